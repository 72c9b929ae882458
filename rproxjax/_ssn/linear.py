"""Newton directions of the tangent-space subproblem's dual, dense or matrix-free.

Both solve (4t Gram + diag(R) + rho I) D = -E on symmetric r x r matrices: the
generalized Jacobian of E (4t Gram, Gram_pq = <X B_p, D[X B_q]> in the orthonormal
basis B_p of symmetric matrices), a non-negative diagonal shift R in that basis (an
r x r symmetric matrix, R[j, l] for B_p with (j, l) = p) and a scalar regularization
rho. The dense path forms the r(r+1)/2 system; the CG path applies the operator
H -> 2t (M + M^T) + R * H + rho H with M = X^T D[X H].
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax import lax

from rproxjax._linalg import mm


@functools.lru_cache(maxsize=64)
def sym_basis(r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthonormal basis of symmetric r x r matrices (Frobenius inner product).

    Returns (rows, cols, scale), each of length m = r (r + 1) / 2:
    B_p = scale_p (E_jl + E_lj) with (j, l) = (rows[p], cols[p]), j <= l, so
    B_p = E_jj on the diagonal (scale 1/2) and (E_jl + E_lj) / sqrt(2) off it.
    The coordinates of a symmetric H are <B_p, H> = scale * (H[rows, cols] + H[cols, rows]).
    """
    rows, cols = (a.astype(np.int32) for a in np.triu_indices(r))
    scale = np.where(rows == cols, 0.5, 1.0 / np.sqrt(2.0))
    return rows, cols, scale


def typed_sym_basis(r: int, dtype):
    """:func:`sym_basis` with its scale in ``dtype`` (the form the Newton systems use)."""
    rows, cols, scale = sym_basis(r)
    return rows, cols, jnp.asarray(scale, dtype)


def vech(h, basis):
    rows, cols, scale = basis
    return scale * (h[rows, cols] + h[cols, rows])


def unvech(v, basis, r):
    rows, cols, scale = basis
    weight = jnp.where(rows == cols, 2.0 * scale, scale) * v
    return jnp.zeros((r, r), v.dtype).at[rows, cols].set(weight).at[cols, rows].set(weight)


def cg(matvec, b, atol, maxiter):
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


def dense_factor(x, t, reg, jac, shift, rho):
    """(Cholesky factor of 4t Gram + diag(R) + rho I, basis): the dense r(r+1)/2 system."""
    basis = typed_sym_basis(x.shape[-1], x.dtype)
    rows, cols, _ = basis
    gram = reg.jacobian_gram(x, jac, basis)
    mat = (4.0 * t) * gram + jnp.diag(shift[rows, cols] + rho)
    # Symmetric positive definite (rho > 0): Cholesky.
    return jax.scipy.linalg.cho_factor(mat), basis


def dense_direction(x, t, reg, jac, e, shift, rho):
    """D from the dense r(r+1)/2 system; returns (D, 0)."""
    factor, basis = dense_factor(x, t, reg, jac, shift, rho)
    coords = jax.scipy.linalg.cho_solve(factor, -vech(e, basis))
    return unvech(coords, basis, x.shape[-1]), jnp.int32(0)


def jacobi_direction(x, t, reg, jac, e, rho):
    """D from the Newton system with its Gram matrix replaced by its diagonal (a Jacobi
    step); returns (D, 0).

    In the symmetric basis the system is diagonal, (4t G_pp + rho) c_p = -<B_p, E>, and
    back in r x r matrices D = -E / (4t Ghat + rho) entrywise, with Ghat the r x r matrix of
    the diagonal entries (``reg.jacobian_gram_diagonal``): d r^2 work against the Gram
    matrix's d r^2 (r + 1) / 2 and its Cholesky factorization. Exact (up to rho) where the
    generalized Jacobian is the identity (l1 with every entry active: Gram = I).
    """
    ghat = reg.jacobian_gram_diagonal(x, jac)
    return -e / ((4.0 * t) * ghat + rho), jnp.int32(0)


def cg_direction(x, xt, t, reg, jac, e, shift, rho, atol):
    """D by matrix-free conjugate gradients (at most r^2 iterations); returns (D, its)."""
    r = x.shape[-1]

    def matvec(h):
        m = mm(xt, reg.jacobian_apply(jac, mm(x, h)))
        return (2.0 * t) * (m + m.T) + (shift + rho) * h

    direction, its = cg(matvec, -e, atol, r * r)
    return 0.5 * (direction + direction.T), its
