"""The Newton kernel's records: a solve's :class:`Problem`, an :class:`Iterate` with its
:class:`Residual`, a step's :class:`StepResult`, and the residual and stopping test that
every rule shares."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from rproxjax._linalg import mm
from rproxjax._typing import Array, PyTree, Regularizer

__all__ = ("Iterate", "Problem", "Residual", "StepResult", "counts", "meets_stopping_test",
           "residual", "stops")


class Problem(NamedTuple):
    """One solve's data, fixed over its Newton loop."""

    x: Array  #: the point, d x r
    xt: Array  #: X^T, materialized once
    t: Array  #: the step t > 0
    reg: Regularizer  #: the regularizer (a pytree)
    tol: Array  #: absolute tolerance on ||E||_F
    rtol: Array  #: relative tolerance (times ||zeta||_F)


class Residual(NamedTuple):
    """The prox and the dual residual at a prox argument W."""

    y: Array  #: Y = prox_{t h}(W)
    jac: PyTree  #: the prox's generalized Jacobian at W (an array for l1, a tuple for l21)
    e: Array  #: E = X^T Y + Y^T X - 2I
    norm_e: Array  #: ||E||_F


class Iterate(NamedTuple):
    """A Newton iterate: the multiplier, its prox argument and the residual there."""

    lam: Array
    w: Array
    y: Array
    jac: PyTree
    e: Array
    norm_e: Array

    @classmethod
    def at(cls, lam, w, res: Residual) -> Iterate:
        return cls(lam, w, *res)


class StepResult(NamedTuple):
    """What a step returns."""

    escalated: Array  #: the adaptive rule's flag after the step
    iterate: Iterate
    counts: Array  #: (CG iterations, path breakpoints), int32
    evaluations: Array  #: evaluations of E, int32
    #: :func:`stops` at the new iterate, or ``None`` (the loop then tests it): the secant
    #: and path steps give it (the former has it for its full step)
    stops: Array | None = None


def counts(cg_iterations, breakpoints=0):
    """A step's inner iterations: (CG iterations, path breakpoints), int32."""
    return jnp.stack([jnp.asarray(cg_iterations, jnp.int32), jnp.asarray(breakpoints, jnp.int32)])


def meets_stopping_test(x, y, norm_e, tol, rtol):
    """The stopping test ||E|| <= tol + (rtol + eps) ||Y - X||_F (zeta = Y - X).

    eps ||zeta||_F (eps of the dtype) is the rounding level of E = X^T zeta + zeta^T X: an
    absolute ``tol`` below it cannot be met and still ends the solve. A non-finite ||E||
    or bound never passes.
    """
    eps = jnp.finfo(norm_e.dtype).eps
    bound = tol + (rtol + eps) * jnp.sqrt(jnp.sum((y - x) ** 2))
    return jnp.isfinite(norm_e) & jnp.isfinite(bound) & (norm_e <= bound)


def stops(p: Problem, y, norm_e):
    """:func:`meets_stopping_test` of problem ``p``."""
    return meets_stopping_test(p.x, y, norm_e, p.tol, p.rtol)


def residual(p: Problem, w) -> Residual:
    """The prox and residual at the prox argument W."""
    y, jac = p.reg.prox_jacobian(w, p.t)
    xty = mm(p.xt, y)
    e = xty + xty.T - 2.0 * jnp.eye(p.x.shape[-1], dtype=p.x.dtype)
    return Residual(y, jac, e, jnp.sqrt(jnp.sum(e * e)))
