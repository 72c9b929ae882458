"""Compile once per structure: programs keyed by their jaxpr, with closed-over arrays as arguments.

:func:`rproxjax.fit` builds its epoch program from closures over the loss,
the optimizer (whose hyperparameters are arrays or array-valued schedules)
and the data. ``jax.jit`` would key its cache on those closures' identity,
so every ``fit`` call would recompile. :func:`compile_once` instead traces
the program to a jaxpr, hoists every closed-over array (the step sizes, mu,
the data) into an argument, and keys its cache (:data:`PROGRAMS`) on what the
executable depends on (:func:`program_key`): the jaxpr's text, the pytree structures of
its inputs and outputs, the shape, dtype and placement of every argument and hoisted
array, and JAX's settings that change the executable (:func:`environment`: the x64 flag,
the default matmul precision, the PRNG's lowering, the optimization settings, the default
device, the default backend and its devices). Two calls share one executable exactly when
all of these are equal: the same computation up to the values of those arrays, for the same
devices and settings.
Python scalars are literals of the jaxpr, so a hyperparameter given as a Python float that
changes does change the key (and recompiles): the optimizers turn theirs into arrays.

The cache holds the :data:`MAX_ENTRIES` most recently used executables and is safe to
share between threads (:class:`ProgramCache`).

Programs whose arguments live on the CPU are compiled with :data:`CPU_COMPILER_OPTIONS`
(options of that one compilation, never JAX's global configuration).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["CONFIG_KEYS", "CPU_COMPILER_OPTIONS", "MAX_ENTRIES", "TASK_COMPILER_OPTIONS",
           "CacheInfo", "ProgramCache", "arguments_key", "clear_cache", "compile_once",
           "environment", "jit", "program_key"]

from rproxjax import _foreign
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

#: JAX's settings that change a program's executable without changing its jaxpr: its
#: lowering (the x64 flag, the default matmul precision, the PRNG's partitionable lowering),
#: its compilation (the optimization switches and efforts) or the device it runs on when its
#: arguments are not placed (the default device). Part of every key (:func:`environment`).
CONFIG_KEYS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_threefry_partitionable",
               "jax_disable_most_optimizations", "jax_optimization_level",
               "jax_exec_time_optimization_effort", "jax_memory_fitting_effort",
               "jax_default_device")


def _setting(name: str):
    """A JAX setting's value in the calling thread (a context manager's, such as
    ``jax.enable_x64(False)``'s, where one is open), its process-wide value for a setting
    without one, or None where the installed JAX lacks it."""
    try:
        return getattr(jax.config, name)
    except AttributeError:
        return jax.config.values.get(name)


def environment() -> tuple:
    """What an executable depends on besides its program and arguments: the values of
    :data:`CONFIG_KEYS` in the calling thread, the default backend and the ids of its
    devices.

    Example:
        >>> import jax
        >>> from rproxjax._run.compile import environment
        >>> with jax.enable_x64(False):
        ...     off = environment()
        >>> with jax.enable_x64(True):
        ...     on = environment()
        >>> off == on
        False
    """
    return (tuple(_setting(name) for name in CONFIG_KEYS), jax.default_backend(),
            tuple(device.id for device in jax.devices()))


def _aval_key(value) -> tuple:
    """Shape, dtype and placement: an executable is compiled for its inputs' shardings."""
    sharding = value.sharding if isinstance(value, jax.Array) else None
    dtype = value.dtype if hasattr(value, "dtype") else jnp.result_type(value)
    return (tuple(jnp.shape(value)), str(dtype), str(sharding))


def arguments_key(args) -> tuple:
    """The pytree structure of ``args`` and each leaf's shape, dtype and placement (a
    NumPy array or a Python number has no placement: ``None``; it goes to the default
    device, which :func:`environment` names)."""
    leaves, tree = jax.tree.flatten(args)
    return (tree, tuple(_aval_key(leaf) for leaf in leaves))


def program_key(jaxpr, in_tree, out_tree, consts, flat_args) -> tuple:
    """:func:`compile_once`'s cache key of a traced program: the jaxpr's text, its input and
    output structures, the shape, dtype and placement of its hoisted arrays (``consts``) and
    arguments (``flat_args``), and :func:`environment`."""
    return (str(jaxpr), in_tree, out_tree, tuple(_aval_key(c) for c in consts),
            tuple(_aval_key(a) for a in flat_args), environment())


def _evaluator(jaxpr, consts, flat_args, refusals: Refusals):
    """The jaxpr compiled ahead of time (so that no call pays for compilation)."""

    def run(consts, flat_args):
        return _foreign.eval_jaxpr(jaxpr, consts, *flat_args)

    lowered = jax.jit(run).lower(consts, flat_args)
    return compile_lowered(lowered, _options((consts, flat_args)), refusals)


