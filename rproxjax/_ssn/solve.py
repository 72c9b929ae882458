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
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax._ssn import implicit as _implicit
from rproxjax._ssn import steps as _steps
from rproxjax._linalg import mm
from rproxjax._results import Status

__all__ = ["METHODS", "SubproblemInfo", "default_tol", "tangent_prox"]

Array = Any

#: r at and above which ``linear_solver="auto"`` uses conjugate gradients. With the
#: secant rule the dense systems take fewer and more uniform steps at r = 15 on real
#: subproblems (benchmarks/results/subproblem_real.md: max 10 against 30 steps) for a
#: similar time per call; at r = 32 inside R-ProxSGD runs CG's steps cost 0.60-1.02x the
#: dense ones (linear_solver_runs.md) and a whole step 0.61-0.64x (scale_cpu_d4096.md). On
#: an H200 a CG Newton step costs about 0.57 / 0.74 ms (float32 / float64) at r = 32 inside
#: R-ProxSGD (3.5-3.8 steps a call at the then default ssn_rtol 1e-2, scale_gpu_2026-11-26.md;
#: 6.4 ms in float32 with the former rule of loose solves). With the present kernel a whole
#: R-ProxSGD step at r = 32 in float32 costs 0.99 ms with dense systems and 1.10 ms with CG
#: (scale_gpu.md, one run, one Newton step a call): not enough to make the rule per backend.
CG_THRESHOLD = 16
#: Newton rules: ``"secant"`` (default), ``"adaptive"`` (plain steps, secant on
#: demand) and ``"reference"`` (the ManPG code's rule).
METHODS = ("secant", "adaptive", "reference")
#: Breakpoints walked per coordinate by the secant rule.
SECANT_PASSES = 3
#: How ``jax.vmap`` batches a solve (read when it is traced): ``None`` (default) runs the
#: lanes' Newton loops one after another (a ``custom_vmap`` rule, :func:`_mapped_lanes`; the
#: work before and after the loops stays batched) on CPU and one batched Newton loop
#: elsewhere; ``True`` / ``False`` force either. On CPU a batched loop runs every lane for as
#: many steps as the slowest needs, and its kernels, already small, gain nothing from the
#: batch (benchmarks/results/step_cost.md). Traced solves are cached by ``jax.jit``: after
#: changing it, ``jax.clear_caches()`` makes later calls trace (and take) the new setting.
SEQUENTIAL_LANES = None


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
      num_breakpoints: threshold crossings followed by the path steps of tight float64 l1
        solves (``rtol = 0``, dense Newton systems; :mod:`rproxjax._ssn.path`), summed over Newton
        steps (int32; 0 for the other solves). Each costs a Cholesky solve and a d r^2
        product, about a tenth of a Newton step at d = 784, r = 15.
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


def default_tol(dtype) -> float:
    """Default bound on ||E(Lambda)||_F: ``max(1e-10, 100 * eps(dtype))``.

    1e-10 in float64 and about 1.2e-5 in float32. ||E|| is the tangency defect of
    zeta, not a bound on its distance to the exact solution: that distance is a few
    times ||E|| where the subproblem is well conditioned and grows with its
    degeneracy (columns of Y with fewer nonzeros than r). On the captured MNIST
    subproblems solved to ||E|| <= 1e-8 it reached 13 ||E||_F (7.2e-9 entrywise) with
    the secant rule from the optimizers' warm start, up to 180 ||E||_F with other rules
    and starts and 700 ||E||_F with the reference rule
    (``benchmarks/results/subproblem_real.md``).
    """
    if dtype is None:  # jnp.dtype(None) is the default float: no silent choice here
        raise ValueError("dtype must be float32 or float64, got None.")
    if jnp.dtype(dtype) not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {jnp.dtype(dtype)}.")
    return max(1e-10, 100.0 * float(jnp.finfo(dtype).eps))


def _smooth_part(x, g):
    """sym(X^T G) / 2: the multiplier of the h = 0 problem."""
    xtg = mm(x.T, g)
    return 0.25 * (xtg + xtg.T)


def _all_finite(*trees):
    leaves = [a for tree in trees for a in jax.tree.leaves(tree)]
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in leaves]))


