"""One path-following (homotopy) Newton step on the l1 dual: tight solves' step.

E(Lambda) = X^T Y + Y^T X - 2I with Y = prox_{t h}(W), W = X - tG + 2t X Lambda, is
piecewise affine in Lambda for entrywise thresholds (l1): on each piece (a fixed active
mask) its Jacobian is 4t Gram(mask), and an entry (i, c) crossing +-t mu_c changes it by
+-4t b b^T with b = vech(e_c x_i^T) (x_i the i-th row of X): a rank-one change.

The secant rule's step solves (4t Gram + diag(R) + rho I) D = -E_0 once (R the coordinate
secant shift, :mod:`rproxjax._ssn.secant`) and moves along D as if the active set stayed fixed.
Where entries cross their thresholds on the way, that line is wrong after the first
crossing: the exact line search then stops near the first breakpoint and the solve changes
about one entry per Newton step (MNIST r = 15, mu = 0.2: 7.4 steps a call at tol 1e-8).

The path step follows instead the homotopy E(Lambda(s)) = (1 - s) E_0, s from 0 to 1: on
each piece Lambda moves along D_k = -M_k^{-1} E_0, M_k = M_0 +- the rank-one changes of the
entries crossed so far and M_0 = 4t Gram(mask_0) + diag(R) + rho I, up to the first entry
that crosses its threshold (a ratio test over the d x r entries,
:meth:`rproxjax.L1.first_breakpoint`). The crossing entry is toggled and M_k updated by
Sherman-Morrison in product form (one Cholesky solve with the step's factor and O(k m) work,
m = r(r+1)/2, plus a d r^2 product per breakpoint), until s reaches 1 or ``ssn.max_breaks``
crossings; a downdate that would make M_k (nearly) singular ends the path there. Where the
budget runs out, the rest of the step (1 - s) is taken along the last direction as well.
The shift keeps the step's pieces well conditioned: with a regularization alone (rho up to
1e-4 min(||E||, 0.1)) the path ended on pieces whose Gram matrix has eigenvalues near 1e-14,
where ||E|| <= 1e-8 left zeta up to 1e-6 from the solution (1171 ||E||; 4e-9 with the
shift, as with the shifted steps). Candidates: the full Newton step (taken without a path
where it cuts ||E|| by ``ssn.path_accept`` or ends the solve), the path's end point, its
completion when cut short, and where none of these halves ||E|| (``ssn.path_progress``) the exact
line search along the first direction (the secant rule's step); the one with the smallest
||E|| is the step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg
from jax import lax

from rproxjax._linalg import mm
from rproxjax._ssn import linear as _linear


def _rank_one_vector(x, index, basis):
    """b = vech(e_c x_i^T) for the flat index i * r + c of a d x r entry: the Jacobian of
    E changes by +-4t b b^T when that entry enters (leaves) the active set."""
    rows, cols, scale = basis
    r = x.shape[-1]
    i, c = index // r, index % r
    xi = lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False)
    return scale * (jnp.where(rows == c, xi[cols], 0.0) + jnp.where(cols == c, xi[rows], 0.0))


def _path(x, t, reg, factor, basis, w, active, coords0, rhs, max_breaks):
    """Follows the homotopy from (W, mask) along D_0 = unvech(coords0); returns
    (s reached, W at s, Lambda increment at s, last coords, entries toggled)."""
    r = x.shape[-1]
    m = coords0.shape[0]
    dtype = x.dtype
    eps = jnp.finfo(dtype).eps

    def direction(coords):
        d = _linear.unvech(coords, basis, r)
        return d, (2.0 * t) * mm(x, d)

    def cond(c):
        k, _, s, *_, done = c
        return (k < max_breaks) & ~done

    def body(c):
        k, n, s, w, dlam, act, coords, vs, coefs, done = c
        d, p = direction(coords)
        tau, index = reg.first_breakpoint(w, p, act, t)
        reach = s + tau >= 1.0
        step = jnp.where(reach, 1.0 - s, tau)
        w = w + step * p
        dlam = dlam + step * d
        s = s + step
        # Toggle the crossing entry; M_k = M_{k-1} + sigma 4t b b^T by Sherman-Morrison:
        # v = M_{k-1}^{-1} b from the step's factor and the earlier updates.
        flat = act.reshape(-1)
        sigma = jnp.where(flat[index], -1.0, 1.0).astype(dtype)
        b = _rank_one_vector(x, index, basis)
        v = jax.scipy.linalg.cho_solve(factor, b) - mm(vs.T, coefs * mm(vs, b))
        kappa = (4.0 * t) * sigma
        denom = 1.0 + kappa * jnp.sum(b * v)
        # A downdate that would make M_k (nearly) singular ends the path at the breakpoint.
        ok = ~reach & jnp.isfinite(denom) & (denom > 16.0 * eps * (1.0 + jnp.abs(denom - 1.0)))
        coef = jnp.where(ok, kappa / jnp.where(ok, denom, 1.0), 0.0)
        vs = vs.at[k].set(jnp.where(ok, v, 0.0))
        coefs = coefs.at[k].set(coef)
        coords = coords - coef * v * jnp.sum(v * rhs)
        act = jnp.where(ok, flat.at[index].set(~flat[index]), flat).reshape(act.shape)
        return k + 1, n + ok, s, w, dlam, act, coords, vs, coefs, reach | ~ok

    zero = jnp.zeros((), dtype)
    init = (jnp.int32(0), jnp.int32(0), zero, w, jnp.zeros((r, r), dtype), active, coords0,
            jnp.zeros((max_breaks, m), dtype), jnp.zeros((max_breaks,), dtype),
            jnp.bool_(False))
    _, n, s, w, dlam, _, coords, _, _, _ = lax.while_loop(cond, body, init)
    return s, w, dlam, coords, n


def _smallest(a, b):
    """Of two candidates (Lambda, W, (Y, jac, E, ||E||)), the one with the smaller ||E||
    (``a`` on ties and NaN)."""
    take_b = b[2][3] < a[2][3]
    return jax.tree.map(lambda u, v: jnp.where(take_b, v, u), a, b)


def path_step(x, t, reg, lam, w, y, jac, e, norm_e, shift, rho, residual, stops,
              line_search, ssn):
    """One path step from (Lambda, W, Y, jac, E, ||E||) with the diagonal shift R
    (``shift``, r x r) and regularization ``rho``; returns (Lambda, W, Y, jac, E, ||E||,
    breakpoints, E evaluations). ``residual(w)`` gives (Y, jac, E, ||E||), ``stops(y,
    norm_e)`` the solve's stopping test and ``line_search(w, y, e, d, p)`` the exact line
    search's step length along D (P = 2t X D); ``ssn`` the settings (:class:`SSN`)."""
    r = x.shape[-1]
    factor, basis = _linear.dense_factor(x, t, reg, jac, shift, rho)
    rhs = -_linear.vech(e, basis)
    coords = jax.scipy.linalg.cho_solve(factor, rhs)
    d = _linear.unvech(coords, basis, r)
    p = (2.0 * t) * mm(x, d)
    at_one = residual(w + p)
    full = (at_one[3] <= ssn.path_accept * norm_e) | stops(at_one[0], at_one[3])

    def follow():
        # jac is the 0/1 mask of the active entries (l1).
        s, w_s, dlam, coords_s, k = _path(x, t, reg, factor, basis, w, jac > 0, coords, rhs,
                                          ssn.max_breaks)
        best = _smallest((lam + d, w + p, at_one), (lam + dlam, w_s, residual(w_s)))

        def complete():
            # Cut short (s < 1): the remaining 1 - s along the last direction as well.
            d_s = _linear.unvech(coords_s, basis, r)
            w_end = w_s + (1.0 - s) * (2.0 * t) * mm(x, d_s)
            end = (lam + dlam + (1.0 - s) * d_s, w_end, residual(w_end))
            return _smallest(best, end), jnp.int32(3)

        best, evals = lax.cond(s < 1.0, complete, lambda: (best, jnp.int32(2)))

        def searched():
            # The exact line search on the dual along the first direction, as the secant
            # rule's steps do, where no candidate lowers ||E|| by PATH_PROGRESS: a path cut
            # short after a small s (cold starts of sparse problems, where the 16 crossings
            # came within s = 0.001-0.05) lowered it by a hair, and accepting that made such
            # solves take 3-6x the steps of shifted steps.
            step = line_search(w, y, e, d, p)
            at = (lam + step * d, w + step * p, residual(w + step * p))
            return _smallest(best, at), evals + 1

        best, evals = lax.cond(best[2][3] < ssn.path_progress * norm_e, lambda: (best, evals),
                               searched)
        return best, k, evals

    def take_full():
        return (lam + d, w + p, at_one), jnp.int32(0), jnp.int32(1)

    (lam, w, (y, jac, e, norm_e)), k, evals = lax.cond(full, take_full, follow)
    return lam, w, y, jac, e, norm_e, k, evals


