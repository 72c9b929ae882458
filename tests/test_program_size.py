"""Compiled programs hold each part once: compile time follows program size.

Two structural contracts, counted rather than timed:

* a solve whose ``rtol`` is concrete holds only the Newton steps of its kind (loose for
  ``rtol > 0``, tight for ``rtol = 0``), with the same result as the program that holds
  both and chooses at run time (``rtol`` traced);
* a variance-reduced block traces its optimizer's update once (the refresh chosen by
  ``lax.cond`` on the step index), with the iterates of the refresh-then-minibatches
  order.
"""

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import problems, stiefel

D, R = 30, 4


def _equations(jaxpr) -> int:
    """Equations of a closed jaxpr, those of every sub-jaxpr (cond branches, loop
    bodies, nested calls) included."""
    count = 0
    for eqn in jaxpr.eqns:
        count += 1
        for param in eqn.params.values():
            subs = param if isinstance(param, (tuple, list)) else (param,)
            for sub in subs:
                if isinstance(sub, jex.ClosedJaxpr):
                    count += _equations(sub.jaxpr)
                elif isinstance(sub, jex.Jaxpr):
                    count += _equations(sub)
    return count


def _subproblem(dtype):
    x = stiefel.random_point(jax.random.key(0), D, R, dtype)
    g = jax.random.normal(jax.random.key(1), (D, R), dtype)
    return x, g


@pytest.mark.parametrize("preset, dtype", [("stochastic", jnp.float32),
                                           ("exact", jnp.float64)])
def test_a_concrete_rtol_traces_one_kind_of_newton_step(preset, dtype):
    """The tight float64 steps include path steps, which a loose solve never takes."""
    x, g = _subproblem(dtype)
    ssn = getattr(rproxjax.SSN, preset)()
    reg = rproxjax.l1(0.3)
    small = _equations(jax.make_jaxpr(
        lambda x, g: rproxjax.tangent_prox(x, g, 0.7, reg, ssn=ssn))(x, g).jaxpr)
    both = _equations(jax.make_jaxpr(
        lambda x, g, rtol: rproxjax.tangent_prox(x, g, 0.7, reg, ssn=ssn.replace(rtol=rtol)))(
            x, g, jnp.asarray(ssn.rtol, dtype)).jaxpr)
    assert small < 0.8 * both, (small, both)


def test_the_step_chosen_at_trace_time_is_the_one_chosen_at_run_time():
    """A loose solve with a concrete rtol equals the one with rtol traced (both kinds of
    step compiled, the loose one chosen at run time), bit for bit."""
    x, g = _subproblem(jnp.float32)
    ssn = rproxjax.SSN.stochastic()
    reg = rproxjax.l1(0.3)
    zeta_s, info_s = jax.jit(lambda x, g: rproxjax.tangent_prox(x, g, 0.7, reg, ssn=ssn))(x, g)
    zeta_t, info_t = jax.jit(lambda x, g, rtol: rproxjax.tangent_prox(
        x, g, 0.7, reg, ssn=ssn.replace(rtol=rtol)))(x, g, jnp.float32(ssn.rtol))
    assert bool(info_s.converged) and int(info_s.num_steps) >= 1
    np.testing.assert_array_equal(zeta_s, zeta_t)
    np.testing.assert_array_equal(info_s.num_steps, info_t.num_steps)
    np.testing.assert_array_equal(info_s.lam, info_t.lam)


def test_a_traced_rtol_still_chooses_per_lane():
    """vmapped over rtol = (0, 0.1): each lane takes its own kind of step, as separate
    calls with concrete values do."""
    x, g = _subproblem(jnp.float32)
    reg = rproxjax.l1(0.3)
    ssn = rproxjax.SSN.stochastic()
    lanes = jax.vmap(lambda r: rproxjax.tangent_prox(x, g, 0.7, reg, ssn=ssn.replace(rtol=r)))(
        jnp.array([0.0, 0.1]))
    for i, rtol in enumerate((0.0, 0.1)):
        zeta, info = rproxjax.tangent_prox(x, g, 0.7, reg, ssn=ssn.replace(rtol=rtol))
        np.testing.assert_allclose(lanes[0][i], zeta, rtol=0, atol=1e-6)
        assert int(lanes[1].num_steps[i]) == int(info.num_steps)


def _counting(opt):
    """``opt`` with a Python-side count of the traces of its ``update``."""
    traces = []

    def update(*args, **kwargs):
        traces.append(1)
        return opt.update(*args, **kwargs)

    return optax.GradientTransformationExtraArgs(opt.init, update), traces


