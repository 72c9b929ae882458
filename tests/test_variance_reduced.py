"""R-ProxSVRG and R-ProxSARAH: Euclidean reductions, estimator formulas, runs on the manifold."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import stiefel

# -- Euclidean reductions: with Gamma = I and Retr = +, the methods are ProxSVRG and ProxSARAH.

N, P = 30, 5
_A = np.asarray(jax.random.normal(jax.random.key(0), (N, P)))
_B = np.asarray(jax.random.normal(jax.random.key(1), (N,)))
MU, GAMMA = 0.05, 0.3


def _grad(w, idx):
    """Gradient of the mean of 0.5 (a_i^T w - b_i)^2 over the samples ``idx``."""
    a, b = _A[idx], _B[idx]
    return a.T @ (a @ w - b) / len(idx)


def _soft(v, thr):
    return np.sign(v) * np.maximum(np.abs(v) - thr, 0.0)


def _batches(steps, rng):
    return [rng.choice(N, 6, replace=False) for _ in range(steps)]


def _drive(opt, w0, batches, period):
    """Runs ``opt`` with refreshes (full gradients) every ``period`` steps."""
    w, state, out = jnp.asarray(w0), opt.init(jnp.asarray(w0)), []
    for t, idx in enumerate(batches):
        refresh = t % period == 0
        g = _grad(np.asarray(w), np.arange(N) if refresh else idx)
        updates, state = opt.update(
            jnp.asarray(g), state, w, refresh=refresh,
            grad_fn=lambda p, idx=idx: jnp.asarray(_grad(np.asarray(p), idx)))
        w = optax.apply_updates(w, updates)
        out.append(np.asarray(w))
    return out


def test_r_prox_svrg_is_prox_svrg_in_euclidean_space():
    batches = _batches(9, np.random.default_rng(0))
    w0 = np.zeros(P)
    opt = rproxjax.r_prox_svrg(1.0, GAMMA, blocks=rproxjax.Euclidean(rproxjax.l1(MU)), m=4)
    got = _drive(opt, w0, batches, 4)
    w, snap, mu_snap = w0.copy(), None, None
    for t, idx in enumerate(batches):
        if t % 4 == 0:
            snap, mu_snap = w.copy(), _grad(w, np.arange(N))
            v = mu_snap
        else:
            v = _grad(w, idx) - (_grad(snap, idx) - mu_snap)
        w = _soft(w - GAMMA * v, GAMMA * MU)  # ProxSVRG (Reddi et al. 2016), step 1
        np.testing.assert_allclose(got[t], w, atol=1e-12)


def test_r_prox_sarah_is_prox_sarah_in_euclidean_space():
    batches = _batches(9, np.random.default_rng(1))
    w0 = np.ones(P) * 0.1
    alpha = 0.6
    opt = rproxjax.r_prox_sarah(GAMMA, alpha, blocks=rproxjax.Euclidean(rproxjax.l1(MU)), q=3)
    got = _drive(opt, w0, batches, 3)
    w, w_prev, v = w0.copy(), None, None
    for t, idx in enumerate(batches):
        if t % 3 == 0:
            v = _grad(w, np.arange(N))
        else:
            v = _grad(w, idx) - _grad(w_prev, idx) + v
        w_hat = _soft(w - GAMMA * v, GAMMA * MU)  # ProxSARAH (Pham et al. 2020)
        w_prev, w = w, (1 - alpha) * w + alpha * w_hat
        np.testing.assert_allclose(got[t], w, atol=1e-12)


def test_r_prox_sarah_checks_its_averaging_weight():
    with pytest.raises(ValueError, match="averaging weight"):
        rproxjax.r_prox_sarah(0.1, 1.5, rproxjax.l1(0.1), q=3)
    with pytest.raises(ValueError, match="m must be a Python int"):
        rproxjax.r_prox_svrg(0.1, 0.1, rproxjax.l1(0.1), m=0)


# -- On the Stiefel manifold.

def test_svrg_estimator_matches_its_formula_on_the_manifold():
    d, r = 9, 2
    x0 = stiefel.random_point(jax.random.key(0), d, r)
    m_full = jax.random.normal(jax.random.key(1), (d, d))
    m_batch = jax.random.normal(jax.random.key(2), (d, d))
    opt = rproxjax.r_prox_svrg(0.3, 0.2, None, m=3)
    state = opt.init(x0)
    u, state = opt.update(m_full @ x0, state, x0)  # count 0: refresh, snapshot X0
    x1 = optax.apply_updates(x0, u)
    u, state = opt.update(m_batch @ x1, state, x1, grad_fn=lambda p: m_batch @ p)
    x2 = optax.apply_updates(x1, u)
    expected = m_batch @ x1 - stiefel.project(x1, m_batch @ x0 - m_full @ x0)
    np.testing.assert_allclose(optax.tree_utils.tree_get(state, "v"), expected, atol=1e-13)
    np.testing.assert_allclose(  # h = 0: the Riemannian gradient step with the estimate
        x2, stiefel.retract(x1, -0.3 * 0.2 * stiefel.project(x1, expected)), atol=1e-13)
    # The snapshot stays X0 until the next refresh.
    np.testing.assert_array_equal(optax.tree_utils.tree_get(state, "snapshot"), x0)


@pytest.mark.parametrize("name", ["r_prox_svrg", "r_prox_sarah"])
def test_converges_on_planted_sparse_pca_and_stays_feasible(name, planted):
    data, x0, w = planted
    reg = rproxjax.l1(3.0)
    if name == "r_prox_svrg":
        opt = rproxjax.r_prox_svrg(1.0, 0.01, reg, m=20)
    else:
        opt = rproxjax.r_prox_sarah(0.02, 0.5, reg, q=20)
    res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, data, key=jax.random.key(1),
                       batch_size=20, num_epochs=2,
                       recording=rproxjax.Recording(variance=True))
    # IFO accounting: blocks of one full gradient (n) and q - 1 steps of 2 b.
    blocks_per_epoch = (1200 // 20) // 19
    np.testing.assert_array_equal(res.epoch_ifo,
                                  blocks_per_epoch * (1200 + 19 * 40) * np.arange(3))
    assert float(jnp.max(res.history.feasibility)) < 1e-12
    np.testing.assert_array_equal(np.abs(np.asarray(res.params)) > 1e-5, np.abs(w) > 0)
    assert float(res.epoch_loss[-1]) < float(res.epoch_loss[0])
    # The estimate is the full gradient at refreshes (and only there).
    var, refresh = np.asarray(res.history.variance), np.asarray(res.history.refresh)
    assert np.all(var[refresh] < 1e-20) and np.all(var[~refresh] > 1e-12)


# -- fit evaluates the estimators' second minibatch gradient with the first (one vmapped call).

_DATA = jax.random.normal(jax.random.key(3), (64, 8)) @ jnp.diag(jnp.linspace(2.0, 0.5, 8))


def _no_batching_rule(x):
    """0, through a callback that has no ``jax.vmap`` rule (pure_callback without a
    vmap_method): a loss holding it cannot be vmapped over X, and the runner then declines
    the paired gradients (the estimator calls grad_fn)."""
    zero = jax.ShapeDtypeStruct((), x.dtype)
    return jax.pure_callback(lambda a: np.zeros((), a.dtype), zero, jax.lax.stop_gradient(x))


def _fused_and_plain(make_opt):
    """(params, loss traces) of a fit with the pair of gradients vmapped, and of one where
    the runner declines it (the estimator then calls grad_fn)."""
    x0 = stiefel.random_point(jax.random.key(4), 8, 2, jnp.float64)
    out = []
    for fused in (True, False):
        traces = []

        def loss(x, a, traces=traces, fused=fused):
            traces.append(1)
            value = -0.5 * jnp.sum((a @ x) ** 2)
            return value if fused else value + _no_batching_rule(x)

        res = rproxjax.fit(make_opt(), loss, x0, _DATA, key=jax.random.key(5), batch_size=8,
                           num_epochs=2)
        out.append((res.params, len(traces)))
    return out


@pytest.mark.parametrize("name", ["r_prox_spb", "r_prox_svrg", "r_prox_sarah"])
def test_fit_evaluates_the_second_gradient_with_the_first(name):
    make = {"r_prox_spb": lambda: rproxjax.r_prox_spb(0.2, 0.5, rproxjax.l1(0.05), q=4),
            "r_prox_svrg": lambda: rproxjax.r_prox_svrg(0.2, 0.5, rproxjax.l1(0.05), m=4),
            "r_prox_sarah": lambda: rproxjax.r_prox_sarah(0.5, 0.5, rproxjax.l1(0.05), q=4)}
    (x_fused, traces_fused), (x_plain, traces_plain) = _fused_and_plain(make[name])
    # The same iterates (the vmapped products may round differently), with the loss traced
    # fewer times: the inner steps' second gradient is no separate call.
    np.testing.assert_allclose(x_fused, x_plain, rtol=0, atol=1e-12)
    assert traces_fused < traces_plain
    assert rproxjax.stiefel.feasibility(x_fused) < 1e-12


def test_estimators_use_the_given_gradient_at_their_point():
    x0 = stiefel.random_point(jax.random.key(6), 8, 2, jnp.float64)
    x1 = stiefel.retract(x0, 0.1 * stiefel.project(x0, jnp.ones((8, 2))))
    g = jnp.full((8, 2), 0.3)
    grad_fn = lambda p: 2.0 * p  # noqa: E731
    for est in (rproxjax.sarah_estimator(3), rproxjax.svrg_estimator(3)):
        state = est.init(x0)
        _, state = est.update(g, state, x0, refresh=True)
        point = state.prev_params if hasattr(state, "prev_params") else state.snapshot
        by_fn, _ = est.update(g, state, x1, grad_fn=grad_fn, refresh=False)
        given, _ = est.update(g, state, x1, grad_fn_value=grad_fn(point), refresh=False)
        np.testing.assert_array_equal(by_fn, given)
        with pytest.raises(ValueError, match="grad_fn"):
            est.update(g, state, x1, refresh=False)


def test_needs_keep_one_declared_point():
    a = rproxjax.Needs(refresh_every=3, grad_fn=True, grad_fn_point="prev_params")
    assert a.merge(rproxjax.Needs()).grad_fn_point == "prev_params"
    assert a.merge(a).grad_fn_point == "prev_params"
    b = rproxjax.Needs(refresh_every=3, grad_fn=True, grad_fn_point="snapshot")
    undeclared = rproxjax.Needs(grad_fn=True)
    conflict = rproxjax._contract.CONFLICTING_POINTS
    assert a.merge(b).grad_fn_point == conflict and a.merge(b).paired_point is None
    assert a.merge(undeclared).grad_fn_point == conflict
    assert undeclared.merge(undeclared).grad_fn_point is None
    # A conflict absorbs later merges: the result does not depend on the order.
    for order in ((a, b, a), (b, a, a), (a, a, b), (undeclared, a, a)):
        merged = rproxjax.Needs()
        for n in order:
            merged = merged.merge(n)
        assert merged.grad_fn_point == conflict and merged.paired_point is None
    assert a.paired_point == "prev_params"


@jax.custom_vjp
def _host_loss(x, batch):
    """-||batch x||^2 / (2 |batch|) evaluated on the host (no batching rule over x)."""
    out = jax.ShapeDtypeStruct((), x.dtype)
    return jax.pure_callback(lambda x, a: np.asarray(-0.5 * np.sum((a @ x) ** 2) / len(a),
                                                     x.dtype), out, x, batch)


def _host_loss_fwd(x, batch):
    return _host_loss(x, batch), (x, batch)


def _host_loss_bwd(res, ct):
    x, batch = res
    grad = jax.pure_callback(lambda x, a: np.asarray(-(a.T @ (a @ x)) / len(a), x.dtype),
                             jax.ShapeDtypeStruct(x.shape, x.dtype), x, batch)
    return ct * grad, jnp.zeros_like(batch)


_host_loss.defvjp(_host_loss_fwd, _host_loss_bwd)


def test_a_loss_without_a_batching_rule_gets_two_gradient_calls():
    x0 = stiefel.random_point(jax.random.key(4), 8, 2, jnp.float64)
    opt = lambda: rproxjax.r_prox_spb(0.2, 0.5, rproxjax.l1(0.05), q=4)  # noqa: E731
    with pytest.raises(NotImplementedError):  # the pair of points cannot be vmapped
        jax.vmap(_host_loss, in_axes=(0, None))(jnp.stack([x0, x0]), _DATA[:8])
    host = rproxjax.fit(opt(), _host_loss, x0, _DATA, key=jax.random.key(5), batch_size=8,
                        num_epochs=2, batched_loss=True)
    traced = rproxjax.fit(opt(), lambda x, a: -0.5 * jnp.sum((a @ x) ** 2) / len(a), x0,
                          _DATA, key=jax.random.key(5), batch_size=8, num_epochs=2,
                          batched_loss=True)
    np.testing.assert_allclose(host.params, traced.params, rtol=0, atol=1e-12)
