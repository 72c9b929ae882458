"""The tangent-space proximal subproblem, solved by a semi-smooth Newton method.

For a point X of St(d, r), a (gradient) matrix G, a step t > 0 and a convex
regularizer h, :func:`tangent_prox` computes

    zeta = argmin_{zeta in T_X} <G, zeta> + ||zeta||_F^2 / (2t) + h(X + zeta)

through its dual (design notes section 3): for symmetric Lambda,

    Y(Lambda) = prox_{t h}(X - t G + 2 t X Lambda),
    E(Lambda) = Y^T X + X^T Y - 2 I,

and zeta = Y(Lambda*) - X where E(Lambda*) = 0. E is solved by a regularized
semi-smooth Newton method with a backtracking line search (Xiao, Li, Wen and
Zhang 2018, as in the reference ManPG code), inside a bounded
``lax.while_loop``.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax._results import Status

__all__ = ["SubproblemInfo", "default_tol", "tangent_prox"]

Array = Any

#: r at and above which ``linear_solver="auto"`` uses conjugate gradients
#: (the reference ManPG code switches at the same size).
CG_THRESHOLD = 15

# Line search (reference constants): s = 1, halve while the residual does not
# decrease by the factor (1 - 0.001 s) and s > 1e-3.
_LS_SLOPE = 1e-3
_LS_MIN = 1e-3


class SubproblemInfo(NamedTuple):
    """What :func:`tangent_prox` reports besides the solution.

    Attributes:
      lam: the r x r symmetric multiplier Lambda of the returned point: of all
        iterates (the starting one included), the one with the smallest
        residual (the last one when converged). Pass it back as ``lam=`` to
        warm-start the next call.
      num_steps: Newton steps taken (int32).
      residual: ||E(Lambda)||_F at the returned multiplier. Since
        zeta^T X + X^T zeta = E(Lambda), it is also the tangency defect.
      converged: ``residual <= tol`` (bool).
      status: a :class:`rproxjax.Status` code (int32); ``describe(status)``
        gives a readable message.
      num_linear_steps: conjugate-gradient iterations, summed over Newton
        steps (0 on the dense path).
      num_evaluations: evaluations of E, line-search trials included.
    """

    lam: Array
    num_steps: Array
    residual: Array
    converged: Array
    status: Array
    num_linear_steps: Array
    num_evaluations: Array


def default_tol(dtype) -> float:
    """Default bound on ||E(Lambda)||_F: ``max(1e-10, 100 * eps(dtype))``.

    1e-10 in float64 (solutions accurate to about 1e-9 or better, since the
    Newton iteration converges quadratically) and about 1.2e-5 in float32.
    """
    return max(1e-10, 100.0 * float(jnp.finfo(dtype).eps))


@functools.cache
def _sym_basis(r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthonormal basis of symmetric r x r matrices (Frobenius inner product).

    Returns (rows, cols, scale), each of length m = r (r + 1) / 2:
    B_p = scale_p (E_jl + E_lj) with (j, l) = (rows[p], cols[p]), j <= l, so
    B_p = E_jj on the diagonal (scale 1/2) and (E_jl + E_lj) / sqrt(2) off it.
    The coordinates of a symmetric H are <B_p, H> = scale * (H[rows, cols] + H[cols, rows]).
    """
    rows, cols = np.triu_indices(r)
    scale = np.where(rows == cols, 0.5, 1.0 / np.sqrt(2.0))
    return rows, cols, scale


def _vech(h, rows, cols, scale):
    return scale * (h[rows, cols] + h[cols, rows])


def _unvech(v, rows, cols, scale, r):
    weight = jnp.where(rows == cols, 2.0 * scale, scale) * v
    return jnp.zeros((r, r), v.dtype).at[rows, cols].set(weight).at[cols, rows].set(weight)


def _newton_reg(norm_e):
    return 0.2 * jnp.maximum(jnp.minimum(norm_e, 0.1), 1e-11)


