"""Sweeps: one function mapped over many hyperparameter values in one compiled program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp

from rproxjax import _checks
from rproxjax._typing import PyTree

__all__ = ["sweep"]

LANES = ("auto", "vmap", "map")


def sweep(fn: Callable[..., PyTree], *args: PyTree, lanes: Literal["auto", "vmap", "map"] = "auto",
          batch_size: int | None = None) -> PyTree:
    """``fn`` mapped over the leading axis of ``args`` (e.g. values of mu and PRNG keys).

    * ``lanes="vmap"``: ``jax.vmap(fn)(*args)``, one batched program. rproxjax's
      subproblem solves inside it map their lanes one after another on CPU (each takes
      its own Newton steps) and form one batched Newton loop on accelerators (which runs
      until its slowest lane ends); the work around their Newton loops (the starting
      residual, zeta, gradients) stays batched.
      A ``lax.cond`` on a batched value runs both branches.
    * ``lanes="map"``: ``jax.lax.map``, the whole lanes one after another inside one
      compiled program (``batch_size`` lanes vmapped at a time): the least memory.
    * ``lanes="auto"`` (default): ``"vmap"``, or ``"map"`` when ``batch_size`` is given
      (it applies to mapped lanes only; with ``lanes="vmap"`` it is an error).
      ``docs/performance.md`` compares the two with runs one after another.

    Either way the result is the same pytree, stacked along a leading axis, and the
    program compiles once; call it inside ``jax.jit``.

    Args:
      fn: the function of one lane, ``fn(*lane_args) -> pytree``.
      *args: arrays or pytrees of arrays (NumPy or JAX), mapped over their leading axis,
        which all share (one entry per lane).
      lanes: ``"auto"``, ``"vmap"`` or ``"map"`` (above).
      batch_size: with ``lanes="map"`` (or ``"auto"``), lanes vmapped at a time (a
        positive int), or None.

    Returns:
      ``fn``'s outputs for every lane, stacked along a new leading axis.

    Raises:
      TypeError: for an ``fn`` that is not callable, ``args`` that are not arrays (or
        pytrees of arrays), or a ``batch_size`` that is not an int.
      ValueError: for an unknown ``lanes``, no ``args``, an argument without a leading axis
        (a scalar), arguments of different leading sizes, a ``batch_size`` below 1, or a
        ``batch_size`` with ``lanes="vmap"``.

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
    args = _checks.array_tree("args", args)
    sizes = {jnp.shape(a)[0] if jnp.ndim(a) else None for a in jax.tree.leaves(args)}
    if None in sizes:
        raise ValueError("sweep maps over the leading axis of args: each must have one "
                         "(a scalar has none).")
    if len(sizes) != 1:
        raise ValueError(f"args must have one common leading size (the lanes), got {sizes}.")
    if batch_size is not None:
        size = _checks.index_or_none(batch_size)
        if size is None:
            raise TypeError(f"batch_size must be a positive int or None, got {batch_size!r}.")
        if size < 1:
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}.")
    if lanes == "vmap" and batch_size is not None:
        raise ValueError("batch_size applies to lanes='map' (lanes vmapped at a time); "
                         "lanes='vmap' batches all lanes at once.")
    if lanes == "auto":
        lanes = "vmap" if batch_size is None else "map"
    if lanes == "vmap":
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda a: fn(*a), args, batch_size=batch_size)
