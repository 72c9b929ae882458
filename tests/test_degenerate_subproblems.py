"""Degenerate subproblems at r = 32: captured from R-ProxSPB on synthetic sparse PCA.

At (d, r, b) = (1024, 32, 200), mu = 0.2, the second block's subproblems have solutions with
columns of fewer than r nonzeros (a singular Newton matrix). When this test was written, the
adaptive rule took a mean of 20.9 Newton steps on them at rtol 1e-2 with the regularization
of loose solves at 1e-4 ||E||, and 3.7 (max 5) with LOOSE_RHO_SCALE = 1.0 (git keeps
benchmarks/hard_subproblems.py, the same comparison at d = 4096); with the secant shift then
dropped from loose solves, 4.3 (max 6) against 3.6 (max 5) with it. The instances are
captured with the first rule of loose solves and the optimizers' first warm start, pinned as
settings (``CAPTURE_SSN``) so that they do not move with the defaults. Step counts are
deterministic, so the goal is asserted, with the stopping test checked independently.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.tree_utils as otu
import pytest

import rproxjax
from rproxjax.problems import spca_loss

D, R, B, Q, MU, GAMMA = 1024, 32, 200, 10, 0.2, 0.1
#: The optimizer's settings when the instances were chosen: rtol 1e-2 (the stochastic
#: optimizers' default then) and the first rule of loose solves (regularization
#: 1e-4 min(||E||, 0.1) with the secant shift, a line search at every step, no Jacobi steps),
#: warm-started from the previous multiplier's regularizer part.
CAPTURE_SSN = rproxjax.SSN.stochastic(
    rtol=1e-2, warm_start="lam_h", rule=rproxjax.Adaptive(
        jacobi_first=False, secant=rproxjax.Secant(path=None, loose_rho_scale=1e-4,
                                                   loose_shift=True, unit_accept=0.0)))


def _data():
    """n = 8 b samples of a sparse spiked model (as benchmarks/scale.py)."""
    k_u, k_s, k_e = jax.random.split(jax.random.key(0), 3)
    support = D // (4 * R)
    rows, cols = jnp.arange(D)[:, None], jnp.arange(R)[None, :]
    mask = (rows >= cols * support) & (rows < (cols + 1) * support)
    u = jnp.where(mask, jax.random.normal(k_u, (D, R)), 0)
    u = u / jnp.linalg.norm(u, axis=0)
    lam = 1.0 + 4.0 * (R - jnp.arange(R)) / R
    s = jax.random.normal(k_s, (8 * B, R)) * jnp.sqrt(lam)
    return jnp.dot(s, u.T, precision="highest") + 0.5 * jax.random.normal(k_e, (8 * B, D))


def capture():
    """[(X, V, previous lam_h)] of the 10 steps of R-ProxSPB's second block."""
    data = _data()
    x = rproxjax.stiefel.random_point(jax.random.key(0), D, R)
    opt = rproxjax.r_prox_spb(1.0, GAMMA, rproxjax.l1(MU), q=Q, ssn=CAPTURE_SSN)
    res = rproxjax.pure_fit(opt, spca_loss, x, data, key=jax.random.key(1), batch_size=B,
                            num_epochs=1, sampling=rproxjax.Sampling(steps_per_epoch=Q))
    x, state = res.params, res.opt_state
    grad = jax.jit(lambda p, b: jax.grad(
        lambda q: jnp.mean(jax.vmap(spca_loss, (None, 0))(q, b)))(p))
    rng = np.random.default_rng(0)
    subs = []
    for j in range(Q):
        lam_h = rproxjax.step_info(state).ssn.lam_h
        if j == 0:
            updates, new = opt.update(grad(x, data), state, x, refresh=True)
        else:
            batch = data[rng.permutation(data.shape[0])[:B]]
            updates, new = opt.update(grad(x, batch), state, x, refresh=False,
                                      grad_fn=lambda p, b=batch: grad(p, b))
        subs.append((x, otu.tree_get(new, "v"), lam_h))
        x, state = optax.apply_updates(x, updates), new
    return subs


@pytest.fixture(scope="module")
def subproblems():
    return capture()


@pytest.mark.parametrize("rtol, mean, most", [(1e-2, 6.0, 8), (rproxjax.SSN_RTOL, 2.0, 3)])
def test_loose_solves_of_degenerate_subproblems_take_few_steps(subproblems, rtol, mean, most):
    # At rtol 1e-2 (the former default) measured 5.0 (max 6) on CPU with Jacobi steps first;
    # without them 4.3 (max 6) on CPU and 4.9 (max 7) on an H200 (the captured instances and
    # their float64 rounding differ by platform). At SSN_RTOL = 0.1: 1.0 (max 1); 1.2 (max 2)
    # without them.
    steps, fewest = [], []
    for x, v, lam_h in subproblems:
        zeta, info = rproxjax.tangent_prox(x, v, GAMMA, rproxjax.l1(MU), lam_h=lam_h,
                                           ssn=rproxjax.SSN(rtol=rtol, rule="adaptive"))
        assert bool(info.converged)
        steps.append(int(info.num_steps))
        y = np.asarray(x + zeta)
        fewest.append(int(np.min(np.count_nonzero(y, axis=0))))
        # The stopping test, recomputed from the returned step (not from info):
        e = np.asarray(x).T @ y
        e = e + e.T - 2 * np.eye(R)
        target = rproxjax.default_tol(jnp.float64) + rtol * np.linalg.norm(np.asarray(zeta))
        assert np.linalg.norm(e) <= target * (1 + 1e-6)
    assert min(fewest) < R  # the instances are degenerate
    assert np.mean(steps) <= mean and max(steps) <= most, steps


def test_loose_and_tight_solves_agree_to_the_loose_tolerance(subproblems):
    x, v, lam_h = subproblems[-1]
    loose, info = rproxjax.tangent_prox(x, v, GAMMA, rproxjax.l1(MU), lam_h=lam_h,
                                        ssn=rproxjax.SSN(rtol=1e-2))
    tight, info_t = rproxjax.tangent_prox(x, v, GAMMA, rproxjax.l1(MU), lam_h=lam_h,
                                          ssn=rproxjax.SSN(tol=1e-10, max_steps=400))
    assert bool(info.converged) and bool(info_t.converged)
    # ||zeta_loose - zeta|| / ||E(loose)||: 1.8 on this instance, at most 3.5 over the block
    # (measured); a loose solve far from the solution would show here.
    assert float(jnp.linalg.norm(loose - tight)) <= 4 * float(info.residual)
