"""The tangent-space proximal subproblem, solved by a semi-smooth Newton method.

For a point X of St(d, r), a (gradient) matrix G, a step t > 0 and a convex
regularizer h, :func:`tangent_prox` computes

    zeta = argmin_{zeta in T_X} <G, zeta> + ||zeta||_F^2 / (2t) + h(X + zeta)

through its dual (design notes section 3): for symmetric Lambda,

    Y(Lambda) = prox_{t h}(X - t G + 2 t X Lambda),
    E(Lambda) = Y^T X + X^T Y - 2 I,

and zeta = Y(Lambda*) - X where E(Lambda*) = 0. E is the gradient of the convex,
piecewise quadratic dual phi(Lambda) = ||Y(Lambda)||^2 / (2t) - 2 tr(Lambda). The
Newton steps (:mod:`rproxjax._ssn.steps`) run inside a bounded ``lax.while_loop``
that keeps the iterate with the smallest residual (or the one that meets the stopping
test, which ends it).
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax import _jit as _compile
from rproxjax._linalg import mm
from rproxjax._results import Status
from rproxjax._ssn import implicit as _implicit
from rproxjax._ssn import steps as _steps
from rproxjax._ssn.config import (
    METHODS,
    SSN,
    AutoLinearSolver,
    Reference,
    with_deprecated,
)
from rproxjax._ssn.records import SubproblemInfo
from rproxjax._typing import Array, ArrayLike, DTypeLike, Regularizer

__all__ = ["METHODS", "SSN", "SubproblemInfo", "default_tol", "tangent_prox"]


def default_tol(dtype: DTypeLike | None) -> float:
    """Default bound on ||E(Lambda)||_F: ``max(1e-10, 100 * eps(dtype))``.

    1e-10 in float64 and about 1.2e-5 in float32. ||E|| is the tangency defect of
    zeta, not a bound on its distance to the exact solution: that distance is a few
    times ||E|| where the subproblem is well conditioned and grows with its
    degeneracy (columns of Y with fewer nonzeros than r).

    Args:
      dtype: the solve's dtype, float32 or float64.

    Returns:
      The tolerance, a Python float.

    Raises:
      ValueError: for a dtype other than float32 and float64 (``None`` included).

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> rproxjax.default_tol(jnp.float64)
        1e-10
    """
    if dtype is None:  # jnp.dtype(None) is the default float: no silent choice here
        raise ValueError("dtype must be float32 or float64, got None.")
    if jnp.dtype(dtype) not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {jnp.dtype(dtype)}.")
    return max(1e-10, 100.0 * float(jnp.finfo(dtype).eps))


def _smooth_part(xt, g):
    """sym(X^T G) / 2 from ``xt`` = X^T: the multiplier of the h = 0 problem."""
    xtg = mm(xt, g)
    return 0.25 * (xtg + xtg.T)


def _all_finite(*trees):
    leaves = [a for tree in trees for a in jax.tree.leaves(tree)]
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in leaves]))


class Best(NamedTuple):
    """The iterate a solve returns: the one that met the stopping test, else the one with
    the smallest residual so far."""

    lam: Array
    y: Array
    norm_e: Array
    w: Array


class LoopState(NamedTuple):
    """The Newton loop's carry."""

    num_steps: Array  #: steps taken (int32)
    iterate: _steps.Iterate  #: the current iterate
    status: Array  #: SUCCESSFUL, or NONFINITE once an iterate is not finite
    going: Array  #: the loop's condition: steps left, finite, stopping test not met
    counts: Array  #: (CG iterations, path breakpoints), summed
    evaluations: Array  #: evaluations of E, summed
    best: Best
    escalated: Array  #: the adaptive rule's flag


def _status(finite):
    return jnp.where(finite, Status.SUCCESSFUL, Status.NONFINITE).astype(jnp.int32)


def init(p: _steps.Problem, ssn: SSN, start: _steps.Iterate) -> LoopState:
    """The loop state at the starting iterate."""
    finite = jnp.isfinite(start.norm_e)
    going = (ssn.max_steps > 0) & finite & ~_steps.stops(p, start.y, start.norm_e)
    best = Best(start.lam, start.y, start.norm_e, start.w)
    return LoopState(jnp.int32(0), start, _status(finite), going, jnp.zeros(2, jnp.int32),
                     jnp.int32(1), best, jnp.bool_(False))


