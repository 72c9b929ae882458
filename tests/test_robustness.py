"""Robustness: long runs stay feasible; thousands of random subproblems are solved or flagged."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import stiefel


def _long_run(steps, method):
    a = jnp.diag(jnp.linspace(3.0, 0.5, 20))
    noise = jax.random.normal(jax.random.key(1), (steps, 20, 3)) * 0.5
    opt = rproxjax.r_prox_sgd(0.5, 0.1, rproxjax.l1(0.05), retraction=method)
    x0 = stiefel.random_point(jax.random.key(0), 20, 3)

    @jax.jit
    def run(x):
        def body(c, e):
            x, s = c
            u, s = opt.update(-2 * a @ x + e, s, x)
            return (optax.apply_updates(x, u), s), None

        return jax.lax.scan(body, (x, opt.init(x)), noise)[0]

    x, state = run(x0)
    return float(stiefel.feasibility(x)), bool(rproxjax.step_info(state).halted)


@pytest.mark.parametrize("method", ["polar", "qr"])
def test_feasible_after_many_steps(method):
    feas, halted = _long_run(10_000, method)
    assert feas < 1e-12 and not halted


@pytest.mark.slow
@pytest.mark.parametrize("method", ["polar", "qr"])
def test_feasible_after_1e5_steps(method):
    feas, halted = _long_run(100_000, method)
    assert feas < 1e-12 and not halted


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_thousands_of_random_subproblems_are_solved_or_flagged(dtype):
    count, d, r = 2000, 12, 3
    keys = jax.random.split(jax.random.key(2), 4)
    xs = stiefel.random_point(keys[0], d, r, dtype, shape=(count,))
    # Gradients, steps and strengths over several decades.
    gs = jax.random.normal(keys[1], (count, d, r), dtype) * 10.0 ** jax.random.uniform(
        keys[2], (count, 1, 1), dtype, -3, 3)
    ts = 10.0 ** jax.random.uniform(keys[3], (count,), dtype, -3, 1)
    mus = 10.0 ** jnp.linspace(-3, 1, count).astype(dtype)
    solve = jax.jit(jax.vmap(
        lambda x, g, t, mu: rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu))))
    zetas, infos = solve(xs, gs, ts, mus)
    assert bool(jnp.all(jnp.isfinite(zetas))) and bool(jnp.all(jnp.isfinite(infos.lam)))
    status = np.asarray(infos.status)
    converged = np.asarray(infos.converged)
    # Every instance is either converged or flagged as such, never silently wrong.
    assert np.all(converged == (status == rproxjax.Status.SUCCESSFUL))
    assert np.all(np.isin(status, [rproxjax.Status.SUCCESSFUL,
                                   rproxjax.Status.MAX_STEPS_REACHED]))
    # float32 instances with ||t G|| up to ~1e4 cannot reach the absolute
    # tolerance 1.2e-5 on E (rounding alone is ~eps * ||t G||): they are flagged.
    assert converged.mean() > (0.95 if dtype == jnp.float64 else 0.9)
    # Converged solutions are tangent to the tolerance.
    a = jnp.swapaxes(xs, 1, 2) @ zetas
    tangency = np.asarray(jnp.linalg.norm(a + jnp.swapaxes(a, 1, 2), axis=(1, 2)))
    tol = rproxjax.default_tol(dtype)
    # The check itself rounds: X^T zeta in the dtype is exact only to ~eps ||zeta||, and
    # float32 steps reach ||zeta|| ~ 2e4 here (the solver's own E can round to 0 there).
    eps = np.finfo(np.dtype(dtype)).eps
    scale = 1.0 + np.asarray(jnp.linalg.norm(zetas, axis=(1, 2)))
    assert np.all(tangency[converged] <= (10 * tol + 10 * eps * scale)[converged])