def _newton_loop(step, x, tol, rtol, max_steps, start):
    """The bounded Newton iteration of ``step`` (on this X) from ``start`` = (Lambda, W, Y,
    jac, E, ||E||); returns (steps, status, (CG its, path breakpoints), evals, best =
    (Lambda, Y, ||E||, W)).

    The loop's condition reads one flag that its body computes. A ``lax.cond`` around the
    loop (entering it only when a step was due, so that calls taking no step would not pay
    for the work on X alone that XLA hoists out of it) cost more than it saved on CPU:
    without it R-ProxSGD's step on MNIST went from 355 to 316 us at mu = 0.2 (1.0 Newton
    step a call) and from 280 to 271 us at mu = 0.8 (none; float64, an A/B run of
    ``benchmarks/step_cost.py``, measured with an optimization barrier that kept that work
    inside the loop). The barrier is not kept: without it the same runs took 300-322 against
    311-317 us at mu = 0.2 and 261-269 against 265-267 at mu = 0.8 (two alternating runs
    each), and tight secant solves were 10-15% slower with it
    (``benchmarks/subproblem_real.py``: it stopped XLA hoisting the work on X alone).
    """
    lam, w, y, jac, e, norm_e = start

    def done(y, norm_e):
        return _steps.meets_stopping_test(x, y, norm_e, tol, rtol)

    def body(state):
        k, lam, w, y, jac, e, norm_e, _, _, n_lin, n_eval, best, aux = state
        aux, new = step(aux, lam, w, y, jac, e, norm_e)
        lam, w, y, jac, e, norm_e, its, evals = new
        # CG iterations and path breakpoints, counted apart.
        n_lin = n_lin + its
        # A non-finite step ends the loop (status) and is never the best iterate: the loop
        # returns ``best``, so the current iterate needs no guard.
        finite = jnp.isfinite(norm_e) & jnp.all(jnp.isfinite(lam))
        status = jnp.where(finite, Status.SUCCESSFUL, Status.NONFINITE).astype(jnp.int32)
        stop = done(y, norm_e)
        # A step can raise the residual (the reference rule accepts its last trial; the
        # dual's minimizer along a line need not lower ||E||): keep the best iterate, or the
        # one that meets the stopping test (it ends the loop; a loose full step can meet it
        # with a larger ||E|| than an earlier iterate's, through a larger ||Y - X||).
        better = finite & (stop | (norm_e < best[2]))
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), (lam, y, norm_e, w), best)
        go = (k + 1 < max_steps) & finite & ~stop
        return (k + 1, lam, w, y, jac, e, norm_e, status, go, n_lin, n_eval + evals,
                best, aux)

    finite = jnp.isfinite(norm_e)
    status0 = jnp.where(finite, Status.SUCCESSFUL, Status.NONFINITE).astype(jnp.int32)
    go = (max_steps > 0) & finite & ~done(y, norm_e)
    init = (jnp.int32(0), lam, w, y, jac, e, norm_e, status0, go, jnp.zeros(2, jnp.int32),
            jnp.int32(1),
            (lam, y, norm_e, w), jnp.bool_(False))
    final = lax.while_loop(lambda state: state[8], body, init)
    k, _, _, _, _, _, _, status, _, n_lin, n_eval, best, _ = final
    return k, status, n_lin, n_eval, best


def _initial_multiplier(x, smooth, lam, lam_h, sub):
    """Lambda_0 from whichever warm start was given (``_warm_start``); ``smooth`` is
    sym(X^T G) / 2."""
    if lam is not None:
        return lam
    if sub is not None:  # the regularizer's part of the multiplier at this X
        return smooth + _smooth_part(x, sub)
    return smooth + lam_h


def _begin(x, g, t, reg, lam):
    """The solve before its Newton loop: (X^T, start = (Lambda, W, Y, jac, E, ||E||))."""
    # X^T materialized once: XLA's transposed-operand products X^T Y were
    # measured 1.5-2x slower on two CPU threads.
    xt = lax.optimization_barrier(x.T)
    w0 = x - t * g + (2.0 * t) * mm(x, lam)
    return xt, (lam, w0, *_steps.residual(x, xt, t, reg, w0))