def step(p: _steps.Problem, ssn: SSN, state: LoopState, rule=None) -> LoopState:
    """One Newton step of ``rule`` (default: ``ssn.method``'s, :func:`rproxjax._ssn.steps.rule`),
    keeping the best iterate."""
    rule = _steps.rule(ssn) if rule is None else rule
    out = rule(p, ssn, state.escalated, state.iterate)
    it = out.iterate
    # A non-finite step ends the loop (status) and is never the best iterate: the loop
    # returns ``best``, so the current iterate needs no guard.
    finite = jnp.isfinite(it.norm_e) & jnp.all(jnp.isfinite(it.lam))
    stop = _steps.stops(p, it.y, it.norm_e) if out.stops is None else out.stops
    # A step can raise the residual (the reference rule accepts its last trial; the dual's
    # minimizer along a line need not lower ||E||): keep the best iterate, or the one that
    # meets the stopping test (it ends the loop).
    better = finite & (stop | (it.norm_e < state.best.norm_e))
    best = jax.tree.map(lambda a, b: jnp.where(better, a, b), Best(it.lam, it.y, it.norm_e,
                                                                    it.w), state.best)
    k = state.num_steps + 1
    going = (k < ssn.max_steps) & finite & ~stop
    return LoopState(k, it, _status(finite), going, state.counts + out.counts,
                     state.evaluations + out.evaluations, best, out.escalated)


def terminate(state: LoopState):
    """Whether the loop ends (the negation of its condition)."""
    return ~state.going


def newton_loop(p: _steps.Problem, ssn: SSN, start: _steps.Iterate, rule=None) -> LoopState:
    """The bounded Newton iteration from ``start``: :func:`init`, then :func:`step` (of
    ``rule``, a function ``(problem, ssn, escalated, iterate) -> StepResult``; default
    ``ssn.method``'s) until :func:`terminate`."""
    return lax.while_loop(lambda s: ~terminate(s), lambda s: step(p, ssn, s, rule),
                          init(p, ssn, start))


@functools.partial(jax.jit, static_argnames="loose")
def _loop(p: _steps.Problem, ssn: SSN, start: _steps.Iterate, loose=None) -> LoopState:
    """:func:`newton_loop` of ``_steps.rule(ssn, loose)``'s steps, traced once per shape,
    dtype, static setting and tracing context (``ssn`` holds no leaves here:
    :func:`_static`): a batched solve's rule traces the loop in its loop over lanes each
    time ``vmap`` batches an enclosing ``lax.scan`` body (its fixpoint over the carry), at
    the same shapes: every time after the first reuses the trace."""
    return newton_loop(p, ssn, start, _steps.rule(ssn, loose))


def _static(ssn: SSN) -> SSN:
    """``ssn`` without its leaves (``tol`` and ``rtol`` are read from the problem)."""
    tree = jax.tree.structure(ssn)
    return jax.tree.unflatten(tree, [None] * tree.num_leaves)


def _initial_multiplier(xt, smooth, lam, lam_h, sub):
    """Lambda_0 from whichever warm start was given (``_warm_start``); ``xt`` is X^T,
    ``smooth`` sym(X^T G) / 2."""
    if lam is not None:
        return lam
    if sub is not None:  # the regularizer's part of the multiplier at this X
        return smooth + _smooth_part(xt, sub)
    return smooth + lam_h


def _begin(x, xt, g, t, reg, lam, tol, rtol):
    """The solve before its Newton loop: (problem, starting iterate); ``xt`` is X^T."""
    p = _steps.Problem(x, xt, t, reg, tol, rtol)
    w0 = x - t * g + (2.0 * t) * mm(x, lam)
    return p, _steps.Iterate.at(lam, w0, _steps.residual(p, w0))


