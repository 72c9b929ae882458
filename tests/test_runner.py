"""The compiled runner: equivalence of modes, sweeps, no retracing, resume, planted sparse PCA."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import Recording, Sampling

D, R = 24, 2


def _loss(x, z):
    return jnp.sum(z**2) - jnp.sum((x.T @ z) ** 2)


def _sgd(mu):
    return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(0.5), 0.05, rproxjax.l1(mu))


def test_same_key_identical_and_jit_path_equals_host_loop(planted):
    data, x0, _ = planted
    kw = dict(key=jax.random.key(3), batch_size=30, num_epochs=2)
    a = rproxjax.fit(_sgd(0.3), _loss, x0, data, **kw)
    b = rproxjax.fit(_sgd(0.3), _loss, x0, data, **kw)
    np.testing.assert_array_equal(a.params, b.params)
    np.testing.assert_array_equal(a.history.zeta_norm, b.history.zeta_norm)
    c = jax.jit(lambda x: rproxjax.pure_fit(_sgd(0.3), _loss, x, data, **kw))(x0)
    np.testing.assert_allclose(c.params, a.params, atol=1e-12)
    np.testing.assert_allclose(c.epoch_loss, a.epoch_loss, rtol=1e-12)
    assert a.history.ifo.shape == (2 * (1200 // 30),)
    assert int(a.history.ifo[-1]) == 2 * 1200
    assert bool(jnp.all(jnp.isnan(c.epoch_time))) and np.all(np.diff(a.epoch_time) > 0)


def test_vmapped_sweep_over_mu_and_keys_equals_separate_runs(planted):
    data, x0, _ = planted
    traces = []

    @jax.jit
    def run(mu, key):
        traces.append(None)
        res = rproxjax.pure_fit(_sgd(mu), _loss, x0, data, key=key, batch_size=40,
                                num_epochs=2)
        return res.params, res.epoch_loss

    mus = jnp.array([0.0, 0.1, 0.3, 1.0])
    keys = jax.random.split(jax.random.key(7), 4)
    params, losses = jax.jit(jax.vmap(run))(mus, keys)
    assert len(traces) == 1
    for i in range(4):
        p, loss = run(mus[i], keys[i])
        np.testing.assert_allclose(params[i], p, atol=1e-11)
        np.testing.assert_allclose(losses[i], loss, rtol=1e-11)
    # vmap batches the jaxpr traced for one run: a single trace serves all.
    assert len(traces) == 1
    nnz = [int(jnp.sum(jnp.abs(p) > 1e-3)) for p in params]  # the paper's threshold
    assert nnz[0] > nnz[-1]  # larger mu, sparser loadings


def test_no_retrace_across_epochs(planted):
    data, x0, _ = planted
    calls = []

    def counting_loss(x, z):
        calls.append(None)
        return _loss(x, z)

    rproxjax.fit(_sgd(0.2), counting_loss, x0, data, key=jax.random.key(0), batch_size=60,
                 num_epochs=1)
    one_epoch = len(calls)
    calls.clear()
    rproxjax.fit(_sgd(0.2), counting_loss, x0, data, key=jax.random.key(0), batch_size=60,
                 num_epochs=4)
    # Traces per call do not grow with the epochs (the first call also checked the loss's
    # output shape with an eval_shape that the second reuses).
    assert 0 < len(calls) <= one_epoch


def test_resume_from_saved_state_is_bit_identical(planted):
    data, x0, _ = planted
    opt = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.2), q=8)
    kw = dict(batch_size=30)
    full = rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(5), num_epochs=3, **kw)
    half = rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(5), num_epochs=1, **kw)
    # Save the state as NumPy arrays (as a checkpoint would) and restore it.
    leaves, treedef = jax.tree.flatten((half.params, half.opt_state, half.key))
    saved = [np.array(leaf) if not jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
             else np.array(jax.random.key_data(leaf)) for leaf in leaves]
    restored = [jax.random.wrap_key_data(s) if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
                else jnp.asarray(s) for s, leaf in zip(saved, leaves, strict=True)]
    params, state, key = jax.tree.unflatten(treedef, restored)
    rest = rproxjax.fit(opt, _loss, params, data, key=key, opt_state=state, num_epochs=2, **kw)
    np.testing.assert_array_equal(rest.params, full.params)
    np.testing.assert_array_equal(optax.tree_utils.tree_get(rest.opt_state, "v"),
                                  optax.tree_utils.tree_get(full.opt_state, "v"))
    n1 = half.history.zeta_norm.shape[0]
    np.testing.assert_array_equal(rest.history.zeta_norm, full.history.zeta_norm[n1:])


def test_planted_sparse_pca_prox_methods_beat_subgradient(planted):
    data, x0, w = planted
    reg = rproxjax.l1(3.0)
    n = data.shape[0]
    common = dict(key=jax.random.key(1), batch_size=20)
    sgd = rproxjax.fit(
        rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(0.5), 0.03, reg), _loss, x0, data,
        num_epochs=12, recording=Recording(variance=True), **common)
    spb = rproxjax.fit(
        rproxjax.r_prox_spb(1.0, 0.01, reg, q=20), _loss, x0, data, num_epochs=2,
        recording=Recording(variance=True), **common)
    # R-Subgrad gets the best of a step-size grid, at the same IFO budget.
    subgrads = [
        rproxjax.fit(rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(eta), reg), _loss, x0,
                     data, num_epochs=12, **common)
        for eta in (0.003, 0.01, 0.03)
    ]
    budget = int(sgd.epoch_ifo[-1])
    assert budget == 12 * n
    assert int(spb.epoch_ifo[-1]) <= budget and int(subgrads[0].epoch_ifo[-1]) == budget
    best_subgrad = min(float(r.epoch_loss[-1]) for r in subgrads)
    assert float(sgd.epoch_loss[-1]) < best_subgrad - 0.02
    assert float(spb.epoch_loss[-1]) < best_subgrad - 0.02
    # Sparsity: the prox methods recover exactly the 8 planted nonzeros (entries
    # above 1e-5, the reference code's threshold); the subgradient iterates
    # stay dense.
    data_support = np.abs(w) > 0
    for res in (sgd, spb):
        np.testing.assert_array_equal(np.abs(np.asarray(res.params)) > 1e-5, data_support)
    assert min(np.sum(np.abs(np.asarray(r.params)) > 1e-5) for r in subgrads) > 40
    # Variance reduction: R-ProxSPB's estimate is closer to the full gradient.
    var_spb = np.asarray(spb.history.variance)
    var_sgd = np.asarray(sgd.history.variance)
    assert np.mean(var_spb[len(var_spb) // 2:]) < np.mean(var_sgd[len(var_sgd) // 2:])


def test_online_stream_runs_in_chunks_and_matches_finite_sum_fixed_point(planted):
    data, x0, _ = planted
    reg = rproxjax.l1(0.3)

    def stream(seed):
        rng = np.random.default_rng(seed)
        while True:
            yield np.asarray(data)[rng.integers(0, data.shape[0], 40)]

    online = rproxjax.fit(
        rproxjax.r_prox_spb(0.3, 0.05, reg, q=10), _loss, x0, stream(0), key=jax.random.key(0),
        batch_size=40, num_steps=200, sampling=Sampling(refresh_batch_size=400),
        recording=Recording(loss=True))
    assert online.history.ifo.shape == (200,)
    assert int(online.history.ifo[0]) == 400 and int(online.history.ifo[1]) == 480
    assert online.history.loss.shape == (200,)
    finite = rproxjax.fit(
        rproxjax.r_prox_spb(0.3, 0.05, reg, q=10), _loss, x0, data, key=jax.random.key(0),
        batch_size=40, num_epochs=6)
    angles = rproxjax.grassmann.principal_angles(online.params, finite.params)
    assert float(jnp.max(angles)) < 0.1


def test_bad_inputs(planted):
    data, x0, _ = planted
    opt = _sgd(0.1)
    with pytest.raises(ValueError, match="not on the Stiefel manifold"):
        rproxjax.fit(opt, _loss, 2.0 * x0, data, key=jax.random.key(0), batch_size=10,
                     num_epochs=1)
    with pytest.raises(ValueError, match="exceeds the number of samples"):
        rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(0), batch_size=5000,
                     num_epochs=1)
    with pytest.raises(ValueError, match="refresh period q must be >= 2"):
        rproxjax.fit(rproxjax.r_prox_spb(0.1, 0.1, rproxjax.l1(0.1), q=1), _loss, x0, data,
                     key=jax.random.key(0), batch_size=10, num_epochs=1)
    with pytest.raises(ValueError, match="use|pure_fit"):
        jax.jit(lambda x: rproxjax.fit(opt, _loss, x, data, key=jax.random.key(0),
                                       batch_size=10, num_epochs=1).params)(x0)
    with pytest.raises(ValueError, match="expected batch_size"):
        rproxjax.fit(opt, _loss, x0, iter([np.ones((3, D))] * 5), key=jax.random.key(0),
                     batch_size=4, num_steps=2)
    with pytest.raises(ValueError, match="stream ended"):
        rproxjax.fit(opt, _loss, x0, iter([np.ones((4, D))]), key=jax.random.key(0),
                     batch_size=4, num_steps=3, sampling=Sampling(chunk_size=4))


def test_nonfinite_data_is_reported_and_x_kept(planted):
    data, x0, _ = planted
    bad = data.at[7, 3].set(jnp.inf)
    res = rproxjax.fit(_sgd(0.1), _loss, x0, bad, key=jax.random.key(0), batch_size=bad.shape[0],
                       num_epochs=1)
    assert bool(res.history.halted[-1])
    np.testing.assert_array_equal(res.params, x0)


def test_steps_per_epoch_gives_finer_curves(planted):
    data, x0, _ = planted
    res = rproxjax.fit(_sgd(0.1), _loss, x0, data, key=jax.random.key(0), batch_size=30,
                       num_epochs=5, sampling=Sampling(steps_per_epoch=4))
    np.testing.assert_array_equal(res.epoch_ifo, 120 * np.arange(6))
    assert res.history.ifo.shape == (20,)
    # F after each short epoch is the full objective at that point (decreasing here).
    assert float(res.epoch_loss[-1]) < float(res.epoch_loss[0])
    # R-ProxSPB: rounded down to whole blocks of q steps (at least one block).
    spb = rproxjax.r_prox_spb(0.2, 0.05, rproxjax.l1(0.1), q=5)
    res = rproxjax.fit(spb, _loss, x0, data, key=jax.random.key(0), batch_size=30,
                       num_epochs=3, sampling=Sampling(steps_per_epoch=12))
    assert res.history.refresh.shape == (3 * 10,)
    np.testing.assert_array_equal(res.epoch_ifo, (2 * (1200 + 4 * 60)) * np.arange(4))
    for bad, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="steps_per_epoch"):
            Sampling(steps_per_epoch=bad)


def test_full_batch_steps_use_the_data_set_as_is(planted):
    """batch_size = n: every step sees the whole data set (no permuted copy), so the run
    does not depend on the key or on the order of the samples."""
    data, x0, _ = planted
    kw = dict(batch_size=data.shape[0], num_epochs=3)
    a = rproxjax.fit(_sgd(0.2), _loss, x0, data, key=jax.random.key(0), **kw)
    b = rproxjax.fit(_sgd(0.2), _loss, x0, data[::-1], key=jax.random.key(9), **kw)
    np.testing.assert_allclose(a.params, b.params, atol=1e-12)
    np.testing.assert_array_equal(a.epoch_ifo, data.shape[0] * np.arange(4))
    assert np.all(np.diff(np.asarray(a.epoch_time)) > 0)


@pytest.mark.parametrize("spb", [False, True])
def test_online_runs_exactly_num_steps(planted, spb):
    """num_steps need not be a multiple of the chunk: the last chunk is cut short, and a
    stream holding exactly the batches needed is enough."""
    data, x0, _ = planted
    if spb:  # blocks of q = 4: a refresh on 2 batches of 40, then 3 steps
        opt, steps, kw = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.3), q=4), 9, \
            dict(sampling=Sampling(refresh_batch_size=80))
        needed = 3 * 2 + (3 + 3 + 0)  # three refreshes, then 3 + 3 + 0 steps on minibatches
        ifo = 80 * np.arange(1, 10)  # a refresh costs |S1| = 80, a SARAH step 2 * 40
    else:
        opt, steps, kw = _sgd(0.3), 7, dict(sampling=Sampling(chunk_size=120))  # 3 + 3 + 1
        needed, ifo = 7, [40 * (k + 1) for k in range(7)]
    batches = [np.asarray(data[40 * i: 40 * (i + 1)]) for i in range(needed)]
    res = rproxjax.fit(opt, _loss, x0, iter(batches), key=jax.random.key(0), batch_size=40,
                       num_steps=steps, **kw)
    assert res.history.ifo.shape == (steps,)
    np.testing.assert_array_equal(res.history.ifo, ifo)
    assert float(jnp.max(res.history.feasibility)) < 1e-12


def test_resumed_ifo_count_continues_with_initial_ifo(planted):
    data, x0, _ = planted
    opt = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.2), q=8)
    kw = dict(batch_size=30)
    full = rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(5), num_epochs=2, **kw)
    half = rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(5), num_epochs=1, **kw)
    rest = rproxjax.fit(opt, _loss, half.params, data, key=half.key, opt_state=half.opt_state,
                        num_epochs=1, initial_ifo=int(half.epoch_ifo[-1]), **kw)
    np.testing.assert_array_equal(rest.epoch_ifo, full.epoch_ifo[1:])
    np.testing.assert_array_equal(rest.history.ifo, full.history.ifo[half.history.ifo.size:])
    with pytest.raises(ValueError, match="initial_ifo"):
        rproxjax.fit(opt, _loss, x0, data, key=jax.random.key(5), num_epochs=1,
                     initial_ifo=-1, **kw)


def test_a_failing_stream_keeps_the_chunks_already_run(planted):
    data, x0, _ = planted

    def stream():
        for i in range(5):  # 5 batches, then a failure of the user's data source
            yield np.asarray(data[40 * i: 40 * (i + 1)])
        raise OSError("the data source went away")

    with pytest.raises(OSError, match="went away") as exc:
        rproxjax.fit(_sgd(0.3), _loss, x0, stream(), key=jax.random.key(0), batch_size=40,
                     num_steps=9, sampling=Sampling(chunk_size=80))  # chunks of 2 steps
    partial = exc.value.partial_result
    assert partial.history.ifo.shape == (4,)  # two whole chunks ran before the failure
    np.testing.assert_array_equal(partial.epoch_ifo, [0, 80, 160])
    assert float(rproxjax.stiefel.feasibility(partial.params)) < 1e-12


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_recorded_variances_match_the_sampled_gradient(dtype):
    """history.variance / riemannian_variance of the first step against the two candidates
    computed by hand: with two samples and batches of one, V_0 is one sample's gradient."""
    rng = np.random.default_rng(3)
    data = jnp.asarray(rng.normal(size=(2, 12)), dtype)
    x0 = rproxjax.stiefel.random_point(jax.random.key(1), 12, 3, dtype)
    res = rproxjax.fit(_sgd(0.1), _loss, x0, data, key=jax.random.key(2), batch_size=1,
                       num_epochs=1, sampling=Sampling(steps_per_epoch=1),
                       recording=Recording(variance=True))
    grads = [jax.grad(_loss)(x0, data[i]) for i in range(2)]
    full = (grads[0] + grads[1]) / 2
    euclid = [float(jnp.sum((g - full) ** 2)) for g in grads]
    tangent = [float(jnp.sum(rproxjax.stiefel.project(x0, g - full) ** 2)) for g in grads]
    got_e, got_t = float(res.history.variance[0]), float(res.history.riemannian_variance[0])
    i = int(np.argmin([abs(got_e - e) for e in euclid]))
    rtol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(got_e, euclid[i], rtol=rtol)
    np.testing.assert_allclose(got_t, tangent[i], rtol=rtol)
    assert tangent[i] < 0.9 * euclid[i]  # the normal part is not counted


