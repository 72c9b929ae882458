"""One semi-smooth Newton step on the subproblem's dual, on named records.

A solve's data is a :class:`Problem` (X, X^T, t, the regularizer and the traced
tolerances), its iterate an :class:`Iterate`: the multiplier Lambda, the prox argument
W = X - tG + 2t X Lambda, Y = prox_{t h}(W) with its generalized Jacobian, and
E = X^T Y + Y^T X - 2I with ||E||_F. Every step takes ``(problem, ssn, escalated,
iterate)`` and returns a :class:`StepResult`; ``ssn`` (:class:`rproxjax.SSN`) holds the
static settings, ``escalated`` the adaptive rule's per-call flag.

* :func:`secant_step` (``"secant"`` and ``"adaptive"``): minimizes the dual
  phi(Lambda) = ||prox_{t h}(W)||^2 / (2t) - 2 tr(Lambda) (convex, piecewise quadratic,
  gradient E) along a Newton direction whose diagonal is raised to the coordinate secant
  curvature (:mod:`rproxjax._regularizers.l1_secant`), by an exact line search or the full step,
  whichever leaves the smaller residual. Loose solves (``rtol > 0``) regularize more,
  skip the shift and take the full step where it cuts ||E|| enough; tight float64 l1
  solves on the dense path take path steps (:mod:`rproxjax._ssn.path`); the adaptive
  rule starts with plain (or, loose, Jacobi) steps and escalates to the secant rule.
* :func:`reference_step` (``"reference"``): the ManPG code's rule, regularization
  0.2 min(||E||, 0.1) and backtracking on ||E||^2 (s halved down to 1e-3, the last trial
  accepted).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from rproxjax._linalg import mm
from rproxjax._ssn import linear as _linear
from rproxjax._ssn import path as _path
from rproxjax._ssn.config import CG, SSN, Adaptive, Reference, Secant
from rproxjax._ssn.records import (  # noqa: F401 - the step functions' vocabulary
    Iterate,
    Problem,
    Residual,
    StepResult,
    counts,
    meets_stopping_test,
    residual,
    stops,
)
from rproxjax._typing import EntrywiseBreakpoints, JacobiDiagonal

# The reference rule's backtracking (its code's constants): s = 1, halved while ||E||^2
# does not fall by (1 - 1e-3 s), down to s = 1e-3.
_LS_SLOPE = 1e-3
_LS_MIN = 1e-3


def uses_cg(ssn: SSN) -> bool:
    """Whether the Newton systems are solved by CG (``ssn.linear_solver`` resolved)."""
    return isinstance(ssn.linear_solver, CG)


def direction(p: Problem, ssn: SSN, it: Iterate, shift, rho):
    """The regularized Newton direction D (r x r) and its CG iterations."""
    if uses_cg(ssn):
        # The reference stops CG at max(1e-7, min(1e-4, 1e-3 ||E||)); its absolute floor is
        # tol / 10 here so that CG never stalls (zero iterations) while ||E|| > tol.
        atol = jnp.maximum(0.1 * p.tol, jnp.minimum(1e-4, 1e-3 * it.norm_e))
        return _linear.cg_direction(p.x, p.xt, p.t, p.reg, it.jac, it.e, shift, rho, atol)
    return _linear.dense_direction(p.x, p.t, p.reg, it.jac, it.e, shift, rho)


def reference_step(p: Problem, ssn: SSN, escalated, it: Iterate) -> StepResult:
    """The reference rule's step (``escalated`` passed through)."""
    rho = 0.2 * jnp.maximum(jnp.minimum(it.norm_e, 0.1), 1e-11)
    d, its = direction(p, ssn, it, jnp.zeros_like(it.e), rho)
    target = it.norm_e * it.norm_e
    # W is affine in Lambda: trial points cost no new X @ Lambda.
    step = (2.0 * p.t) * mm(p.x, d)

    def ls_cond(ls):
        s, _, _, _, norm_new, _ = ls
        # NaN/inf trial residuals count as failures (keep halving).
        sufficient = norm_new * norm_new < target * (1.0 - _LS_SLOPE * s)
        return (~sufficient) & (s > _LS_MIN)

    def ls_body(ls):
        s, _, _, _, _, n = ls
        s = 0.5 * s
        return (s, *residual(p, it.w + s * step), n + 1)

    one = jnp.ones((), p.x.dtype)
    s, y, jac, e, norm_e, n_eval = lax.while_loop(
        ls_cond, ls_body, (one, *residual(p, it.w + step), jnp.int32(1)))
    new = Iterate(it.lam + s * d, it.w + s * step, y, jac, e, norm_e)
    return StepResult(escalated, new, counts(its), n_eval)