@pytest.mark.parametrize("make", [
    lambda: rproxjax.r_prox_spb(0.5, 1.0, rproxjax.l1(0.1), q=5),
    lambda: rproxjax.r_prox_svrg(0.5, 1.0, rproxjax.l1(0.1), m=5),
], ids=["r_prox_spb", "r_prox_svrg"])
def test_a_block_traces_the_optimizer_update_once(make):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((200, D))
    x0 = np.linalg.qr(rng.standard_normal((D, R)))[0]
    opt, traces = _counting(make())
    rproxjax._run.compile.clear_cache()
    res = rproxjax.fit(opt, problems.spca_loss, x0, data, key=jax.random.key(3),
                       batch_size=20, num_epochs=1)
    assert len(traces) == 1
    # A refresh every 5 steps, in order, and the iterates of the optimizer itself.
    refresh = np.asarray(res.history.refresh)
    np.testing.assert_array_equal(np.flatnonzero(refresh), np.arange(0, refresh.size, 5))
    bare = rproxjax.fit(make(), problems.spca_loss, x0, data, key=jax.random.key(3),
                        batch_size=20, num_epochs=1)
    np.testing.assert_array_equal(res.params, bare.params)
    assert float(res.history.feasibility[-1]) < 1e-12


def test_the_segments_of_a_block_are_one_program_with_the_whole_blocks_iterates():
    """Epochs shorter than a block (a curve point every 2 steps of a q = 6 block): one
    program serves every segment (the update traced once), and the run takes the steps of
    the same run in whole blocks."""
    rng = np.random.default_rng(1)
    data = rng.standard_normal((200, D))
    x0 = np.linalg.qr(rng.standard_normal((D, R)))[0]

    def make():
        return rproxjax.r_prox_spb(0.5, 1.0, rproxjax.l1(0.1), q=6)

    opt, traces = _counting(make())
    rproxjax._run.compile.clear_cache()
    segmented = rproxjax.fit(opt, problems.spca_loss, x0, data, key=jax.random.key(4),
                             batch_size=20, num_epochs=6,
                             sampling=rproxjax.Sampling(steps_per_epoch=2))
    assert len(traces) == 1
    assert len(segmented.epoch_loss) == 7  # the start and one point per segment
    whole = rproxjax.fit(make(), problems.spca_loss, x0, data, key=jax.random.key(4),
                         batch_size=20, num_epochs=2,
                         sampling=rproxjax.Sampling(steps_per_epoch=6))
    np.testing.assert_array_equal(segmented.params, whole.params)
    np.testing.assert_array_equal(segmented.history.zeta_norm, whole.history.zeta_norm)
    np.testing.assert_array_equal(segmented.epoch_ifo[::3], whole.epoch_ifo)


def _solver_copies(run) -> int:
    """Cholesky factorizations (one per copy of the Newton solver) in the compiled HLO."""
    return jax.jit(run).lower().compile().as_text().count("potrf")


@pytest.mark.parametrize("make", [
    lambda: rproxjax.r_prox_sgd(0.5, 1.0, rproxjax.l1(0.1)),
    lambda: rproxjax.r_prox_spb(0.5, 1.0, rproxjax.l1(0.1), q=5),
], ids=["r_prox_sgd", "r_prox_spb"])
def test_a_partial_last_epoch_shares_the_whole_epochs_program_on_cpu(make):
    """On CPU a run whose last epoch is partial (num_steps not a multiple of the epoch's
    steps) holds one copy of the step, its subproblem solver included, as a run of whole
    epochs does (they were two: half the compile time of sparse_pca's path), and fit
    compiles no program more for it. Its iterates are the same steps': test_array_likes
    checks them against a longer run's and fit's against pure_fit's, bit for bit."""
    if jax.default_backend() != "cpu":
        pytest.skip("accelerators keep the partial epoch's own copy (no branch a step)")
    rng = np.random.default_rng(2)
    data = rng.standard_normal((200, D))
    x0 = np.linalg.qr(rng.standard_normal((D, R)))[0]

    def run(**budget):
        return rproxjax.pure_fit(make(), problems.spca_loss, x0, data,
                                 key=jax.random.key(5), batch_size=20, **budget).params

    whole = _solver_copies(lambda: run(num_epochs=2))
    assert whole >= 1
    assert _solver_copies(lambda: run(num_steps=23)) == whole

    counts = []

    def count(event, duration, **kwargs):
        counts[-1] += event.endswith("backend_compile_duration")

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        for budget in ({"num_epochs": 3}, {"num_steps": 23}):
            rproxjax._run.compile.clear_cache()
            counts.append(0)
            res = rproxjax.fit(make(), problems.spca_loss, x0, data, key=jax.random.key(5),
                               batch_size=20, **budget)
            jax.block_until_ready(res.params)
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert counts[1] <= counts[0]
    assert res.history.ifo.shape == (23,)
