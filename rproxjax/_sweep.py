"""Sweeps: one function mapped over many hyperparameter values in one compiled program."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from rproxjax import _checks

__all__ = ["sweep"]

LANES = ("auto", "vmap", "map")


def sweep(fn, *args, lanes: Literal["auto", "vmap", "map"] = "auto", batch_size=None):
    """``fn`` mapped over the leading axis of ``args`` (e.g. values of mu and PRNG keys).

    * ``lanes="vmap"``: ``jax.vmap(fn)(*args)``. The lanes run in lockstep: a bounded
      ``while_loop`` (the Newton solve) runs until its slowest lane ends, and a
      ``lax.cond`` runs both branches. Efficient where batching pays: GPUs and TPUs.
    * ``lanes="map"``: ``jax.lax.map``, the lanes one after another inside one compiled
      program (``batch_size`` lanes vmapped at a time). On CPU a lane of rproxjax's
      solvers is already compute-bound, so batching gains nothing, and lockstep costs
      the slowest lane's Newton steps on every lane: measured on 2 CPU cores,
      ``jax.vmap`` of ``fit`` over 8 mu cost 1.5-2.5x the 8 runs one after another
      (``benchmarks/results/step_cost.md``).
    * ``lanes="auto"`` (default): ``"map"`` on CPU, ``"vmap"`` elsewhere.

    Either way the result is the same pytree, stacked along a leading axis, and the
    program compiles once; call it inside ``jax.jit``.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 20, 3)
        >>> g = jax.random.normal(jax.random.key(1), (20, 3))
        >>> solve = lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu))[0]
        >>> zetas = jax.jit(lambda mus: rproxjax.sweep(solve, mus))(jnp.array([0.1, 0.2]))
        >>> zetas.shape
        (2, 20, 3)
    """
    if lanes not in LANES:
        raise ValueError(f"lanes must be one of {LANES}, got {lanes!r}.")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    if not args:
        raise ValueError("sweep needs at least one argument to map over.")
    sizes = {jnp.shape(a)[0] if jnp.ndim(a) else None for a in jax.tree.leaves(args)}
    if None in sizes:
        raise ValueError("sweep maps over the leading axis of args: each must have one "
                         "(a scalar has none).")
    if len(sizes) != 1:
        raise ValueError(f"args must have one common leading size (the lanes), got {sizes}.")
    if batch_size is not None:
        size = _checks.index_or_none(batch_size)
        if size is None or size < 1:
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}.")
    if lanes == "auto":
        lanes = "map" if jax.default_backend() == "cpu" else "vmap"
    if lanes == "vmap":
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda a: fn(*a), args, batch_size=batch_size)
