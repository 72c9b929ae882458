"""Test configuration: the tests (not the library) enable float64."""

import jax

jax.config.update("jax_enable_x64", True)


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_caches():
    """Each test module starts with JAX's in-memory caches empty. One process compiles
    thousands of programs over the suite (no setting needs a cache cleared: settings are
    values); left to grow, XLA's CPU compiler crashed (SIGSEGV in backend_compile) after some
    700 tests on a 2-core machine, while each module passed alone. Modules are independent,
    so what one compiled is never needed by the next."""
    yield
    jax.clear_caches()


@pytest.fixture(params=[None, False], ids=["lanes-default", "lanes-batched"])
def lanes(request):
    """Solver settings with the default batching of vmapped solves (lanes mapped one after
    another on CPU) and with one batched Newton loop (``SSN.sequential_lanes``)."""
    import rproxjax

    return rproxjax.SSN(sequential_lanes=request.param)


@pytest.fixture(scope="session")
def tiny_results(tmp_path_factory):
    """One folder per session for the experiments' tiny results (shared with the notebooks)."""
    return tmp_path_factory.mktemp("tiny_results")


@pytest.fixture(scope="session")
def planted():
    """Sparse PCA data (n = 1200, d = 24) with two planted sparse, orthonormal loadings W:
    (data, X0 on St(24, 2), W)."""
    import jax.numpy as jnp
    import numpy as np

    from rproxjax import stiefel

    d, r, n = 24, 2, 1200
    w = np.zeros((d, r))
    w[:4, 0] = 0.5
    w[4:8, 1] = 0.5
    key_s, key_e = jax.random.split(jax.random.key(0))
    s = jax.random.normal(key_s, (n, r)) * jnp.array([4.0, 3.0])
    data = s @ w.T + 0.3 * jax.random.normal(key_e, (n, d))
    return data, stiefel.random_point(jax.random.key(1), d, r), w
