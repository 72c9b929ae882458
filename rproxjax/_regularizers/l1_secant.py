"""Coordinate secant curvature of the l1 dual: the diagonal raise of the Newton matrix.

The dual of the tangent-space subproblem (design notes section 3b),

    phi(Lambda) = ||prox_{t h}(W)||_F^2 / (2t) - 2 tr(Lambda),   W = X - tG + 2t X Lambda,

is convex and piecewise quadratic with gradient E(Lambda). Its generalized Hessian
4t Gram(active mask) is singular when columns of W have fewer active entries than r:
phi is then flat up to the next breakpoint (an entry reaching the threshold), and a
Newton step regularized by a small multiple of the identity overshoots wildly.

Along one orthonormal basis direction B_p of the symmetric matrices, p = (j, l),
only columns l and j of W move (along X[:, j] and X[:, l]), and the one-dimensional
derivative of phi is piecewise linear with a breakpoint wherever an entry crosses
+-t mu. :func:`l1_secant_shift` walks, from the current point in the descent
direction of each coordinate, over the first ``passes`` breakpoints (ties
together; no sort: one masked minimum per pass), finds the root d_p of the 1-D
derivative (extrapolating with the last slope), and returns the secant
curvature |e_p| / d_p minus the Jacobian's own diagonal J_pp, clipped at 0:
the amount by which the Newton matrix's diagonal must be raised to take the 1-D
step exactly. Coordinates whose supports do not overlap are nearly decoupled,
so this supplies curvature exactly where the Jacobian is singular.

All quantities are r x r symmetric matrices indexed by the pair (c, j) = (l, j);
one sweep over the columns c (on CPU a ``lax.map``, so that each column's (r, d)
breakpoints stay in cache instead of one (r, r, d) array; on accelerators ``vmap``: one
wide kernel instead of r small ones) finds, for every j, the first ``passes``
breakpoints of column c moving along X[:, j] with their slope changes; the pair's walk
then merges the two columns' lists (:func:`_merged_walk`). The breakpoints are computed from gaps
formed in the input dtype and cast to ``work_dtype`` (float32 by default: a
heuristic curvature needs relative, not absolute, accuracy). Work is in "raw" units
delta (W[:, c] moves by delta * 2t * X[:, j]); the basis coordinate is d = delta / s
with s = 1 on the diagonal and 1/sqrt(2) off it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from rproxjax._linalg import mm


def _union(m, eye):
    """Sum over the union of the (c, j) and (j, c) contributions of a pair."""
    return m + m.T - jnp.where(eye, m, 0.0)


def _own_breakpoints(w, x, sigma, t, thr, passes, dtype, by_column):
    """For each ordered pair (c, j): the first ``passes`` breakpoints of column c of W
    moving along sigma[c, j] X[:, j] (delta > 0 where |W[i, c] + delta u_i| = thr_c,
    u = sigma 2t X[:, j]) and the summed slope change u_i^2 / t (+ entering, - leaving)
    at each; ties within 8 eps are grouped. Returns two (passes, r, r) arrays indexed
    [k, c, j]; missing breakpoints are inf with change 0."""
    eps = jnp.finfo(dtype).eps
    inf = jnp.asarray(jnp.inf, dtype)
    gap_up = (thr - w).T.astype(dtype)  # (c, i): thr - W, formed in the input dtype
    gap_dn = (-thr - w).T.astype(dtype)
    xt = x.T.astype(dtype)
    inv_rate = jnp.where(xt != 0, 1.0 / jnp.where(xt != 0, (2.0 * t) * xt, 1.0), 0.0)
    jump_mag = ((4.0 * t) * xt * xt) * jnp.sign(xt)  # u^2 / t, signed like X

    def column(args):
        up, dn, sig = args  # (d,), (d,), (r,)
        valid = (sig[:, None] != 0) & (inv_rate != 0)
        inv = sig[:, None] * inv_rate  # 1 / u for sigma = +-1
        d_up = jnp.where(valid, up[None, :] * inv, -inf)
        d_dn = jnp.where(valid, dn[None, :] * inv, -inf)
        # At delta_up the entry enters if u > 0 (+u^2/t), leaves if u < 0; the reverse at
        # delta_dn: the change at delta_up is sign(u) u^2 / t.
        jump = sig[:, None] * jump_mag
        prev = jnp.zeros(sig.shape, dtype)
        firsts, changes = [], []
        for _ in range(passes):
            ahead = prev[:, None]
            cand_up = jnp.where(d_up > ahead, d_up, inf)
            cand_dn = jnp.where(d_dn > ahead, d_dn, inf)
            first = jnp.minimum(jnp.min(cand_up, axis=-1), jnp.min(cand_dn, axis=-1))
            at = (first * (1.0 + 8.0 * eps))[:, None]
            change = jnp.sum(jnp.where(cand_up <= at, jump, 0.0)
                             - jnp.where(cand_dn <= at, jump, 0.0), axis=-1)
            firsts.append(first)
            changes.append(change)
            prev = jnp.where(jnp.isfinite(first), at[:, 0], prev)
        return jnp.stack(firsts), jnp.stack(changes)

    args = (gap_up, gap_dn, sigma.astype(dtype))
    if by_column:
        firsts, changes = lax.map(column, args)
    else:
        firsts, changes = jax.vmap(lambda *a: column(a))(*args)
    return jnp.swapaxes(firsts, 0, 1), jnp.swapaxes(changes, 0, 1)  # [k, c, j]


def _merged_walk(firsts, changes, val, kappa, eye, passes):
    """Walks a pair's merged breakpoint list (its two columns' own lists) from delta = 0
    while the derivative val + kappa delta stays negative; returns the root delta_p
    (inf where the slope never turns positive)."""
    dtype = val.dtype
    eps = jnp.finfo(dtype).eps
    inf = jnp.asarray(jnp.inf, dtype)
    pad = lambda a, fill: jnp.concatenate([a, jnp.full((1,) + a.shape[1:], fill, a.dtype)])  # noqa: E731
    fa, ca = pad(firsts, inf), pad(changes, 0.0)
    # The (j, c) part of the pair; the diagonal pair has one column only.
    fb = jnp.where(eye, inf, jnp.swapaxes(fa, 1, 2))
    cb = jnp.where(eye, 0.0, jnp.swapaxes(ca, 1, 2))
    take = lambda a, i: jnp.take_along_axis(a, i[None], axis=0)[0]  # noqa: E731
    ia = jnp.zeros(val.shape, jnp.int32)
    ib = jnp.zeros(val.shape, jnp.int32)
    prev = jnp.zeros_like(val)
    done = jnp.zeros(val.shape, bool)
    root = jnp.full(val.shape, inf)
    safe = lambda k: jnp.where(k > 0, k, 1.0)  # noqa: E731
    for _ in range(passes):
        na, nb_ = take(fa, ia), take(fb, ib)
        nb = jnp.minimum(na, nb_)
        finite = jnp.isfinite(nb)
        reach = val + kappa * jnp.where(finite, nb - prev, 0.0)
        hit = ~done & (kappa > 0) & (~finite | (reach >= 0))
        root = jnp.where(hit, prev - val / safe(kappa), root)
        done = done | hit
        cross = ~done & finite
        from_a = cross & (na <= nb * (1.0 + 8.0 * eps))
        from_b = cross & (nb_ <= nb * (1.0 + 8.0 * eps))
        change = jnp.where(from_a, take(ca, ia), 0.0) + jnp.where(from_b, take(cb, ib), 0.0)
        val = jnp.where(cross, reach, val)
        kappa = kappa + change
        prev = jnp.where(cross, nb, prev)
        ia = ia + from_a
        ib = ib + from_b
    # Not reached within the walk: extrapolate with the last slope.
    return jnp.where(done, root, jnp.where(kappa > 0, prev - val / safe(kappa), inf))


def l1_secant_shift(w, x, e, t, thr, passes: int, work_dtype=jnp.float32, by_column=None):
    """The diagonal raise R (r x r, symmetric, >= 0) of the l1 dual Newton matrix.

    Args:
      w: the prox argument W (d x r); x: the point X (d x r); e: the residual E (r x r);
      t: the step; thr: the thresholds t mu per column, shape (r,);
      passes: breakpoints walked per coordinate (static) before extrapolating;
      work_dtype: the dtype of the (r, r, d) breakpoint work (never wider than x's).
      by_column: sweep the columns one by one (``lax.map``) or all at once (``vmap``);
        default: one by one on CPU only (static, chosen at trace time).
    """
    dtype = x.dtype
    work = jnp.promote_types(work_dtype, jnp.float32)
    work = dtype if jnp.finfo(work).bits > jnp.finfo(dtype).bits else work
    r = x.shape[-1]
    eye = jnp.eye(r, dtype=bool)
    active = (jnp.abs(w) > thr).astype(dtype)
    # Slope (d^2 phi / d delta^2) at delta = 0: 4t sum over active entries of X[i, j]^2.
    kappa = _union((4.0 * t) * mm(active.T, x * x), eye)
    j_pp = jnp.where(eye, kappa, 0.5 * kappa)  # in coordinate units: s^2 kappa
    slope0 = -jnp.where(eye, 1.0, 2.0) * jnp.abs(e)  # d phi / d delta at 0 (descent)
    if by_column is None:
        by_column = jax.default_backend() == "cpu"
    firsts, changes = _own_breakpoints(w, x, -jnp.sign(e), t, thr, passes, work, by_column)
    root = _merged_walk(firsts.astype(dtype), changes.astype(dtype), slope0, kappa, eye,
                        passes)
    # |e_p| / d_p in coordinate units equals |E[c, j]| / delta_p on and off the diagonal.
    ok = (root > 0) & jnp.isfinite(root)
    secant = jnp.where(ok, jnp.abs(e) / jnp.where(ok, root, 1.0), 0.0)
    return jnp.maximum(secant - j_pp, 0.0)