def exact_line_search(reg, t, w, y, e, d, p, passes):
    """argmin_s phi(Lambda + s D) by bracketed Newton on phi'(s), from s = 1, at most
    ``passes`` evaluations (fewer once a Newton iterate repeats: it is then exact).

    phi'(s) = <E, D> + <prox(W + sP) - Y, P> / t (this difference form keeps float32
    accurate; the plain sum cancels) is monotone and piecewise linear with slope
    <D_prox[P], P> / t. Falls back to s = 1 when the result is not finite and positive.
    """
    dtype = w.dtype
    slope0 = jnp.sum(e * d)
    inf = jnp.asarray(jnp.inf, dtype)

    def cond(c):
        k, s, _, _, moved = c
        return (k < passes) & moved

    def body(c):
        k, s, lo, hi, _ = c
        ys, jac = reg.prox_jacobian(w + s * p, t)
        val = slope0 + jnp.sum((ys - y) * p) / t
        curv = jnp.sum(reg.jacobian_apply(jac, p) * p) / t
        lo = jnp.where(val < 0, s, lo)
        hi = jnp.where(val >= 0, s, hi)
        newton = s - val / jnp.where(curv > 0, curv, 1.0)
        inside = (curv > 0) & (newton >= lo) & (newton <= hi)
        fallback = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2.0 * s)
        s_new = jnp.where(inside, newton, fallback)
        # phi' is linear on the piece holding s: once Newton stays put, s is exact.
        moved = jnp.abs(s_new - s) > 16 * jnp.finfo(dtype).eps * jnp.abs(s)
        return k + 1, s_new, lo, hi, moved

    one = jnp.ones((), dtype)
    _, s, _, _, _ = lax.while_loop(
        cond, body, (jnp.int32(0), one, jnp.zeros((), dtype), inf, jnp.bool_(True)))
    ok = jnp.isfinite(s) & (s > 0) & (slope0 < 0)
    return jnp.where(ok, s, one)


def _secant_direction(p: Problem, ssn: SSN, escalated, it: Iterate, loose):
    """The direction of one :func:`secant_step` (its docstring says which): (D, CG its)."""
    rule = ssn.rule
    adaptive = isinstance(rule, Adaptive)
    sec = rule.secant if adaptive else rule
    x, t, reg = p.x, p.t, p.reg
    eps = jnp.finfo(x.dtype).eps
    cap = jnp.minimum(it.norm_e, 0.1)
    secant_scale = jnp.where(loose, sec.loose_rho_scale, sec.rho_scale)
    zeros = lambda: jnp.zeros_like(it.e)  # noqa: E731
    secant = lambda: reg.secant_shift(it.w, x, it.e, t, sec.passes)  # noqa: E731
    if adaptive:
        scale = jnp.where(escalated, secant_scale, rule.plain_rho_scale)
        shifted = lambda: lax.cond(escalated, secant, zeros)  # noqa: E731
    else:
        scale = secant_scale
        shifted = secant
    # 4t eps keeps the Newton matrix definite.
    rho = scale * cap + 4.0 * t * eps

    def newton():
        # The loose test outermost: in a batched vmap the lanes share rtol, so it stays a
        # real branch there even where ``escalated`` differs between lanes.
        shift = shifted() if sec.loose_shift else _cond(loose, zeros, shifted)
        return direction(p, ssn, it, shift, rho)

    if not (adaptive and rule.jacobi_first and isinstance(reg, JacobiDiagonal)):
        return newton()

    def jacobi():
        rho_j = rule.jacobi_rho_scale * cap + 4.0 * t * eps
        return _linear.jacobi_direction(x, t, reg, it.jac, it.e, rho_j)

    # The loose test outermost, as above: tight solves of batched lanes never form the
    # Jacobi direction; loose ones form both where ``escalated`` differs between lanes.
    return _cond(loose, lambda: lax.cond(escalated, newton, jacobi), newton)


def takes_path_steps(p: Problem, ssn: SSN) -> bool:
    """Whether tight solves of this problem take path steps (static): the secant rule with
    :class:`rproxjax.PathSteps` on dense systems, a regularizer with entrywise breakpoints
    (l1), float64 unless the path steps' ``float32``."""
    path = ssn.rule.path if isinstance(ssn.rule, Secant) else None
    if path is None or uses_cg(ssn) or not isinstance(p.reg, EntrywiseBreakpoints):
        return False
    return p.x.dtype == jnp.dtype("float64") or (path.float32 and
                                                 p.x.dtype == jnp.dtype("float32"))


def is_loose(p: Problem, loose=None):
    """Whether the solve is loose (``rtol > 0``): ``loose`` where the caller knows it at
    trace time (a Python bool: one branch compiled), else the traced test ``p.rtol > 0``
    (both branches compiled, chosen at run time)."""
    return p.rtol > 0 if loose is None else loose


