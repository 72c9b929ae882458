"""Data-parallel runs on 4 devices (run by test_sharding.py in a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=4; skipped in a 1-device process).

Each run is compared with a single-device reference on the same per-shard samples
(tests/sharding_reference.py: the loop, gradients and updates written out by hand).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import rproxjax
from rproxjax._run import compile as _compile
from rproxjax.problems import spca_loss
from tests.sharding_reference import reference_blocks, reference_plain

pytestmark = pytest.mark.skipif(jax.device_count() < 4,
                                reason="needs 4 devices (run through test_sharding.py)")

K, N, D, R, B = 4, 64, 12, 3, 8


@pytest.fixture(scope="module")
def problem():
    z = jax.random.normal(jax.random.key(0), (N, D), jnp.float64)
    x0 = rproxjax.stiefel.random_point(jax.random.key(1), D, R, jnp.float64)
    return z, x0, NamedSharding(jax.make_mesh((K,), ("data",)), P("data"))


def test_r_prox_sgd_matches_the_single_device_reference(problem):
    z, x0, sharding = problem
    opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
    res = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(2), batch_size=B,
                       num_epochs=2, sharding=sharding)
    ref = reference_plain(opt, x0, z, jax.random.key(2), B, 2, K)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-10)
    assert np.asarray(res.history.ifo)[-1] == 2 * N  # IFOs as on one device
    assert res.params.sharding.is_fully_replicated


@pytest.mark.parametrize("refresh", [None, 16])
def test_r_prox_spb_matches_the_single_device_reference(problem, refresh):
    z, x0, sharding = problem
    opt = rproxjax.r_prox_spb(0.5, 0.5, rproxjax.l1(0.05), q=4)
    res = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(3), batch_size=B,
                       num_epochs=2, sampling=rproxjax.Sampling(refresh_batch_size=refresh),
                       sharding=sharding)
    ref = reference_blocks(opt, x0, z, jax.random.key(3), B, 4, 2, K, refresh)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-10)


def test_manpg_full_batches_match_the_single_device_run(problem):
    z, x0, sharding = problem
    opt = rproxjax.manpg(0.5, rproxjax.l1(0.05), tol=1e-10)
    a = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(4), num_epochs=4,
                     sharding=sharding, recording=rproxjax.Recording(loss=True))
    b = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(4), num_epochs=4,
                     recording=rproxjax.Recording(loss=True))
    np.testing.assert_allclose(a.params, b.params, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.history.loss, b.history.loss, rtol=1e-12)
    np.testing.assert_array_equal(a.history.ifo, b.history.ifo)


def test_data_placed_beforehand_and_pure_fit_under_jit_agree(problem):
    z, x0, sharding = problem
    opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
    kwargs = dict(key=jax.random.key(5), batch_size=B, num_epochs=2)
    a = rproxjax.fit(opt, spca_loss, x0, z, sharding=sharding, **kwargs)
    placed = jax.device_put(z, sharding)
    b = rproxjax.fit(opt, spca_loss, x0, placed, **kwargs)  # the mesh read off the data
    c = jax.jit(lambda data: rproxjax.pure_fit(opt, spca_loss, x0, data, sharding=sharding,
                                               **kwargs).params)(z)
    np.testing.assert_array_equal(a.params, b.params)
    np.testing.assert_allclose(a.params, c, rtol=0, atol=1e-12)


def test_compiled_epoch_all_reduces_gradients_and_gathers_no_data(problem):
    z, x0, sharding = problem
    _compile.clear_cache()
    for opt in (rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05)),
                rproxjax.r_prox_spb(0.5, 0.5, rproxjax.l1(0.05), q=4)):
        rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(6), batch_size=B,
                     num_epochs=1, sharding=sharding)
    texts = [compiled.as_text() for compiled in _compile.PROGRAMS.entries.values()]
    # two epoch programs, two end-of-epoch losses (all-reduced), and the two programs that
    # draw the epochs' sample indices (replicated: no communication)
    assert len(texts) == 6
    assert sum("all-reduce" in text for text in texts) == 4
    for text in texts:
        assert "all-gather" not in text


@pytest.mark.parametrize("n, kwargs, match", [
    (66, dict(batch_size=8), "do not split evenly"),
    (64, dict(batch_size=6), "batch_size = 6 does not split"),
    (64, dict(batch_size=8, sampling=rproxjax.Sampling(refresh_batch_size=10)),
     "refresh_batch_size = 10"),
])
def test_sizes_that_do_not_split_over_the_devices_are_errors(problem, n, kwargs, match):
    _, x0, sharding = problem
    z = jax.random.normal(jax.random.key(0), (n, D), jnp.float64)
    opt = rproxjax.r_prox_spb(0.5, 0.5, rproxjax.l1(0.05), q=4)
    with pytest.raises(ValueError, match=match):
        rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(0), num_epochs=1, sharding=sharding,
                     **kwargs)


def test_a_mesh_of_two_axes_splits_the_samples_over_the_named_one(problem):
    z, x0, _ = problem
    mesh = jax.make_mesh((2, 2), ("data", "model"))
    opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
    res = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(7), batch_size=B,
                       num_epochs=1, sharding=NamedSharding(mesh, P("data")))
    ref = reference_plain(opt, x0, z, jax.random.key(7), B, 1, 2)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-10)
    # the former keywords: the mesh alone does not say which axis
    with pytest.warns(DeprecationWarning, match="mesh="), \
            pytest.raises(ValueError, match="name the data axis"):
        rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(0), batch_size=B,
                     num_epochs=1, mesh=mesh)
    with pytest.warns(DeprecationWarning, match="mesh=, data_axis="):
        former = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(7), batch_size=B,
                              num_epochs=1, mesh=mesh, data_axis="data")
    np.testing.assert_array_equal(former.params, res.params)


def test_vmap_over_mu_of_a_sharded_pure_fit_equals_the_single_runs(problem):
    z, x0, sharding = problem

    def run(mu):
        opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(mu))
        return rproxjax.pure_fit(opt, spca_loss, x0, z, key=jax.random.key(8), batch_size=B,
                                 num_epochs=1, sharding=sharding).params

    mus = jnp.array([0.01, 0.05, 0.2])
    lanes = jax.jit(jax.vmap(run))(mus)
    single = jnp.stack([jax.jit(run)(m) for m in mus])
    np.testing.assert_allclose(lanes, single, rtol=0, atol=1e-12)


def test_pure_fit_under_jit_reads_the_mesh_off_placed_data(problem):
    """Data placed over a mesh with Explicit axes (jax.make_mesh's default) and passed to a
    jitted pure_fit without sharding=: the mesh is read off the traced data's type (it
    raised JAX's ShardingTypeError before), so the run is fit's data-parallel one; vmapped
    over keys too. On an Auto mesh the traced type holds no split: sharding= is needed
    there."""
    z, x0, sharding = problem
    opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
    kwargs = dict(batch_size=B, num_epochs=2)
    placed = jax.device_put(z, sharding)
    a = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(9), sharding=sharding, **kwargs)
    b = jax.jit(lambda data: rproxjax.pure_fit(opt, spca_loss, x0, data, key=jax.random.key(9),
                                               **kwargs))(placed)
    np.testing.assert_array_equal(a.params, b.params)
    np.testing.assert_array_equal(a.history.ifo, b.history.ifo)
    keys = jax.random.split(jax.random.key(10), 2)
    lanes = jax.jit(jax.vmap(lambda k, data: rproxjax.pure_fit(
        opt, spca_loss, x0, data, key=k, **kwargs).params, in_axes=(0, None)))(keys, placed)
    for lane, k in zip(lanes, keys, strict=True):
        ref = rproxjax.fit(opt, spca_loss, x0, z, key=k, sharding=sharding, **kwargs)
        np.testing.assert_allclose(lane, ref.params, rtol=0, atol=1e-12)
    ref = reference_plain(opt, x0, z, jax.random.key(9), B, 2, K)  # k shards' samples
    np.testing.assert_allclose(b.params, ref, rtol=0, atol=1e-10)


def test_a_halted_sharded_run_keeps_its_point(problem):
    """The manifold guard on a data-parallel run: a step off the manifold is refused on
    every device alike, in fit and in a jitted pure_fit."""
    import optax

    z, x0, sharding = problem
    inner = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))

    def update(updates, state, params=None, **extra):
        updates, state = inner.update(updates, state, params, **extra)
        return 0.5 * updates, state

    opt = optax.GradientTransformationExtraArgs(inner.init, update)
    kwargs = dict(key=jax.random.key(11), batch_size=B, num_epochs=1, sharding=sharding)
    a = rproxjax.fit(opt, spca_loss, x0, z, **kwargs)
    b = jax.jit(lambda data: rproxjax.pure_fit(opt, spca_loss, x0, data, **kwargs))(z)
    for res in (a, b):
        assert np.asarray(res.history.halted).all()
        np.testing.assert_array_equal(res.params, x0)


@pytest.mark.parametrize("make", [
    lambda: rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05)),
    lambda: rproxjax.r_prox_spb(0.5, 0.5, rproxjax.l1(0.05), q=4),
], ids=["r_prox_sgd", "r_prox_spb"])
def test_a_partial_last_epoch_runs_sharded(problem, make):
    # num_steps = 11: an epoch of 8 steps and a partial one of 3 (with blocks of q = 4, a
    # partial block), which on CPU runs in the whole epochs' program: the same steps as the
    # first 11 of a longer sharded run, and pure_fit under jit gives fit's point.
    z, x0, sharding = problem
    kw = dict(key=jax.random.key(5), batch_size=B, sharding=sharding)
    part = rproxjax.fit(make(), spca_loss, x0, z, num_steps=11, **kw)
    full = rproxjax.fit(make(), spca_loss, x0, z, num_steps=16, **kw)
    assert part.history.ifo.shape == (11,)
    np.testing.assert_allclose(part.history.zeta_norm, full.history.zeta_norm[:11],
                               rtol=1e-12)
    np.testing.assert_array_equal(part.history.ifo, full.history.ifo[:11])
    pure = jax.jit(lambda: rproxjax.pure_fit(make(), spca_loss, x0, z, num_steps=11, **kw))()
    np.testing.assert_allclose(pure.params, part.params, rtol=0, atol=1e-12)
