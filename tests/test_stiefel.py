"""Stiefel and Grassmann geometry: invariants, batching, dtypes, errors."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from rproxjax import grassmann, stiefel
from rproxjax._linalg import mm

METHODS = stiefel.RETRACTIONS


def _point_and_tangent(seed, d, r, dtype=jnp.float64, scale=1.0):
    kx, kv = jax.random.split(jax.random.key(seed))
    x = stiefel.random_point(kx, d, r, dtype)
    v = stiefel.project(x, scale * jax.random.normal(kv, (d, r), dtype))
    return x, v


def _tangency(x, v):
    a = x.T @ v
    return float(jnp.linalg.norm(a + a.T))


def test_random_point_is_orthonormal():
    x = stiefel.random_point(jax.random.key(0), 30, 7)
    chex.assert_shape(x, (30, 7))
    chex.assert_type(x, jnp.float64)  # the default float (the tests enable x64)
    assert float(stiefel.feasibility(x)) < 1e-13


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_random_point_from_a_concrete_key_equals_the_traced_draw(dtype):
    """A concrete key is drawn by a program compiled without LLVM's optimizations (fast
    to compile); inside a caller's jit or vmap the draw is part of the caller's program.
    Both give the same point to a few units in the last place, and their sign fix agrees."""
    key = jax.random.key(7)
    eager = stiefel.random_point(key, 40, 6, dtype)
    traced = jax.jit(lambda k: stiefel.random_point(k, 40, 6, dtype))(key)
    mapped = jax.vmap(lambda k: stiefel.random_point(k, 40, 6, dtype))(key[None])[0]
    eps = float(jnp.finfo(dtype).eps)
    for other in (traced, mapped):
        chex.assert_type(other, dtype)
        np.testing.assert_allclose(np.asarray(eager), np.asarray(other), atol=64 * eps)
    assert float(stiefel.feasibility(eager)) < 50 * eps


def test_random_point_with_a_captured_key_inside_jit_and_scan():
    """A concrete key captured (not an argument) inside a caller's trace takes the traced
    draw: compiler options are for top-level programs only."""
    key = jax.random.key(9)
    eager = stiefel.random_point(key, 6, 2)
    jitted = jax.jit(lambda: stiefel.random_point(key, 6, 2))()
    _, scanned = jax.lax.scan(lambda c, _: (c, stiefel.random_point(key, 6, 2)), 0, None,
                              length=2)
    shape = jax.eval_shape(lambda: grassmann.random_point(key, 6, 2))
    for other in (jitted, scanned[0], scanned[1]):
        np.testing.assert_allclose(np.asarray(other), np.asarray(eager), atol=1e-13)
    assert shape.shape == (6, 2)


def test_project_gives_tangent_vectors_and_is_idempotent():
    x, _ = _point_and_tangent(1, 12, 4)
    u = jax.random.normal(jax.random.key(5), (12, 4))
    v = stiefel.project(x, u)
    assert _tangency(x, v) < 1e-13
    np.testing.assert_allclose(stiefel.project(x, v), v, atol=1e-14)
    # Orthogonal projection: residual orthogonal to the tangent space.
    w = stiefel.project(x, jax.random.normal(jax.random.key(6), (12, 4)))
    assert abs(float(jnp.sum((u - v) * w))) < 1e-12


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1e-3, 1.0, 10.0, 100.0])
def test_retraction_feasible_even_for_large_steps(method, scale):
    x, v = _point_and_tangent(2, 40, 6, scale=scale)
    y = stiefel.retract(x, v, retraction=method)
    chex.assert_equal_shape([y, x])
    chex.assert_type(y, x.dtype)
    assert float(stiefel.feasibility(y)) < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_retraction_at_zero_is_identity(method):
    x, v = _point_and_tangent(3, 15, 5)
    np.testing.assert_allclose(stiefel.retract(x, 0.0 * v, retraction=method), x, atol=1e-14)


@pytest.mark.parametrize("method", METHODS)
def test_retraction_second_order_agreement(method):
    # ||Retr_x(eps v) - (x + eps v)|| = O(eps^2): halving eps quarters the error.
    x, v = _point_and_tangent(4, 20, 3)
    v = v / jnp.linalg.norm(v)
    errs = [
        float(jnp.linalg.norm(stiefel.retract(x, eps * v, retraction=method) - (x + eps * v)))
        for eps in (1e-2, 5e-3, 2.5e-3)
    ]
    for big, small in zip(errs[:-1], errs[1:], strict=True):
        assert 3.5 < big / small < 4.5
    assert errs[0] < 1e-3


def test_qr_retraction_sign_convention():
    x, v = _point_and_tangent(5, 10, 4)
    y = stiefel.retract(x, v, retraction="qr")
    # y = qf(x + v) with diag(R) > 0, i.e. R = y^T (x + v) upper triangular, positive diagonal.
    r_factor = y.T @ (x + v)
    np.testing.assert_allclose(jnp.tril(r_factor, -1), 0.0, atol=1e-12)
    assert bool(jnp.all(jnp.diag(r_factor) > 0))


def test_polar_matches_formula():
    x, v = _point_and_tangent(6, 10, 3)
    w, q = jnp.linalg.eigh(jnp.eye(3) + v.T @ v)
    expected = (x + v) @ (q @ jnp.diag(w**-0.5) @ q.T)
    np.testing.assert_allclose(stiefel.retract(x, v, retraction="polar"), expected, atol=1e-13)


def _ill_conditioned_step(seed, d, r, size, dtype=jnp.float64):
    """A point and a rank-one tangent step of spectral norm ``size``: cond(X + V)^2 = 1 +
    size^2."""
    x, v = _point_and_tangent(seed, d, r, dtype)
    v = stiefel.project(x, v.at[:, 1:].set(0.0))
    return x, size * v / jnp.linalg.norm(v, 2)


def _one_pass_retraction(x, v):
    """The polar retraction's first pass alone: a (a^T a)^{-1/2} with a = X + V."""
    return stiefel._inv_sqrt_factor(x + v)[0]