def test_epochs_can_be_segments_of_a_block(planted):
    """steps_per_epoch below q (dividing it): a curve point every few steps, the refresh
    still every q steps, the IFOs of whole blocks; otherwise a clear error."""
    data, x0, _ = planted
    opt = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.2), q=10)
    common = dict(key=jax.random.key(4), batch_size=40)
    def per(steps, **kw):
        return Sampling(steps_per_epoch=steps, **kw)

    whole = rproxjax.fit(opt, _loss, x0, data, num_epochs=3, sampling=per(10), **common)
    seg = rproxjax.fit(opt, _loss, x0, data, num_epochs=15, sampling=per(2),
                       recording=Recording(variance=True), **common)
    refresh = np.asarray(seg.history.refresh)
    np.testing.assert_array_equal(np.flatnonzero(refresh), [0, 10, 20])
    np.testing.assert_array_equal(seg.epoch_ifo[::5], whole.epoch_ifo)
    # The same samples as whole-block epochs (one key per block): the same run.
    np.testing.assert_allclose(seg.params, whole.params, rtol=0, atol=1e-13)
    np.testing.assert_allclose(seg.epoch_loss[::5], whole.epoch_loss, rtol=1e-13)
    np.testing.assert_array_equal(jax.random.key_data(seg.key), jax.random.key_data(whole.key))
    assert seg.epoch_loss.shape == (16,) and np.all(np.diff(np.asarray(seg.epoch_time)) > 0)
    var = np.asarray(seg.history.riemannian_variance)
    assert np.all(var[refresh] < 1e-20) and np.all(var[~refresh] > 0)
    # the curve's points are the losses at those steps (F evaluated outside the timing)
    for e in (3, 7):
        part = rproxjax.fit(opt, _loss, x0, data, num_epochs=e, sampling=per(2), **common)
        np.testing.assert_allclose(part.epoch_loss[-1], seg.epoch_loss[e], rtol=1e-12)
    # A sampled refresh (|S1| < n), num_steps: the same as whole blocks too.
    kw = dict(recording=Recording(loss=True), **common)
    a = rproxjax.fit(opt, _loss, x0, data, num_steps=20,
                     sampling=per(5, refresh_batch_size=200), **kw)
    b = rproxjax.fit(opt, _loss, x0, data, num_epochs=2,
                     sampling=per(10, refresh_batch_size=200), **kw)
    assert a.epoch_loss.shape == (5,) and int(a.epoch_ifo[-1]) == int(b.epoch_ifo[-1])
    np.testing.assert_allclose(a.history.loss, b.history.loss, rtol=1e-13)
    with pytest.raises(ValueError, match="must divide q"):
        rproxjax.fit(opt, _loss, x0, data, num_epochs=2, sampling=per(3), **common)
    with pytest.raises(ValueError, match="whole blocks"):
        rproxjax.pure_fit(opt, _loss, x0, data, num_epochs=2, sampling=per(2), **common)


