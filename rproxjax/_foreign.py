"""The other libraries' private names that rproxjax relies on, each in this one module.

``tests/test_foreign.py`` checks every one of them against the installed versions, so that
a release of JAX or optax that renames or changes one fails that test by name instead of
changing the library's behaviour silently.
"""

from __future__ import annotations

from typing import Any


def trace_state_clean() -> bool:
    """Whether no transformation (jit, vmap, scan, ...) is tracing: JAX's private
    ``jax._src.core.trace_state_clean`` (JAX has no public test of the trace state).
    False where the installed JAX lacks it (the caller then acts as inside a trace)."""
    try:
        from jax._src import core
        return bool(core.trace_state_clean())
    except (ImportError, AttributeError):
        return False


def is_optax_chain(optimizer: Any) -> bool:
    """Whether ``optimizer`` was built by ``optax.chain`` (its state is then the plain
    tuple of its links' states): optax's ``init`` closure is named ``chain.<locals>.init_fn``
    in optax's own module."""
    import optax

    init = getattr(optimizer, "init", None)
    return (getattr(init, "__qualname__", None) == "chain.<locals>.init_fn"
            and getattr(init, "__module__", None) == optax.chain.__module__)


def eval_jaxpr(jaxpr: Any, consts: Any, *args: Any) -> list:
    """Evaluates a closed-over jaxpr (``jax.make_jaxpr(...).jaxpr``) on ``args``: JAX's
    ``jax.core.eval_jaxpr`` (the jaxpr interpreter; ``jax.core`` is JAX's semi-private
    namespace, being trimmed release by release)."""
    import jax.core

    return jax.core.eval_jaxpr(jaxpr, consts, *args)


def jit_cache_size(fn: Any) -> int:
    """The number of compilations a ``jax.jit``-ed function holds (its private
    ``_cache_size``)."""
    return fn._cache_size()
