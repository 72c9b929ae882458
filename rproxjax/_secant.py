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
each pass finds, column by column, the nearest breakpoint of entry W[i, c] moving
along X[i, j] for every j. Work in "raw" units delta (W[:, c] moves by delta * 2t * X[:, j]); the
basis coordinate is d = delta / s with s = 1 on the diagonal and 1/sqrt(2) off it.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from rproxjax._linalg import mm


def _union(m, eye):
    """Sum over the union of the (c, j) and (j, c) contributions of a pair."""
    return m + m.T - jnp.where(eye, m, 0.0)


def l1_secant_shift(w, x, e, t, thr, passes: int):
    """The diagonal raise R (r x r, symmetric, >= 0) of the l1 dual Newton matrix.

    Args:
      w: the prox argument W (d x r); x: the point X (d x r); e: the residual E (r x r);
      t: the step; thr: the thresholds t mu per column, shape (r,);
      passes: breakpoints walked per coordinate (static) before extrapolating.
    """
    dtype = x.dtype
    r = x.shape[-1]
    eye = jnp.eye(r, dtype=bool)
    eps = jnp.finfo(dtype).eps
    active = (jnp.abs(w) > thr).astype(dtype)
    # Slope (d^2 phi / d delta^2) at delta = 0: 4t sum over active entries of X[i, j]^2.
    kappa = _union((4.0 * t) * mm(active.T, x * x), eye)
    j_pp = jnp.where(eye, kappa, 0.5 * kappa)  # in coordinate units: s^2 kappa
    slope0 = -jnp.where(eye, 1.0, 2.0) * jnp.abs(e)  # d phi / d delta at 0 (descent)
    sigma = -jnp.sign(e)
    rate = (2.0 * t) * x.T  # rate[j, i] of W[i, c] along X[:, j], before the sign
    inf = jnp.asarray(jnp.inf, dtype)

    def own_first(prev):
        """Per ordered pair (c, j): the nearest breakpoint beyond prev[c, j] of column c
        moving along X[:, j], and the summed slope change of the entries there (ties and
        values within 8 eps grouped). One column per iteration: the (r, d) breakpoints of
        a column stay in cache instead of an (r, r, d) array in memory."""

        def column(args):
            w_c, thr_c, sigma_c, prev_c = args
            u = sigma_c[:, None] * rate  # (j, i)
            safe = jnp.where(u != 0, u, 1.0)
            ahead = prev_c[:, None]
            d_up = jnp.where((u != 0), (thr_c - w_c) / safe, inf)
            d_dn = jnp.where((u != 0), (-thr_c - w_c) / safe, inf)
            d_up = jnp.where(d_up > ahead, d_up, inf)
            d_dn = jnp.where(d_dn > ahead, d_dn, inf)
            first = jnp.minimum(jnp.min(d_up, axis=-1), jnp.min(d_dn, axis=-1))
            at = (first * (1.0 + 8.0 * eps))[:, None]
            jump = jnp.sign(u) * u * u / t
            change = jnp.sum(jnp.where(d_up <= at, jump, 0.0) - jnp.where(d_dn <= at, jump, 0.0),
                             axis=-1)
            return first, change

        return lax.map(column, (w.T, thr, sigma, prev))

    prev = jnp.zeros((r, r), dtype)
    val = slope0
    done = jnp.zeros((r, r), bool)
    root = jnp.full((r, r), inf)
    for _ in range(passes):
        first, change = own_first(prev)
        nb = jnp.minimum(first, first.T)
        # Only a part whose own nearest breakpoint is the pair's contributes its change.
        change = jnp.where(first <= nb * (1.0 + 8.0 * eps), change, 0.0)
        finite = jnp.isfinite(nb)
        reach = val + kappa * jnp.where(finite, nb - prev, 0.0)
        hit = ~done & (kappa > 0) & (~finite | (reach >= 0))
        root = jnp.where(hit, prev - val / jnp.where(kappa > 0, kappa, 1.0), root)
        done = done | hit
        cross = ~done & finite
        val = jnp.where(cross, reach, val)
        kappa = jnp.where(cross, kappa + _union(change, eye), kappa)
        prev = jnp.where(cross, jnp.maximum(nb * (1.0 + 8.0 * eps), prev), prev)
    # Not reached within the walk: extrapolate with the last slope.
    extra = jnp.where(kappa > 0, prev - val / jnp.where(kappa > 0, kappa, 1.0), inf)
    root = jnp.where(done, root, extra)
    # |e_p| / d_p in coordinate units equals |E[c, j]| / delta_p on and off the diagonal.
    secant = jnp.where((root > 0) & jnp.isfinite(root), jnp.abs(e) / jnp.where(root > 0, root, 1.0),
                       0.0)
    return jnp.maximum(secant - j_pp, 0.0)
