"""The solver's settings as one value (``rproxjax.SSN``) and the named optimizers as chains.

* every named optimizer and its documented chain of public pieces, with default arguments,
  take identical steps;
* two ``SSN`` values in one process compile two behaviours, with no cache to clear; new
  values of the traced fields (tol, rtol) compile nothing;
* the presets and the pytree: tol and rtol the leaves, the rest static;
* the rule and the linear solver are values holding their own knobs;
* the former keyword arguments and flat fields warn and give the same results as the
  settings they map to.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import SSN, problems, stiefel

L1 = rproxjax.l1(0.1)


@pytest.fixture(scope="module")
def data():
    a = jax.random.normal(jax.random.key(0), (240, 16))
    return a * jnp.linspace(2.0, 0.5, 16)


def _x0():
    return stiefel.random_point(jax.random.key(1), 16, 3)


def _chains(q=4, m=4):
    """(alias, its documented chain of public pieces), default arguments throughout."""
    eta, gamma, alpha = 0.5, 0.2, 0.7
    return {
        "r_prox_sgd": (rproxjax.r_prox_sgd(eta, gamma, L1),
                       optax.chain(rproxjax.proximal_step(gamma, L1), rproxjax.retract(eta))),
        "r_prox_spb": (rproxjax.r_prox_spb(eta, gamma, L1, q=q),
                       optax.chain(rproxjax.sarah_estimator(q), rproxjax.proximal_step(gamma, L1),
                                   rproxjax.retract(eta))),
        "r_prox_svrg": (rproxjax.r_prox_svrg(eta, gamma, L1, m=m),
                        optax.chain(rproxjax.svrg_estimator(m),
                                    rproxjax.proximal_step(gamma, L1), rproxjax.retract(eta))),
        "r_prox_sarah": (rproxjax.r_prox_sarah(gamma, alpha, L1, q=q),
                         optax.chain(rproxjax.sarah_estimator(q),
                                     rproxjax.proximal_step(gamma, L1), rproxjax.retract(alpha))),
        "r_spider_boost": (rproxjax.r_spider_boost(eta, gamma, q=q),
                           optax.chain(rproxjax.sarah_estimator(q), rproxjax.proximal_step(gamma),
                                       rproxjax.retract(eta))),
        "r_subgrad": (rproxjax.r_subgrad(eta, L1),
                      optax.chain(rproxjax.subgradient_direction(L1), rproxjax.retract(eta))),
    }


@pytest.mark.parametrize("name", sorted(_chains()))
def test_each_named_optimizer_is_its_documented_chain(name, data):
    alias, chain = _chains()[name]
    runs = [rproxjax.fit(opt, problems.spca_loss, _x0(), data, key=jax.random.key(2),
                         batch_size=20, num_steps=12,
                         sampling=rproxjax.Sampling(steps_per_epoch=4))
            for opt in (alias, chain)]
    a, c = runs
    assert float(jnp.max(jnp.abs(a.params - _x0()))) > 1e-3  # the runs moved
    np.testing.assert_array_equal(a.params, c.params)
    np.testing.assert_array_equal(a.epoch_loss, c.epoch_loss)
    np.testing.assert_array_equal(a.history.ssn_steps, c.history.ssn_steps)


def test_manpg_defaults_to_exact_solves_and_the_others_to_the_stochastic_preset():
    x = _x0()
    g = jax.random.normal(jax.random.key(3), x.shape)
    exact = rproxjax.tangent_prox(x, g, 0.2, L1, ssn=SSN.exact())
    default = rproxjax.tangent_prox(x, g, 0.2, L1)
    np.testing.assert_array_equal(exact[0], default[0])
    assert SSN.exact() == SSN()
    loose = SSN.stochastic()
    assert (loose.method, loose.rtol) == ("adaptive", rproxjax.SSN_RTOL)
    step = rproxjax.proximal_step(0.2, L1)
    explicit = rproxjax.proximal_step(0.2, L1, ssn=SSN.stochastic())
    s0, s1 = step.init(x), explicit.init(x)
    np.testing.assert_array_equal(step.update(g, s0, x)[0], explicit.update(g, s1, x)[0])


def test_two_settings_compile_two_behaviours_without_clearing_caches():
    # A cold, sparse solve (most entries thresholded): path steps cross thresholds.
    x = stiefel.random_point(jax.random.key(1), 200, 15, jnp.float64)
    g = jax.random.normal(jax.random.key(1001), (200, 15), jnp.float64)
    reg = rproxjax.l1(2.0)

    def solve(ssn):
        return rproxjax.tangent_prox(x, g, 0.5, reg, ssn=ssn)[1]

    path, shifted = SSN(tol=1e-10), SSN(tol=1e-10, rule=rproxjax.Secant(path=None))
    one, other, again = solve(path), solve(shifted), solve(path)
    assert int(one.num_breakpoints) > 0 and int(other.num_breakpoints) == 0
    assert int(again.num_breakpoints) == int(one.num_breakpoints)
    assert int(solve(SSN(max_steps=1)).num_steps) == 1
    # Under jax.jit the settings are an argument: static fields key the cache, and new
    # values of tol and rtol (the pytree's leaves) reuse the compiled program.
    traces = []

    @jax.jit
    def jitted(ssn):
        traces.append(ssn)
        return rproxjax.tangent_prox(x, g, 0.5, reg, ssn=ssn)[1].num_steps

    for tol in (1e-6, 1e-8, 1e-10):
        jitted(SSN(tol=tol))
    assert len(traces) == 1
    jitted(SSN(tol=1e-8, rtol=0.1))
    assert len(traces) == 1
    jitted(SSN(tol=1e-8, rule="reference"))
    assert len(traces) == 2


def test_the_settings_are_a_pytree_of_two_traced_leaves():
    ssn = SSN.stochastic(tol=1e-7, rule=rproxjax.Adaptive(escalate=0.3))
    leaves, tree = jax.tree.flatten(ssn)
    assert len(leaves) == 2
    rebuilt = jax.tree.unflatten(tree, leaves)
    assert rebuilt == ssn
    doubled = jax.tree.map(lambda a: 2 * a, ssn)
    assert doubled.tol == 2e-7 and doubled.rtol == 2 * rproxjax.SSN_RTOL
    assert doubled.rule.escalate == 0.3 and doubled.method == "adaptive"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ssn.tol = 1.0  # type: ignore[misc]
    # vmap over the traced tolerance of one settings value.
    x = _x0()
    g = jax.random.normal(jax.random.key(6), x.shape)
    tols = jnp.array([1e-4, 1e-10])
    steps = jax.vmap(lambda tol: rproxjax.tangent_prox(x, g, 0.2, L1,
                                                       ssn=SSN(tol=tol))[1].num_steps)(tols)
    assert int(steps[0]) <= int(steps[1])


def test_fields_are_validated_at_construction():
    for bad in ({"rule": "newton"}, {"linear_solver": "lu"}, {"max_steps": -1},
                {"max_steps": 2.5}, {"rule": rproxjax.Dense()}, {"linear_solver": "secant"},
                {"sequential_lanes": "yes"}, {"warm_start": "lam"},
                {"tol": 0.0}, {"rtol": -0.1}, {"tol": jnp.ones(2)}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SSN(**bad)
    for make, field in ((lambda: rproxjax.Secant(rho_scale=-1e-4), "rho_scale"),
                        (lambda: rproxjax.Secant(unit_accept=float("inf")), "unit_accept"),
                        (lambda: rproxjax.Secant(path=True), "path"),
                        (lambda: rproxjax.PathSteps(max_breaks=-1), "max_breaks"),
                        (lambda: rproxjax.PathSteps(float32=1), "float32"),
                        (lambda: rproxjax.Adaptive(escalate="x"), "escalate"),
                        (lambda: rproxjax.Adaptive(secant=rproxjax.Secant()), "path=None"),
                        (lambda: rproxjax.AutoLinearSolver(cg_threshold=1.5), "cg_threshold")):
        with pytest.raises(ValueError, match=field):
            make()
    assert SSN(max_steps=np.int64(7)).max_steps == 7
    assert isinstance(rproxjax.Secant(rho_scale=1).rho_scale, float)
    with pytest.raises(TypeError, match="rho"):
        SSN(rho=1.0)  # no such field
    with pytest.raises(TypeError, match="ssn must be an rproxjax.SSN"):
        rproxjax.tangent_prox(_x0(), _x0(), 0.1, L1, ssn={"tol": 1e-3})
    with pytest.raises(TypeError, match="max_step"):
        rproxjax.tangent_prox(_x0(), _x0(), 0.1, L1, max_step=3)


def test_the_former_keyword_arguments_warn_and_map_to_their_fields(data):
    x = _x0()
    g = jax.random.normal(jax.random.key(7), x.shape)
    with pytest.warns(DeprecationWarning, match="tangent_prox"):
        old = rproxjax.tangent_prox(x, g, 0.2, L1, tol=1e-9, method="reference", max_steps=7)
    new = rproxjax.tangent_prox(x, g, 0.2, L1, ssn=SSN(tol=1e-9, rule="reference",
                                                       max_steps=7))
    np.testing.assert_array_equal(old[0], new[0])
    with pytest.warns(DeprecationWarning, match="r_prox_sgd"):
        old_opt = rproxjax.r_prox_sgd(0.5, 0.2, L1, ssn_rtol=0.0, ssn_method="secant",
                                      ssn_max_steps=50, linear_solver="dense")
    new_opt = rproxjax.r_prox_sgd(0.5, 0.2, L1, ssn=SSN.stochastic(
        rtol=0.0, rule="secant", max_steps=50, linear_solver="dense"))
    runs = [rproxjax.fit(o, problems.spca_loss, x, data, key=jax.random.key(2), batch_size=20,
                         num_steps=6, sampling=rproxjax.Sampling(steps_per_epoch=6))
            for o in (old_opt, new_opt)]
    np.testing.assert_array_equal(runs[0].params, runs[1].params)
    with pytest.warns(DeprecationWarning, match="manpg"):
        rproxjax.manpg(0.1, L1, tol=1e-6, ssn_method="reference")
    v = stiefel.project(x, g)
    with pytest.warns(DeprecationWarning, match="retract"):
        old_point = stiefel.retract(x, 0.1 * v, method="qr")
    np.testing.assert_array_equal(old_point, stiefel.retract(x, 0.1 * v, retraction="qr"))
    with pytest.warns(DeprecationWarning, match="retract"):
        rproxjax.retract(0.5, method="qr")
    with pytest.raises(TypeError, match="retractoin"):
        rproxjax.retract(0.5, retractoin="qr")


def test_the_rule_and_the_linear_solver_are_values_with_their_own_knobs():
    ssn = SSN(rule=rproxjax.Adaptive(jacobi_first=False), linear_solver=rproxjax.CG())
    assert ssn.method == "adaptive" and ssn.rule.secant.path is None
    assert ssn.linear_solver == rproxjax.CG() and SSN(linear_solver="cg") == ssn.replace(
        rule="secant")
    assert rproxjax.AutoLinearSolver(cg_threshold=8).select(8) == rproxjax.CG()
    assert rproxjax.AutoLinearSolver(cg_threshold=8).select(7) == rproxjax.Dense()
    assert SSN().rule == rproxjax.Secant(path=rproxjax.PathSteps())
    assert len(dataclasses.fields(SSN)) == 7
    # Values are hashable: they key jit's cache as static data.
    assert len({SSN(), SSN(rule=rproxjax.Secant()), SSN(rule="adaptive")}) == 2


FLAT = [({"method": "adaptive", "jacobi_first": False, "escalate": 0.3},
         {"rule": rproxjax.Adaptive(jacobi_first=False, escalate=0.3)}),
        ({"path_steps": False, "rho_scale": 1e-3},
         {"rule": rproxjax.Secant(path=None, rho_scale=1e-3)}),
        ({"max_breaks": 4, "path_accept": 0.2, "loose_secant_shift": True},
         {"rule": rproxjax.Secant(loose_shift=True, path=rproxjax.PathSteps(max_breaks=4,
                                                                            accept=0.2))}),
        ({"method": "adaptive", "unit_accept": 0.0},
         {"rule": rproxjax.Adaptive(secant=rproxjax.Secant(path=None, unit_accept=0.0))}),
        ({"cg_threshold": 4}, {"linear_solver": rproxjax.AutoLinearSolver(cg_threshold=4)})]


@pytest.mark.parametrize("flat, composed", FLAT)
def test_the_former_flat_fields_warn_and_map_to_the_values(flat, composed):
    with pytest.warns(DeprecationWarning, match="removed in rproxjax 0.5"):
        old = SSN(tol=1e-9, **flat)
    assert old == SSN(tol=1e-9, **composed)
    with pytest.warns(DeprecationWarning, match="flat fields"):
        assert SSN(tol=1e-9).replace(**flat) == old