def _loop(max_steps: int, use_cg: bool, method: str):
    """The Newton loop, (x, xt, t, reg, tol, rtol, start) -> (steps, status, CG its, evals,
    best = (Lambda, Y, ||E||, W))."""

    def loop(x, xt, t, reg, tol, rtol, start):
        if method in ("secant", "adaptive"):
            step = functools.partial(_steps.secant_step, passes=SECANT_PASSES,
                                     adaptive=method == "adaptive", rtol=rtol)
        else:
            step = _steps.reference_step
        step = functools.partial(step, x, xt, t, reg, tol, use_cg)
        return _newton_loop(step, x, tol, rtol, max_steps, start)

    return loop


def _finish(x, g, t, reg, lam0, smooth, tol, rtol, out):
    """(zeta, info) from the loop's output ``out``."""
    k, status, n_lin, n_eval, (lam, y, norm_e, w) = out
    # Non-finite inputs can be hidden by the prox (soft-thresholding maps NaN
    # to 0), so they are detected explicitly; such a call returns zeta = 0.
    inputs_finite = _all_finite(x, g, t, lam0, reg)
    converged = _steps.meets_stopping_test(x, y, norm_e, tol, rtol) & inputs_finite
    status = jnp.where(
        converged, Status.SUCCESSFUL,
        jnp.where(status == Status.SUCCESSFUL, Status.MAX_STEPS_REACHED, status),
    )
    # Y = X + zeta always has a nonzero column space (sym(X^T Y) = I at the solution), but
    # an unconverged iterate can have a zero column; X + eta zeta would then collapse.
    collapsed = ~converged & jnp.any(jnp.all(y == 0, axis=0))
    status = jnp.where(collapsed & (status == Status.MAX_STEPS_REACHED), Status.COLLAPSED,
                       status)
    # Finite inputs at extreme scales can overflow ||E|| or ||zeta|| (entries past ~1e154 in
    # float64, ~1e19 in float32): such a call is not converged, and says so.
    overflow = ~jnp.isfinite(norm_e) | ~jnp.isfinite(jnp.sum((y - x) ** 2))
    status = jnp.where(overflow & ~converged, Status.NONFINITE, status)
    status = jnp.where(inputs_finite, status, Status.NONFINITE).astype(jnp.int32)
    # Traced values that a concrete call rejects: t, mu, tol (finite, > 0), rtol (finite,
    # >= 0). An infinite tol or rtol passed every iterate as converged.
    valid = (t > 0) & jnp.all(jnp.stack([jnp.all(a >= 0) for a in jax.tree.leaves(reg)]))
    valid = valid & (tol > 0) & jnp.isfinite(tol) & (rtol >= 0) & jnp.isfinite(rtol)
    status = jnp.where(inputs_finite & ~valid, Status.INVALID, status).astype(jnp.int32)
    converged = converged & valid
    ok = inputs_finite & valid
    zeta = jnp.where(ok & ~collapsed, y - x, jnp.zeros_like(x))
    # The warm starts for a next call, zeroed where the status is NONFINITE or INVALID:
    # NaN ones, or huge ones after an overflow, passed back as lam_h= or subgradient= made
    # every later call of a warm-start chain NONFINITE. (W - Y) / t at the returned
    # multiplier (the loop keeps its W).
    fresh = ok & (status != Status.NONFINITE)
    sub = jnp.where(fresh, (w - y) / jnp.where(ok, t, 1.0), jnp.zeros_like(x))
    lam_h = jnp.where(fresh, lam - smooth, jnp.zeros_like(lam))
    info = SubproblemInfo(lam, k, norm_e, converged, status, n_lin[0], n_eval, lam_h, sub,
                          n_lin[1])
    return zeta, info


def _solver(max_steps: int, use_cg: bool, method: str):
    """solve(x, g, t, reg, lam0, smooth, tol, rtol) -> (zeta, info); where
    :func:`sequential_lanes`, with a ``custom_vmap`` rule (:func:`_mapped_lanes`)."""
    loop = _loop(max_steps, use_cg, method)

    def solve(x, g, t, reg, lam, smooth, tol, rtol):
        xt, start = _begin(x, g, t, reg, lam)
        out = loop(x, xt, t, reg, tol, rtol, start)
        return _finish(x, g, t, reg, lam, smooth, tol, rtol, out)

    lanes = _mapped_lanes(solve, loop) if sequential_lanes() else solve
    return _implicit.implicit(lanes, use_cg)