def _polar_retract(path):
    """The polar retraction on this backend's path, on the accelerators' (Newton-Schulz
    products, both eigendecomposition passes where they have not converged) or with both
    passes always, whatever the backend."""
    if path in PASSES:
        return lambda x, v: stiefel._polar_factor(x + v, passes=PASSES[path])
    return lambda x, v: stiefel.retract(x, v, retraction="polar")


PASSES = {"accelerator path": "ns", "both passes": "two"}
POLAR_PATHS = ["this backend", *PASSES]


@pytest.mark.parametrize("dtype, bound", [(jnp.float64, 1e-13), (jnp.float32, 1e-5)])
def test_polar_takes_its_second_pass_where_one_is_not_enough(dtype, bound):
    # cond(X + V)^2 = 1e8: one pass of a (a^T a)^{-1/2} loses orthogonality (eps cond^2).
    x, v = _ill_conditioned_step(14, 60, 4, 1e4, dtype)
    y = stiefel.retract(x, v, retraction="polar")
    assert float(stiefel.feasibility(y)) < bound
    # In a batch with a well-conditioned step, and vmapped: the batch takes both passes.
    x2, v2 = _point_and_tangent(15, 60, 4, dtype, scale=0.1)
    xs, vs = jnp.stack([x2, x]), jnp.stack([v2, v])
    for ys in (stiefel.retract(xs, vs, retraction="polar"),
               jax.vmap(lambda a, b: stiefel.retract(a, b, retraction="polar"))(xs, vs)):
        assert float(jnp.max(stiefel.feasibility(ys))) < bound
    # The case needs it: with the second pass turned off, one pass alone fails the bound.
    one = _one_pass_retraction(x, v)
    if jax.default_backend() == "cpu":  # elsewhere both passes always run
        assert float(stiefel.feasibility(one)) > bound


@pytest.mark.parametrize("path", POLAR_PATHS)
def test_polar_of_a_numerically_rank_deficient_matrix_is_nan(path):
    # Where eigenvalues of a^T a round to <= 0 the polar factor is not determined to working
    # precision: the retraction returned finite non-orthonormal matrices (entries ~1e25-1e281,
    # feasibility inf; a zero column kept as is). Now NaN, lane by lane; the conditioning it
    # can still handle stays right (against the SVD polar factor).
    retract = _polar_retract(path)

    def polar(a):
        return retract(a, jnp.zeros_like(a))

    def stretched(c, dtype):
        return jnp.array([[1.0, 1.0], [0.0, 1.0 / c], [0.0, 0.0]], dtype)

    for dtype, bad, good, bound in ((jnp.float64, 1e9, 1e7, 1e-9), (jnp.float32, 1e5, 1e3, 1e-4)):
        assert bool(jnp.all(jnp.isnan(polar(stretched(bad, dtype)))))
        zero_column = jnp.eye(4, 2, dtype=dtype).at[:, 1].set(0.0)
        assert bool(jnp.all(jnp.isnan(polar(zero_column))))
        a = stretched(good, dtype)
        u, _, vt = np.linalg.svd(np.asarray(a, np.float64), full_matrices=False)
        np.testing.assert_allclose(polar(a), u @ vt, atol=bound)
        both = polar(jnp.stack([a, stretched(bad, dtype)]))  # one batch, one branch
        np.testing.assert_allclose(both[0], u @ vt, atol=bound)
        assert bool(jnp.all(jnp.isnan(both[1])))


def test_safe_square_root_has_zero_derivatives_of_every_order_at_zero():
    # sqrt0 keeps NaN by returning 0 * sq where sq <= 0: sq itself (a first version) had a
    # first derivative 0 at 0 but a second one of 1 (Hessians of l21 at zero rows 1, of
    # feasibility on the manifold up to 8).
    from rproxjax._linalg import sqrt0

    assert float(jax.hessian(lambda a: sqrt0(a * a))(0.0)) == 0.0
    assert float(jnp.max(jnp.abs(jax.hessian(stiefel.feasibility)(jnp.eye(5, 2))))) == 0.0


def test_feasibility_of_a_non_finite_matrix_is_not_finite():
    # The safe square root read a NaN sum of squares as 0: a NaN point was "feasible".
    for bad in (jnp.full((3, 2), jnp.nan), jnp.eye(3, 2).at[0, 0].set(jnp.nan),
                jnp.full((3, 2), jnp.inf)):
        assert not bool(jnp.isfinite(stiefel.feasibility(bad)))
    assert float(stiefel.feasibility(jnp.eye(3, 2))) == 0.0


