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

from rproxjax._linalg import mm
from rproxjax._results import Status
from rproxjax._ssn import linear as _linear


def _zero_tangent(a):
    """The tangent of an output that does not vary: float0 for integers and bools."""
    if jnp.issubdtype(a.dtype, jnp.inexact):
        return jnp.zeros_like(a)
    return np.zeros(a.shape, dtype=jax.dtypes.float0)


def _multiplier_solve(x, t, reg, jac, use_cg):
    """b -> dLambda with L[dLambda] = b on symmetric matrices (b is symmetrized: reverse mode
    passes non-symmetric cotangents, on whose antisymmetric part L is zero).

    Dense: the least-squares solution of minimum norm (eigenvalues of 4t Gram below m eps
    times the largest dropped). Where the Gram matrix is singular the right-hand side has
    no component in its null space if the solution map is differentiable; where it is not
    (a support that changes under any perturbation) the null component is dropped instead
    of being divided by a regularization (tangents of info.lam and info.subgradient of
    order 1e15). CG (r >= 16 by default): L + rho I with rho = 4t eps, which keeps CG
    definite; there a null component is divided by rho."""
    xt = x.T
    rho = 4.0 * t * jnp.finfo(x.dtype).eps

    def matvec(h):
        m = mm(xt, reg.jacobian_apply(jac, mm(x, (2.0 * t) * h)))
        return m + m.T + rho * h

    def solve(_, b):
        b = 0.5 * (b + b.T)
        if use_cg:
            atol = 100.0 * jnp.finfo(x.dtype).eps * jnp.sqrt(jnp.sum(b * b))
            sol, _ = _linear.cg(matvec, b, atol, x.shape[-1] ** 2)
            return 0.5 * (sol + sol.T)
        return _pseudo_inverse_solve(x, t, reg, jac, b)

    return lambda b: lax.custom_linear_solve(matvec, b, solve, symmetric=True)


def _pseudo_inverse_solve(x, t, reg, jac, b):
    r = x.shape[-1]
    basis = _linear.typed_sym_basis(r, x.dtype)
    rows = basis[0]
    w, q = jnp.linalg.eigh((4.0 * t) * reg.jacobian_gram(x, jac, basis))
    cutoff = rows.size * jnp.finfo(x.dtype).eps * jnp.max(jnp.abs(w))
    inv = jnp.where(w > cutoff, 1.0 / jnp.where(w > cutoff, w, 1.0), 0.0)
    coords = mm(q, inv * mm(q.T, _linear.vech(b, basis)))
    return _linear.unvech(coords, basis, r)


def implicit(solve, use_cg: bool):
    """``solve(x, xt, g, t, reg, lam0, smooth, tol, rtol) -> (zeta, info)`` (``xt`` = X^T,
    whose tangent is ignored: that of ``x`` is used) with derivatives by the implicit
    function theorem at its returned multiplier (module docstring)."""
    fn = jax.custom_jvp(solve)

    @fn.defjvp
    def rule(primals, tangents):
        zeta, info = fn(*primals)
        # Invalid and non-finite calls (zeta = 0) get zero tangents; their inputs are
        # replaced by harmless ones so that no NaN reaches a cotangent in reverse mode.
        valid = (info.status != Status.NONFINITE) & (info.status != Status.INVALID)
        keep = lambda a, fill=0.0: jnp.where(valid, a, fill)  # noqa: E731
        x, _, g, t, reg, _, _, _, _ = primals
        dx, _, dg, dt, dreg, _, dsmooth, _, _ = jax.tree.map(keep, tangents)
        x, g, t, reg = keep(x), keep(g), keep(t, 1.0), jax.tree.map(keep, reg)
        lam = jnp.where(valid, info.lam, 0.0)
        sub = jnp.where(valid, info.subgradient, 0.0)
        xlam = mm(x, lam)
        w = x - t * g + (2.0 * t) * xlam
        dw0 = dx - dt * g - t * dg + (2.0 * dt) * xlam + (2.0 * t) * mm(dx, lam)
        y, jac = reg.prox_jacobian(w, t)
        # The prox's tangent at fixed Lambda: the generalized Jacobian J (the Newton
        # matrix's) on dW, and the threshold's move (t and the strengths).
        _, dthr = jax.jvp(lambda t_, reg_: reg_.prox(w, t_), (t, reg), (dt, dreg))
        dy0 = reg.jacobian_apply(jac, dw0) + dthr
        rhs = mm(dx.T, y) + mm(x.T, dy0)
        dlam = _multiplier_solve(x, t, reg, jac, use_cg)(-(rhs + rhs.T))
        dwl = (2.0 * t) * mm(x, dlam)
        dy = dy0 + reg.jacobian_apply(jac, dwl)
        # A collapsed call zeroes zeta but keeps its multiplier and subgradient (the next
        # call starts there): so do the tangents.
        moves = valid & (info.status != Status.COLLAPSED)
        dsub = ((dw0 + dwl - dy) - dt * sub) / t
        dinfo = info._replace(
            lam=dlam, lam_h=jnp.where(valid, dlam - dsmooth, 0.0), subgradient=dsub,
            **{f: _zero_tangent(getattr(info, f)) for f in
               ("num_steps", "residual", "converged", "status", "num_linear_steps",
                "num_evaluations", "num_breakpoints")})
        return (zeta, info), (jnp.where(moves, dy - dx, 0.0), dinfo)

    return fn
