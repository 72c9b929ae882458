"""Compile once per structure: programs keyed by their jaxpr, with closed-over arrays as arguments.

:func:`rproxjax.fit` builds its epoch program from closures over the loss,
the optimizer (whose hyperparameters are arrays or array-valued schedules)
and the data. ``jax.jit`` would key its cache on those closures' identity,
so every ``fit`` call would recompile. :func:`compile_once` instead traces
the program to a jaxpr, hoists every closed-over array (the step sizes, mu,
the data) into an argument, and keys its cache (:data:`PROGRAMS`) on the
jaxpr's text: two programs share one compiled executable exactly when they are the
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
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["CPU_COMPILER_OPTIONS", "MAX_ENTRIES", "TASK_COMPILER_OPTIONS", "clear_cache",
           "compile_once", "jit"]

from rproxjax._jit import (  # noqa: F401 (the runner's names for them)
    CPU_COMPILER_OPTIONS,
    TASK_COMPILER_OPTIONS,
    Refusals,
    _on_cpu,
    _options,
    compile_lowered,
    jit,
)

#: Programs kept by the cache (least recently used evicted).
MAX_ENTRIES = 64
def _aval_key(value):
    """Shape, dtype and placement: an executable is compiled for its inputs' shardings."""
    sharding = value.sharding if isinstance(value, jax.Array) else None
    return (tuple(jnp.shape(value)), str(jnp.result_type(value)), str(sharding))


def _evaluator(jaxpr, consts, flat_args, refusals: Refusals):
    """The jaxpr compiled ahead of time (so that no call pays for compilation)."""

    def run(consts, flat_args):
        return jax.core.eval_jaxpr(jaxpr, consts, *flat_args)

    lowered = jax.jit(run).lower(consts, flat_args)
    return compile_lowered(lowered, _options((consts, flat_args)), refusals)


class ProgramCache:
    """Compiled programs keyed by their jaxpr and arguments' avals (the ``max_entries``
    most recently used), the option sets XLA refused, and the lock that makes them safe to
    share between threads: the owner of :func:`compile_once`'s executables."""

    def __init__(self, max_entries: int = MAX_ENTRIES):
        self.max_entries = max_entries
        self.entries: collections.OrderedDict[Any, Callable] = collections.OrderedDict()
        self.refusals = Refusals()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()

    def get(self, key, build: Callable[[], Callable]) -> Callable:
        """The entry of ``key``, built by ``build()`` if missing (most recent first)."""
        with self._lock:
            evaluator = self.entries.pop(key, None)
        if evaluator is None:
            evaluator = build()  # compiles outside the lock
        with self._lock:
            self.entries[key] = evaluator
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)
        return evaluator


#: The executables of :func:`compile_once`.
PROGRAMS = ProgramCache()


def clear_cache() -> None:
    PROGRAMS.clear()


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
    flat_examples = in_tree.flatten_up_to(example_args)
    evaluator = PROGRAMS.get(key, lambda: _evaluator(closed.jaxpr, consts, flat_examples,
                                                     PROGRAMS.refusals))

    def call(*args):
        flat = in_tree.flatten_up_to(args)
        return jax.tree.unflatten(out_tree, evaluator(consts, flat))

    return call