def _finish(p: _steps.Problem, g, lam0, smooth, out: LoopState):
    """(zeta, info) from the loop's final state ``out``."""
    x, t, reg, tol, rtol = p.x, p.t, p.reg, p.tol, p.rtol
    lam, y, norm_e, w = out.best
    # Non-finite inputs can be hidden by the prox (soft-thresholding maps NaN
    # to 0), so they are detected explicitly; such a call returns zeta = 0.
    inputs_finite = _all_finite(x, g, t, lam0, reg)
    converged = _steps.meets_stopping_test(x, y, norm_e, tol, rtol) & inputs_finite
    status = jnp.where(
        converged, Status.SUCCESSFUL,
        jnp.where(out.status == Status.SUCCESSFUL, Status.MAX_STEPS_REACHED, out.status),
    )
    # Y = X + zeta always has a nonzero column space (sym(X^T Y) = I at the solution), but
    # an unconverged iterate can have a zero column; X + eta zeta would then collapse.
    collapsed = ~converged & jnp.any(jnp.all(y == 0, axis=0))
    status = jnp.where(collapsed & (status == Status.MAX_STEPS_REACHED), Status.COLLAPSED,
                       status)
    # Finite inputs at extreme scales can overflow ||E|| or ||zeta||: such a call is not
    # converged, and says so.
    overflow = ~jnp.isfinite(norm_e) | ~jnp.isfinite(jnp.sum((y - x) ** 2))
    status = jnp.where(overflow & ~converged, Status.NONFINITE, status)
    status = jnp.where(inputs_finite, status, Status.NONFINITE).astype(jnp.int32)
    # Traced values that a concrete call rejects: t, mu, tol (finite, > 0), rtol (finite,
    # >= 0).
    valid = (t > 0) & jnp.all(jnp.stack([jnp.all(a >= 0) for a in jax.tree.leaves(reg)]))
    valid = valid & (tol > 0) & jnp.isfinite(tol) & (rtol >= 0) & jnp.isfinite(rtol)
    status = jnp.where(inputs_finite & ~valid, Status.INVALID, status).astype(jnp.int32)
    converged = converged & valid
    ok = inputs_finite & valid
    zeta = jnp.where(ok & ~collapsed, y - x, jnp.zeros_like(x))
    # The warm starts for a next call, zeroed where the status is NONFINITE or INVALID
    # (passed back, they would make every later call of a warm-start chain NONFINITE).
    fresh = ok & (status != Status.NONFINITE)
    sub = jnp.where(fresh, (w - y) / jnp.where(ok, t, 1.0), jnp.zeros_like(x))
    lam_h = jnp.where(fresh, lam - smooth, jnp.zeros_like(lam))
    info = SubproblemInfo.make(
        lam=lam, num_steps=out.num_steps, residual=norm_e, converged=converged, status=status,
        num_linear_steps=out.counts[0], num_evaluations=out.evaluations, lam_h=lam_h,
        subgradient=sub, num_breakpoints=out.counts[1])
    return zeta, info


def _solver(ssn: SSN, loose: bool | None = None):
    """solve(x, xt, g, t, reg, lam0, smooth, tol, rtol) -> (zeta, info) for the static settings
    ``ssn``; where :func:`sequential_lanes`, with a ``custom_vmap`` rule
    (:func:`_mapped_lanes`). ``loose``: whether ``rtol > 0`` where known at trace time
    (:func:`rproxjax._ssn.steps.is_loose`)."""
    static = _static(ssn)

    def loop(p, start):
        return _loop(p, static, start, loose)

    def solve(x, xt, g, t, reg, lam, smooth, tol, rtol):
        p, start = _begin(x, xt, g, t, reg, lam, tol, rtol)
        return _finish(p, g, lam, smooth, loop(p, start))

    lanes = _mapped_lanes(solve, ssn, loop) if sequential_lanes(ssn) else solve
    return _implicit.implicit(lanes, _steps.uses_cg(ssn))


def sequential_lanes(ssn: SSN) -> bool:
    """Whether a ``jax.vmap``-ed solve runs its lanes one after another: on CPU, unless
    ``ssn.sequential_lanes`` says otherwise."""
    if ssn.sequential_lanes is None:
        return jax.default_backend() == "cpu"
    return bool(ssn.sequential_lanes)


