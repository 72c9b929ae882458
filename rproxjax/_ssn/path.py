"""One path-following (homotopy) Newton step on the l1 dual: tight solves' step.

E(Lambda) = X^T Y + Y^T X - 2I with Y = prox_{t h}(W), W = X - tG + 2t X Lambda, is
piecewise affine in Lambda for entrywise thresholds (l1): on each piece (a fixed active
mask) its Jacobian is 4t Gram(mask), and an entry (i, c) crossing +-t mu_c changes it by
+-4t b b^T with b = vech(e_c x_i^T) (x_i the i-th row of X): a rank-one change.

The secant rule's step solves (4t Gram + diag(R) + rho I) D = -E_0 once (R the coordinate
secant shift, :mod:`rproxjax._regularizers.l1_secant`) and moves along D as if the active
set stayed fixed. Where entries cross their thresholds on the way, that line is wrong after
the first crossing: the exact line search then stops near the first breakpoint and the
solve changes about one entry per Newton step.

The path step follows instead the homotopy E(Lambda(s)) = (1 - s) E_0, s from 0 to 1: on
each piece Lambda moves along D_k = -M_k^{-1} E_0, M_k = M_0 +- the rank-one changes of the
entries crossed so far and M_0 = 4t Gram(mask_0) + diag(R) + rho I, up to the first entry
that crosses its threshold (a ratio test over the d x r entries,
:meth:`rproxjax.L1.first_breakpoint`). The crossing entry is toggled and M_k updated by
Sherman-Morrison in product form (one Cholesky solve with the step's factor and O(k m) work,
m = r(r+1)/2, plus a d r^2 product per breakpoint), until s reaches 1 or
:attr:`PathSteps.max_breaks` crossings; a downdate that would make M_k (nearly) singular
ends the path there. Where the budget runs out, the rest of the step (1 - s) is taken
along the last direction as well.
The secant shift R keeps the step's pieces well conditioned (a regularization alone can
leave the path on pieces whose Gram matrix is numerically singular, where a small ||E||
does not bound zeta's error). Candidates: the full Newton step (taken without a path where
it cuts ||E|| by :attr:`PathSteps.accept` or ends the solve), the path's end point, its
completion when cut short, and where none of these cuts ||E|| by
:attr:`PathSteps.progress` the exact line search along the first direction (the secant
rule's step); the one with the smallest ||E|| is the step.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg
from jax import lax

from rproxjax._linalg import mm
from rproxjax._ssn import linear as _linear
from rproxjax._ssn.config import PathSteps
from rproxjax._ssn.records import Iterate, Problem, Residual, residual, stops
from rproxjax._typing import Array


def _rank_one_vector(x, index, basis):
    """b = vech(e_c x_i^T) for the flat index i * r + c of a d x r entry: the Jacobian of
    E changes by +-4t b b^T when that entry enters (leaves) the active set."""
    rows, cols, scale = basis
    r = x.shape[-1]
    i, c = index // r, index % r
    xi = lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False)
    return scale * (jnp.where(rows == c, xi[cols], 0.0) + jnp.where(cols == c, xi[rows], 0.0))


class PathState(NamedTuple):
    """The homotopy's loop state, from breakpoint to breakpoint."""

    k: Array  #: breakpoints met (int32)
    toggled: Array  #: entries toggled, i.e. rank-one updates kept (int32)
    s: Array  #: the homotopy parameter reached, in [0, 1]
    w: Array  #: W at s
    dlam: Array  #: Lambda's increment at s
    active: Array  #: the active mask of the current piece (d x r, bool)
    coords: Array  #: the current direction D_k in vech coordinates
    vectors: Array  #: the Sherman-Morrison vectors v_j = M_{j-1}^{-1} b_j, (max_breaks, m)
    coefs: Array  #: their coefficients kappa_j / (1 + kappa_j b_j^T v_j), (max_breaks,)
    done: Array  #: s reached 1, or a downdate would make M_k (nearly) singular


class PathEnd(NamedTuple):
    """Where the homotopy stopped."""

    s: Array  #: the parameter reached (1 unless cut short)
    w: Array  #: W at s
    dlam: Array  #: Lambda's increment at s
    coords: Array  #: the last direction, vech coordinates
    toggled: Array  #: entries toggled (int32)


class Candidate(NamedTuple):
    """A candidate next iterate: Lambda, W and the residual there."""

    lam: Array
    w: Array
    res: Residual


class PathResult(NamedTuple):
    """What :func:`path_step` returns."""

    iterate: Iterate
    breakpoints: Array  #: entries toggled along the path (int32)
    evaluations: Array  #: evaluations of E (int32)


