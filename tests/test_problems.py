"""Sparse PCA problem functions: gradients, objective, metrics, stationarity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import datasets, problems, stiefel
from tests.reference import manpg_reference_problem


@pytest.fixture(scope="module")
def mnist_slice():
    return jnp.asarray(datasets.load_mnist(500, seed=3, dtype=np.float64))


def test_spca_gradient_matches_jax_grad_and_finite_differences(mnist_slice):
    x = stiefel.random_point(jax.random.key(0), 784, 4)
    z = mnist_slice[7]
    g = problems.spca_grad(x, z)
    np.testing.assert_allclose(g, jax.grad(problems.spca_loss)(x, z), rtol=1e-12, atol=1e-12)
    direction = jax.random.normal(jax.random.key(1), x.shape)
    eps = 1e-6
    fd = (problems.spca_loss(x + eps * direction, z)
          - problems.spca_loss(x - eps * direction, z)) / (2 * eps)
    np.testing.assert_allclose(fd, jnp.sum(g * direction), rtol=1e-7)


def test_spca_loss_is_reconstruction_error_on_the_manifold(mnist_slice):
    x = stiefel.random_point(jax.random.key(2), 784, 3)
    z = mnist_slice[11]
    np.testing.assert_allclose(problems.spca_loss(x, z), jnp.sum((z - x @ (x.T @ z)) ** 2),
                               rtol=1e-12)


def test_objective_chunks_and_metrics(mnist_slice):
    x = stiefel.random_point(jax.random.key(3), 784, 5)
    direct = jnp.mean(jax.vmap(problems.spca_loss, (None, 0))(x, mnist_slice)) + 0.3 * jnp.sum(
        jnp.abs(x))
    np.testing.assert_allclose(problems.spca_objective(x, mnist_slice, 0.3, chunk_size=64),
                               direct, rtol=1e-12)
    a = mnist_slice.T
    ev = jnp.trace(x.T @ a @ a.T @ x) / jnp.trace(x @ x.T)
    np.testing.assert_allclose(problems.explained_variance(x, mnist_slice), ev, rtol=1e-12)
    assert 0 < float(problems.explained_variance(x, mnist_slice, normalized=True)) < 1
    # The top eigenvectors explain the most variance.
    _, vecs = jnp.linalg.eigh(a @ a.T)
    top = vecs[:, -5:]
    assert float(problems.explained_variance(top, mnist_slice)) > float(
        problems.explained_variance(x, mnist_slice))
    assert int(problems.nonzeros(jnp.array([[1e-4, -2e-3], [0.5, 0.0]]))) == 2


@pytest.mark.parametrize("fn", [problems.explained_variance,
                                lambda x, data: problems.spca_objective(x, data, 0.1)])
def test_metrics_refuse_complex_and_mismatched_data(fn):
    """Complex data gave a complex "variance"; the metrics name the argument instead."""
    x = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 2)))[0]
    data = np.random.default_rng(1).standard_normal((10, 6))
    assert np.isfinite(float(fn(x, data)))
    with pytest.raises(TypeError, match="data must hold real numbers"):
        fn(x, data.astype(np.complex128))
    with pytest.raises(ValueError, match="x must have dtype"):
        fn(x.astype(np.complex128), data)
    with pytest.raises(ValueError, match="n x d array with d = 6"):
        fn(x, data[:, :5])
    # Shapes and dtypes only: the checks hold under jit (traced values are not inspected).
    np.testing.assert_allclose(jax.jit(fn)(x, data), fn(x, data), rtol=1e-6)


def test_stationarity_measure_vanishes_at_a_stationary_point():
    ref = manpg_reference_problem()
    reg = rproxjax.l1(ref.mu)
    a = jnp.asarray(ref.A)
    f = lambda x: -jnp.trace(x.T @ a @ x)  # noqa: E731
    tol = 1e-8 * 100 * 5
    opt = rproxjax.manpg(ref.t, reg, tol=tol)

    @jax.jit
    def run(x):
        def body(c, _):
            x, s = c
            u, s = opt.update(jax.grad(f)(x), s, x, value_fn=f)
            return (x + u, s), None

        return jax.lax.scan(body, (x, opt.init(x)), None, length=300)[0]

    x0 = jnp.asarray(ref.X0)
    x, state = run(x0)
    assert bool(state.converged)
    start, _ = problems.stationarity(x0, jax.grad(f)(x0), ref.t, reg)
    end, info = problems.stationarity(x, jax.grad(f)(x), ref.t, reg)
    assert bool(info.converged)
    # ManPG stops once ||zeta|| / t < sqrt(tol); ||G|| matches ||zeta|| / t to first order.
    assert float(end) < 1.01 * np.sqrt(tol)
    assert float(end) < 1e-3 * float(start)