def sequential_lanes() -> bool:
    """Whether a ``jax.vmap``-ed solve runs its lanes one after another: on CPU, unless
    :data:`SEQUENTIAL_LANES` says otherwise."""
    if SEQUENTIAL_LANES is None:
        return jax.default_backend() == "cpu"
    return bool(SEQUENTIAL_LANES)


@functools.partial(jax.jit, static_argnames=("max_steps", "use_cg", "method"))
def _solve_jit(x, g, t, reg, lam, lam_h, sub, tol, rtol, max_steps, use_cg, method):
    # The warm start is resolved here, outside the mapped-lanes rule: its arguments are then
    # all arrays (no None), as custom_vmap needs under jax.jacfwd. sym(X^T G) / 2 is formed
    # once, for Lambda_0 and for info.lam_h.
    smooth = _smooth_part(x, g)
    lam0 = _initial_multiplier(x, smooth, lam, lam_h, sub)
    return _solver(max_steps, use_cg, method)(x, g, t, reg, lam0, smooth, tol, rtol)


def _mapped_lanes(solve, loop):
    """``solve`` whose ``vmap`` runs the lanes' Newton loops (``loop``) one after another
    (``lax.map``) while the work before and after them (the starting residual and stopping
    test, zeta) stays batched: most loose solves take no Newton step. Unlike
    ``jax.custom_batching.sequential_vmap`` it also accepts a batch with no batched argument
    (``jax.jacfwd``: only tangents batched), where it computes ``solve`` once."""
    fn = jax.custom_batching.custom_vmap(solve)

    @fn.def_vmap
    def rule(axis_size, in_batched, x, g, t, reg, lam, smooth, tol, rtol):
        # axis_size given to the inner vmaps: the batch can be in tol or rtol alone.
        args = (x, g, t, reg, lam, smooth, tol, rtol)
        if not any(jax.tree.leaves(in_batched)):
            out = solve(*args)
            return out, jax.tree.map(lambda _: False, out)
        axes = [jax.tree.map(lambda b: 0 if b else None, f) for f in in_batched]
        bx, bg, bt, breg, blam, bsmooth, btol, brtol = axes
        xt, start = jax.vmap(_begin, in_axes=(bx, bg, bt, breg, blam),
                             axis_size=axis_size)(x, g, t, reg, lam)
        # The loops' arguments: X^T and the start are batched now, the others as given.
        fx, _, ft, freg, _, _, ftol, frtol = in_batched
        loop_args = (x, xt, t, reg, tol, rtol, start)
        loop_flags = (fx, True, ft, freg, ftol, frtol, jax.tree.map(lambda _: True, start))
        flat, tree = jax.tree.flatten(loop_args)
        flags = jax.tree.leaves(loop_flags)

        def lane(lane_args):
            it = iter(lane_args)
            merged = [next(it) if b else a for a, b in zip(flat, flags, strict=True)]
            return loop(*jax.tree.unflatten(tree, merged))

        out = lax.map(lane, [a for a, b in zip(flat, flags, strict=True) if b])
        res = jax.vmap(_finish, in_axes=(bx, bg, bt, breg, blam, bsmooth, btol, brtol, 0),
                       axis_size=axis_size)(x, g, t, reg, lam, smooth, tol, rtol, out)
        return res, jax.tree.map(lambda _: True, res)

    return fn