@pytest.mark.parametrize("dtype, size, bound", [(jnp.float64, 1e6, 1e-9),
                                               (jnp.float32, 1e6, 5e-2)])
def test_exp_retraction_of_a_very_long_step_is_finite(dtype, size, bound):
    # jax.scipy.linalg.expm gives NaN past max_squarings (16 by default: ||V|| > ~3.5e5).
    x, v = _point_and_tangent(50, 30, 4, dtype)
    y = stiefel.retract(x, (size * v / jnp.linalg.norm(v)).astype(dtype), retraction="exp")
    chex.assert_tree_all_finite(y)
    assert float(stiefel.feasibility(y)) < bound


@pytest.mark.parametrize("cond2", [1e2, 1e4])
def test_one_polar_pass_is_enough_well_beyond_its_threshold(cond2):
    # The margin of _SECOND_PASS_COND2 = 100: one pass alone (the second turned off) still
    # leaves X^T X = I to rounding at cond(X + V)^2 = 1e2 and 1e4.
    x, v = _ill_conditioned_step(21, 60, 4, float(np.sqrt(cond2 - 1.0)))
    assert float(stiefel.feasibility(_one_pass_retraction(x, v))) < 1e-13


def test_vmapped_polar_keeps_its_branch_and_derivatives():
    x, v = _point_and_tangent(17, 30, 4)
    xs = jnp.stack([x, x])
    vs = jnp.stack([0.1 * v, 0.5 * v])
    retract = lambda a, b: stiefel.retract(a, b, retraction="polar")  # noqa: E731
    jaxpr = str(jax.make_jaxpr(jax.vmap(retract))(xs, vs))
    # The lanes share one branch (taken by all if one needs the second pass on CPU, the
    # eigendecomposition passes on accelerators), not a select that runs both sides for
    # every lane.
    assert "cond[" in jaxpr
    np.testing.assert_allclose(jax.vmap(retract)(xs, vs),
                               jnp.stack([retract(x, vs[0]), retract(x, vs[1])]), atol=1e-14)
    f = lambda s, a, b: jnp.sum(retract(a, s * b)[:, 0])  # noqa: E731
    grads = jax.vmap(jax.grad(f), (None, 0, 0))(0.3, xs, vs)
    fwd = jax.vmap(lambda a, b: jax.jvp(lambda s: f(s, a, b), (0.3,), (1.0,))[1])(xs, vs)
    for i in range(2):
        h = 1e-6
        fd = (f(0.3 + h, x, vs[i]) - f(0.3 - h, x, vs[i])) / (2 * h)
        np.testing.assert_allclose(grads[i], fd, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(fwd[i], fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("path", POLAR_PATHS)
def test_reverse_mode_through_a_vmapped_polar_retraction(path):
    # vmap inside the derivative: the tangent rule must not hold the branch (a batched cond
    # is a select whose stop_gradient cannot be transposed), nor the second pass (its eigh
    # sees equal eigenvalues). The accelerator path (both passes, no branch) is traced here
    # whatever the backend.
    x, v = _point_and_tangent(18, 30, 4)
    vs = jnp.stack([0.1 * v, 0.5 * v, 2.0 * v])
    polar = _polar_retract(path)
    retract = jax.vmap(lambda b: polar(x, b))
    loss = lambda b: jnp.sum(retract(b)[:, :, 0] ** 3)  # noqa: E731
    grad = jax.grad(loss)(vs)
    u = jax.random.normal(jax.random.key(19), vs.shape)
    h = 1e-6
    fd = (loss(vs + h * u) - loss(vs - h * u)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(grad * u), fd, rtol=1e-6)
    jac = jax.jacrev(lambda b: retract(b)[:, 0, 0])(vs)
    chex.assert_shape(jac, (3, 3, 30, 4))
    chex.assert_tree_all_finite(jac)


@pytest.mark.parametrize("dtype, bound", [(jnp.float64, 1e-13), (jnp.float32, 2e-6)])
def test_newton_schulz_polar_is_the_svd_polar_factor_by_products_alone(dtype, bound):
    # The accelerators' polar factor: matrix products only (no eigh on the path that
    # converges), for optimizer steps from tiny to long ones of a well-spread V.
    for scale in (0.0, 1e-3, 0.1, 1.0, 3.0, 30.0):
        x, v = _point_and_tangent(22, 50, 5, dtype, scale=scale)
        a = x + v
        jaxpr = str(jax.make_jaxpr(stiefel._newton_schulz)(a))
        assert "eigh" not in jaxpr and "cond[" not in jaxpr
        u, converged = stiefel._newton_schulz(a)
        assert bool(converged)
        ref_u, _, ref_vt = np.linalg.svd(np.asarray(a, np.float64), full_matrices=False)
        np.testing.assert_allclose(u, ref_u @ ref_vt, atol=bound)
        assert float(stiefel.feasibility(u)) < bound
        np.testing.assert_array_equal(stiefel._polar_factor(a, passes="ns"), u)


@pytest.mark.parametrize("dtype, bound", [(jnp.float64, 1e-13), (jnp.float32, 1e-5)])
def test_newton_schulz_polar_falls_back_where_it_has_not_converged(dtype, bound):
    # cond(X + V)^2 = 1e8: eight iterations cannot close the spread of a^T a; the flag says
    # so, and both eigendecomposition passes give the factor, for the whole batch and
    # under vmap (the lanes share the branch).
    x, v = _ill_conditioned_step(14, 60, 4, 1e4, dtype)
    assert not bool(stiefel._newton_schulz(x + v)[1])
    polar = lambda a: stiefel._polar_factor(a, passes="ns")  # noqa: E731
    assert float(stiefel.feasibility(polar(x + v))) < bound
    x2, v2 = _point_and_tangent(15, 60, 4, dtype, scale=0.1)
    a = jnp.stack([x2 + v2, x + v])
    assert [bool(c) for c in stiefel._newton_schulz(a)[1]] == [True, False]
    for ys in (polar(a), jax.vmap(polar)(a)):
        assert float(jnp.max(stiefel.feasibility(ys))) < bound
        np.testing.assert_allclose(ys[0], stiefel._polar_factor(a[0], passes="two"),
                                   atol=bound)
    assert "cond[" in str(jax.make_jaxpr(jax.vmap(polar))(a))
    # The documented reach: a rank-one step of ||V||_2 = 4 in float64 (cond(a)^2 = 17), and
    # steps of r = 32 whose singular values spread evenly over [0, ||V||_2] up to 3 in
    # float64 and 4.5 in float32, take the products alone, at the rounding level.
    reach = 3.0 if dtype == jnp.float64 else 4.5
    steps = [_ill_conditioned_step(23, 60, 4, 4.0, dtype)] if dtype == jnp.float64 else []
    for seed in range(3):
        x3, v3 = _point_and_tangent(30 + seed, 300, 32, dtype)
        left, _, right = jnp.linalg.svd(v3, full_matrices=False)
        spread = jnp.linspace(0.0, reach, 32).astype(dtype)
        steps.append((x3, (left * spread) @ right))
    for x3, v3 in steps:
        u, converged = stiefel._newton_schulz(x3 + v3)
        assert bool(converged) and float(stiefel.feasibility(u)) < bound


def test_newton_schulz_polar_stays_feasible_over_many_steps():
    # The accelerators' path on 10^4 steps of random tangent directions (||V||_F up to
    # 1.5): no drift accumulates, and every step converged without the fallback.
    noise = jax.random.normal(jax.random.key(24), (10_000, 20, 3))
    sizes = jax.random.uniform(jax.random.key(25), (10_000,), maxval=1.5)

    @jax.jit
    def run(x):
        def body(x, step):
            g, size = step
            v = stiefel.project(x, g)
            a = x + size * v / jnp.linalg.norm(v)
            return stiefel._polar_factor(a, passes="ns"), stiefel._newton_schulz(a)[1]

        return jax.lax.scan(body, x, (noise, sizes))

    x, converged = run(stiefel.random_point(jax.random.key(26), 20, 3))
    assert bool(jnp.all(converged))
    assert float(stiefel.feasibility(x)) < 1e-12


def test_polar_one_pass_agrees_with_the_svd_polar_factor():
    # Steps of an optimizer (cond(X + V)^2 near 1) take one pass: still the polar factor.
    for scale in (1e-3, 0.1, 1.0):
        x, v = _point_and_tangent(16, 50, 5, scale=scale)
        u, _, vt = np.linalg.svd(np.asarray(x + v), full_matrices=False)
        y = stiefel.retract(x, v, retraction="polar")
        np.testing.assert_allclose(y, u @ vt, atol=1e-13)
        assert float(stiefel.feasibility(y)) < 1e-13


def test_exp_is_a_geodesic():
    # The exponential satisfies Exp_x(2 v) = Exp_{Exp_x(v)}(transported v) ... check instead
    # the defining property that the curve has constant speed: Exp_x(s v) at s and 2s.
    x, v = _point_and_tangent(7, 12, 3, scale=0.3)
    y1 = stiefel.retract(x, v, retraction="exp")
    y2 = stiefel.retract(x, 2 * v, retraction="exp")
    # Velocity at y1 (finite difference) has the same norm as v (geodesics have constant speed).
    h = 1e-5
    vel = (stiefel.retract(x, (1 + h) * v, retraction="exp") - stiefel.retract(
        x, (1 - h) * v, retraction="exp")) / (2 * h)
    np.testing.assert_allclose(jnp.linalg.norm(vel), jnp.linalg.norm(v), rtol=1e-7)
    # And continuing from y1 with the velocity reaches y2.
    np.testing.assert_allclose(stiefel.retract(y1, vel, retraction="exp"), y2, atol=1e-7)


def test_cayley_matches_dense_formula():
    x, v = _point_and_tangent(8, 9, 3)
    p = jnp.eye(9) - 0.5 * x @ x.T
    w = p @ v @ x.T - x @ v.T @ p
    expected = jnp.linalg.solve(jnp.eye(9) - w / 2, (jnp.eye(9) + w / 2) @ x)
    np.testing.assert_allclose(stiefel.retract(x, v, retraction="cayley"), expected, atol=1e-13)


def test_transport_is_tangent_at_target():
    x, v = _point_and_tangent(9, 16, 4)
    y = stiefel.retract(x, v)
    _, u = _point_and_tangent(10, 16, 4)
    w = stiefel.transport(x, y, u)
    assert _tangency(y, w) < 1e-13


@pytest.mark.parametrize("method", METHODS)
def test_batched_jit_vmap_and_float32(method):
    kx, kv = jax.random.split(jax.random.key(11))
    x = stiefel.random_point(kx, 25, 4, jnp.float32, shape=(3,))
    v = stiefel.project(x, jax.random.normal(kv, (3, 25, 4), jnp.float32))
    y = jax.jit(lambda a, b: stiefel.retract(a, b, retraction=method))(x, v)
    chex.assert_shape(y, (3, 25, 4))
    chex.assert_type(y, jnp.float32)
    assert float(jnp.max(stiefel.feasibility(y))) < 1e-5
    y_vmap = jax.vmap(lambda a, b: stiefel.retract(a, b, retraction=method))(x, v)
    np.testing.assert_allclose(y, y_vmap, atol=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_grad_through_retraction_is_finite(method):
    x, v = _point_and_tangent(12, 8, 2)
    g = jax.grad(lambda s: jnp.sum(stiefel.retract(x, s * v, retraction=method) ** 2))(0.3)
    # ||Retr||_F^2 = r on the manifold, so the derivative vanishes.
    assert abs(float(g)) < 1e-10


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("method", METHODS)
def test_differential_of_every_retraction_at_zero_is_the_identity(method, dtype):
    # D Retr_X(0)[xi] = xi for tangent xi (what makes it a retraction), forward and reverse,
    # at v = 0 and just beside it: through eigh's derivative (polar) a^T a = I + v^T v has
    # (nearly) equal eigenvalues, and through a QR of (I - X X^T) V (exp) a zero matrix.
    tol = 1e-12 if dtype == jnp.float64 else 1e-5
    x, xi = _point_and_tangent(30, 15, 4, dtype)
    c = jax.random.normal(jax.random.key(31), x.shape, dtype)
    retract = lambda b: stiefel.retract(x, b, retraction=method)  # noqa: E731
    for s in (0.0, 1e-12, 1e-9):
        v = (s * xi).astype(dtype)
        _, dy = jax.jvp(retract, (v,), (xi,))
        np.testing.assert_allclose(dy, xi, atol=tol + 10 * s)
        # Reverse mode agrees with forward mode along the tangent direction.
        g = jax.grad(lambda b: jnp.sum(c * retract(b)))(v)
        np.testing.assert_allclose(jnp.sum(g * xi), jnp.sum(c * dy), rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_polar_derivative_at_a_point_is_the_closed_form(dtype):
    # The polar factor Q(a) = a (a^T a)^{-1/2} at an orthonormal a = X has the derivative
    # dQ = da - X sym(X^T da) in every (not only tangent) direction da.
    x, _ = _point_and_tangent(32, 15, 4, dtype)
    da = jax.random.normal(jax.random.key(33), x.shape, dtype)
    _, dy = jax.jvp(lambda b: stiefel.retract(x, b, retraction="polar"), (jnp.zeros_like(x),),
                    (da,))
    # The reference's own products at full precision (JAX's default is TF32 on NVIDIA GPUs).
    expected = da - mm(x, stiefel.sym(mm(x.T, da)))
    np.testing.assert_allclose(dy, expected, atol=1e-13 if dtype == jnp.float64 else 1e-5)


def test_qr_derivative_matches_jax_qr_rule_in_float64():
    # The QR retraction's own rule (full-precision products; JAX's QR rule multiplies at the
    # default precision, TF32 on NVIDIA GPUs) against JAX's rule where that is exact (float64
    # on CPU), at points off the manifold, in ambient directions, forward and reverse.
    def reference(a):
        q, r = jnp.linalg.qr(a, mode="reduced")
        return q * jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0)

    x, _ = _point_and_tangent(45, 20, 5)
    for seed in range(3):
        k_v, k_da, k_c = jax.random.split(jax.random.key(46 + seed), 3)
        v = 0.7 * jax.random.normal(k_v, x.shape)
        da = jax.random.normal(k_da, x.shape)
        c = jax.random.normal(k_c, x.shape)
        y, dy = jax.jvp(lambda b: stiefel.retract(x, b, retraction="qr"), (v,), (da,))
        y_ref, dy_ref = jax.jvp(lambda b: reference(x + b), (v,), (da,))
        np.testing.assert_allclose(y, y_ref, atol=1e-14)
        np.testing.assert_allclose(dy, dy_ref, atol=1e-12)
        g = jax.grad(lambda b, c=c: jnp.sum(c * stiefel.retract(x, b, retraction="qr")))(v)
        g_ref = jax.grad(lambda b, c=c: jnp.sum(c * reference(x + b)))(v)
        np.testing.assert_allclose(g, g_ref, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_derivatives_at_a_vertical_tangent_vector_are_finite_and_exact(method):
    # V = X Omega (Omega skew) has no normal part: (I - X X^T) V = 0, rank-deficient.
    x, _ = _point_and_tangent(34, 10, 3)
    omega = jax.random.normal(jax.random.key(35), (3, 3))
    v = 0.4 * x @ (omega - omega.T)
    u = jax.random.normal(jax.random.key(36), x.shape)
    c = jax.random.normal(jax.random.key(37), x.shape)
    loss = lambda b: jnp.sum(c * stiefel.retract(x, b, retraction=method))  # noqa: E731
    g = jax.grad(loss)(v)
    chex.assert_tree_all_finite(g)
    h = 1e-6
    fd = (loss(v + h * u) - loss(v - h * u)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(g * u), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(("method", "path"), [("polar", "this backend"),
                                            ("polar", "accelerator path"),
                                            pytest.param("exp", "this backend",
                                                         marks=pytest.mark.slow),  # one path
                                            ("qr", "this backend")])
def test_second_derivatives_of_retractions_match_finite_differences(method, path):
    # Hessians over ambient v at v = 0, at a vertical v (equal eigenvalues of a^T a) and at a
    # generic v: every order of the polar rule avoids the derivative of eigh, and exp's
    # avoids its QR. Compared with central differences of the gradient.
    retract = _polar_retract(path) if method == "polar" else (
        lambda a, b: stiefel.retract(a, b, retraction=method))
    d, r = 6, 2
    x, xi = _point_and_tangent(40, d, r)
    c = jax.random.normal(jax.random.key(41), (d, r))
    loss = lambda b: jnp.sum(c * retract(x, b) ** 2)  # noqa: E731
    grad = jax.jit(jax.grad(loss))
    hessian, reverse = jax.jit(jax.hessian(loss)), jax.jit(jax.jacrev(jax.jacrev(loss)))
    vertical = 0.5 * x @ jnp.array([[0.0, 1.0], [-1.0, 0.0]])
    ambient = 0.3 * jax.random.normal(jax.random.key(42), (d, r))
    h = 1e-5
    steps = h * jnp.eye(d * r).reshape(d * r, d, r)
    for v in (jnp.zeros_like(x), 1e-9 * xi, vertical, ambient):
        hess = hessian(v).reshape(d * r, d * r)
        rev = reverse(v).reshape(d * r, d * r)
        fd = (jax.vmap(grad)(v + steps) - jax.vmap(grad)(v - steps)).reshape(d * r, -1).T / (2 * h)
        scale = np.max(np.abs(fd))
        np.testing.assert_allclose(hess, fd, atol=1e-8 * scale)
        np.testing.assert_allclose(rev, fd, atol=1e-8 * scale)


def test_exp_stays_orthonormal_on_long_steps_with_spread_normal_parts():
    # The skew block (QR form) keeps the point orthonormal to rounding for steps of any
    # length; a non-normal block (the form without the QR, used for derivatives only) lost
    # orthonormality when V_perp's singular values spread over many orders (1e-11 at 1e3).
    x, _ = _point_and_tangent(43, 40, 6)
    u = jax.random.normal(jax.random.key(44), (40, 6)) * jnp.logspace(0, -6, 6)
    v = stiefel.project(x, u)
    for size in (10.0, 100.0, 1000.0):
        y = stiefel.retract(x, size * v / jnp.linalg.norm(v), retraction="exp")
        assert float(stiefel.feasibility(y)) < 1e-12


def test_feasibility_has_a_zero_derivative_on_the_manifold():
    # ||X^T X - I||_F is minimal (0) at an exactly orthonormal X: the square root's
    # derivative there was NaN (0 is a subgradient). Off it the gradient has norm ~1.
    np.testing.assert_array_equal(jax.grad(stiefel.feasibility)(jnp.eye(10, 3)), 0.0)
    x, _ = _point_and_tangent(45, 10, 3)
    drifted = 1.01 * x
    u = jax.random.normal(jax.random.key(46), x.shape)
    fd = (stiefel.feasibility(drifted + 1e-6 * u) - stiefel.feasibility(drifted - 1e-6 * u)) / 2e-6
    np.testing.assert_allclose(jnp.sum(jax.grad(stiefel.feasibility)(drifted) * u), fd, rtol=1e-6)


def test_exp_matches_the_dense_canonical_geodesic():
    # Independent reference: expm(W) X with W = P V X^T - X V^T P, P = I - X X^T / 2 (the
    # canonical-metric geodesic in its d x d form), for short and long steps.
    for scale in (0.1, 1.0, 3.0):
        x, v = _point_and_tangent(38, 12, 3, scale=scale)
        p = jnp.eye(12) - 0.5 * x @ x.T
        w = p @ v @ x.T - x @ v.T @ p
        np.testing.assert_allclose(stiefel.retract(x, v, retraction="exp"),
                                   jax.scipy.linalg.expm(w) @ x, atol=1e-12)


@pytest.mark.parametrize("method", ["qr", "polar"])
def test_self_correcting_retractions_remove_drift(method):
    x, v = _point_and_tangent(13, 30, 5)
    drifted = x * (1 + 1e-6)
    assert float(stiefel.feasibility(drifted)) > 1e-7
    assert float(stiefel.feasibility(stiefel.retract(drifted, v, retraction=method))) < 1e-13


def test_bad_inputs_raise_clear_errors():
    x = stiefel.random_point(jax.random.key(0), 5, 2)
    with pytest.raises(ValueError, match="same shape"):
        stiefel.project(x, jnp.ones((5, 3)))
    with pytest.raises(ValueError, match="r <= d"):
        stiefel.feasibility(jnp.ones((2, 5)))
    with pytest.raises(ValueError, match="float32 or float64"):
        stiefel.project(jnp.ones((5, 2), jnp.int32), jnp.ones((5, 2), jnp.int32))
    for low in (jnp.float16, jnp.bfloat16):  # no eigh/QR in JAX: refused up front
        with pytest.raises(ValueError, match="float32 or float64.*astype"):
            stiefel.retract(x.astype(low), x.astype(low))
        with pytest.raises(ValueError, match="float32 or float64"):
            stiefel.random_point(jax.random.key(0), 5, 2, low)
    with pytest.raises(ValueError, match="same dtype"):
        stiefel.retract(x.astype(jnp.float32), jnp.zeros((5, 2), jnp.float64))
    with pytest.raises(ValueError, match="same dtype"):
        stiefel.project(x.astype(jnp.float32), jnp.zeros((5, 2), jnp.float64))
    with pytest.raises(ValueError, match="unknown retraction"):
        stiefel.retract(x, x, retraction="householder")
    with pytest.raises(ValueError, match="d x r matrix"):
        stiefel.feasibility(jnp.ones(3))
    with pytest.raises(ValueError, match="r <= d"):
        stiefel.random_point(jax.random.key(0), 2, 3)


def test_grassmann_projection_retraction_and_angles():
    u = grassmann.random_point(jax.random.key(1), 20, 3)
    z = grassmann.project(u, jax.random.normal(jax.random.key(2), (20, 3)))
    np.testing.assert_allclose(u.T @ z, 0.0, atol=1e-13)
    w = grassmann.retract(u, 0.5 * z)
    assert float(stiefel.feasibility(w)) < 1e-13
    # Same subspace, different basis: zero angles.
    q, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(3), (3, 3)))
    chex.assert_trees_all_close(grassmann.principal_angles(u, u @ q), jnp.zeros(3), atol=1e-6)
    # Orthogonal subspaces: angles pi/2.
    e = jnp.eye(6)
    np.testing.assert_allclose(grassmann.principal_angles(e[:, :2], e[:, 2:4]), np.pi / 2)
    with pytest.raises(ValueError, match="Grassmann"):
        grassmann.retract(u, z, retraction="exp")


@pytest.mark.parametrize("dtype, bound", [(jnp.float64, 1e-15), (jnp.float32, 1e-7)])
def test_principal_angles_resolve_small_angles_and_differentiate_at_zero(dtype, bound):
    # Planted angles (1e-8, 1e-3, 1.2) between span(A) and span(W), W = A cos + B sin: by
    # arccos alone the small ones were lost (identical float32 subspaces gave 3e-4, 1e-8 in
    # float64 gave 0) and the gradient of the squared distance at identical subspaces was NaN.
    q = stiefel.random_point(jax.random.key(60), 8, 6)
    a, b = q[:, :3], q[:, 3:]
    theta = jnp.array([1e-8, 1e-3, 1.2])
    w = a * jnp.cos(theta) + b * jnp.sin(theta)
    angles = grassmann.principal_angles(a.astype(dtype), w.astype(dtype))
    np.testing.assert_allclose(angles, theta, rtol=1e-6 if dtype == jnp.float64 else 1e-3,
                               atol=10 * bound)
    u = a.astype(dtype)
    assert float(jnp.max(grassmann.principal_angles(u, u))) < 10 * bound * 3
    grad = jax.grad(lambda z: jnp.sum(grassmann.principal_angles(u, z) ** 2))(u)
    chex.assert_tree_all_finite(grad)
    assert float(jnp.max(jnp.abs(grad))) < 1e-6
    np.testing.assert_allclose(grassmann.principal_angles(a, b), jnp.full(3, jnp.pi / 2),
                               atol=1e-15)


def test_principal_angles_check_both_bases():
    u = stiefel.random_point(jax.random.key(61), 6, 2)
    with pytest.raises(ValueError, match="w"):
        grassmann.principal_angles(u, u.astype(jnp.float32))
    with pytest.raises((ValueError, TypeError), match="w"):
        grassmann.principal_angles(u, u.astype(jnp.complex128))


def test_principal_angles_gradient_at_repeated_angles_near_the_blend():
    # Three equal angles pi/4 (where the sine and cosine forms meet): the gradient of the
    # sum of squared angles against central differences along the manifold (a hard switch
    # between the forms mixed them inside the cluster: relative errors 0.8-45).
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.standard_normal((8, 6)))
    rotation = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    u = jnp.asarray(q[:, :3])
    w = jnp.asarray((q[:, :3] * np.cos(np.pi / 4) + q[:, 3:] * np.sin(np.pi / 4)) @ rotation)
    f = lambda z: jnp.sum(grassmann.principal_angles(u, z) ** 2)  # noqa: E731
    grad = jax.grad(f)(w)
    for seed in range(3):
        v = stiefel.project(w, jnp.asarray(np.random.default_rng(seed).standard_normal(w.shape)))
        h = 1e-6
        fd = (f(stiefel.retract(w, h * v)) - f(stiefel.retract(w, -h * v))) / (2 * h)
        np.testing.assert_allclose(jnp.sum(grad * v), fd, rtol=1e-6)


def test_small_geometry_functions_reject_bad_inputs_clearly():
    # Found by review: sym accepted non-square input (a broadcasting error) and integers
    # (promoted silently), random_point's shape=3 raised "'int' object is not iterable",
    # transport took any x.
    with pytest.raises(ValueError, match="square"):
        stiefel.sym(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="square"):
        stiefel.sym(jnp.ones(3))
    with pytest.raises(ValueError, match="float32 or float64"):
        stiefel.sym(jnp.ones((2, 2), jnp.int32))
    for shape in (3, (-1,), (2.0,)):
        with pytest.raises(ValueError, match="shape"):
            stiefel.random_point(jax.random.key(0), 4, 2, shape=shape)
    chex.assert_shape(stiefel.random_point(jax.random.key(0), 4, 2, shape=(np.int64(2),)),
                      (2, 4, 2))
    x, v = _point_and_tangent(62, 6, 2)
    with pytest.raises(ValueError, match="dtype"):
        stiefel.transport(x.astype(jnp.float32), x, v)


class TestGeometryUnderJit(chex.TestCase):
    """The geometry run as they are and inside ``jax.jit`` (chex variants): the same values,
    shapes and dtypes, batched points included (two 7 x 3 points)."""

    def _batch(self, dtype=jnp.float64):
        kx, kv = jax.random.split(jax.random.key(70))
        x = stiefel.random_point(kx, 7, 3, dtype, shape=(2,))
        v = stiefel.project(x, jax.random.normal(kv, (2, 7, 3), dtype))
        return x, v

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(*[(method, method) for method in METHODS])
    def test_retraction(self, method):
        x, v = self._batch()
        traced = []

        def retract(a, b):
            traced.append(isinstance(a, jax.core.Tracer))
            return stiefel.retract(a, b, retraction=method)

        y = self.variant(retract)(x, v)
        assert traced == [self.variant.type == chex.ChexVariantType.WITH_JIT]
        chex.assert_shape(y, (2, 7, 3))
        chex.assert_type(y, jnp.float64)
        chex.assert_tree_all_finite(y)
        chex.assert_trees_all_close(y, stiefel.retract(x, v, retraction=method), atol=1e-13,
                                    rtol=0.0)
        assert float(jnp.max(stiefel.feasibility(y))) < 1e-12

    @chex.variants(with_jit=True, without_jit=True)
    def test_projection_and_transport(self):
        x, _ = self._batch(jnp.float32)
        u = jax.random.normal(jax.random.key(71), x.shape, jnp.float32)
        project = self.variant(stiefel.project)
        v = project(x, u)
        chex.assert_shape(v, (2, 7, 3))
        chex.assert_type(v, jnp.float32)
        chex.assert_trees_all_close(v, stiefel.project(x, u), atol=1e-6, rtol=0.0)
        chex.assert_trees_all_close(project(x, v), v, atol=1e-6, rtol=0.0)  # idempotent
        xtv = jnp.swapaxes(x, -1, -2) @ v
        chex.assert_trees_all_close(xtv + jnp.swapaxes(xtv, -1, -2), jnp.zeros((2, 3, 3)),
                                    atol=1e-5, rtol=0.0)  # tangent at x
        y = stiefel.retract(x, v)
        w = self.variant(stiefel.transport)(x, y, v)
        chex.assert_trees_all_close(w, stiefel.project(y, v), atol=1e-6, rtol=0.0)

    @chex.variants(with_jit=True, without_jit=True)
    def test_feasibility(self):
        x, _ = self._batch()
        feasibility = self.variant(stiefel.feasibility)
        on, off = feasibility(x), feasibility(2.0 * x)
        chex.assert_shape([on, off], [(2,), (2,)])
        chex.assert_type([on, off], jnp.float64)
        assert float(jnp.max(on)) < 1e-13
        # ||4 I - I||_F = 3 sqrt(r) for 2X.
        chex.assert_trees_all_close(off, jnp.full(2, 3.0 * np.sqrt(3.0)), rtol=1e-13)

    @chex.variants(with_jit=True, without_jit=True)
    def test_grassmann_retraction_and_angles(self):
        u, z = self._batch()
        z = grassmann.project(u, z)
        w = self.variant(grassmann.retract)(u, 0.5 * z)
        chex.assert_shape(w, (2, 7, 3))
        chex.assert_trees_all_close(w, grassmann.retract(u, 0.5 * z), atol=1e-13, rtol=0.0)
        angles = self.variant(grassmann.principal_angles)(u, w)
        chex.assert_shape(angles, (2, 3))
        chex.assert_tree_all_finite(angles)
        chex.assert_trees_all_close(angles, grassmann.principal_angles(u, w), atol=1e-12,
                                    rtol=0.0)
