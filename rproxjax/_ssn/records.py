"""The Newton kernel's records: a solve's :class:`Problem`, an :class:`Iterate` with its
:class:`Residual`, a step's :class:`StepResult`, the residual and stopping test that every
rule shares, and what a solve reports, :class:`SubproblemInfo`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from rproxjax._linalg import mm
from rproxjax._typing import Array, ArrayLike, PyTree, Regularizer

__all__ = ("Iterate", "Problem", "Residual", "StepResult", "SubproblemInfo", "counts",
           "meets_stopping_test", "residual", "stops")


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


class SubproblemInfo(NamedTuple):
    """What :func:`tangent_prox` reports besides the solution.

    Attributes:
      lam: the r x r symmetric multiplier Lambda of the returned point: of all
        iterates (the starting one included), the one with the smallest
        residual (the last one when converged). Pass it back as ``lam=`` to
        warm-start a call on the same (X, G).
      num_steps: Newton steps taken (int32).
      residual: ||E(Lambda)||_F at the returned multiplier. Since
        zeta^T X + X^T zeta = E(Lambda), it is also the tangency defect (not a
        bound on the distance to the exact solution: see :func:`default_tol`).
      converged: ``residual <= tol + (rtol + eps) * ||zeta||_F`` (bool), eps that of the
        dtype: E's rounding level, so that a ``tol`` below it still ends the solve.
      status: a :class:`rproxjax.Status` code (int32); ``describe(status)``
        gives a readable message.
      num_linear_steps: conjugate-gradient iterations, summed over Newton
        steps (0 on the dense path).
      num_evaluations: evaluations of E, line-search trials of the reference
        rule included (the secant rule evaluates E once to four times per step).
      lam_h: the regularizer's part of the multiplier, Lambda - sym(X^T G) / 2.
        It changes slowly from one optimizer step to the next while the
        gradient part jumps with every minibatch: pass it back as ``lam_h=`` to
        warm-start the next step's call (at a new X and G). Zeros where the status
        is NONFINITE or INVALID (like ``subgradient``).
      subgradient: (W - Y) / t at the returned multiplier (d x r), with W its
        prox argument and Y = prox_{t h}(W): an element of the subdifferential of
        h at Y (prox optimality; Y = X + zeta unless zeta was zeroed). At every
        returned multiplier Lambda = sym(X^T (G + subgradient)) / 2 + E / (4t),
        E = 0 at a solution. Pass it back as ``subgradient=`` to warm-start the
        next step's call at a new X and G: it carries the regularizer's part over
        to the new X (``lam_h`` is tied to the old one). Zeros where the status is
        NONFINITE or INVALID (non-finite or invalid inputs, or an overflow) and for
        h = 0; kept for a collapsed iterate (where zeta is zeroed), so that the next
        call starts where this one ended.
      num_breakpoints: threshold crossings followed by the path steps of tight l1 solves
        (:mod:`rproxjax._ssn.path`), summed over Newton steps (int32; 0 for other solves).

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 20, 3)
        >>> g = jax.random.normal(jax.random.key(1), (20, 3))
        >>> zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
        >>> info.lam.shape, info.subgradient.shape, info.num_steps.dtype
        ((3, 3), (20, 3), dtype('int32'))
        >>> rproxjax.describe(info.status)
        'converged: the residual is below the tolerance'
    """

    lam: Array
    num_steps: Array
    residual: Array
    converged: Array
    status: Array
    num_linear_steps: Array
    num_evaluations: Array
    lam_h: Array
    subgradient: Array
    num_breakpoints: Array

    @classmethod
    def make(cls, *, lam: Array, residual: Array, converged: Array, status: Array,
             subgradient: Array, lam_h: Array | None = None, num_steps: ArrayLike = 0,
             num_linear_steps: ArrayLike = 0, num_evaluations: ArrayLike = 0,
             num_breakpoints: ArrayLike = 0) -> SubproblemInfo:
        """The one constructor, by keyword: counts default to 0 (int32), ``lam_h`` to
        zeros like ``lam``."""
        count = lambda n: jnp.asarray(n, jnp.int32)  # noqa: E731
        return cls(lam=lam, num_steps=count(num_steps), residual=residual,
                   converged=converged, status=status,
                   num_linear_steps=count(num_linear_steps),
                   num_evaluations=count(num_evaluations),
                   lam_h=jnp.zeros_like(lam) if lam_h is None else lam_h,
                   subgradient=subgradient, num_breakpoints=count(num_breakpoints))