def _cg(matvec, b, atol, maxiter):
    """Conjugate gradients on symmetric r x r matrices; returns (x, iterations)."""
    dot = lambda u, v: jnp.sum(u * v)  # noqa: E731
    x0 = jnp.zeros_like(b)
    rs0 = dot(b, b)

    def cond(state):
        _, _, _, rs, k = state
        return (k < maxiter) & (jnp.sqrt(rs) >= atol) & jnp.isfinite(rs)

    def body(state):
        x, res, p, rs, k = state
        ap = matvec(p)
        pap = dot(p, ap)
        alpha = rs / jnp.where(pap > 0, pap, 1.0)
        x = x + alpha * p
        res = res - alpha * ap
        rs_new = dot(res, res)
        p = res + (rs_new / jnp.where(rs > 0, rs, 1.0)) * p
        return x, res, p, rs_new, k + 1

    x, _, _, _, k = lax.while_loop(cond, body, (x0, b, b, rs0, jnp.int32(0)))
    return x, k


def _solve(x, g, t, reg, lam, tol, max_steps: int, use_cg: bool):
    d, r = x.shape
    dtype = x.dtype
    eye = jnp.eye(r, dtype=dtype)
    base = x - t * g
    # X^T materialized once: XLA's transposed-operand products X^T Y were
    # measured 1.5-2x slower on two CPU threads.
    xt = lax.optimization_barrier(x.T)

    def residual_at(arg):
        """Y, the prox Jacobian, E and ||E|| at the prox argument X - tG + 2tX Lambda."""
        y, jac = reg.prox_jacobian(arg, t)
        xty = xt @ y
        e = xty + xty.T - 2.0 * eye
        return y, jac, e, jnp.sqrt(jnp.sum(e * e))

    if use_cg:
        def newton_direction(jac, e, norm_e):
            mu_reg = _newton_reg(norm_e)

            def matvec(h):
                m = xt @ reg.jacobian_apply(jac, x @ h)
                return (2.0 * t) * (m + m.T) + mu_reg * h

            # The reference stops CG at max(1e-7, min(1e-4, 1e-3 ||E||)); its
            # absolute floor is replaced by tol / 10 so that CG never stalls
            # (zero iterations) while ||E|| > tol.
            atol = jnp.maximum(0.1 * tol, jnp.minimum(1e-4, 1e-3 * norm_e))
            direction, its = _cg(matvec, -e, atol, r * r)
            return 0.5 * (direction + direction.T), its
    else:
        rows, cols, scale = _sym_basis(r)
        scale = jnp.asarray(scale, dtype=dtype)
        m = rows.size

        def newton_direction(jac, e, norm_e):
            gram = reg.jacobian_gram(x, jac, (rows, cols, scale))
            mat = (4.0 * t) * gram + _newton_reg(norm_e) * jnp.eye(m, dtype=dtype)
            coords = jnp.linalg.solve(mat, -_vech(e, rows, cols, scale))
            return _unvech(coords, rows, cols, scale, r), jnp.int32(0)

    def cond(state):
        k, _, _, _, _, _, norm_e, status, _, _, _ = state
        return (k < max_steps) & (norm_e > tol) & (status == Status.SUCCESSFUL)

    def body(state):
        k, lam_, arg, y, jac, e, norm_e, _, n_lin, n_eval, best = state
        direction, its = newton_direction(jac, e, norm_e)
        target = norm_e * norm_e
        # The argument is affine in Lambda: trial points cost no new X @ Lambda.
        arg_step = (2.0 * t) * (x @ direction)

        def ls_cond(ls):
            s, _, _, _, norm_new, _ = ls
            # NaN/inf trial residuals count as failures (keep halving).
            sufficient = norm_new * norm_new < target * (1.0 - _LS_SLOPE * s)
            return (~sufficient) & (s > _LS_MIN)

        def ls_body(ls):
            s, _, _, _, _, n = ls
            s = 0.5 * s
            y_new, jac_new, e_new, norm_new = residual_at(arg + s * arg_step)
            return s, y_new, jac_new, e_new, norm_new, n + 1

        one = jnp.ones((), dtype)
        first = residual_at(arg + arg_step)
        s, y_new, jac_new, e_new, norm_new, n_ls = lax.while_loop(
            ls_cond, ls_body, (one, *first, jnp.int32(1))
        )
        finite = jnp.isfinite(norm_new) & jnp.all(jnp.isfinite(direction))
        keep = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
        lam_new = keep(lam_ + s * direction, lam_)
        arg = keep(arg + s * arg_step, arg)
        y = keep(y_new, y)
        jac = jax.tree.map(keep, jac_new, jac)
        e = keep(e_new, e)
        norm_e = keep(norm_new, norm_e)
        status = jnp.where(finite, Status.SUCCESSFUL, Status.NONFINITE).astype(jnp.int32)
        # The line search accepts its last trial even without a decrease, so the residual
        # can rise (by orders of magnitude on degenerate problems): keep the best iterate.
        better = norm_e < best[2]
        best = jax.tree.map(lambda new, old: jnp.where(better, new, old), (lam_new, y, norm_e),
                            best)
        return (k + 1, lam_new, arg, y, jac, e, norm_e, status, n_lin + its, n_eval + n_ls, best)

    # Non-finite inputs can be hidden by the prox (soft-thresholding maps NaN
    # to 0), so they are detected explicitly; such a call returns zeta = 0.
    inputs_finite = (
        jnp.all(jnp.isfinite(base)) & jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(lam))
        & jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree.leaves(reg)]))
    )
    arg0 = base + (2.0 * t) * (x @ lam)
    y0, jac0, e0, norm0 = residual_at(arg0)
    status0 = jnp.where(jnp.isfinite(norm0) & inputs_finite, Status.SUCCESSFUL, Status.NONFINITE)
    init = (jnp.int32(0), lam, arg0, y0, jac0, e0, norm0, status0.astype(jnp.int32),
            jnp.int32(0), jnp.int32(1), (lam, y0, norm0))
    k, _, _, _, _, _, _, status, n_lin, n_eval, (lam, y, norm_e) = lax.while_loop(
        cond, body, init)
    converged = norm_e <= tol
    status = jnp.where(
        converged, Status.SUCCESSFUL,
        jnp.where(status == Status.SUCCESSFUL, Status.MAX_STEPS_REACHED, status),
    ).astype(jnp.int32)
    converged = converged & inputs_finite
    status = jnp.where(inputs_finite, status, Status.NONFINITE).astype(jnp.int32)
    zeta = jnp.where(inputs_finite, y - x, jnp.zeros_like(x))
    info = SubproblemInfo(lam, k, norm_e, converged, status, n_lin, n_eval)
    return zeta, info


