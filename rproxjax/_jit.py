"""The library's ``jax.jit`` with XLA options for its CPU compilations.

A base module (it imports nothing of rproxjax): the kernel (``_ssn``), the tasks and the
runner (``_run``) all compile through :class:`jit`, so none of them imports another's
layer for it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import MappingProxyType

import jax

__all__ = ["CPU_COMPILER_OPTIONS", "TASK_COMPILER_OPTIONS", "Refusals", "compile_lowered", "jit"]

#: XLA options of the library's own CPU compilations (:func:`compile_once`, :class:`jit`:
#: ``fit``'s programs, the task functions' and an eager ``tangent_prox``'s): XLA's loop
#: emitters instead of its fusion emitters. The solver's programs are many small fusions,
#: which the loop emitters compile in about 60% of the time, with steps no slower
#: (``benchmarks/compile_time.py``). The results equal those of a default compilation up to
#: rounding (on the benchmarks' problems bit for bit; elsewhere a few units in the last
#: place, as any change of fusion gives). Dropped when the installed XLA does not know them.
CPU_COMPILER_OPTIONS = MappingProxyType({"xla_cpu_use_fusion_emitters": False})

#: The task functions' CPU options (``sparse_pca``, ``robust_matrix_completion``): those of
#: :data:`CPU_COMPILER_OPTIONS` and LLVM's second optimization level instead of its third.
#: LLVM's code generation is most of the compile time the loop emitters leave, and level 2
#: takes less of it with steps no slower (``benchmarks/compile_time.py``). ``fit`` keeps the
#: third level: its iterates equal those of :func:`rproxjax.pure_fit` under a plain
#: ``jax.jit`` bit for bit on the tests' problems, which level 2 changes in the last place.
TASK_COMPILER_OPTIONS = MappingProxyType({**CPU_COMPILER_OPTIONS,
                                         "xla_backend_optimization_level": 2})


class Refusals:
    """The option sets an XLA refused (an option it does not know, or no longer knows), so
    that each is tried once by its owner: a :class:`jit` or a program cache. Thread-safe."""

    def __init__(self):
        self._keys: set = set()
        self._lock = threading.Lock()

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._keys

    def record(self, err: Exception, key: tuple) -> None:
        """Records ``key`` if ``err`` is XLA's refusal of an option; re-raises any other."""
        if "compile option" not in str(err):
            raise err
        with self._lock:
            self._keys.add(key)


def compile_lowered(lowered, options, refusals: Refusals):
    """``lowered.compile()`` with ``options``, or without them if XLA refuses them
    (remembered in ``refusals``, so that each set is refused once per owner)."""
    key = tuple(sorted(options.items()))
    if options and key not in refusals:
        try:
            return lowered.compile(compiler_options=dict(options))
        except jax.errors.JaxRuntimeError as err:
            refusals.record(err, key)
    return lowered.compile()


def _on_cpu(args) -> bool | None:
    """Whether a program of ``args`` runs on the CPU; ``None`` when one is traced (the
    program is then part of the caller's)."""
    leaves = jax.tree.leaves(args)
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return None
    for leaf in leaves:
        if isinstance(leaf, jax.Array) and leaf.committed:
            return all(d.platform == "cpu" for d in leaf.sharding.device_set)
    return jax.default_backend() == "cpu"


def _options(args) -> dict:
    return dict(CPU_COMPILER_OPTIONS) if _on_cpu(args) else {}


class jit:  # noqa: N801 (used as jax.jit is)
    """``jax.jit(fn, **kwargs)`` whose calls with arguments on the CPU compile with
    ``options`` (:data:`CPU_COMPILER_OPTIONS` by default; unless the installed XLA refused
    them, which each instance learns once); plain ``jax.jit`` elsewhere, and inside the
    caller's trace."""

    def __init__(self, fn: Callable, *, options: dict | None = None, **kwargs):
        options = dict(CPU_COMPILER_OPTIONS if options is None else options)
        self._key = tuple(sorted(options.items()))
        self._plain = jax.jit(fn, **kwargs)
        self._cpu = jax.jit(fn, compiler_options=options, **kwargs)
        self._refusals = Refusals()
        functools.update_wrapper(self, fn)

    @property
    def options(self) -> dict:
        """The options of this function's CPU compilations."""
        return dict(self._key)

    def __call__(self, *args, **kwargs):
        if _on_cpu((args, kwargs)) and self._key not in self._refusals:
            try:
                return self._cpu(*args, **kwargs)
            except jax.errors.JaxRuntimeError as err:
                self._refusals.record(err, self._key)
        return self._plain(*args, **kwargs)

    def _cache_size(self) -> int:
        from rproxjax._foreign import jit_cache_size

        return jit_cache_size(self._plain) + jit_cache_size(self._cpu)