@functools.partial(_compile.jit, static_argnames="loose")
def _solve_jit(x, g, t, reg, lam, lam_h, sub, ssn, loose=None):
    # ssn's tol and rtol are traced leaves; its other fields are static (the tree's
    # structure). The warm start is resolved here, outside the mapped-lanes rule: its
    # arguments are then all arrays (no None), as custom_vmap needs under jax.jacfwd.
    # sym(X^T G) / 2 is formed once, for Lambda_0 and for info.lam_h, from X^T
    # materialized (as in _begin: products with a transposed operand are slower on CPU).
    # Multipliers are symmetric: a skew part would add X * skew to the prox argument and
    # move the solution (a converged answer to another problem), so it is dropped.
    sym = lambda a: 0.5 * (a + a.T)  # noqa: E731
    lam, lam_h = (None if lam is None else sym(lam)), sym(lam_h)
    xt = lax.optimization_barrier(x.T)
    smooth = _smooth_part(xt, g)
    lam0 = _initial_multiplier(xt, smooth, lam, lam_h, sub)
    return _solver(ssn, loose)(x, xt, g, t, reg, lam0, smooth, ssn.tol, ssn.rtol)


def _mapped_lanes(solve, ssn, loop):
    """``solve`` whose ``vmap`` runs the Newton loops (``loop(problem, start)``) of the lanes
    that take a step one after another (:func:`_going_lanes`) while the work before and
    after them (the starting residual and stopping test, zeta) stays batched: most loose
    solves take no Newton step, and their lanes then cost no loop. Unlike
    ``jax.custom_batching.sequential_vmap`` it also accepts a batch with no batched argument
    (``jax.jacfwd``: only tangents batched), where it computes ``solve`` once."""
    fn = jax.custom_batching.custom_vmap(solve)

    @fn.def_vmap
    def rule(axis_size, in_batched, x, xt, g, t, reg, lam, smooth, tol, rtol):
        # axis_size given to the inner vmaps: the batch can be in tol or rtol alone.
        args = (x, xt, g, t, reg, lam, smooth, tol, rtol)
        if not any(jax.tree.leaves(in_batched)):
            out = solve(*args)
            return out, jax.tree.map(lambda _: False, out)
        axes = [jax.tree.map(lambda b: 0 if b else None, f) for f in in_batched]
        bx, bxt, bg, bt, breg, blam, bsmooth, btol, brtol = axes
        start = jax.vmap(lambda *a: _begin(*a)[1],
                         in_axes=(bx, bxt, bg, bt, breg, blam, btol, brtol),
                         axis_size=axis_size)(x, xt, g, t, reg, lam, tol, rtol)
        # The loops' arguments: the start is batched now, the others as given; X^T is
        # formed in each lane's loop (_going_lanes).
        p = _steps.Problem(x, None, t, reg, tol, rtol)
        fx, _, _, ft, freg, _, _, ftol, frtol = in_batched
        p_flags = _steps.Problem(fx, None, ft, freg, ftol, frtol)
        p_axes = _steps.Problem(bx, None, bt, breg, btol, brtol)
        out = _going_lanes(p, p_flags, p_axes, start, ssn, loop, axis_size)
        res = jax.vmap(_finish, in_axes=(p_axes, bg, blam, bsmooth, 0),
                       axis_size=axis_size)(p, g, lam, smooth, out)
        return res, jax.tree.map(lambda _: True, res)

    return fn


def _outcome(state: LoopState) -> LoopState:
    """``state`` without its current iterate (what :func:`_finish` reads)."""
    return state._replace(iterate=None)


