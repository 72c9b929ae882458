"""The Newton loop's bookkeeping and the kernel's cheap paths, checked directly.

* the loop returns the iterate that meets the stopping test even when an earlier one had a
  smaller ||E|| (a loose full step can meet it through a larger ||Y - X||);
* a call whose warm start already meets the test takes no step, with the same result whether
  vmapped lanes are mapped (where the loop sits behind a ``lax.cond``) or batched;
* a loose step that meets the stopping test is taken in full, without a line search;
* the Gram's column-pair products by static slices equal the gathered ones.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import _newton, _regularizers, _ssn_steps, _subproblem
from tests.kernel_rules import loose_rule
from tests.subproblem_instances import load_instances


def test_loop_returns_the_iterate_that_meets_the_stopping_test():
    x = jnp.eye(4, 2)
    u = jnp.eye(4)[:, 2:]  # orthogonal to X
    reg = rproxjax.l1(0.0)  # prox = identity: Y = W
    t, tol, rtol = jnp.asarray(0.1), jnp.asarray(1e-10), jnp.asarray(0.5)
    w0 = 1.1 * x  # E = 0.2 I: ||E|| = 0.28 > 0.5 ||Y - X|| = 0.07
    y1 = 1.2 * x + 3.0 * u  # E = 0.4 I: ||E|| = 0.57, larger, but < 0.5 ||Y - X|| = 2.1
    _, jac1, e1, norm1 = _ssn_steps.residual(x, x.T, t, reg, y1)

    def step(aux, lam, w, y, jac, e, norm_e):
        return aux, (lam + 1.0, y1, y1, jac1, e1, norm1, jnp.int32(0), jnp.int32(1))

    k, status, _, _, (lam, y, norm_e, w), done = _subproblem._newton_loop(
        step, x, x.T, t, reg, jnp.zeros((2, 2)), w0, tol, rtol, 10)
    assert int(k) == 1 and int(status) == rproxjax.Status.SUCCESSFUL
    assert bool(done(y, norm_e))
    np.testing.assert_allclose(y, y1)
    np.testing.assert_allclose(float(norm_e), float(norm1))
    np.testing.assert_allclose(lam, jnp.ones((2, 2)))


def _instance():
    return [i for i in load_instances(10, np.float64) if i["mu"] == 0.4][0]


@pytest.mark.parametrize("sequential", [True, False])
def test_a_warm_start_that_meets_the_test_takes_no_step(sequential, monkeypatch):
    inst = _instance()
    xtg = inst["x"].T @ inst["g"]
    reg = rproxjax.l1(inst["mu"])
    # The tight solution as the warm start: it meets the loose test at once.
    _, tight = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"], reg, tol=1e-12,
                                     lam=0.25 * (xtg + xtg.T) + inst["lam_s"])
    monkeypatch.setattr(_subproblem, "SEQUENTIAL_LANES", sequential)
    jax.clear_caches()
    try:
        solve = jax.jit(jax.vmap(
            lambda mu: rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"], rproxjax.l1(mu),
                                             rtol=0.1, lam=tight.lam, method="adaptive")))
        zeta, info = solve(jnp.full((2,), inst["mu"]))
        single, info1 = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"], reg, rtol=0.1,
                                              lam=tight.lam, method="adaptive")
    finally:
        jax.clear_caches()
    assert np.all(np.asarray(info.num_steps) == 0) and bool(jnp.all(info.converged))
    assert int(info1.num_steps) == 0 and int(info1.num_evaluations) == 1
    np.testing.assert_allclose(zeta[0], single, atol=1e-14)
    np.testing.assert_allclose(zeta[1], single, atol=1e-14)


def test_a_loose_step_that_meets_the_test_takes_no_line_search():
    # With full steps by their cut alone all but turned off (UNIT_ACCEPT tiny), a loose step is
    # still taken in full, evaluating E once (2 evaluations in a one-step call: the start and
    # the step), when it meets the stopping test; a line search would evaluate E twice more.
    rule = (_ssn_steps.LOOSE_RHO_SCALE, _ssn_steps.LOOSE_SECANT_SHIFT, 1e-12)
    full = searched = 0
    with loose_rule(rule):
        for r in (10, 15):
            for inst in load_instances(r, np.float64):
                xtg = inst["x"].T @ inst["g"]
                _, info = rproxjax.tangent_prox(
                    inst["x"], inst["g"], inst["t"], rproxjax.l1(inst["mu"]),
                    rtol=rproxjax.SSN_RTOL, method="adaptive",
                    lam=0.25 * (xtg + xtg.T) + inst["lam_s"])
                assert bool(info.converged)
                if int(info.num_steps) == 1:
                    full += int(info.num_evaluations) == 2
                    searched += int(info.num_evaluations) == 3
    assert full >= 3, (full, searched)

@pytest.mark.parametrize("r", [1, 2, 5, 10, 16])
def test_pair_products_by_slices_equal_the_gathered_ones(r):
    a = jax.random.normal(jax.random.key(r), (7, r))
    b = jax.random.normal(jax.random.key(r + 100), (7, r))
    basis = _newton.sym_basis(r)
    rows, cols, _ = basis
    np.testing.assert_array_equal(_regularizers._pair_products(a, b, basis),
                                  a[:, rows] * b[:, cols])
    # Another order of the pairs falls back to the gather.
    order = np.random.default_rng(r).permutation(rows.size)
    other = (rows[order], cols[order], None)
    np.testing.assert_array_equal(_regularizers._pair_products(a, b, other),
                                  a[:, rows[order]] * b[:, cols[order]])