def _same_run(a, b):
    """Every array of two FitResults equal bit for bit (epoch_time aside: a wall clock)."""
    a, b = a._replace(epoch_time=None), b._replace(epoch_time=None)
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b) and len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("runner", ["fit", "pure_fit"])
def test_the_groups_and_the_former_flat_keywords_run_alike(planted, runner):
    """fit(sampling=Sampling(...), recording=Recording(...)) is the run of the former flat
    keywords, bit for bit; they warn, once per group, naming the new form, at the caller's
    line."""
    data, x0, _ = planted
    opt = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.2), q=5)
    seen = {"group": [], "flat": []}
    common = dict(key=jax.random.key(4), batch_size=40, num_steps=23)
    grouped = dict(sampling=Sampling(steps_per_epoch=10, refresh_batch_size=200,
                                     chunk_size=300),
                   recording=Recording(loss=True, variance=True,
                                       callback=lambda i: seen["group"].append(i.ifo)))
    flat = dict(steps_per_epoch=10, refresh_batch_size=200, chunk_size=300, record_loss=True,
                record_variance=True, callback=lambda i: seen["flat"].append(i.ifo))
    run = getattr(rproxjax, runner)
    a = run(opt, _loss, x0, data, **common, **grouped)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b = run(opt, _loss, x0, data, **common, **flat)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert [str(w.message) for w in deprecations] == [
        f"{runner}(steps_per_epoch=, refresh_batch_size=, chunk_size=) are deprecated and will "
        "be removed in rproxjax 0.5: use sampling=rproxjax.Sampling(steps_per_epoch=..., "
        "refresh_batch_size=..., chunk_size=...) instead.",
        f"{runner}(record_loss=, record_variance=, callback=) are deprecated and will be "
        "removed in rproxjax 0.5: use recording=rproxjax.Recording(loss=..., variance=..., "
        "callback=...) instead."]
    assert all(w.filename == __file__ for w in deprecations)
    _same_run(a, b)
    assert a.history.loss is not None and a.history.riemannian_variance is not None
    jax.effects_barrier()  # pure_fit's callbacks have arrived
    assert len(seen["group"]) == len(seen["flat"]) == 3
    np.testing.assert_array_equal(seen["group"], seen["flat"])