class CacheInfo(NamedTuple):
    """A cache's statistics, as ``functools.lru_cache``'s ``cache_info()`` gives them."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class ProgramCache:
    """Built values (compiled programs) by key: the ``max_entries`` most recently used, the
    option sets XLA refused (:class:`rproxjax._jit.Refusals`), and a lock that makes both
    safe to share between threads.

    Args:
      max_entries: how many entries are kept (an int >= 1); the least recently used is
        evicted first.

    Raises:
      TypeError: ``max_entries`` is not an int.
      ValueError: ``max_entries`` is below 1.

    Example:
        >>> from rproxjax._run.compile import ProgramCache
        >>> cache = ProgramCache(max_entries=2)
        >>> cache.get("a", lambda: 1), cache.get("a", lambda: 2), cache.get("b", lambda: 3)
        (1, 1, 3)
        >>> cache.cache_info()
        CacheInfo(hits=1, misses=2, maxsize=2, currsize=2)
    """

    def __init__(self, max_entries: int = MAX_ENTRIES):
        if isinstance(max_entries, bool) or not isinstance(max_entries, int):
            raise TypeError(f"max_entries must be an int, got {max_entries!r}.")
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}.")
        self.max_entries = max_entries
        self.entries: collections.OrderedDict[Any, Callable] = collections.OrderedDict()
        self.refusals = Refusals()
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def clear(self) -> None:
        """Drops every entry and resets the statistics (the refusals are kept: they are
        the installed XLA's)."""
        with self._lock:
            self.entries.clear()
            self._hits = self._misses = 0

    def cache_info(self) -> CacheInfo:
        """Hits, misses (builds), the bound and the current number of entries."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.max_entries, len(self.entries))

    def cache_parameters(self) -> dict:
        """``{"maxsize": max_entries}``, as ``functools.lru_cache``'s: the cache's bound."""
        return {"maxsize": self.max_entries}

    def get(self, key, build: Callable[[], Any]) -> Any:
        """The entry of ``key``, built by ``build()`` if missing, now the most recent.

        ``build`` runs outside the lock (compiling takes long): two threads missing the
        same key at once each build it, and the later one's value is kept; both return a
        valid value."""
        with self._lock:
            if key in self.entries:
                self._hits += 1
                self.entries.move_to_end(key)
                return self.entries[key]
            self._misses += 1
        value = build()
        with self._lock:
            self.entries[key] = value
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)
        return value


#: The executables of :func:`compile_once`, shared by every caller in the process: a
#: bounded, thread-safe cache whose keys hold everything an executable depends on.
PROGRAMS = ProgramCache()


def clear_cache() -> None:
    """Drops :data:`PROGRAMS`' executables."""
    PROGRAMS.clear()


def compile_once(fn: Callable, *example_args,
                 notice: Callable[[], None] | None = None) -> Callable:
    """``fn`` as a compiled callable of arguments shaped like ``example_args``.

    ``notice``, if given, is called just before a compilation (when the program is not
    cached), not when the program is found in the cache.

    Compilation (if the program is not cached yet) happens here, not at the
    first call: callers time their calls. The returned callable takes arguments
    with the same pytree structure, shapes and dtypes as ``example_args`` and
    returns ``fn``'s outputs. Its executable is shared with every earlier
    ``compile_once`` of the same computation for the same devices and JAX settings
    (:func:`program_key`). When ``fn`` closes over values traced by an enclosing
    ``jax.jit`` or ``jax.vmap``, ``fn`` itself is returned: it is then part of the caller's
    program.

    Example:
        >>> import jax.numpy as jnp
        >>> from rproxjax._run.compile import compile_once
        >>> scale = jnp.asarray(3.0)
        >>> double = compile_once(lambda x: x * scale, jnp.ones(2))
        >>> double(jnp.arange(2.0)).tolist()
        [0.0, 3.0]
    """
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
    in_tree = jax.tree.structure(example_args)
    out_tree = jax.tree.structure(out_shape)
    consts = list(closed.consts)
    if any(isinstance(c, jax.core.Tracer) for c in consts):
        return fn  # inside an outer trace (jit, vmap): inlined into the caller's program
    flat_examples = in_tree.flatten_up_to(example_args)
    key = program_key(closed.jaxpr, in_tree, out_tree, consts, flat_examples)
    def build():
        if notice is not None:
            notice()
        return _evaluator(closed.jaxpr, consts, flat_examples, PROGRAMS.refusals)

    evaluator = PROGRAMS.get(key, build)

    def call(*args):
        flat = in_tree.flatten_up_to(args)
        return jax.tree.unflatten(out_tree, evaluator(consts, flat))

    return call