def _going_lanes(p, p_flags, p_axes, start, ssn, loop, axis_size) -> LoopState:
    """The lanes' final loop states, batched and without the current iterate (which
    :func:`_finish` does not read): :func:`init` of every lane, batched, then
    ``loop(problem, start)`` (a :func:`newton_loop`) of each lane whose loop goes, one
    after another: a ``while_loop`` over those lanes alone, each writing its row in place,
    so that a lane that takes no step costs no loop. ``p_flags`` says which fields of ``p``
    are batched (``p_axes`` as ``vmap`` axes; X^T is not among them: each lane forms its
    own); the start iterate is batched."""
    first = jax.vmap(lambda pp, st: _outcome(init(pp, ssn, st)), in_axes=(p_axes, 0),
                     axis_size=axis_size)(p, start)
    order = jnp.argsort(~first.going, stable=True)  # the lanes that go first
    flat, tree = jax.tree.flatten((p, start.e))
    flags = jax.tree.leaves((p_flags, True))

    def body(carry):
        k, out = carry
        i = order[k]
        lane = [lax.dynamic_index_in_dim(a, i, keepdims=False) if b else a
                for a, b in zip(flat, flags, strict=True)]
        lane_p, lane_e = jax.tree.unflatten(tree, lane)
        # X^T of the lane, formed here: a slice of the batched X^T, passed into this
        # loop, would be copied whole (XLA copies a while loop's operands) on every call.
        lane_p = lane_p._replace(xt=lax.optimization_barrier(lane_p.x.T))
        # The lane's start from the carry, whose row i no lane has written yet (its Y and
        # Jacobian from W again): the batched start's d x r arrays then need no copy beside
        # the carry, and the batched Jacobian is never formed.
        row_of = lambda a: lax.dynamic_index_in_dim(a, i, keepdims=False)  # noqa: E731
        lam, w, norm_e = row_of(out.best.lam), row_of(out.best.w), row_of(out.best.norm_e)
        y, jac = lane_p.reg.prox_jacobian(w, lane_p.t)
        lane_start = _steps.Iterate(lam, w, y, jac, lane_e, norm_e)
        row = _outcome(loop(lane_p, lane_start))
        out = jax.tree.map(lambda buf, v: lax.dynamic_update_index_in_dim(buf, v, i, 0),
                           out, row)
        return k + 1, out

    count = jnp.sum(first.going)
    _, out = lax.while_loop(lambda c: c[0] < count, body, (jnp.int32(0), first))
    return out


@jax.jit
def _solve_smooth(x, g, t):
    """h = 0: zeta = -t P_X(G) and Lambda = sym(X^T G) / 2 in closed form."""
    finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(g)) & jnp.isfinite(t)
    valid = t > 0  # a traced t <= 0 would give an ascent step
    ok = finite & valid
    # Invalid and non-finite calls have zero derivatives: their inputs reach the formulas
    # through a selection that passes no cotangent (a zero cotangent times a NaN partial is
    # NaN). Values are unchanged, lam included.
    guard = lambda a: jnp.where(ok, a, lax.stop_gradient(a))  # noqa: E731
    xs, gs, ts = guard(x), guard(g), jnp.where(ok, t, 0.0)
    lam = _smooth_part(xs.T, gs)
    zeta = jnp.where(ok, -ts * (gs - mm(xs, 2.0 * lam)), jnp.zeros_like(x))
    status = jnp.where(finite, jnp.where(valid, Status.SUCCESSFUL, Status.INVALID),
                       Status.NONFINITE).astype(jnp.int32)
    info = SubproblemInfo.make(lam=lam, residual=jnp.zeros((), x.dtype), converged=ok,
                               status=status, subgradient=jnp.zeros_like(x))
    return zeta, info