@jax.jit
def _solve_smooth(x, g, t):
    """h = 0: zeta = -t P_X(G) and Lambda = sym(X^T G) / 2 in closed form."""
    finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(g)) & jnp.isfinite(t)
    valid = t > 0  # a traced t <= 0 would give an ascent step
    ok = finite & valid
    # Invalid and non-finite calls have zero derivatives: their inputs reach the formulas
    # through a selection that passes no cotangent (a zero cotangent times a NaN partial was
    # NaN: reverse mode through zeta = 0, and a vmapped NaN lane's NaN in the gradient of
    # arguments shared with other lanes). Values are unchanged, lam included.
    guard = lambda a: jnp.where(ok, a, lax.stop_gradient(a))  # noqa: E731
    xs, gs, ts = guard(x), guard(g), jnp.where(ok, t, 0.0)
    lam = _smooth_part(xs, gs)
    zeta = jnp.where(ok, -ts * (gs - mm(xs, 2.0 * lam)), jnp.zeros_like(x))
    status = jnp.where(finite, jnp.where(valid, Status.SUCCESSFUL, Status.INVALID),
                       Status.NONFINITE).astype(jnp.int32)
    finite = ok
    zero = jnp.zeros((), jnp.int32)
    info = SubproblemInfo(lam, zero, jnp.zeros((), x.dtype), finite, status, zero, zero,
                          jnp.zeros_like(lam), jnp.zeros_like(x), zero)
    return zeta, info


