"""The transformation contract: chains, the runner's needs, compile-once, the step record."""

import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import problems, stiefel

D, R, N = 16, 2, 240


@pytest.fixture(scope="module")
def data():
    w = np.zeros((D, R))
    w[:3, 0] = 1 / np.sqrt(3)
    w[3:6, 1] = 1 / np.sqrt(3)
    key_s, key_e = jax.random.split(jax.random.key(0))
    s = jax.random.normal(key_s, (N, R)) * jnp.array([3.0, 2.0])
    return s @ w.T + 0.3 * jax.random.normal(key_e, (N, D))


X0 = stiefel.random_point(jax.random.key(1), D, R)

OPTIMIZERS = {
    "r_prox_sgd": lambda mu, eta: rproxjax.r_prox_sgd(
        rproxjax.inverse_sqrt_schedule(eta), 0.2, rproxjax.l1(mu)),
    "r_prox_spb": lambda mu, eta: rproxjax.r_prox_spb(eta, 0.2, rproxjax.l1(mu), q=4),
    "r_prox_svrg": lambda mu, eta: rproxjax.r_prox_svrg(eta, 0.2, rproxjax.l1(mu), m=4),
    "r_prox_sarah": lambda mu, eta: rproxjax.r_prox_sarah(0.4, eta, rproxjax.l1(mu), q=4),
    "r_subgrad": lambda mu, eta: rproxjax.r_subgrad(
        rproxjax.inverse_sqrt_schedule(0.1 * eta), rproxjax.l1(mu)),
    "manpg": lambda mu, eta: rproxjax.manpg(0.2 * eta, rproxjax.l1(mu), tol=1e-10),
}


def _fit(opt, data, **kw):
    batch = {} if "manpg" in kw.pop("name", "") else {"batch_size": 20}
    return rproxjax.fit(opt, problems.spca_loss, X0, data, key=jax.random.key(2),
                        num_epochs=2, recording=rproxjax.Recording(loss=True), **batch, **kw)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_chain_with_preprocessing_matches_the_bare_optimizer(name, data):
    """Same iterates, same reported F = f + h, same history, through an optax chain."""
    bare = _fit(OPTIMIZERS[name](0.3, 0.5), data, name=name)
    chained_opt = optax.chain(optax.clip_by_global_norm(1e6), optax.identity(),
                              OPTIMIZERS[name](0.3, 0.5))
    chained = _fit(chained_opt, data, name=name)
    chex.assert_shape(bare.params, (D, R))
    chex.assert_type(bare.params, jnp.float64)
    chex.assert_tree_all_finite((bare.params, bare.epoch_loss, bare.history))
    # The whole per-step history (every field), the point, F and the IFOs.
    chex.assert_trees_all_equal(
        (chained.params, chained.epoch_loss, chained.epoch_ifo, chained.history),
        (bare.params, bare.epoch_loss, bare.epoch_ifo, bare.history))
    # F includes h: it is f + mu ||X||_1 at the final point.
    f = jnp.mean(jax.vmap(problems.spca_loss, (None, 0))(bare.params, data))
    np.testing.assert_allclose(bare.epoch_loss[-1], f + 0.3 * jnp.sum(jnp.abs(bare.params)),
                               rtol=1e-12)
    assert float(bare.history.feasibility[-1]) < 1e-12


@pytest.fixture
def compilations():
    """The XLA compilations (backend compile events) during a test, as a list."""
    events = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield events
    jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.parametrize("name", ["r_prox_sgd", "r_prox_spb", "r_subgrad", "manpg"])
def test_second_fit_with_new_hyperparameters_compiles_nothing(name, data, compilations):
    events = compilations
    rproxjax._run.compile.clear_cache()  # earlier tests may have compiled this very program
    first = _fit(OPTIMIZERS[name](0.3, 0.5), data, name=name)
    assert len(events) > 0  # the first call compiles (the listener works)
    new_data = jax.block_until_ready(data * 1.01)
    events.clear()
    second = _fit(OPTIMIZERS[name](0.1, 0.7), new_data, name=name)  # new mu, eta, data
    assert len(events) == 0, f"{len(events)} compilations on the second call"
    assert not np.array_equal(second.params, first.params)
    # ... and the cached program computes the new values: same as a fresh trace.
    rproxjax._run.compile.clear_cache()
    fresh = _fit(OPTIMIZERS[name](0.1, 0.7), new_data, name=name)
    np.testing.assert_array_equal(second.params, fresh.params)
    np.testing.assert_array_equal(second.epoch_loss, fresh.epoch_loss)