def tangent_prox(
    x: ArrayLike,
    g: ArrayLike,
    t: ArrayLike,
    reg: Regularizer | None,
    *,
    lam: ArrayLike | None = None,
    lam_h: ArrayLike | None = None,
    subgradient: ArrayLike | None = None,
    ssn: SSN | None = None,
    **deprecated: Any,
) -> tuple[Array, SubproblemInfo]:
    r"""Solves the tangent-space proximal subproblem at ``x``.

    .. math::
        \zeta = \operatorname*{argmin}_{\zeta \in T_X \mathrm{St}}
        \langle G, \zeta\rangle + \frac{1}{2t}\|\zeta\|_F^2 + h(X + \zeta)

    by a semi-smooth Newton method on the dual residual E(Lambda) (design notes sections
    3 and 3b): dense Newton systems in the r(r+1)/2 symmetric coordinates for small r,
    matrix-free conjugate gradients for large r, inside a bounded ``lax.while_loop``.
    Compiled once per shape, dtype and static setting of ``ssn``; new values of ``t``,
    the regularizer's strength, the warm starts, ``ssn.tol`` and ``ssn.rtol`` do not
    retrace. It can be ``jax.vmap``-ed over ``x``, ``g``, ``t``, the warm starts, the
    regularizer (for instance over many values of mu) and the tolerances. Where
    ``ssn.sequential_lanes`` says so (on CPU by default) the vmapped lanes' Newton loops
    run one after another, each for its own number of steps, while the work around them
    stays batched; under nested ``vmap`` the innermost axis runs lane by lane.

    Derivatives (``jax.jvp``, ``jax.grad``, ...) of zeta, ``info.lam``, ``info.lam_h``
    and ``info.subgradient`` with respect to ``x``, ``g``, ``t`` and the regularizer's
    strengths are those of the solution map, by the implicit function theorem at the
    returned multiplier (:mod:`rproxjax._ssn.implicit`), not of the iterations: the warm
    start and the tolerances do not move them. At an unconverged or loose iterate they
    are those of the map with E held at its value. Invalid and non-finite calls have zero
    derivatives. ``docs/subproblem.md`` describes the Newton rules (``ssn.method``).

    Args:
      x: point of St(d, r), shape (d, r), float32 or float64 (``jax.vmap`` for batches).
        Its orthonormality is not checked here (``fit`` and the optimizers check their
        points): off the manifold, zeta solves the problem on {X^T zeta + zeta^T X = 0},
        which is then not the tangent space.
      g: gradient (estimate), same shape and dtype as ``x``.
      t: step size t > 0 (scalar).
      reg: a regularizer such as :func:`rproxjax.l1` or :func:`rproxjax.l21`, or ``None``
        for h = 0 (closed form zeta = -t P_X(G), no iteration).
      lam: r x r symmetric initial multiplier (a warm start on the same or a nearby
        (X, G)); its symmetric part is used. Give at most one of ``lam``, ``lam_h`` and
        ``subgradient``; none: Lambda_0 = sym(X^T G) / 2.
      lam_h: warm start from the regularizer's part of a previous multiplier
        (``info.lam_h``): Lambda_0 = lam_h + sym(X^T G) / 2.
      subgradient: warm start from a subgradient V of h (``info.subgradient`` of a
        previous call, shape (d, r)): Lambda_0 = sym(X^T (G + V)) / 2 at this X.
      ssn: the solver's settings, :class:`rproxjax.SSN` (default ``SSN()``: the secant
        rule to ``tol`` = :func:`default_tol`, ``rtol = 0``).
      **deprecated: ``tol``, ``rtol``, ``max_steps``, ``linear_solver`` and ``method``,
        the fields of ``ssn`` of the same names (``DeprecationWarning``; removed in 0.5).

    Returns:
      ``(zeta, info)``: the tangent step (d x r) and a :class:`SubproblemInfo`. zeta =
      Y(Lambda) - X is returned even when ``info.converged`` is False, at the iterate that
      met the stopping test or else had the smallest residual; it is finite when the
      inputs are. Non-finite inputs give ``Status.NONFINITE`` and zeta = 0; an
      unconverged iterate with a zero column of Y gives ``Status.COLLAPSED`` and zeta = 0.

    Raises:
      ValueError: for inconsistent shapes, r > d, non-float dtypes, a concrete t <= 0 or
        mu < 0, mu of the wrong length, a ``reg`` that is not a regularizer, or more than
        one warm start. Traced values out of range give ``Status.INVALID``; finite inputs
        whose norms overflow, ``Status.NONFINITE``.
      TypeError: for ``ssn`` not an :class:`SSN`, or an unknown keyword argument.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 20, 3)
        >>> g = jax.random.normal(jax.random.key(1), (20, 3))
        >>> zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
        >>> bool(info.converged)
        True
        >>> zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1),
        ...                                    ssn=rproxjax.SSN(tol=1e-4))
    """
    ssn = with_deprecated(ssn, "tangent_prox", deprecated, _OLD_NAMES)
    r = _check_arguments(x, g, t)
    dtype = jnp.result_type(x)
    # Outside a trace, values reach the solve by transfers (nothing compiled but the solve);
    # inside one, by casts in the caller's program, as any traced code.
    eager = not any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(
        (x, g, t, reg, lam, lam_h, subgradient, ssn)))
    t = _checks.as_dtype(t, dtype, eager)
    if reg is None:
        return _solve_smooth(x, g, t)
    if not isinstance(reg, Regularizer):
        raise ValueError(f"reg must be None or a regularizer (rproxjax.l1, rproxjax.l21), "
                         f"got {reg!r}.")
    reg.check(x.shape)  # type: ignore[union-attr]
    reg = jax.tree.map(lambda a: _checks.as_dtype(a, dtype, eager), reg)
    lam, lam_h, subgradient = _warm_start(lam, lam_h, subgradient,
                                          x.shape, dtype, eager)  # type: ignore[union-attr]
    # rtol > 0 decided here where rtol is concrete (the usual case, a Python number): the
    # program then holds the loose or the tight branch of the Newton steps, not both.
    rtol = _checks.concrete_or_none(ssn.rtol)
    loose = None if rtol is None else bool(rtol > 0)
    return _solve_jit(x, g, t, reg, lam, lam_h, subgradient, resolve(ssn, r, dtype, eager),
                      loose=loose)


