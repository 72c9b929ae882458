"""The Newton loop's bookkeeping and the kernel's cheap paths, checked directly.

* the loop returns the iterate that meets the stopping test even when an earlier one had a
  smaller ||E|| (a loose full step can meet it through a larger ||Y - X||), and a step that
  comes out non-finite ends it at the best finite iterate;
* a call whose warm start already meets the test takes no step, with the same result whether
  vmapped lanes are mapped or batched;
* a loose step that meets the stopping test is taken in full, without a line search;
* the Gram's column-pair products by static slices equal the gathered ones;
* the Jacobi steps of loose adaptive solves: the Gram diagonal each regularizer gives against
  its Gram matrix, the step against the Newton step where the Jacobian is the identity, the
  first step of a loose solve along the Jacobi direction, and a regularizer without the
  diagonal solved with full Newton steps.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import _regularizers
from rproxjax._ssn import linear as _newton
from rproxjax._ssn import solve as _subproblem
from rproxjax._ssn import steps as _ssn_steps
from tests.subproblem_instances import load_instances


def _problem(x, reg, t, tol, rtol):
    return _ssn_steps.Problem(x, x.T, t, reg, tol, rtol)


def test_loop_returns_the_iterate_that_meets_the_stopping_test():
    x = jnp.eye(4, 2)
    u = jnp.eye(4)[:, 2:]  # orthogonal to X
    reg = rproxjax.l1(0.0)  # prox = identity: Y = W
    p = _problem(x, reg, jnp.asarray(0.1), jnp.asarray(1e-10), jnp.asarray(0.5))
    w0 = 1.1 * x  # E = 0.2 I: ||E|| = 0.28 > 0.5 ||Y - X|| = 0.07
    y1 = 1.2 * x + 3.0 * u  # E = 0.4 I: ||E|| = 0.57, larger, but < 0.5 ||Y - X|| = 2.1
    at_y1 = _ssn_steps.residual(p, y1)

    def rule(p, ssn, escalated, it):
        new = _ssn_steps.Iterate.at(it.lam + 1.0, y1, at_y1)
        return _ssn_steps.StepResult(escalated, new, _ssn_steps.counts(0), jnp.int32(1))

    start = _ssn_steps.Iterate.at(jnp.zeros((2, 2)), w0, _ssn_steps.residual(p, w0))
    out = _subproblem.newton_loop(p, rproxjax.SSN(max_steps=10), start, rule)
    lam, y, norm_e, _ = out.best
    assert int(out.num_steps) == 1 and int(out.status) == rproxjax.Status.SUCCESSFUL
    assert bool(_ssn_steps.stops(p, y, norm_e))
    np.testing.assert_allclose(y, y1)
    np.testing.assert_allclose(float(norm_e), float(at_y1.norm_e))
    np.testing.assert_allclose(lam, jnp.ones((2, 2)))


def test_a_non_finite_step_ends_the_loop_at_the_best_finite_iterate():
    x = jnp.eye(4, 2)
    reg = rproxjax.l1(0.0)  # prox = identity: Y = W
    p = _problem(x, reg, jnp.asarray(0.1), jnp.asarray(1e-10), jnp.asarray(0.5))
    w0 = 1.2 * x  # E = 0.4 I
    y1 = 1.05 * x  # E = 0.1 I: smaller, but above 0.5 ||Y - X||
    _, jac1, e1, norm1 = _ssn_steps.residual(p, y1)
    nan = jnp.full_like(y1, jnp.nan)

    def rule(p, ssn, second, it):
        # The first call moves to y1, the second returns a NaN multiplier with a finite and
        # smaller ||E|| (the soft-threshold maps NaN to 0): it must count as non-finite and
        # never become the best iterate.
        new = jax.tree.map(lambda a, b: jnp.where(second, a, b),
                           (it.lam + jnp.nan, nan, nan, jac1, 0.5 * e1, 0.5 * norm1),
                           (it.lam + 1.0, y1, y1, jac1, e1, norm1))
        return _ssn_steps.StepResult(jnp.bool_(True), _ssn_steps.Iterate(*new),
                                     _ssn_steps.counts(0), jnp.int32(1))

    start = _ssn_steps.Iterate.at(jnp.zeros((2, 2)), w0, _ssn_steps.residual(p, w0))
    out = _subproblem.newton_loop(p, rproxjax.SSN(max_steps=10), start, rule)
    lam, y, norm_e, w = out.best
    assert int(out.num_steps) == 2 and int(out.status) == rproxjax.Status.NONFINITE
    assert int(out.evaluations) == 3
    np.testing.assert_allclose(y, y1)
    np.testing.assert_allclose(w, y1)
    np.testing.assert_allclose(float(norm_e), float(norm1))
    np.testing.assert_allclose(lam, jnp.ones((2, 2)))


def _instance():
    return [i for i in load_instances(10, np.float64) if i["mu"] == 0.4][0]


@pytest.mark.parametrize("sequential", [True, False])
def test_a_warm_start_that_meets_the_test_takes_no_step(sequential):
    inst = _instance()
    reg = rproxjax.l1(inst["mu"])
    x, g, t = inst["x"], inst["g"], inst["t"]
    # The tight solution as the warm start: it meets the loose test at once.
    _, tight = rproxjax.tangent_prox(x, g, t, reg, lam=inst["lam0"], ssn=rproxjax.SSN(tol=1e-12))
    ssn = rproxjax.SSN(rtol=0.1, rule="adaptive", sequential_lanes=sequential)
    solve = jax.jit(jax.vmap(
        lambda mu: rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), lam=tight.lam, ssn=ssn)))
    zeta, info = solve(jnp.full((2,), inst["mu"]))
    single, info1 = rproxjax.tangent_prox(x, g, t, reg, lam=tight.lam, ssn=ssn)
    assert np.all(np.asarray(info.num_steps) == 0) and bool(jnp.all(info.converged))
    assert int(info1.num_steps) == 0 and int(info1.num_evaluations) == 1
    np.testing.assert_allclose(zeta[0], single, atol=1e-14)
    np.testing.assert_allclose(zeta[1], single, atol=1e-14)


def test_a_loose_step_that_meets_the_test_takes_no_line_search():
    # With full steps by their cut alone all but turned off (unit_accept tiny), a loose step is
    # still taken in full, evaluating E once (2 evaluations in a one-step call: the start and
    # the step), when it meets the stopping test; a line search would evaluate E twice more.
    ssn = rproxjax.SSN.stochastic(rule=rproxjax.Adaptive(
        secant=rproxjax.Secant(path=None, unit_accept=1e-12)))
    full = searched = 0
    for r in (10, 15):
        for inst in load_instances(r, np.float64):
            _, info = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"],
                                            rproxjax.l1(inst["mu"]), lam=inst["lam0"], ssn=ssn)
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


def _regularizers_and_inputs(key, d=12, r=4):
    x = rproxjax.stiefel.random_point(key, d, r, jnp.float64)
    v = jax.random.normal(jax.random.fold_in(key, 1), (d, r), jnp.float64)
    regs = [rproxjax.l1(0.4), rproxjax.l1(jnp.linspace(0.1, 0.9, r)), rproxjax.l21(0.8)]
    return x, v, regs


@pytest.mark.parametrize("which", [0, 1, 2])
def test_gram_diagonal_is_the_diagonal_of_the_gram_matrix(which):
    x, v, regs = _regularizers_and_inputs(jax.random.key(which))
    reg = regs[which]
    _, jac = reg.prox_jacobian(v, 0.5)
    basis = _newton.sym_basis(x.shape[-1])
    rows, cols, _ = basis
    gram = reg.jacobian_gram(x, jac, basis)
    ghat = reg.jacobian_gram_diagonal(x, jac)
    np.testing.assert_allclose(ghat, ghat.T, atol=1e-15)
    np.testing.assert_allclose(ghat[rows, cols], jnp.diag(gram), rtol=1e-12, atol=1e-14)
    # Some entries inactive: the instance is not the identity case.
    assert 0 < float(jnp.min(jnp.diag(gram))) < float(jnp.max(jnp.diag(gram)))


def test_jacobi_step_is_the_newton_step_where_the_jacobian_is_the_identity():
    x, v, _ = _regularizers_and_inputs(jax.random.key(7))
    reg = rproxjax.l1(1e-3)  # every |V_ij| > t mu: the mask is all ones
    t = jnp.asarray(0.5)
    _, jac = reg.prox_jacobian(v, t)
    assert bool(jnp.all(jac == 1))
    e = x.T @ v + v.T @ x - 2 * jnp.eye(4)
    rho = jnp.asarray(1e-3)
    jacobi, _ = _newton.jacobi_direction(x, t, reg, jac, e, rho)
    newton, _ = _newton.dense_direction(x, t, reg, jac, e, jnp.zeros_like(e), rho)
    np.testing.assert_allclose(jacobi, newton, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jacobi, -e / (4 * t + rho), rtol=1e-12)


def _first_step_cosine(reg, inst, direction):
    """Cosine between a loose adaptive solve's first step and ``direction(x, t, jac, e, n)``
    at the warm start; None where the warm start already meets the test."""
    x, g, t, lam0 = (jnp.asarray(inst[k]) for k in ("x", "g", "t", "lam0"))
    w0 = x - t * g + 2 * t * x @ lam0
    tol, rtol = rproxjax.default_tol(jnp.float64), rproxjax.SSN_RTOL
    y0, jac0, e0, n0 = _ssn_steps.residual(_problem(x, reg, t, tol, rtol), w0)
    if bool(_ssn_steps.meets_stopping_test(x, y0, n0, tol, rtol)):
        return None
    ssn = rproxjax.SSN(rtol=rtol, max_steps=1, rule="adaptive")
    _, info = rproxjax.tangent_prox(x, g, t, reg, lam=lam0, ssn=ssn)
    d = np.asarray(direction(x, t, jac0, e0, float(n0))).ravel()
    step = np.asarray(info.lam - lam0).ravel()
    return step @ d / (np.linalg.norm(step) * np.linalg.norm(d))


def test_a_loose_adaptive_solve_steps_along_the_jacobi_direction_first():
    # Instances whose warm start does not meet the loose test: the first step, at whatever
    # length the step rule takes, is parallel to -E_0 / (4t Ghat_0 + rho_0), computed here.
    def jacobi(x, t, jac, e, norm_e):
        reg = rproxjax.l1(0.0)  # jacobian_gram_diagonal reads the mask alone
        rho = rproxjax.Adaptive().jacobi_rho_scale * min(norm_e, 0.1) + 4 * float(t) * 2.0**-52
        return -e / (4 * t * reg.jacobian_gram_diagonal(x, jac) + rho)

    cosines = [_first_step_cosine(rproxjax.l1(i["mu"]), i, jacobi)
               for i in load_instances(10, np.float64)]
    cosines = [c for c in cosines if c is not None]
    assert len(cosines) >= 3 and min(cosines) > 1 - 1e-10


class _L1WithoutDiagonal(NamedTuple):
    mu: Any


for _name in ("value", "prox", "prox_jacobian", "subgradient", "jacobian_apply",
              "jacobian_gram", "secant_shift", "check"):
    setattr(_L1WithoutDiagonal, _name, getattr(_regularizers.L1, _name))


def test_a_regularizer_without_the_gram_diagonal_gets_newton_steps():
    assert not hasattr(_L1WithoutDiagonal(0.1), "jacobian_gram_diagonal")

    def plain_newton(x, t, jac, e, norm_e):  # the adaptive rule's plain step, no shift
        rho = rproxjax.Adaptive().plain_rho_scale * min(norm_e, 0.1) + 4 * float(t) * 2.0**-52
        reg = rproxjax.l1(0.0)  # jacobian_gram reads the mask alone
        return _newton.dense_direction(x, t, reg, jac, e, jnp.zeros_like(e), rho)[0]

    cosines = [_first_step_cosine(_L1WithoutDiagonal(jnp.asarray(i["mu"])), i, plain_newton)
               for i in load_instances(10, np.float64)]
    cosines = [c for c in cosines if c is not None]
    assert len(cosines) >= 3 and min(cosines) > 1 - 1e-10
    for inst in load_instances(10, np.float64)[::4]:
        lam0 = inst["lam0"]
        out = {}
        for reg in (rproxjax.l1(inst["mu"]), _L1WithoutDiagonal(jnp.asarray(inst["mu"]))):
            zeta, info = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"], reg, lam=lam0,
                                               ssn=rproxjax.SSN.stochastic())
            assert bool(info.converged)
            out[type(reg).__name__] = (zeta, info)
        # Same problem, same stopping test: the two solutions agree to the loose tolerance.
        (z1, _), (z2, _) = out.values()
        assert float(jnp.linalg.norm(z1 - z2)) <= 0.2 * float(jnp.linalg.norm(z1)) + 1e-8


def test_loose_solves_with_jacobi_steps_agree_mapped_and_batched():
    # Lanes that need steps, with different mu: mapped lanes take real branches, a batched
    # loop selects between the Jacobi and the Newton direction per lane.
    insts = [i for i in load_instances(10, np.float64) if i["mu"] in (0.05, 0.2)][:4]
    x, g, t = (jnp.asarray(insts[0][k]) for k in ("x", "g", "t"))
    mus = jnp.asarray([0.05, 0.1, 0.2, 0.3])
    out = {}
    lam_h = jnp.asarray(insts[0]["lam_s"])
    for sequential in (True, False):
        ssn = rproxjax.SSN.stochastic(sequential_lanes=sequential)
        solve = jax.jit(jax.vmap(
            lambda mu, ssn=ssn: rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), lam_h=lam_h,
                                                      ssn=ssn)))
        out[sequential] = solve(mus)
    (z_map, i_map), (z_bat, i_bat) = out[True], out[False]
    assert bool(jnp.all(i_map.converged)) and bool(jnp.all(i_bat.converged))
    assert int(jnp.sum(i_map.num_steps)) > 0
    np.testing.assert_array_equal(i_map.num_steps, i_bat.num_steps)
    np.testing.assert_allclose(z_map, z_bat, rtol=0, atol=1e-12)