def test_a_changed_structure_compiles_again(data, compilations):
    events = compilations
    rproxjax._run.compile.clear_cache()
    _fit(OPTIMIZERS["r_prox_sgd"](0.3, 0.5), data)
    events.clear()
    _fit(rproxjax.r_prox_sgd(0.5, 0.2, rproxjax.l1(0.3), retraction="qr"), data)
    assert len(events) > 0  # another retraction is another program


def test_step_info_and_needs_are_found_through_chains():
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      rproxjax.r_prox_spb(0.1, 0.1, rproxjax.l1(0.1), q=5))
    state = opt.init(X0)
    info = rproxjax.step_info(state)
    assert isinstance(info, rproxjax.StepInfo)
    # The record's arrays: scalars, and the Stiefel block's subproblem record (a multiplier
    # r x r, the warm start's subgradient d x r), in the params' dtype.
    chex.assert_shape([info.zeta_norm, info.halted, info.ssn.lam, info.ssn.subgradient],
                      [(), (), (R, R), (D, R)])
    chex.assert_type([info.zeta_norm, info.halted, info.ssn.status, info.ssn.lam],
                     [jnp.float64, jnp.bool_, jnp.int32, jnp.float64])
    assert optax.tree_utils.tree_get(state, "info") is info
    needs = rproxjax._contract.find_needs(jax.eval_shape(opt.init, X0))
    assert needs == rproxjax.Needs(refresh_every=5, grad_fn=True, grad_fn_point="prev_params",
                                   lands=True)  # the retraction lands on the manifold
    assert rproxjax._contract.find_needs(rproxjax.manpg(0.1, None, tol=1e-6).init(X0)) == \
        rproxjax.Needs(value_fn=True, full_batch=True, lands=True)
    assert not rproxjax._contract.find_needs(rproxjax.proximal_step(0.1).init(X0)).lands
    assert rproxjax.step_info(optax.sgd(0.1).init(X0)) is None
    with pytest.raises(ValueError, match="different refresh periods"):
        rproxjax._contract.find_needs(
            optax.chain(rproxjax.sarah_estimator(3), rproxjax.svrg_estimator(4)).init(X0))


def test_transforms_compose_into_the_named_optimizers(data):
    """r_prox_spb is chain(sarah_estimator, proximal_step, retract): built by hand, same run."""
    reg = rproxjax.l1(0.2)
    ssn = rproxjax.SSN(rtol=rproxjax.SSN_RTOL, rule="adaptive")
    by_hand = optax.chain(rproxjax.sarah_estimator(4), rproxjax.proximal_step(0.2, reg, ssn=ssn),
                          rproxjax.retract(0.5))
    a = _fit(by_hand, data)
    b = _fit(rproxjax.r_prox_spb(0.5, 0.2, reg, q=4), data)
    chex.assert_trees_all_equal((a.params, a.epoch_loss, a.epoch_ifo, a.history),
                                (b.params, b.epoch_loss, b.epoch_ifo, b.history))


def test_a_retraction_given_to_a_direction_is_not_silently_unused():
    """proximal_step and subgradient_direction never retract: the chain's retract does. A
    retraction given to them would be ignored, so it is deprecated with a warning that
    names where it belongs; without it nothing warns."""
    reg = rproxjax.l1(0.1)
    with pytest.warns(DeprecationWarning, match=r"retract\(eta, retraction='exp'\)"):
        rproxjax.proximal_step(0.2, reg, retraction="exp")
    with pytest.warns(DeprecationWarning, match="has no effect"):
        rproxjax.subgradient_direction(reg, retraction="qr")
    with pytest.raises(ValueError, match="unknown retraction"), pytest.warns(DeprecationWarning):
        rproxjax.proximal_step(0.2, reg, retraction="nope")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rproxjax.proximal_step(0.2, reg)
        rproxjax.subgradient_direction(reg)
        rproxjax.r_prox_sgd(0.5, 0.2, reg, retraction="exp")  # the named ones retract
        rproxjax.r_subgrad(0.5, reg, retraction="qr")