def tangent_prox(
    x,
    g,
    t,
    reg,
    *,
    lam=None,
    lam_h=None,
    subgradient=None,
    tol=None,
    rtol=0.0,
    max_steps: int = 100,
    linear_solver: Literal["auto", "dense", "cg"] = "auto",
    method: Literal["secant", "adaptive", "reference"] = "secant",
):
    r"""Solves the tangent-space proximal subproblem at ``x``.

    .. math::
        \zeta = \operatorname*{argmin}_{\zeta \in T_X \mathrm{St}}
        \langle G, \zeta\rangle + \frac{1}{2t}\|\zeta\|_F^2 + h(X + \zeta)

    by a semi-smooth Newton method on the dual residual E(Lambda) (design
    notes sections 3 and 3b): dense Newton systems in the r(r+1)/2 symmetric
    coordinates for small r, matrix-free conjugate gradients for large r. The
    iteration is a bounded ``lax.while_loop``; the function is compiled once
    per shape, dtype and static setting and does not retrace when ``t``, the
    regularizer's strength, ``lam``, ``lam_h``, ``subgradient`` or the
    tolerances change value.
    It can be ``jax.vmap``-ed over ``x``, ``g``, ``t``, ``lam`` and the
    regularizer (for instance over many values of mu). On CPU the Newton loops
    of a vmapped solve's lanes run one after another, each for its own number
    of steps (a ``jax.custom_batching.custom_vmap`` rule), while the work
    around them (the starting residual, the stopping test, zeta; gradients)
    stays batched; on accelerators they form one batched loop that runs until
    its slowest lane ends (``_solve.SEQUENTIAL_LANES``). Under nested
    ``vmap`` the innermost axis runs lane by lane and the outer axes batch its
    loops (the rule maps one axis): flatten the lanes into one axis to run each
    for its own number of steps.

    Derivatives (``jax.jvp``, ``jax.grad``, ``jax.jacfwd``, ...) of zeta,
    ``info.lam``, ``info.lam_h`` and ``info.subgradient`` with respect to ``x``,
    ``g``, ``t`` and the regularizer's strengths are those of the solution map,
    by the implicit function theorem at the returned multiplier (one Newton
    system, dense or CG like the solve; :mod:`rproxjax._ssn.implicit`), not of the
    iterations: a warm start, ``tol`` and ``rtol`` do not move them. Invalid and
    non-finite calls have zero tangents and gradients; a collapsed call zero
    tangents of zeta (its multiplier and subgradient keep theirs). At an
    unconverged iterate (or a loose one: the stochastic optimizers stop at
    ``rtol`` = ``SSN_RTOL``) they are those of the map with E held at its current
    value, so approximate. An entry of W exactly at the prox's kink counts as inactive
    in every term (the map is often differentiable there, and they are then its
    derivatives); where the map is not differentiable (a support that changes under
    any move) they are one generalized derivative; on degenerate subproblems the dense system
    drops the part of its right-hand side in the Gram matrix's null space (the
    CG system divides it by 4t eps).

    Methods:

    * ``"secant"`` (default): minimizes the dual phi (whose gradient is E)
      with the Newton matrix's diagonal raised to the coordinate secant
      curvature of phi (:mod:`rproxjax._ssn.secant`; l1 only, the plain
      Jacobian for l21) and an exact line search on phi. On degenerate
      subproblems (columns of Y with fewer nonzeros than r, where the
      generalized Jacobian is singular) it takes few and uniform steps.
      With a relative stopping test (``rtol > 0``) the shift is skipped, the
      regularization raised, and the full Newton step taken without the line
      search when it cuts ||E|| by 10x or meets the stopping test: at such
      tolerances the shift saved
      few steps and cost 70% of a step (``rproxjax._ssn.steps``). Without a
      relative test (``rtol = 0``), float64 l1 solves on the dense path take
      path steps instead (:mod:`rproxjax._ssn.path`): the shifted Newton direction
      follows the piecewise-affine residual E(Lambda(s)) = (1 - s) E_0, updated
      by a rank-one correction at each entry that crosses its threshold (at most
      16 a step, counted in ``info.num_breakpoints``), with the exact line
      search as well where no path candidate halves ||E||. On captured MNIST
      subproblems at tol 1e-8 they take a mean of 1.7 / 2.4 steps (max 4 / 6) at
      r = 10 / 15, against 2.2 / 3.3 (max 7 / 10) with shifted steps alone, in
      the same time per call or up to 20% less.
    * ``"adaptive"``: plain dual Newton steps (no secant shift) until a
      step cuts ||E|| by less than 5x, then the secant rule. Cheaper per call
      than ``"secant"`` at tight tolerances where few steps are needed, a few
      more steps on degenerate problems. At loose tolerances (the stochastic
      optimizers' default) its first steps are Jacobi steps (the Newton system
      with the Gram matrix's diagonal, ``reg.jacobian_gram_diagonal``: 0.3-0.7
      of a Newton step's cost on MNIST), then regularized Newton steps. In a batched
      (accelerator) ``jax.vmap`` its switch runs both branches, the secant
      shift's in tight solves (use ``"secant"`` there) and the Newton
      direction's in loose ones where lanes differ in escalation (the Jacobi
      step then saves little; not yet measured on an accelerator).
    * ``"reference"``: the reference ManPG code's rule (regularization
      0.2 min(||E||, 0.1), backtracking on ||E||^2), kept to reproduce its
      published iteration counts.

    Args:
      x: point of St(d, r), shape (d, r), float32 or float64 (use ``jax.vmap``
        for batches).
      g: gradient (estimate), same shape and dtype as ``x``.
      t: step size t > 0 (scalar).
      reg: a regularizer such as :func:`rproxjax.l1` or :func:`rproxjax.l21`,
        or ``None`` for h = 0 (closed form zeta = -t P_X(G), no iteration).
      lam: r x r symmetric initial multiplier (a warm start on the same or a
        nearby (X, G)); its symmetric part is used. Zeros if no warm start is
        given. Give at most one of ``lam``, ``lam_h`` and ``subgradient``.
      lam_h: warm start from the regularizer's part of a previous multiplier
        (``info.lam_h`` of the previous optimizer step): Lambda_0 = lam_h +
        sym(X^T G) / 2. This tracks a stochastic gradient's jumps exactly,
        but lam_h belongs to the previous X.
      subgradient: warm start from a subgradient V of h (``info.subgradient``
        of the previous optimizer step, shape (d, r)): Lambda_0 =
        sym(X^T (G + V)) / 2, the optimality condition's multiplier with the
        previous solution's subgradient, at the new X. Unlike ``lam_h`` it
        follows X's move; the optimizers use it (except the reference rule,
        which warm-starts from ``lam`` like its code).
      tol: absolute bound on ||E(Lambda)||_F (not its square); defaults to
        :func:`default_tol` of the dtype (1e-10 in float64, ~1.2e-5 in float32).
      rtol: relative bound: the solve stops when
        ||E||_F <= tol + (rtol + eps) * ||zeta||_F (0 by default; eps, the dtype's,
        is the rounding level of E, unreachable below). ||E|| is the
        tangency defect of zeta and bounds its error up to a small factor.
      max_steps: most Newton steps (static).
      linear_solver: ``"dense"``, ``"cg"``, or ``"auto"`` (dense for r <= 15).
      method: ``"secant"``, ``"adaptive"`` or ``"reference"`` (static).

    Returns:
      ``(zeta, info)``: the tangent step (d x r) and a :class:`SubproblemInfo`.
      zeta = Y(Lambda) - X is returned even when ``info.converged`` is False,
      at the iterate with the smallest residual (the one that met the stopping
      test, when converged); it is always finite when
      the inputs are. Non-finite inputs (NaN/inf in
      x, g, t, mu, lam, lam_h or subgradient) give ``status == Status.NONFINITE``
      and zeta = 0;
      an unconverged iterate with a zero column of Y gives
      ``status == Status.COLLAPSED`` and zeta = 0 (the secant rule solves such
      problems, where t mu exceeds every entry of X - tG, in a few steps; the
      reference rule cannot start from Y = 0).

    Raises:
      ValueError: for inconsistent shapes, r > d, non-float dtypes, a concrete
        t <= 0 or mu < 0, a concrete tol or rtol out of range, a non-scalar tol or
        rtol, mu of the wrong length, an unknown solver or method, or more than one
        of ``lam``, ``lam_h`` and ``subgradient``. Traced values out of range give
        ``Status.INVALID``; finite inputs whose norms overflow, ``Status.NONFINITE``.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 20, 3)
        >>> g = jax.random.normal(jax.random.key(1), (20, 3))
        >>> zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
        >>> bool(info.converged)
        True
    """
    r = _check_arguments(x, g, t, max_steps, linear_solver, method)
    dtype = jnp.result_type(x)
    t = jnp.asarray(t, dtype)
    if reg is None:
        return _solve_smooth(x, g, t)
    if not hasattr(reg, "prox_jacobian"):
        raise ValueError(f"reg must be None or a regularizer (rproxjax.l1, rproxjax.l21), "
                         f"got {reg!r}.")
    reg.check(x.shape)
    reg = jax.tree.map(lambda a: jnp.asarray(a, dtype), reg)
    lam, lam_h, subgradient = _warm_start(lam, lam_h, subgradient, x.shape, dtype)
    tol, rtol = _tolerances(tol, rtol, dtype)
    use_cg = (r >= CG_THRESHOLD) if linear_solver == "auto" else linear_solver == "cg"
    return _solve_jit(x, g, t, reg, lam, lam_h, subgradient, tol, rtol, int(max_steps), use_cg,
                      method)


