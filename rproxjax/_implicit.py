"""Derivatives of the subproblem's solution by the implicit function theorem.

At the returned multiplier Lambda, with W = X - tG + 2t X Lambda and Y = prox_{t h}(W),
the dual residual E = X^T Y + Y^T X - 2I vanishes. Perturbing (X, G, t, h's strengths)
and differentiating E = 0 gives one linear system for the multiplier's tangent,

    L[dLambda] = -(dX^T Y + X^T dY0 + transpose),   L[H] = X^T J[2t X H] + transpose,

where dY0 is the prox's tangent with Lambda held fixed and J the prox's generalized
Jacobian at W; then dY = dY0 + J[2t X dLambda] and dzeta = dY - dX. L is the Newton
matrix of the solve (4t Gram in the symmetric basis): the system is solved densely or by
conjugate gradients inside ``lax.custom_linear_solve``, so reverse mode transposes it.

Differentiating through the Newton iterations instead gives the derivative of the last
iterate: wrong where a warm start takes few or no steps (a call warm-started at its
solution returns it unchanged, whatever the tangents of X and G), and, under ``jax.vmap``
of ``jax.jvp``, lanes were mixed by JAX's ``custom_vmap`` JVP rule when some batched
inputs had zero tangents. The warm start, ``tol`` and ``rtol`` do not move the solution:
their tangents are ignored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _newton
from rproxjax._linalg import mm
from rproxjax._results import Status


def _zero_tangent(a):
    """The tangent of an output that does not vary: float0 for integers and bools."""
    if jnp.issubdtype(a.dtype, jnp.inexact):
        return jnp.zeros_like(a)
    return np.zeros(a.shape, dtype=jax.dtypes.float0)


def _multiplier_solve(x, t, reg, jac, use_cg):
    """b -> dLambda with L[dLambda] + rho dLambda = b (rho = 4t eps keeps L definite where
    the Gram matrix is singular: its null directions leave J[X dLambda] unchanged)."""
    xt = x.T
    rho = 4.0 * t * jnp.finfo(x.dtype).eps

    def matvec(h):
        m = mm(xt, reg.jacobian_apply(jac, mm(x, (2.0 * t) * h)))
        return m + m.T + rho * h

    def solve(_, b):
        if use_cg:
            atol = 100.0 * jnp.finfo(x.dtype).eps * jnp.sqrt(jnp.sum(b * b))
            sol, _ = _newton.cg(matvec, b, atol, x.shape[-1] ** 2)
            return 0.5 * (sol + sol.T)
        zeros = jnp.zeros((x.shape[-1],) * 2, x.dtype)
        return _newton.dense_direction(x, t, reg, jac, -b, zeros, rho)[0]

    return lambda b: lax.custom_linear_solve(matvec, b, solve, symmetric=True)


def implicit(solve, use_cg: bool):
    """``solve(x, g, t, reg, lam0, smooth, tol, rtol) -> (zeta, info)`` with derivatives by
    the implicit function theorem at its returned multiplier (module docstring)."""
    fn = jax.custom_jvp(solve)

    @fn.defjvp
    def rule(primals, tangents):
        x, g, t, reg, _, _, _, _ = primals
        dx, dg, dt, dreg, _, dsmooth, _, _ = tangents
        zeta, info = fn(*primals)
        lam = info.lam
        xlam = mm(x, lam)
        w = x - t * g + (2.0 * t) * xlam
        dw0 = dx - dt * g - t * dg + (2.0 * dt) * xlam + (2.0 * t) * mm(dx, lam)
        y, dy0 = jax.jvp(lambda w_, t_, reg_: reg_.prox(w_, t_), (w, t, reg), (dw0, dt, dreg))
        rhs = mm(dx.T, y) + mm(x.T, dy0)
        _, jac = reg.prox_jacobian(w, t)
        dlam = _multiplier_solve(x, t, reg, jac, use_cg)(-(rhs + rhs.T))
        dwl = (2.0 * t) * mm(x, dlam)
        dy = dy0 + reg.jacobian_apply(jac, dwl)
        # zeta is zeroed for invalid, non-finite or collapsed calls, the subgradient for the
        # first two: their tangents too.
        valid = (info.status != Status.NONFINITE) & (info.status != Status.INVALID)
        moves = valid & (info.status != Status.COLLAPSED)
        dsub = ((dw0 + dwl - dy) - dt * info.subgradient) / t
        dinfo = info._replace(
            lam=jnp.where(valid, dlam, 0.0), lam_h=jnp.where(valid, dlam - dsmooth, 0.0),
            subgradient=jnp.where(valid, dsub, 0.0),
            **{f: _zero_tangent(getattr(info, f)) for f in
               ("num_steps", "residual", "converged", "status", "num_linear_steps",
                "num_evaluations")})
        return (zeta, info), (jnp.where(moves, dy - dx, 0.0), dinfo)

    return fn