def test_full_batch_method_refuses_minibatches(data):
    with pytest.raises(ValueError, match="full-batch method"):
        rproxjax.fit(rproxjax.manpg(0.1, rproxjax.l1(0.1), tol=1e-6), problems.spca_loss, X0,
                     data, key=jax.random.key(0), batch_size=20, num_epochs=1)


def test_blocks_are_typed_pytrees():
    blocks = {"u": rproxjax.Grassmann(), "x": rproxjax.Stiefel(rproxjax.l1(0.2)),
              "s": rproxjax.Euclidean(rproxjax.l1(0.1), step_scale=2.0)}
    leaves = jax.tree.leaves(blocks, is_leaf=rproxjax._blocks.is_block)
    assert {type(b).__name__ for b in leaves} == {"Grassmann", "Stiefel", "Euclidean"}
    assert all(isinstance(b, rproxjax.Block) for b in leaves)
    # Regularizer strengths and step scales are children: traced and vmapped, not static.
    doubled = jax.tree.map(lambda a: 2 * a, blocks)
    assert float(doubled["x"].reg.mu) == pytest.approx(0.4)
    assert float(doubled["s"].step_scale) == 4.0
    assert doubled["u"].retraction == "polar"
    x = stiefel.random_point(jax.random.key(3), 6, 2)
    v = jax.random.normal(jax.random.key(4), (6, 2))
    for block in (rproxjax.Stiefel(), rproxjax.Grassmann()):
        z = block.project(x, v)
        np.testing.assert_allclose(x.T @ z + z.T @ x, 0.0, atol=1e-12)
        assert float(block.feasibility(block.retract(x, z))) < 1e-12
    chex.assert_trees_all_equal(rproxjax.Euclidean().project(x, v), v)


def test_compile_once_compiles_ahead_of_the_timed_calls(compilations):
    """fit times its epochs: all compilation happens when the program is prepared."""
    from rproxjax._run.compile import clear_cache, compile_once

    clear_cache()
    scale = jnp.asarray(3.0)
    call = compile_once(lambda x, k: (x * scale + k, jnp.sum(x)), jnp.ones(4), 1.0)
    assert len(compilations) > 0
    x = jax.block_until_ready(jnp.arange(4.0))
    compilations.clear()
    out, total = call(x, 2.0)
    assert len(compilations) == 0
    np.testing.assert_array_equal(out, 3.0 * np.arange(4.0) + 2.0)
    assert float(total) == 6.0


_BLOCKS = {
    "Stiefel, l1 (Newton solve)": (lambda: rproxjax.Stiefel(rproxjax.l1(0.1)), lambda: X0),
    "Stiefel, h = 0 (closed form)": (lambda: rproxjax.Stiefel(None), lambda: X0),
    "Grassmann (closed form)": (lambda: rproxjax.Grassmann(), lambda: X0),
    "Euclidean, l1 (closed form)": (lambda: rproxjax.Euclidean(rproxjax.l1(0.1)),
                                    lambda: jnp.linspace(-1.0, 1.0, D)),
}


@pytest.mark.parametrize("bad", ["nan", "inf", "huge"])
@pytest.mark.parametrize("kind", sorted(_BLOCKS))
def test_a_non_finite_proximal_step_halts_on_every_block(kind, bad):
    """A gradient with a NaN or an infinity halts the step (zero update) on every block; a
    finite gradient so large that its step overflows halts it too, or gives a finite step."""
    make_block, make_params = _BLOCKS[kind]
    params = make_params()
    step = rproxjax.proximal_step(0.1, blocks=make_block())
    value = {"nan": jnp.nan, "inf": jnp.inf, "huge": 1e307}[bad]
    g = jnp.ones_like(params).at[(0,) * params.ndim].set(value)
    if bad == "huge":
        g = g * 1e307
    updates, state = jax.jit(step.update)(g, step.init(params), params)
    info = rproxjax.step_info(state)
    finite = bool(jnp.all(jnp.isfinite(updates)))
    chex.assert_trees_all_equal_shapes_and_dtypes(updates, params)
    assert finite  # never a non-finite update
    if bad != "huge":
        assert bool(info.halted) and not bool(jnp.any(updates != 0))
    else:
        assert bool(info.halted) or bool(jnp.isfinite(info.zeta_norm))
    ok_updates, ok_state = jax.jit(step.update)(jnp.ones_like(params), step.init(params), params)
    assert not bool(rproxjax.step_info(ok_state).halted)
    assert bool(jnp.any(ok_updates != 0))
