"""No silent drift from compositions (issue 33, item 4): a chain that would move X off
its manifold is an error when the run starts, or a halted run, never a wrongly placed point.

* statically: an ``optax.chain`` with a link after the rproxjax step (the retraction, or
  ManPG) is a ValueError in ``fit`` and ``pure_fit`` (nested chains included);
* at run time: a step whose point has ||X^T X - I||_F above ``FEASIBILITY_TOL`` (1e-3
  float32, 1e-6 float64) is refused, X kept, and ``history.halted`` set from that step on
  (``throw=True`` raises), in ``fit`` and ``pure_fit`` under ``jit`` alike;
* no false alarm: the named optimizers, their documented chains, preprocessing chained
  before them, a tangent step scaled before the retraction, ``optax.inject_hyperparams``
  and RMC's Grassmann/Euclidean blocks run with feasibility far below the tolerance.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import problems, stiefel
from rproxjax._run.program import FEASIBILITY_TOL, feasibility_tolerance
from tests.test_settings import _chains

DTYPES = [pytest.param(jnp.float32, id="float32"), pytest.param(jnp.float64, id="float64")]
L1 = rproxjax.l1(0.1)


def _problem(dtype, n=128, d=16, r=3):
    z = jax.random.normal(jax.random.key(0), (n, d), dtype) * jnp.linspace(2.0, 0.5, d,
                                                                           dtype=dtype)
    return z, stiefel.random_point(jax.random.key(1), d, r, dtype)


def _fit(opt, z, x0, **kwargs):
    kwargs = {"key": jax.random.key(2), "batch_size": 16, "num_epochs": 2, **kwargs}
    return rproxjax.fit(opt, problems.spca_loss, x0, z, **kwargs)


def _pure_fit(opt, z, x0, **kwargs):
    kwargs = {"key": jax.random.key(2), "batch_size": 16, "num_epochs": 2, **kwargs}
    return jax.jit(lambda z: rproxjax.pure_fit(opt, problems.spca_loss, x0, z, **kwargs))(z)


def _halved(opt):
    """``opt`` with its updates halved: a wrapper (not an ``optax.chain``), which the static
    check does not look into."""
    def update(updates, state, params=None, **extra):
        updates, state = opt.update(updates, state, params, **extra)
        return jax.tree.map(lambda u: 0.5 * u, updates), state

    return optax.GradientTransformationExtraArgs(opt.init, update)


class _DriftState(NamedTuple):
    count: Any
    inner: Any


def _drifting(opt, rate):
    """``opt`` whose t-th update also adds ``rate * t * X``: the point drifts off the
    manifold by about 2 rate t sqrt(r), more at each step."""
    def init(params):
        return _DriftState(jnp.zeros((), jnp.int32), opt.init(params))

    def update(updates, state, params=None, **extra):
        updates, inner = opt.update(updates, state.inner, params, **extra)
        c = (rate * state.count).astype(params.dtype)
        return updates + c * params, _DriftState(state.count + 1, inner)

    return optax.GradientTransformationExtraArgs(init, update)


def test_the_tolerances():
    assert FEASIBILITY_TOL == {"float32": 1e-3, "float64": 1e-6}
    assert feasibility_tolerance(jnp.float32) == 1e-3
    assert feasibility_tolerance(np.dtype("float64")) == 1e-6


# ----------------------------------------------------------- refused when the run starts


def _after_the_step():
    sgd = rproxjax.r_prox_sgd(0.1, 0.5, L1)
    return {
        "scale": optax.chain(sgd, optax.scale(0.5)),
        "nested": optax.chain(optax.clip_by_global_norm(1.0),
                              optax.chain(rproxjax.r_prox_sgd(0.1, 0.5, L1), optax.scale(0.5))),
        "pieces": optax.chain(rproxjax.proximal_step(0.5, L1), rproxjax.retract(0.1),
                              optax.scale(0.5)),
        "decay": optax.chain(rproxjax.r_prox_spb(0.1, 0.5, L1, q=4),
                             optax.add_decayed_weights(1e-3)),
        "manpg": optax.chain(rproxjax.manpg(0.5, L1, tol=1e-8), optax.scale(0.5)),
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_issue_chain_is_an_error_at_start(dtype):
    """The issue's chain (R-ProxSGD, then optax.scale(0.5)) ran 4 epochs to ||X^T X - I||_F
    = 3.6e-3 (float64), 6.4e-3 after 20 steps (float32), unflagged."""
    z, x0 = _problem(dtype)
    opt = _after_the_step()["scale"]
    with pytest.raises(ValueError, match="a transformation after the rproxjax step moves X "
                                         "off the manifold; put gradient preprocessing"):
        _fit(opt, z, x0)
    with pytest.raises(ValueError, match="after the rproxjax step"):
        _pure_fit(opt, z, x0)


@pytest.mark.parametrize("name", ["nested", "pieces", "decay", "manpg"])
def test_other_links_after_the_step_are_errors_at_start(name):
    z, x0 = _problem(jnp.float64)
    kwargs = {"batch_size": z.shape[0]} if name == "manpg" else {}
    with pytest.raises(ValueError, match="after the rproxjax step"):
        _fit(_after_the_step()[name], z, x0, **kwargs)


# -------------------------------------------------------------- halted at run time


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_step_off_the_manifold_is_refused_and_halts(dtype):
    """The issue's composition hidden in a wrapper: its first point is 4.6e-3 (float32) or
    7.0e-3 (float64) off; the step is refused, X0 kept, the run halted from step 0."""
    z, x0 = _problem(dtype)
    tol = feasibility_tolerance(dtype)
    opt = _halved(rproxjax.r_prox_sgd(0.1, 0.5, L1))
    res = _fit(opt, z, x0)
    feas = np.asarray(res.history.feasibility)
    assert feas[0] > 3 * tol  # the point refused
    assert np.asarray(res.history.halted).all()
    np.testing.assert_array_equal(res.params, x0)  # kept
    assert float(stiefel.feasibility(res.params)) <= tol
    assert bool(rproxjax.step_info(res.opt_state).halted)  # sticky: a resumed run stays halted
    with pytest.raises(RuntimeError, match="left the manifold") as err:
        _fit(opt, z, x0, throw=True)
    np.testing.assert_array_equal(err.value.result.params, x0)
    pure = _pure_fit(opt, z, x0)  # the same flag and point under jit
    np.testing.assert_array_equal(pure.history.halted, res.history.halted)
    np.testing.assert_array_equal(pure.params, res.params)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_guard_halts_where_the_drift_crosses_the_tolerance(dtype):
    """A drift that grows each step: the steps below the tolerance are taken, the first
    above it is refused, and the run ends at the last point taken (full-batch steps, so a
    run stopped there takes the same ones)."""
    z, x0 = _problem(dtype, n=64)
    tol = feasibility_tolerance(dtype)
    opt = _drifting(rproxjax.r_prox_sgd(0.5, 0.02, L1), tol / 40)
    kwargs = {"batch_size": 64, "num_epochs": 30}
    res = _fit(opt, z, x0, **kwargs)
    halted = np.asarray(res.history.halted)
    feas = np.asarray(res.history.feasibility)
    k = int(np.argmax(halted))
    assert 3 <= k < 25 and halted[k:].all() and not halted[:k].any()
    assert (feas[:k] <= tol).all() and feas[k] > tol
    stopped = _fit(opt, z, x0, **{**kwargs, "num_epochs": k})
    np.testing.assert_array_equal(res.params, stopped.params)
    assert float(stiefel.feasibility(res.params)) <= tol
    pure = _pure_fit(opt, z, x0, **kwargs)
    np.testing.assert_array_equal(pure.history.halted, res.history.halted)
    # fit's CPU program (XLA's loop emitters) equals a plain jax.jit up to rounding
    # (docs/contract.md), here over the k steps taken.
    rtol = 1e-12 if dtype == jnp.float64 else 2e-5
    np.testing.assert_allclose(pure.params, res.params, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_start_check_uses_the_same_tolerance(dtype):
    z, x0 = _problem(dtype)
    tol = feasibility_tolerance(dtype)
    opt = rproxjax.r_prox_sgd(0.1, 0.5, L1)
    r = x0.shape[1]
    # ||(1 + s)^2 I - I||_F = (2 s + s^2) sqrt(r): just above and just below the tolerance
    above = x0 * (1 + 1.5 * tol / (2 * float(np.sqrt(r))))
    below = x0 * (1 + 0.5 * tol / (2 * float(np.sqrt(r))))
    assert above.dtype == below.dtype == dtype
    assert float(stiefel.feasibility(above)) > tol > float(stiefel.feasibility(below))
    with pytest.raises(ValueError, match="not on the"):
        _fit(opt, z, above)
    res = _fit(opt, z, below)
    assert not np.asarray(res.history.halted).any()


# ------------------------------------------------------------------- no false alarm


def _check_clean(res, dtype, margin=30):
    feas = np.asarray(res.history.feasibility)
    assert not np.asarray(res.history.halted).any()
    assert feas.max() < feasibility_tolerance(dtype) / margin, feas.max()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(_chains()))
def test_named_optimizers_and_their_documented_chains_are_never_flagged(name, dtype):
    z, x0 = _problem(dtype)
    alias, chain = _chains()[name]
    for opt in (alias, chain):
        res = _fit(opt, z, x0, num_epochs=1, num_steps=None,
                   sampling=rproxjax.Sampling(steps_per_epoch=8))
        _check_clean(res, dtype)
        assert float(jnp.max(jnp.abs(res.params - x0))) > 1e-3  # the run moved


@pytest.mark.parametrize("dtype", DTYPES)
def test_manpg_and_allowed_compositions_are_never_flagged(dtype):
    z, x0 = _problem(dtype)
    eta, gamma = 0.5, 0.2
    inject = optax.inject_hyperparams(
        lambda learning_rate, gamma: rproxjax.r_prox_sgd(learning_rate, gamma, L1))
    for opt, kwargs in [
        (rproxjax.manpg(gamma, L1, tol=1e-10), {"batch_size": z.shape[0], "num_epochs": 5}),
        (rproxjax.manpg(gamma, L1, tol=1e-10, adaptive=True),
         {"batch_size": z.shape[0], "num_epochs": 5}),
        (optax.chain(optax.clip_by_global_norm(10.0), rproxjax.r_prox_sgd(eta, gamma, L1)), {}),
        (optax.chain(rproxjax.proximal_step(gamma, L1), optax.scale(0.5),
                     rproxjax.retract(eta)), {}),  # the tangent step scaled: allowed
        (inject(learning_rate=eta, gamma=gamma), {}),
    ]:
        _check_clean(_fit(opt, z, x0, **kwargs), dtype)


def test_a_long_float32_run_is_never_flagged():
    """2,000 steps of R-ProxSGD (polar and Cayley retractions) and R-ProxSPB in float32 on
    St(64, 8): the largest feasibility stays below tol / 30 (measured: 3e-6 to 6e-6)."""
    dtype = jnp.float32
    z, x0 = _problem(dtype, n=2000, d=64, r=8)
    for opt in (rproxjax.r_prox_sgd(0.5, 0.01, rproxjax.l1(0.05)),
                rproxjax.r_prox_sgd(0.5, 0.01, rproxjax.l1(0.05), retraction="cayley"),
                rproxjax.r_prox_spb(0.5, 0.01, rproxjax.l1(0.05), q=10)):
        res = _pure_fit(opt, z, x0, batch_size=4, num_epochs=4)
        assert res.history.halted.shape[0] >= 2000
        _check_clean(res, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmc_blocks_are_never_flagged(dtype):
    """Robust matrix completion's blocks: U on a Grassmann manifold, S Euclidean (l1)."""
    rng = np.random.default_rng(0)
    m, n, r = 60, 20, 3
    matrix = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    mask = rng.random((m, n)) < 0.5
    prob = problems.rmc_problem(matrix.astype(dtype), mask, lam=1e-3)
    prob = jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating)
                        else a, prob)
    nnz = int(prob.values.shape[0])
    u0 = jnp.asarray(np.linalg.qr(rng.standard_normal((m, r)))[0], dtype)
    blocks = {"U": rproxjax.Grassmann(),
              "S": rproxjax.Euclidean(rproxjax.l1(0.03), step_scale=nnz)}
    params = {"U": u0, "S": jnp.zeros(nnz, dtype)}
    for opt in (rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 1.0 / nnz,
                                    blocks=blocks),
                rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(1.0 / nnz), blocks=blocks),
                rproxjax.r_prox_spb(0.5, 1.0 / nnz, blocks=blocks, q=5)):
        res = rproxjax.fit(opt, lambda p, b: problems.rmc_batch_loss(p, b, prob), params,
                           jnp.arange(nnz), key=jax.random.key(1), batch_size=nnz // 10,
                           num_epochs=3, batched_loss=True,
                           sampling=rproxjax.Sampling(chunk_size=nnz))
        _check_clean(res, dtype)
        assert float(jnp.max(jnp.abs(res.params["U"] - u0))) > 1e-3