@functools.partial(jax.jit, static_argnames=("max_steps", "use_cg"))
def _solve_jit(x, g, t, reg, lam, tol, max_steps, use_cg):
    return _solve(x, g, t, reg, lam, tol, max_steps, use_cg)


@jax.jit
def _solve_smooth(x, g, t):
    """h = 0: zeta = -t P_X(G) and Lambda = sym(X^T G) / 2 in closed form."""
    xtg = x.T @ g
    lam = 0.25 * (xtg + xtg.T)
    finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(g)) & jnp.isfinite(t)
    zeta = jnp.where(finite, -t * (g - x @ (2.0 * lam)), jnp.zeros_like(x))
    status = jnp.where(finite, Status.SUCCESSFUL, Status.NONFINITE).astype(jnp.int32)
    zero = jnp.zeros((), jnp.int32)
    info = SubproblemInfo(lam, zero, jnp.zeros((), x.dtype), finite, status, zero, zero)
    return zeta, info


def tangent_prox(
    x,
    g,
    t,
    reg,
    *,
    lam=None,
    tol=None,
    max_steps: int = 100,
    linear_solver: Literal["auto", "dense", "cg"] = "auto",
):
    r"""Solves the tangent-space proximal subproblem at ``x``.

    .. math::
        \zeta = \operatorname*{argmin}_{\zeta \in T_X \mathrm{St}}
        \langle G, \zeta\rangle + \frac{1}{2t}\|\zeta\|_F^2 + h(X + \zeta)

    by the regularized semi-smooth Newton method on the dual residual
    E(Lambda) (design notes section 3): dense Newton systems in the
    r(r+1)/2 symmetric coordinates for small r, matrix-free conjugate
    gradients for large r. The iteration is a bounded ``lax.while_loop``; the
    function is compiled once per shape and dtype and does not retrace when
    ``t``, the regularizer's strength or ``lam`` change value. It can be
    ``jax.vmap``-ed over ``x``, ``g``, ``t``, ``lam`` and the regularizer (for
    instance over many values of mu).

    Args:
      x: point of St(d, r), shape (d, r), float32 or float64 (use ``jax.vmap``
        for batches).
      g: gradient (estimate), same shape and dtype as ``x``.
      t: step size t > 0 (scalar).
      reg: a regularizer such as :func:`rproxjax.l1` or :func:`rproxjax.l21`,
        or ``None`` for h = 0 (closed form zeta = -t P_X(G), no iteration).
      lam: r x r symmetric initial multiplier (warm start); zeros if omitted.
      tol: bound on ||E(Lambda)||_F (not its square); defaults to
        :func:`default_tol` of the dtype (1e-10 in float64, ~1.2e-5 in float32).
      max_steps: most Newton steps (static).
      linear_solver: ``"dense"``, ``"cg"``, or ``"auto"`` (dense for r < 15).

    Returns:
      ``(zeta, info)``: the tangent step (d x r) and a :class:`SubproblemInfo`.
      zeta = Y(Lambda) - X is returned even when ``info.converged`` is False,
      at the iterate with the smallest residual; it is always finite when
      the inputs are. Non-finite inputs (NaN/inf in
      x, g, t, mu or lam) give ``status == Status.NONFINITE`` and zeta = 0.

    Raises:
      ValueError: for inconsistent shapes, r > d, non-float dtypes, a concrete
        t <= 0 or mu < 0, mu of the wrong length, or an unknown solver.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 20, 3)
        >>> g = jax.random.normal(jax.random.key(1), (20, 3))
        >>> zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
        >>> bool(info.converged)
        True
    """
    if jnp.ndim(x) != 2:
        raise ValueError(
            f"tangent_prox takes a single d x r point, got x of shape {jnp.shape(x)}; "
            "use jax.vmap for batches."
        )
    d, r = _checks.check_point("x", x)
    _checks.check_float("g", g)
    _checks.check_same_shape("x", x, "g", g)
    dtype = jnp.result_type(x)
    if jnp.result_type(g) != dtype:
        raise ValueError(f"x and g must have the same dtype, got {dtype} and {jnp.result_type(g)}.")
    if jnp.ndim(t) != 0:
        raise ValueError(f"t must be a scalar, got shape {jnp.shape(t)}.")
    _checks.check_positive("t", t)
    if not isinstance(max_steps, (int, np.integer)) or max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative int, got {max_steps!r}.")
    if linear_solver not in ("auto", "dense", "cg"):
        raise ValueError(
            f"linear_solver must be 'auto', 'dense' or 'cg', got {linear_solver!r}."
        )
    t = jnp.asarray(t, dtype)
    if reg is None:
        return _solve_smooth(x, g, t)
    reg.check((d, r))
    reg = jax.tree.map(lambda a: jnp.asarray(a, dtype), reg)
    if lam is None:
        lam = jnp.zeros((r, r), dtype)
    else:
        if jnp.shape(lam) != (r, r):
            raise ValueError(f"lam must have shape ({r}, {r}), got {jnp.shape(lam)}.")
        lam = jnp.asarray(lam, dtype)
    if tol is None:
        tol = default_tol(dtype)
    else:
        _checks.check_positive("tol", tol)
    tol = jnp.asarray(tol, dtype)
    use_cg = (r >= CG_THRESHOLD) if linear_solver == "auto" else linear_solver == "cg"
    return _solve_jit(x, g, t, reg, lam, tol, int(max_steps), use_cg)
