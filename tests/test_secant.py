"""The coordinate secant shift of the l1 dual against a brute-force 1-D root search.

Along a basis direction B_p of the symmetric matrices the dual's derivative
phi'(d) = <E(Lambda + d B_p), B_p> is monotone and piecewise linear. The secant rule walks its
first breakpoints to the root d_p and returns R_p = max(|e_p| / d_p - J_pp, 0). Here the root is
found by bisection on exact evaluations of E instead, and J_pp from the dense Gram matrix.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import stiefel
from rproxjax._regularizers.l1_secant import l1_secant_shift
from rproxjax._ssn import linear as _newton


def _residual(x, base, t, reg, lam):
    y = reg.prox(base + 2.0 * t * x @ lam, t)
    xty = x.T @ y
    return xty + xty.T - 2.0 * jnp.eye(x.shape[1], dtype=x.dtype)


def _root_by_bisection(f, hi):
    lo = 0.0
    while f(hi) < 0:
        lo, hi = hi, 2 * hi
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("seed, mu, passes", [(0, 0.3, 3), (1, 1.0, 3), (2, 2.0, 8)])
def test_secant_shift_matches_brute_force_roots(seed, mu, passes):
    d, r, t = 40, 3, 0.5
    x = stiefel.random_point(jax.random.key(seed), d, r)
    g = jax.random.normal(jax.random.key(seed + 10), (d, r))
    reg = rproxjax.l1(mu)
    base = x - t * g
    lam = 0.3 * jax.random.normal(jax.random.key(seed + 20), (r, r))
    lam = 0.5 * (lam + lam.T)
    w = base + 2.0 * t * x @ lam
    e = _residual(x, base, t, reg, lam)
    # Float64 breakpoints, so that the check is exact.
    shift = l1_secant_shift(w, x, e, t, jnp.full((r,), t * mu), passes, work_dtype=jnp.float64)
    _, jac = reg.prox_jacobian(w, t)
    rows, cols, scale = _newton.sym_basis(r)
    gram = 4.0 * t * reg.jacobian_gram(x, jac, (rows, cols, jnp.asarray(scale)))
    checked = exact = 0
    for p, (j, k) in enumerate(zip(rows, cols, strict=True)):
        basis = np.zeros((r, r))
        basis[j, k] = basis[k, j] = scale[p]
        if j == k:
            basis[j, j] = 1.0  # B_jj = E_jj
        basis = jnp.asarray(basis)
        e_p = float(jnp.sum(e * basis))
        if abs(e_p) < 1e-12:
            continue
        sign = -np.sign(e_p)

        def slope(dd, basis=basis, sign=sign):
            """phi'(d) along the descent direction sign * B_p (negative at 0)."""
            return sign * float(jnp.sum(_residual(x, base, t, reg, lam + sign * dd * basis)
                                        * basis))

        root = _root_by_bisection(slope, 1e-3)
        expected = max(abs(e_p) / root - float(gram[p, p]), 0.0)
        got = float(shift[j, k])
        assert got >= 0.0
        # Breakpoints before the root (entries of the moving columns crossing +-t mu): the
        # walk is exact when the root lies within its walked breakpoints.
        move = np.asarray(2.0 * t * sign * x @ basis)  # dW / dd
        wn, tau = np.asarray(w), t * mu
        with np.errstate(divide="ignore", invalid="ignore"):
            cuts = np.concatenate([((tau - wn) / move).ravel(), ((-tau - wn) / move).ravel()])
        before = np.sum((cuts > 0) & (cuts < root))
        if before < passes:
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
            exact += expected > 1e-3  # a real shift, not two zeros
        checked += 1
    assert checked >= 4 and exact >= 1, (checked, exact)


def test_column_sweep_and_vectorized_sweep_agree():
    # CPU sweeps the columns one by one (cache), accelerators all at once: the same numbers.
    d, r, t, mu = 50, 4, 0.5, 0.8
    x = stiefel.random_point(jax.random.key(5), d, r)
    w = x - t * jax.random.normal(jax.random.key(6), (d, r))
    e = x.T @ rproxjax.l1(mu).prox(w, t)
    e = e + e.T - 2.0 * jnp.eye(r)
    thr = jnp.full((r,), t * mu)
    a = l1_secant_shift(w, x, e, t, thr, 3, by_column=True)
    b = l1_secant_shift(w, x, e, t, thr, 3, by_column=False)
    assert float(jnp.max(a)) > 0.0
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


def test_secant_shift_is_zero_without_degeneracy():
    # mu = 0: every entry is active, the Jacobian is exact along every direction (phi is
    # quadratic), and the secant curvature equals J_pp: no shift.
    d, r, t = 30, 4, 0.5
    x = stiefel.random_point(jax.random.key(3), d, r)
    g = jax.random.normal(jax.random.key(4), (d, r))
    w = x - t * g
    e = x.T @ w + w.T @ x - 2.0 * jnp.eye(r)
    shift = l1_secant_shift(w, x, e, t, jnp.zeros((r,)), 3)
    np.testing.assert_allclose(shift, 0.0, atol=1e-5)