def _cond(pred, true_fn, false_fn):
    """``lax.cond``, or the branch itself where ``pred`` is a Python bool."""
    if isinstance(pred, bool):
        return true_fn() if pred else false_fn()
    return lax.cond(pred, true_fn, false_fn)


def secant_step(p: Problem, ssn: SSN, escalated, it: Iterate, loose=None) -> StepResult:
    """One step of the secant or adaptive rule.

    With the adaptive rule, until the call is ``escalated`` the step is a plain Newton step
    on the dual (no secant shift, regularization ``plain_rho_scale`` min(||E||, 0.1)); a
    step that does not cut ||E|| by ``escalate`` escalates the call, whose later steps are
    its ``secant`` rule's. A loose solve (``rtol > 0``, traced) regularizes by the secant
    rule's ``loose_rho_scale`` and, unless ``loose_shift``, drops the shift; its step is
    taken in full when that meets the stopping test or cuts ||E|| by ``unit_accept``, with
    the exact line search otherwise. An adaptive loose solve's steps before it escalates
    are Jacobi steps (``jacobi_first``). A tight solve that
    :func:`takes_path_steps` takes a path step (a ``lax.cond`` on ``loose``). ``loose``
    (:func:`is_loose`): a Python bool where the caller knows ``rtol > 0`` at trace time,
    so that only that branch is compiled; ``None`` decides at run time.
    """
    loose = is_loose(p, loose)
    if takes_path_steps(p, ssn):
        return _cond(loose, lambda: _shifted_step(p, ssn, escalated, it, loose),
                     lambda: _path_step(p, ssn, escalated, it))
    return _shifted_step(p, ssn, escalated, it, loose)


def _path_step(p: Problem, ssn: SSN, escalated, it: Iterate) -> StepResult:
    """A tight solve's step by :func:`rproxjax._ssn.path.path_step`: the secant shift, and the
    regularization of the path steps' ``rho_scale`` min(||E||, 0.1) + 4t eps."""
    sec = ssn.rule
    x, t, reg = p.x, p.t, p.reg
    eps = jnp.finfo(x.dtype).eps
    rho = sec.path.rho_scale * jnp.minimum(it.norm_e, 0.1) + 4.0 * t * eps
    shift = reg.secant_shift(it.w, x, it.e, t, sec.passes)
    out = _path.path_step(
        p, it, shift, rho, sec.path,
        line_search=lambda *a: exact_line_search(reg, t, *a, passes=sec.line_search_passes))
    new = out.iterate
    return StepResult(escalated, new, counts(0, out.breakpoints), out.evaluations,
                      stops(p, new.y, new.norm_e))


def _shifted_step(p: Problem, ssn: SSN, escalated, it: Iterate, loose) -> StepResult:
    x, t = p.x, p.t
    sec = ssn.rule.secant if isinstance(ssn.rule, Adaptive) else ssn.rule
    d, its = _secant_direction(p, ssn, escalated, it, loose)
    step = (2.0 * t) * mm(x, d)
    at_one = residual(p, it.w + step)
    if sec.unit_accept > 0 and loose is not False:
        # A full step that ends the solve needs no line search (its last one, when loose).
        ends = stops(p, at_one.y, at_one.norm_e)
        full = jnp.asarray(loose) & ((at_one.norm_e <= sec.unit_accept * it.norm_e) | ends)
    else:
        full, ends = False, None

    def line_searched():
        # The dual's minimizer along D need not lower ||E|| where phi is flat; the full
        # Newton step often does: keep the one with the smaller residual.
        s = exact_line_search(p.reg, t, it.w, it.y, it.e, d, step,
                              passes=sec.line_search_passes)
        at_min = residual(p, it.w + s * step)
        pick = at_one.norm_e < at_min.norm_e
        at = jax.tree.map(lambda u, v: jnp.where(pick, u, v), at_one, at_min)
        return jnp.where(pick, 1.0, s), at

    def searched():
        s, at = line_searched()
        return s, at, stops(p, at.y, at.norm_e)

    # The stopping test at the new iterate goes to the loop (known at the full step).
    s, (y, jac, e, norm_new), stop = _cond(
        full, lambda: (jnp.ones((), x.dtype), at_one, ends), searched)
    if isinstance(ssn.rule, Adaptive):
        escalated = escalated | ~(norm_new <= ssn.rule.escalate * it.norm_e)
    evals = jnp.where(full, 1, 2).astype(jnp.int32)
    new = Iterate(it.lam + s * d, it.w + s * step, y, jac, e, norm_new)
    return StepResult(escalated, new, counts(its), evals, stop)


def rule(ssn: SSN, loose: bool | None = None):
    """The step function of ``ssn.rule``; ``loose`` as in :func:`secant_step` (the
    reference rule has no loose variant)."""
    if isinstance(ssn.rule, Reference):
        return reference_step
    if loose is None:
        return secant_step
    return functools.partial(secant_step, loose=loose)