def test_the_former_mesh_keywords_warn_and_run_as_the_sharding(planted):
    data, x0, _ = planted
    mesh = jax.make_mesh((1,), ("data",))
    kw = dict(key=jax.random.key(2), batch_size=40, num_epochs=1)
    a = rproxjax.fit(_sgd(0.2), _loss, x0, data, **kw,
                     sharding=jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data")))
    for former in (dict(mesh=mesh), dict(mesh=mesh, data_axis="data")):
        with pytest.warns(DeprecationWarning, match=r"fit\(mesh=(, data_axis=)?\) (is|are) "
                          r"deprecated and will be removed in rproxjax 0\.5: use "
                          r"sharding=NamedSharding\(mesh, PartitionSpec\(data_axis\)\)"):
            b = rproxjax.fit(_sgd(0.2), _loss, x0, data, **kw, **former)
        _same_run(a, b)


def _no_op(info):
    return None


#: The former flat keywords, one by one: (keyword, a value, the same option as a group, the
#: new form its warning names).
FORMER_ALONE = [
    ("steps_per_epoch", 10, lambda: dict(sampling=Sampling(steps_per_epoch=10)),
     "sampling=rproxjax.Sampling(steps_per_epoch=...)"),
    ("refresh_batch_size", 200, lambda: dict(sampling=Sampling(refresh_batch_size=200)),
     "sampling=rproxjax.Sampling(refresh_batch_size=...)"),
    ("chunk_size", 300, lambda: dict(sampling=Sampling(chunk_size=300)),
     "sampling=rproxjax.Sampling(chunk_size=...)"),
    ("record_loss", True, lambda: dict(recording=Recording(loss=True)),
     "recording=rproxjax.Recording(loss=...)"),
    ("record_variance", True, lambda: dict(recording=Recording(variance=True)),
     "recording=rproxjax.Recording(variance=...)"),
    ("progress", False, lambda: dict(recording=Recording(progress=False)),
     "recording=rproxjax.Recording(progress=...)"),
    ("callback", _no_op, lambda: dict(recording=Recording(callback=_no_op)),
     "recording=rproxjax.Recording(callback=...)"),
    ("mesh", None, lambda: dict(sharding=_mesh_sharding("data")),
     "sharding=NamedSharding(mesh, PartitionSpec(data_axis))"),
    ("data_axis", "data", None, "sharding=NamedSharding(mesh, PartitionSpec(data_axis))"),
]


@pytest.mark.parametrize("runner, name, value, group, new", [
    pytest.param(runner, *case, id=f"{runner}-{case[0]}") for runner in ("fit", "pure_fit")
    for case in FORMER_ALONE
    if (runner, case[0]) != ("pure_fit", "progress")])  # test_pure_fit_draws_no_progress_bar
def test_each_former_keyword_warns_alone(planted, runner, name, value, group, new):
    """Each of the nine former keywords (pure_fit: eight, no progress=), given alone, raises a
    DeprecationWarning naming it and its new form, and runs as its group does (data_axis=
    alone: the warning, then the error that it needs mesh=)."""
    data, x0, _ = planted
    opt = rproxjax.r_prox_spb(0.3, 0.05, rproxjax.l1(0.2), q=5)
    common = dict(key=jax.random.key(4), batch_size=40, num_steps=10)
    run = getattr(rproxjax, runner)
    if name == "mesh":
        value = jax.make_mesh((1,), ("data",))
    message = (rf"^{runner}\({name}=\) is deprecated and will be removed in rproxjax 0\.5: "
               rf"use {re.escape(new)} instead\.$")
    if group is None:  # data_axis= without mesh=
        with pytest.raises(ValueError, match="data_axis needs mesh="), \
                pytest.warns(DeprecationWarning, match=message):
            run(opt, _loss, x0, data, **common, **{name: value})
        return
    with pytest.warns(DeprecationWarning, match=message) as caught:
        b = run(opt, _loss, x0, data, **common, **{name: value})
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1 and deprecations[0].filename == __file__
    _same_run(run(opt, _loss, x0, data, **common, **group()), b)


def test_every_former_keyword_is_checked_alone():
    from rproxjax._run.options import FORMER

    assert [case[0] for case in FORMER_ALONE] == list(FORMER)


def _mesh_sharding(*spec, axes=("data",)):
    return jax.sharding.NamedSharding(jax.make_mesh((1,) * len(axes), axes),
                                      jax.sharding.PartitionSpec(*spec))


@pytest.mark.parametrize("runner", ["fit", "pure_fit"])
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(sampling={"steps_per_epoch": 2}), TypeError, "sampling must be a rproxjax.Sampling"),
    (dict(recording=True), TypeError, "recording must be a rproxjax.Recording"),
    (dict(sharding="data"), TypeError, "sharding must be a jax.sharding.NamedSharding"),
    (dict(sharding=_mesh_sharding()), ValueError, "split the leading"),
    (dict(sharding=_mesh_sharding(None, "data")), ValueError, "split the leading"),
    (dict(sharding=_mesh_sharding(("a", "b"), axes=("a", "b"))), ValueError,
     "over one mesh axis"),
    (dict(sampling=Sampling(), chunk_size=10), TypeError, "give chunk_size in sampling= only"),
    (dict(recording=Recording(), record_loss=True), TypeError, "give loss in recording="),
    (dict(steps=3), TypeError, "unexpected keyword argument 'steps'"),
])
def test_bad_groups_are_errors_before_anything_is_traced(planted, runner, kwargs, error, match):
    data, x0, _ = planted
    traced = []

    def loss(x, z):
        traced.append(None)
        return _loss(x, z)

    with pytest.raises(error, match=match):
        getattr(rproxjax, runner)(_sgd(0.1), loss, x0, data, key=jax.random.key(0),
                                  batch_size=40, num_epochs=1, **kwargs)
    assert not traced  # raised before the loss (and so any program) was traced


