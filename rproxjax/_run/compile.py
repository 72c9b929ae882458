"""Compile once per structure: programs keyed by their jaxpr, with closed-over arrays as arguments.

:func:`rproxjax.fit` builds its epoch program from closures over the loss,
the optimizer (whose hyperparameters are arrays or array-valued schedules)
and the data. ``jax.jit`` would key its cache on those closures' identity,
so every ``fit`` call would recompile. :func:`compile_once` instead traces
the program to a jaxpr, hoists every closed-over array (the step sizes, mu,
the data) into an argument, and keys a module-level cache on the jaxpr's
text: two programs share one compiled executable exactly when they are the
same computation up to the values of those arrays. Python scalars are
literals of the jaxpr, so a hyperparameter given as a Python float that
changes does change the key (and recompiles): the optimizers turn theirs
into arrays.

Tracing costs milliseconds to a few tenths of a second; compiling costs
seconds. The cache holds the :data:`MAX_ENTRIES` most recently used programs.

Programs whose arguments live on the CPU are compiled with :data:`CPU_COMPILER_OPTIONS`
(options of that one compilation, never JAX's global configuration).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["CPU_COMPILER_OPTIONS", "MAX_ENTRIES", "TASK_COMPILER_OPTIONS", "clear_cache",
           "compile_once", "jit"]

#: XLA options of the library's own CPU compilations (:func:`compile_once`, :class:`jit`:
#: ``fit``'s programs, the task functions' and an eager ``tangent_prox``'s): XLA's loop
#: emitters instead of its fusion emitters. The solver's programs are many small fusions,
#: which the loop emitters compile in about 60% of the time, with steps no slower
#: (``benchmarks/compile_time.py``). The results equal those of a default compilation up to
#: rounding (on the benchmarks' problems bit for bit; elsewhere a few units in the last
#: place, as any change of fusion gives). Dropped when the installed XLA does not know them.
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

#: The task functions' CPU options (``sparse_pca``, ``robust_matrix_completion``): those of
#: :data:`CPU_COMPILER_OPTIONS` and LLVM's second optimization level instead of its third.
#: LLVM's code generation is most of the compile time the loop emitters leave, and level 2
#: takes less of it with steps no slower (``benchmarks/compile_time.py``). ``fit`` keeps the
#: third level: its iterates equal those of :func:`rproxjax.pure_fit` under a plain
#: ``jax.jit`` bit for bit on the tests' problems, which level 2 changes in the last place.
TASK_COMPILER_OPTIONS = {**CPU_COMPILER_OPTIONS, "xla_backend_optimization_level": 2}


_REFUSED: set = set()  # option sets this process's XLA refused (not tried again)


def _refused(err: Exception, key: tuple) -> None:
    """Records that XLA refused the options ``key`` (an option the installed XLA does not
    know, or no longer knows); re-raises any other error."""
    if "compile option" not in str(err):
        raise err
    _REFUSED.add(key)


def compile_lowered(lowered, options: dict):
    """``lowered.compile()`` with ``options``, or without them if XLA refuses them
    (remembered, so that each set is refused once per process)."""
    key = tuple(sorted(options.items()))
    if options and key not in _REFUSED:
        try:
            return lowered.compile(compiler_options=dict(options))
        except jax.errors.JaxRuntimeError as err:
            _refused(err, key)
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
    ``options`` (:data:`CPU_COMPILER_OPTIONS` by default; unless this process's XLA refused
    them); plain ``jax.jit`` elsewhere, and inside the caller's trace."""

    def __init__(self, fn: Callable, *, options: dict | None = None, **kwargs):
        options = dict(CPU_COMPILER_OPTIONS if options is None else options)
        self._key = tuple(sorted(options.items()))
        self._plain = jax.jit(fn, **kwargs)
        self._cpu = jax.jit(fn, compiler_options=options, **kwargs)
        functools.update_wrapper(self, fn)

    @property
    def options(self) -> dict:
        """The options of this function's CPU compilations."""
        return dict(self._key)

    def __call__(self, *args, **kwargs):
        if _on_cpu((args, kwargs)) and self._key not in _REFUSED:
            try:
                return self._cpu(*args, **kwargs)
            except jax.errors.JaxRuntimeError as err:
                _refused(err, self._key)
        return self._plain(*args, **kwargs)

    def _cache_size(self) -> int:
        return self._plain._cache_size() + self._cpu._cache_size()


#: Programs kept by the cache (least recently used evicted).
MAX_ENTRIES = 64
_CACHE: collections.OrderedDict[Any, Callable] = collections.OrderedDict()


def clear_cache() -> None:
    _CACHE.clear()


def _aval_key(value):
    """Shape, dtype and placement: an executable is compiled for its inputs' shardings."""
    sharding = value.sharding if isinstance(value, jax.Array) else None
    return (tuple(jnp.shape(value)), str(jnp.result_type(value)), str(sharding))


def _evaluator(jaxpr, consts, flat_args):
    """The jaxpr compiled ahead of time (so that no call pays for compilation)."""

    def run(consts, flat_args):
        return jax.core.eval_jaxpr(jaxpr, consts, *flat_args)

    lowered = jax.jit(run).lower(consts, flat_args)
    return compile_lowered(lowered, _options((consts, flat_args)))


def compile_once(fn: Callable, *example_args) -> Callable:
    """``fn`` as a compiled callable of arguments shaped like ``example_args``.

    Compilation (if the program is not cached yet) happens here, not at the
    first call: callers time their calls. The returned callable takes arguments
    with the same pytree structure, shapes and dtypes as ``example_args`` and
    returns ``fn``'s outputs. Its
    executable is shared with every earlier ``compile_once`` of the same
    computation (see the module docstring). When ``fn`` closes over values traced by an
    enclosing ``jax.jit`` or ``jax.vmap``, ``fn`` itself is returned: it is then part of
    the caller's program.
    """
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
    in_tree = jax.tree.structure(example_args)
    out_tree = jax.tree.structure(out_shape)
    consts = list(closed.consts)
    if any(isinstance(c, jax.core.Tracer) for c in consts):
        return fn  # inside an outer trace (jit, vmap): inlined into the caller's program
    key = (str(closed.jaxpr), in_tree, out_tree, tuple(_aval_key(c) for c in consts),
           tuple(_aval_key(a) for a in in_tree.flatten_up_to(example_args)))
    evaluator = _CACHE.pop(key, None)
    if evaluator is None:
        evaluator = _evaluator(closed.jaxpr, consts, in_tree.flatten_up_to(example_args))
    _CACHE[key] = evaluator
    while len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)

    def call(*args):
        flat = in_tree.flatten_up_to(args)
        return jax.tree.unflatten(out_tree, evaluator(consts, flat))

    return call