def _tolerances(tol, rtol, dtype):
    """(tol, rtol) checked (scalars; concrete values in range) and cast to ``dtype``;
    ``tol=None`` is :func:`default_tol`."""
    for name, value in (("tol", tol), ("rtol", rtol)):
        if value is not None and jnp.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar (vmap over it for several), got shape "
                             f"{jnp.shape(value)}.")
    if tol is None:
        tol = default_tol(dtype)
    else:
        _checks.check_positive("tol", tol)
    _checks.check_nonnegative("rtol", rtol)
    return jnp.asarray(tol, dtype), jnp.asarray(rtol, dtype)


def _check_arguments(x, g, t, max_steps, linear_solver, method) -> int:
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
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or \
            max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative int, got {max_steps!r}.")
    if linear_solver not in ("auto", "dense", "cg"):
        raise ValueError(
            f"linear_solver must be 'auto', 'dense' or 'cg', got {linear_solver!r}."
        )
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    return r


def _warm_start(lam, lam_h, sub, shape, dtype):
    """(lam or None, lam_h, subgradient or None) for the solver: checked, cast and
    symmetrized."""
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
    if sub is not None:
        return None, jnp.zeros((r, r), dtype), jnp.asarray(sub, dtype)
    # Multipliers are symmetric: a skew part would add X * skew to the prox argument and
    # move the solution (a converged answer to another problem), so it is dropped.
    sym = lambda a: 0.5 * (a + a.T)  # noqa: E731
    lam = None if lam is None else sym(jnp.asarray(lam, dtype))
    if lam_h is None:
        lam_h = jnp.zeros((r, r), dtype)
        return (lam_h if lam is None else lam), lam_h, None
    return lam, sym(jnp.asarray(lam_h, dtype)), None