@pytest.mark.parametrize("build, error, match", [
    (lambda: Sampling(steps_per_epoch=0), ValueError, "steps_per_epoch must be a positive"),
    (lambda: Sampling(refresh_batch_size=2.0), TypeError, "refresh_batch_size must be a pos"),
    (lambda: Sampling(chunk_size=None), TypeError, "chunk_size must be a positive int"),
    (lambda: Sampling(chunk_size=True), TypeError, "chunk_size must be a positive int"),
    (lambda: Sampling(3), TypeError, "positional"),
    (lambda: Recording(loss=1), TypeError, "Recording.loss must be True or False"),
    (lambda: Recording(variance="yes"), TypeError, "Recording.variance must be True or"),
    (lambda: Recording(progress=None), TypeError, "Recording.progress must be True or"),
    (lambda: Recording(callback=3), TypeError, "callback must be callable"),
])
def test_the_groups_check_their_values_when_built(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_the_groups_are_frozen_values():
    s = Sampling(steps_per_epoch=np.int64(4))
    assert type(s.steps_per_epoch) is int and s == Sampling(steps_per_epoch=4)
    assert Recording(loss=np.bool_(True)).loss is True
    with pytest.raises(AttributeError):
        s.chunk_size = 10


def test_pure_fit_draws_no_progress_bar(planted):
    data, x0, _ = planted
    kw = dict(key=jax.random.key(0), batch_size=40, num_epochs=1)
    with pytest.raises(ValueError, match="pure_fit draws no progress bar"):
        rproxjax.pure_fit(_sgd(0.1), _loss, x0, data, recording=Recording(progress=True), **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'progress'"):
        rproxjax.pure_fit(_sgd(0.1), _loss, x0, data, progress=True, **kw)