#: tangent_prox's former keyword arguments, by the SSN field each sets.
_OLD_NAMES = MappingProxyType({"tol": "tol", "rtol": "rtol", "max_steps": "max_steps",
                               "linear_solver": "linear_solver", "method": "rule"})


def resolve(ssn: SSN, r: int, dtype, eager: bool = False) -> SSN:
    """``ssn`` for one solve of rank ``r`` in ``dtype``: ``tol=None`` made
    :func:`default_tol`, the tolerances arrays of ``dtype`` (``eager``: by transfers, see
    :func:`rproxjax._checks.as_dtype`), an :class:`AutoLinearSolver` the solver it picks."""
    tol = default_tol(dtype) if ssn.tol is None else ssn.tol
    solver = ssn.linear_solver
    if isinstance(solver, AutoLinearSolver):
        solver = solver.select(r)
    return ssn.replace(tol=_checks.as_dtype(tol, dtype, eager),
                       rtol=_checks.as_dtype(ssn.rtol, dtype, eager), linear_solver=solver)


def _check_arguments(x, g, t) -> int:
    """Trace-time checks of :func:`tangent_prox`'s arguments; returns r."""
    _checks.check_array("x", x)
    _checks.check_array("g", g)
    if jnp.ndim(x) != 2:
        raise ValueError(
            f"tangent_prox takes a single d x r point, got x of shape {jnp.shape(x)}; "
            "use jax.vmap for batches."
        )
    _, r = _checks.check_point("x", x)
    _checks.check_same_shape("x", x, "g", g)
    _checks.check_same_dtype("x", x, "g", g)
    if jnp.ndim(t) != 0:
        raise ValueError(f"t must be a scalar, got shape {jnp.shape(t)}.")
    _checks.check_positive("t", t)
    return r


def _warm_start(lam, lam_h, sub, shape, dtype, eager=False):
    """(lam or None, lam_h, subgradient or None) for the solver: checked and cast
    (:func:`_solve_jit` symmetrizes the multipliers)."""
    given = [name for name, v in (("lam", lam), ("lam_h", lam_h), ("subgradient", sub))
             if v is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one warm start (lam, lam_h or subgradient), got "
                         f"{' and '.join(given)}.")
    if sub is not None:
        _checks.check_array("subgradient", sub)
    r = shape[-1]
    for name, value, want in (("lam", lam, (r, r)), ("lam_h", lam_h, (r, r)),
                              ("subgradient", sub, tuple(shape))):
        if value is not None and jnp.shape(value) != want:
            raise ValueError(f"{name} must have shape {want}, got {jnp.shape(value)}.")
    # Eager calls: host zeros and transfers, which compile nothing (see _checks.as_dtype).
    # The multipliers are symmetrized in the solve's program (_solve_jit).
    cast = lambda a: _checks.as_dtype(a, dtype, eager)  # noqa: E731
    zeros = cast(np.zeros((r, r))) if eager else jnp.zeros((r, r), dtype)
    if sub is not None:
        return None, zeros, cast(sub)
    lam = None if lam is None else cast(lam)
    if lam_h is None:
        return (zeros if lam is None else lam), zeros, None
    return lam, cast(lam_h), None


def next_warm_start(info: SubproblemInfo, ssn: SSN) -> dict[str, Array]:
    """The warm start a proximal step passes to its next solve, as ``tangent_prox``'s
    keyword argument: the reference rule's previous multiplier (``lam``, as its code
    does), otherwise ``ssn.warm_start``'s field of ``info`` (the subgradient of h, or the
    multiplier's regularizer part ``lam_h``)."""
    if isinstance(ssn.rule, Reference):
        return {"lam": info.lam}
    return {ssn.warm_start: getattr(info, ssn.warm_start)}
