"""rproxjax.sweep: vmap or sequential lanes, the same results, one compilation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import problems, stiefel


def _run(mu, key):
    data = jax.random.normal(jax.random.key(5), (200, 12))
    x0 = stiefel.random_point(jax.random.key(6), 12, 3)
    opt = rproxjax.r_prox_sgd(0.5, 0.1, rproxjax.l1(mu))
    res = rproxjax.pure_fit(opt, problems.spca_loss, x0, data, key=key, batch_size=20,
                            num_epochs=1)
    return res.params, res.history.ssn_steps


def test_map_and_vmap_lanes_agree_with_single_runs():
    mus = jnp.array([0.05, 0.2, 0.8])
    keys = jax.random.split(jax.random.key(0), 3)
    traces = []

    def run(mu, key):
        traces.append(None)
        return _run(mu, key)

    by_map = jax.jit(lambda m, k: rproxjax.sweep(run, m, k, lanes="map"))(mus, keys)
    by_vmap = jax.jit(lambda m, k: rproxjax.sweep(run, m, k, lanes="vmap"))(mus, keys)
    assert len(traces) == 2  # one trace per program, not per lane
    for i in range(3):
        params, steps = jax.jit(_run)(mus[i], keys[i])
        np.testing.assert_allclose(by_map[0][i], params, atol=1e-12)
        np.testing.assert_allclose(by_vmap[0][i], params, atol=1e-9)
        np.testing.assert_array_equal(by_map[1][i], steps)
    # A second call with new values compiles nothing.
    fn = jax.jit(lambda m, k: rproxjax.sweep(_run, m, k))
    fn(mus, keys)
    size = fn._cache_size()
    fn(mus * 2, keys)
    assert fn._cache_size() == size


def test_auto_is_vmap_and_bad_arguments_raise():
    f = lambda a: a * 2  # noqa: E731
    out = rproxjax.sweep(f, jnp.arange(3.0))
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    jaxpr = str(jax.make_jaxpr(lambda a: rproxjax.sweep(f, a))(jnp.arange(3.0)))
    assert "scan" not in jaxpr and "while" not in jaxpr  # one batched product
    jaxpr = str(jax.make_jaxpr(lambda a: rproxjax.sweep(f, a, lanes="map"))(jnp.arange(3.0)))
    assert "scan" in jaxpr or "while" in jaxpr
    # batch_size applies to mapped lanes: "auto" maps with it, "vmap" refuses it.
    jaxpr = str(jax.make_jaxpr(lambda a: rproxjax.sweep(f, a, batch_size=2))(jnp.arange(4.0)))
    assert "scan" in jaxpr or "while" in jaxpr
    np.testing.assert_array_equal(rproxjax.sweep(f, jnp.arange(4.0), batch_size=3),
                                  [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="batch_size applies to lanes='map'"):
        rproxjax.sweep(f, jnp.arange(3.0), lanes="vmap", batch_size=2)
    with pytest.raises(ValueError, match="lanes must be one of"):
        rproxjax.sweep(f, jnp.arange(3.0), lanes="pmap")
    with pytest.raises(ValueError, match="at least one argument"):
        rproxjax.sweep(f)


@pytest.mark.parametrize("method", ["r_prox_sgd", "r_prox_spb"])
def test_lanes_sharing_one_key_equal_single_runs_with_it(method):
    # Common random numbers: the key unbatched, every lane draws the same minibatches (one
    # gather); each lane must still be the single run at its mu with that key.
    data = jax.random.normal(jax.random.key(5), (200, 12))
    x0 = stiefel.random_point(jax.random.key(6), 12, 3)

    def run(mu, key):
        opt = (rproxjax.r_prox_sgd(0.5, 0.1, rproxjax.l1(mu)) if method == "r_prox_sgd" else
               rproxjax.r_prox_spb(0.2, 0.1, rproxjax.l1(mu), q=5))
        res = rproxjax.pure_fit(opt, problems.spca_loss, x0, data, key=key, batch_size=20,
                                num_epochs=1)
        return res.params, res.history.ssn_steps

    mus, key = jnp.array([0.05, 0.2, 0.8]), jax.random.key(1)
    params, steps = jax.jit(jax.vmap(run, in_axes=(0, None)))(mus, key)
    for i in range(3):
        p1, s1 = jax.jit(run)(mus[i], key)
        np.testing.assert_allclose(params[i], p1, atol=1e-9)
        np.testing.assert_array_equal(steps[i], s1)
    assert not np.allclose(params[0], params[2])  # the lanes differ by mu