def _path(x, t, reg, factor, basis, w, active, coords0, rhs, max_breaks) -> PathEnd:
    """Follows the homotopy from (W, mask) along D_0 = unvech(coords0)."""
    r = x.shape[-1]
    m = coords0.shape[0]
    dtype = x.dtype
    eps = jnp.finfo(dtype).eps

    def direction(coords):
        d = _linear.unvech(coords, basis, r)
        return d, (2.0 * t) * mm(x, d)

    def cond(c: PathState):
        return (c.k < max_breaks) & ~c.done

    def body(c: PathState) -> PathState:
        d, p = direction(c.coords)
        tau, index = reg.first_breakpoint(c.w, p, c.active, t)
        reach = c.s + tau >= 1.0
        step = jnp.where(reach, 1.0 - c.s, tau)
        # Toggle the crossing entry; M_k = M_{k-1} + sigma 4t b b^T by Sherman-Morrison:
        # v = M_{k-1}^{-1} b from the step's factor and the earlier updates.
        flat = c.active.reshape(-1)
        sigma = jnp.where(flat[index], -1.0, 1.0).astype(dtype)
        b = _rank_one_vector(x, index, basis)
        v = jax.scipy.linalg.cho_solve(factor, b) - mm(c.vectors.T, c.coefs * mm(c.vectors, b))
        kappa = (4.0 * t) * sigma
        denom = 1.0 + kappa * jnp.sum(b * v)
        # A downdate that would make M_k (nearly) singular ends the path at the breakpoint.
        ok = ~reach & jnp.isfinite(denom) & (denom > 16.0 * eps * (1.0 + jnp.abs(denom - 1.0)))
        coef = jnp.where(ok, kappa / jnp.where(ok, denom, 1.0), 0.0)
        return PathState(
            k=c.k + 1, toggled=c.toggled + ok, s=c.s + step, w=c.w + step * p,
            dlam=c.dlam + step * d,
            active=jnp.where(ok, flat.at[index].set(~flat[index]), flat).reshape(c.active.shape),
            coords=c.coords - coef * v * jnp.sum(v * rhs),
            vectors=c.vectors.at[c.k].set(jnp.where(ok, v, 0.0)),
            coefs=c.coefs.at[c.k].set(coef), done=reach | ~ok)

    zero = jnp.zeros((), dtype)
    init = PathState(k=jnp.int32(0), toggled=jnp.int32(0), s=zero, w=w,
                     dlam=jnp.zeros((r, r), dtype), active=active, coords=coords0,
                     vectors=jnp.zeros((max_breaks, m), dtype),
                     coefs=jnp.zeros((max_breaks,), dtype), done=jnp.bool_(False))
    out = lax.while_loop(cond, body, init)
    return PathEnd(out.s, out.w, out.dlam, out.coords, out.toggled)


def _smallest(a: Candidate, b: Candidate) -> Candidate:
    """Of two candidates, the one with the smaller ||E|| (``a`` on ties and NaN)."""
    take_b = b.res.norm_e < a.res.norm_e
    return jax.tree.map(lambda u, v: jnp.where(take_b, v, u), a, b)


def path_step(p: Problem, it: Iterate, shift, rho, path: PathSteps, line_search) -> PathResult:
    """One path step from the iterate ``it`` of problem ``p`` with the diagonal shift R
    (``shift``, r x r), regularization ``rho`` and the settings ``path``;
    ``line_search(w, y, e, d, p)`` gives the exact line search's step length along D
    (P = 2t X D)."""
    x, t, reg = p.x, p.t, p.reg
    r = x.shape[-1]
    factor, basis = _linear.dense_factor(x, t, reg, it.jac, shift, rho)
    rhs = -_linear.vech(it.e, basis)
    coords = jax.scipy.linalg.cho_solve(factor, rhs)
    d = _linear.unvech(coords, basis, r)
    step = (2.0 * t) * mm(x, d)
    res_one = residual(p, it.w + step)
    full = ((res_one.norm_e <= path.accept * it.norm_e)
            | stops(p, res_one.y, res_one.norm_e))

    def at_one():
        return Candidate(it.lam + d, it.w + step, res_one)

    def follow():
        # it.jac is the 0/1 mask of the active entries (l1).
        end = _path(x, t, reg, factor, basis, it.w, it.jac > 0, coords, rhs, path.max_breaks)
        best = _smallest(at_one(), Candidate(it.lam + end.dlam, end.w, residual(p, end.w)))

        def complete():
            # Cut short (s < 1): the remaining 1 - s along the last direction as well.
            d_s = _linear.unvech(end.coords, basis, r)
            w_end = end.w + (1.0 - end.s) * (2.0 * t) * mm(x, d_s)
            rest = Candidate(it.lam + end.dlam + (1.0 - end.s) * d_s, w_end, residual(p, w_end))
            return _smallest(best, rest), jnp.int32(3)

        best, evals = lax.cond(end.s < 1.0, complete, lambda: (best, jnp.int32(2)))

        def searched():
            # The exact line search on the dual along the first direction, as the secant
            # rule's steps do, where no candidate lowers ||E|| by ``path.progress``.
            s = line_search(it.w, it.y, it.e, d, step)
            at = Candidate(it.lam + s * d, it.w + s * step, residual(p, it.w + s * step))
            return _smallest(best, at), evals + 1

        best, evals = lax.cond(best.res.norm_e < path.progress * it.norm_e,
                               lambda: (best, evals), searched)
        return best, end.toggled, evals

    def take_full():
        return at_one(), jnp.int32(0), jnp.int32(1)

    best, toggled, evals = lax.cond(full, take_full, follow)
    return PathResult(Iterate.at(best.lam, best.w, best.res), toggled, evals)
