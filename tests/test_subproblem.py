"""tangent_prox: reference values, optimality, jit/vmap behaviour, dtypes, errors."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import stiefel
from rproxjax._ssn import solve as _subproblem
from tests.reference import manpg_reference_problem


@pytest.fixture(scope="module")
def ref():
    return manpg_reference_problem()


def test_reference_inputs(ref):
    # design.md section 7: B(1,1), L, t, F(X0).
    np.testing.assert_allclose(ref.B[0, 0], -0.230017404916933, rtol=1e-13)
    np.testing.assert_allclose(ref.L, 10.4340316044535, rtol=1e-12)
    np.testing.assert_allclose(ref.t, 0.0958402310735935, rtol=1e-12)
    np.testing.assert_allclose(ref.F(ref.X0), 30.218745874321, rtol=1e-12)


@pytest.mark.parametrize("method", ["reference", "secant"])
@pytest.mark.parametrize("linear_solver", ["dense", "cg"])
def test_first_ssn_call_reproduces_reference(ref, linear_solver, method):
    x0 = jnp.asarray(ref.X0)
    g = jnp.asarray(ref.grad(ref.X0))
    zeta, info = rproxjax.tangent_prox(x0, g, ref.t, rproxjax.l1(ref.mu),
                                       ssn=rproxjax.SSN(tol=np.sqrt(1e-11),
                                                        linear_solver=linear_solver, rule=method))
    if method == "reference":
        assert int(info.num_steps) == 4  # the reference code's count
    else:
        assert 1 <= int(info.num_steps) <= 4
    assert bool(info.converged) and int(info.status) == rproxjax.Status.SUCCESSFUL
    lam = np.asarray(info.lam)
    # CG stops at an absolute residual 1e-7 (reference rule), hence its looser agreement.
    rtol = 1e-8 if linear_solver == "dense" else 1e-6
    np.testing.assert_allclose(np.linalg.norm(zeta), 0.729691156505674, rtol=rtol)
    np.testing.assert_allclose(np.linalg.norm(lam), 5.64623403305, rtol=rtol)
    np.testing.assert_allclose(
        np.diag(lam),
        [2.57584939521, 2.3568151133, 2.57198873955, 2.40526661012, 2.42906011455],
        rtol=rtol,
    )
    np.testing.assert_allclose(lam[0, 1], 0.045783627829, rtol=10 * rtol)
    y = np.asarray(x0 + zeta)
    assert np.count_nonzero(y) == 374
    if linear_solver == "dense" and method == "reference":
        np.testing.assert_allclose(float(info.residual), 4.380e-10, rtol=1e-3)


def _objective(x, g, t, reg, zeta):
    return float(jnp.sum(g * zeta) + jnp.sum(zeta**2) / (2 * t) + reg.value(x + zeta))


def _instance(seed, d, r, dtype=jnp.float64):
    kx, kg = jax.random.split(jax.random.key(seed))
    x = stiefel.random_point(kx, d, r, dtype)
    g = jax.random.normal(kg, (d, r), dtype)
    return x, g


@pytest.mark.parametrize("reg", [rproxjax.l1(0.3), rproxjax.l21(0.5)])
def test_solution_is_optimal_against_perturbations(reg):
    # zeta minimizes the strongly convex objective over T_X: every feasible
    # perturbation increases it.
    x, g = _instance(0, 30, 4)
    t = 0.7
    zeta, info = rproxjax.tangent_prox(x, g, t, reg)
    assert bool(info.converged)
    a = x.T @ zeta
    assert float(jnp.linalg.norm(a + a.T)) < 1e-10
    best = _objective(x, g, t, reg, zeta)
    for k in range(20):
        u = stiefel.project(x, jax.random.normal(jax.random.key(100 + k), x.shape))
        for eps in (1e-2, 1e-4):
            assert _objective(x, g, t, reg, zeta + eps * u) >= best - 1e-12


def test_smooth_case_closed_form():
    x, g = _instance(1, 12, 3)
    zeta, info = rproxjax.tangent_prox(x, g, 0.4, None)
    np.testing.assert_allclose(zeta, -0.4 * stiefel.project(x, g), atol=1e-14)
    # The closed form agrees with the SSN at mu = 0.
    zeta0, _ = rproxjax.tangent_prox(x, g, 0.4, rproxjax.l1(0.0))
    np.testing.assert_allclose(zeta, zeta0, atol=1e-10)
    np.testing.assert_allclose(info.lam, _.lam, atol=1e-9)


def test_warm_start_from_solution_takes_no_steps():
    x, g = _instance(2, 25, 5)
    reg = rproxjax.l1(0.2)
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, reg)
    zeta2, info2 = rproxjax.tangent_prox(x, g, 0.5, reg, lam=info.lam)
    assert int(info2.num_steps) == 0
    np.testing.assert_allclose(zeta, zeta2, atol=1e-14)
    # A nearby problem converges in fewer steps from the warm start.
    g_near = g + 1e-3 * jax.random.normal(jax.random.key(9), g.shape)
    _, cold = rproxjax.tangent_prox(x, g_near, 0.5, reg)
    _, warm = rproxjax.tangent_prox(x, g_near, 0.5, reg, lam=info.lam)
    assert int(warm.num_steps) < int(cold.num_steps)


def _equations(jaxpr, name, **params):
    """The equations of a primitive (with the given params) in a jaxpr, sub-jaxprs
    included."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == name and all(eqn.params.get(k) == v
                                              for k, v in params.items()):
            yield eqn
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from _equations(sub, name, **params)


def _count_primitives(jaxpr, name, **params):
    """Occurrences of a primitive (with the given params) in a jaxpr, sub-jaxprs included."""
    return sum(1 for _ in _equations(jaxpr, name, **params))


def _lane_loops(jaxpr):
    """The while loops over lanes: a body that slices its lane's arguments and runs the
    Newton while_loop (directly or in a nested jit), with no product of its own (every
    product is in the Newton loop)."""
    for eqn in _equations(jaxpr, "while"):
        body = eqn.params["body_jaxpr"].jaxpr
        names = {e.primitive.name for e in body.eqns}
        if ("dynamic_slice" in names and "dot_general" not in names
                and _count_primitives(body, "while") >= 1):
            yield eqn


def test_vmapped_solves_map_their_lanes_on_cpu(lanes):
    x, g = _instance(3, 40, 5)
    solve = lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu), ssn=lanes)[0]  # noqa: E731
    jaxpr = jax.make_jaxpr(jax.vmap(solve))(jnp.array([0.1, 0.2, 0.3])).jaxpr
    sequential = lanes.sequential_lanes is None and jax.default_backend() == "cpu"
    assert _subproblem.sequential_lanes(lanes) == sequential
    # Mapped lanes: a while_loop over the lanes that go, around the Newton while_loop. Only
    # the loops are mapped: the starting residual (its products X Lambda and X^T Y) and
    # zeta stay batched, outside it; inside it, products only in the Newton loop.
    loops = list(_lane_loops(jaxpr))
    assert (len(loops) == 1) == sequential
    assert _count_primitives(jaxpr, "while") >= 1
    if sequential:
        assert _count_primitives(loops[0].params["body_jaxpr"].jaxpr, "dot_general") >= 1


@pytest.mark.parametrize("stepping", [(True, False, True), (False, False, False),
                                      (False, True, False)])
def test_mapped_lanes_mix_lanes_that_step_and_lanes_that_do_not(stepping):
    """The lane loop visits the lanes that step (in any position) and leaves the others at
    their start: each lane's solve is that of a call on its own."""
    x, g = _instance(3, 40, 5)
    ssn = rproxjax.SSN(sequential_lanes=True)
    solve = jax.jit(jax.vmap(lambda lam: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1),
                                                               lam=lam, ssn=ssn)))
    _, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
    assert int(info.num_steps) > 0
    lams = jnp.stack([jnp.zeros_like(info.lam) if s else info.lam for s in stepping])
    zetas, infos = solve(lams)
    np.testing.assert_array_equal(np.asarray(infos.num_steps) > 0, stepping)
    for i in range(len(stepping)):
        zeta, one = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1), lam=lams[i])
        np.testing.assert_allclose(zetas[i], zeta, atol=1e-12)
        np.testing.assert_allclose(infos.lam[i], one.lam, atol=1e-12)
        assert int(infos.num_steps[i]) == int(one.num_steps)
        assert int(infos.num_evaluations[i]) == int(one.num_evaluations)
        assert int(infos.status[i]) == int(one.status)


def test_vmap_over_mu_equals_python_loop(lanes):
    x, g = _instance(3, 40, 5)
    mus = jnp.geomspace(1e-3, 1.0, 9)
    solve = lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu), ssn=lanes)  # noqa: E731
    zetas, infos = jax.jit(jax.vmap(solve))(mus)
    for i, mu in enumerate(mus):
        zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(float(mu)))
        np.testing.assert_allclose(zetas[i], zeta, atol=1e-12)
        assert int(infos.num_steps[i]) == int(info.num_steps)
    assert bool(jnp.all(infos.converged))


def test_nested_vmap_with_unbatched_arguments(lanes):
    x, g = _instance(5, 30, 4)
    mus = jnp.array([[0.05, 0.1, 0.2], [0.3, 0.4, 0.8]])
    ts = jnp.array([0.2, 0.5])
    solve = lambda t, mu: rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), ssn=lanes)  # noqa: E731
    zetas, infos = jax.jit(jax.vmap(jax.vmap(solve, (None, 0)), (0, 0)))(ts, mus)
    assert zetas.shape == (2, 3, 30, 4)
    for i in range(2):
        for j in range(3):
            zeta, info = rproxjax.tangent_prox(x, g, float(ts[i]), rproxjax.l1(float(mus[i, j])))
            np.testing.assert_allclose(zetas[i, j], zeta, atol=1e-12)
            assert int(infos.num_steps[i, j]) == int(info.num_steps)


@pytest.mark.parametrize("which", ["tol", "rtol"])
def test_vmap_over_tolerances_alone(lanes, which):
    # Only a tolerance batched: the mapped-lanes rule's batched parts take the batch size
    # from the rule, not from x, g, t, mu or the warm start.
    x, g = _instance(3, 40, 5)
    values = jnp.array([1e-4, 1e-8, 1e-12]) if which == "tol" else jnp.array([0.0, 1e-2, 0.5])
    solve = lambda v: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1),  # noqa: E731
                                            ssn=lanes.replace(**{which: v}))
    zetas, infos = jax.jit(jax.vmap(solve))(values)
    for i, v in enumerate(values):
        zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1),
                                           ssn=rproxjax.SSN(**{which: float(v)}))
        np.testing.assert_allclose(zetas[i], zeta, atol=1e-14)
        assert int(infos.num_steps[i]) == int(info.num_steps)
        assert bool(infos.converged[i])


def test_forward_mode_derivatives_in_both_lane_modes(lanes):
    # jax.jacfwd batches only tangents: the mapped-lanes rule must accept a batch with no
    # batched argument. Checked against central differences and a vmapped jvp.
    x, g = _instance(3, 40, 5)
    h = lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu),  # noqa: E731
                                         ssn=lanes.replace(tol=1e-12))[0].sum()
    d = float(jax.jacfwd(h)(0.2))
    fd = (float(h(0.2 + 1e-6)) - float(h(0.2 - 1e-6))) / 2e-6
    np.testing.assert_allclose(d, fd, rtol=1e-4)
    tangents = jax.vmap(lambda m: jax.jvp(h, (m,), (1.0,))[1])(jnp.array([0.1, 0.2, 0.3]))
    np.testing.assert_allclose(float(tangents[1]), d, rtol=1e-10)


def test_vmap_over_points_gradients_and_regularizer_pytree():
    kx, kg = jax.random.split(jax.random.key(4))
    xs = stiefel.random_point(kx, 20, 3, shape=(4,))
    gs = jax.random.normal(kg, (4, 20, 3))
    regs = rproxjax.L21(jnp.array([0.1, 0.2, 0.3, 0.4]))
    zetas, infos = jax.vmap(lambda x, g, reg: rproxjax.tangent_prox(x, g, 0.3, reg))(xs, gs, regs)
    for i in range(4):
        zeta, _ = rproxjax.tangent_prox(xs[i], gs[i], 0.3, rproxjax.l21(float(regs.mu[i])))
        np.testing.assert_allclose(zetas[i], zeta, atol=1e-12)


def test_one_trace_for_new_values_of_t_mu_and_lam():
    traces = []

    @jax.jit
    def solve(x, g, t, mu, lam):
        traces.append(None)
        return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), lam=lam)

    x, g = _instance(5, 15, 3)
    lam = jnp.zeros((3, 3))
    for k in range(4):
        zeta, info = solve(x, g, 0.1 * (k + 1), 0.05 * (k + 1), lam)
        lam = info.lam
    assert len(traces) == 1
    # The eager entry point caches its compiled solver in the same way.
    size = rproxjax._ssn.solve._solve_jit._cache_size()
    for k in range(3):
        rproxjax.tangent_prox(x, g, 0.2 + k, rproxjax.l1(0.1 * k), lam=lam)
    assert rproxjax._ssn.solve._solve_jit._cache_size() <= size + 1


def test_max_steps_one_reports_not_converged_with_finite_outputs(ref):
    zeta, info = rproxjax.tangent_prox(jnp.asarray(ref.X0), jnp.asarray(ref.grad(ref.X0)), ref.t,
                                       rproxjax.l1(ref.mu), ssn=rproxjax.SSN(max_steps=1))
    assert int(info.num_steps) == 1
    assert not bool(info.converged)
    assert int(info.status) == rproxjax.Status.MAX_STEPS_REACHED
    assert "max_steps" in rproxjax.describe(info.status)
    assert bool(jnp.all(jnp.isfinite(zeta))) and bool(jnp.all(jnp.isfinite(info.lam)))
    assert np.isfinite(float(info.residual)) and float(info.residual) > 0


@pytest.fixture(scope="module")
def degenerate_subproblem():
    """A sparse PCA subproblem met along an R-ProxSGD run on Fashion-MNIST (r = 10, mu = 0.2,
    t = 0.1, after 200 steps): several columns of the solution have fewer nonzeros than r, so
    the Newton matrix is singular and the residual stalls and jumps before converging."""
    from rproxjax import datasets, problems

    data = jnp.asarray(datasets.load_fashion_mnist(10000, seed=0, dtype=np.float64))
    x0 = stiefel.random_point(jax.random.key(0), 784, 10, jnp.float64)
    opt = rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 0.1, rproxjax.l1(0.2),
                              ssn=rproxjax.SSN.stochastic(tol=1e-6, linear_solver="dense"))
    res = rproxjax.fit(opt, problems.spca_loss, x0, data, key=jax.random.key(1),
                       batch_size=100, num_epochs=1,
                       sampling=rproxjax.Sampling(steps_per_epoch=200))
    batch = data[jax.random.permutation(jax.random.key(7), 10000)[:100]]
    g = jnp.mean(jax.vmap(jax.grad(problems.spca_loss), (None, 0))(res.params, batch), 0)
    return res.params, g, rproxjax.step_info(res.opt_state).ssn.lam


@pytest.mark.parametrize("linear_solver", [pytest.param("dense", marks=pytest.mark.slow), "cg"])
def test_unconverged_calls_return_the_best_iterate(degenerate_subproblem, linear_solver):
    """Non-converged calls return the iterate with the smallest residual: the residual
    reported for max_steps = k does not increase with k (the trajectory does not depend on
    max_steps), and it is the tangency defect of the returned zeta."""
    x, g, lam = degenerate_subproblem
    reg = rproxjax.l1(0.2)
    residuals = []
    for k in (0, 1, 2, 3, 5, 10, 20, 30, 40, 50):
        ssn = rproxjax.SSN(tol=1e-12, max_steps=k, linear_solver=linear_solver)
        zeta, info = rproxjax.tangent_prox(x, g, 0.1, reg, lam=lam, ssn=ssn)
        defect = x.T @ zeta
        # atol: the rounding of X^T zeta (d = 784) once the solve has converged (the dense
        # path does in 6 steps, to 6e-16; its defect recomputed from zeta is 1.1e-14).
        np.testing.assert_allclose(float(jnp.linalg.norm(defect + defect.T)),
                                   float(info.residual), rtol=1e-6, atol=1e-13)
        # lam is the returned point's multiplier: Y(lam) - X reproduces zeta.
        arg = x - 0.1 * g + 0.2 * x @ info.lam
        np.testing.assert_allclose(reg.prox(arg, 0.1) - x, zeta, atol=1e-12)
        residuals.append(float(info.residual))
    assert all(b <= a for a, b in zip(residuals, residuals[1:], strict=False)), residuals
    assert residuals[-1] < 1e-3 * residuals[0]


def test_nonfinite_gradient_is_flagged():
    x, g = _instance(6, 10, 2)
    g = g.at[0, 0].set(jnp.nan)
    _, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
    assert int(info.status) == rproxjax.Status.NONFINITE
    assert not bool(info.converged)


@pytest.mark.parametrize("reg", [rproxjax.l1(0.05), rproxjax.l21(0.1)])
@pytest.mark.parametrize("linear_solver", ["dense", "cg"])
def test_float32_agrees_with_float64(reg, linear_solver):
    x, g = _instance(7, 50, 6)
    zeta64, info64 = rproxjax.tangent_prox(x, g, 0.5, reg,
                                           ssn=rproxjax.SSN(linear_solver=linear_solver))
    zeta32, info32 = rproxjax.tangent_prox(x.astype(jnp.float32), g.astype(jnp.float32), 0.5, reg,
                                           ssn=rproxjax.SSN(linear_solver=linear_solver))
    assert zeta32.dtype == jnp.float32 and info32.lam.dtype == jnp.float32
    assert bool(info32.converged) and bool(info64.converged)
    np.testing.assert_allclose(zeta32, zeta64, atol=2e-4)


@pytest.mark.parametrize("t", [1e2, 1e3, 1e4])
@pytest.mark.parametrize("reg", [rproxjax.l1(0.1), rproxjax.l21(1.0)])
def test_float32_solves_at_large_scale_end_at_the_rounding_level(reg, t):
    # ||E|| cannot fall below ~eps ||zeta||: with ||zeta|| ~ 1e3-1e5 the default float32 tol
    # (1.2e-5) is below it, and such solves ran to max_steps, flagged unconverged, with a
    # correct answer. The stopping test includes eps ||zeta|| (E's rounding level).
    x, g = _instance(8, 60, 5)
    ref, info64 = rproxjax.tangent_prox(x, g, t, reg, ssn=rproxjax.SSN(tol=1e-12))
    assert bool(info64.converged)
    zeta, info = rproxjax.tangent_prox(x.astype(jnp.float32), g.astype(jnp.float32), t, reg)
    norm_zeta = float(jnp.linalg.norm(zeta))
    assert int(info.status) == rproxjax.Status.SUCCESSFUL and int(info.num_steps) <= 10
    assert float(info.residual) <= _subproblem.default_tol(jnp.float32) + float(
        jnp.finfo(jnp.float32).eps) * norm_zeta
    assert float(jnp.linalg.norm(zeta - ref)) <= 1e-6 * float(jnp.linalg.norm(ref))


def test_a_tolerance_below_the_rounding_level_ends_the_solve():
    # A tol of the dtype's smallest normal number asks for the impossible: the solve ends at
    # E's rounding level, converged, instead of running to max_steps (float64 and float32).
    for dtype in (jnp.float64, jnp.float32):
        x, g = _instance(9, 40, 4, dtype)
        tiny = float(jnp.finfo(dtype).tiny)
        zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.2), ssn=rproxjax.SSN(tol=tiny))
        assert bool(info.converged) and int(info.num_steps) < 20
        bound = float(jnp.finfo(dtype).eps) * float(jnp.linalg.norm(zeta))
        assert float(info.residual) <= tiny + bound


def test_overflowing_norms_are_never_converged():
    # ||E|| and ||zeta|| overflow (entries past ~1e154 in float64, ~1e19 in float32) with
    # finite inputs: inf <= inf passed the stopping test, and wrong answers came back
    # converged with status SUCCESSFUL (review). Now NONFINITE, not converged.
    x, g = _instance(10, 12, 3)
    cases = [
        (x, g, 0.5, {"lam_h": jnp.full((3, 3), 1e160)}),
        (x.astype(jnp.float32), 2e19 * g.astype(jnp.float32), 0.5, {}),
        (x, g, 1e154, {}),
        (x, 1e200 * g, 0.5, {"ssn": rproxjax.SSN(rtol=0.1)}),
    ]
    for xx, gg, t, kw in cases:
        _, info = rproxjax.tangent_prox(xx, gg, t, rproxjax.l1(0.2), **kw)
        assert not bool(info.converged)
        assert int(info.status) == rproxjax.Status.NONFINITE


def test_traced_tolerances_out_of_range_are_invalid():
    # Concrete values raise; traced ones were MAX_STEPS_REACHED (tol < 0, NaN) or, for an
    # infinite tol or rtol, SUCCESSFUL with a wrong zeta.
    x, g = _instance(11, 12, 3)
    status = jax.jit(lambda tol, rtol: rproxjax.tangent_prox(
        x, g, 0.5, rproxjax.l1(0.2), ssn=rproxjax.SSN(tol=tol, rtol=rtol))[1].status)
    for tol, rtol in [(-1.0, 0.0), (jnp.nan, 0.0), (jnp.inf, 0.0), (1e-8, jnp.inf),
                      (1e-8, -0.5), (1e-8, jnp.nan)]:
        assert int(status(tol, rtol)) == rproxjax.Status.INVALID
    assert int(status(1e-8, 0.1)) == rproxjax.Status.SUCCESSFUL
    for name in ("tol", "rtol"):
        with pytest.raises(ValueError, match=f"{name} must be a scalar"):
            rproxjax.SSN(**{name: jnp.array([0.1, 0.2])})


def test_per_column_mu():
    x, g = _instance(8, 30, 3)
    mu = jnp.array([0.0, 0.5, 5.0])
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu))
    assert bool(info.converged)
    y = x + zeta
    # Stronger columns are sparser; mu = 0 leaves column 0 dense.
    nnz = np.count_nonzero(np.asarray(y), axis=0)
    assert nnz[0] == 30 and nnz[0] >= nnz[1] >= nnz[2]


def test_bad_inputs_raise_clear_errors():
    x, g = _instance(9, 8, 3)
    reg = rproxjax.l1(0.1)
    with pytest.raises(ValueError, match="same shape"):
        rproxjax.tangent_prox(x, g[:, :2], 0.5, reg)
    with pytest.raises(ValueError, match="r <= d"):
        rproxjax.tangent_prox(jnp.ones((2, 3)), jnp.ones((2, 3)), 0.5, reg)
    with pytest.raises(ValueError, match="t must be finite and > 0"):
        rproxjax.tangent_prox(x, g, 0.0, reg)
    with pytest.raises(ValueError, match="t must be finite and > 0"):
        rproxjax.tangent_prox(x, g, np.float64(-1.0), reg)
    with pytest.raises(ValueError, match="mu must be finite and >= 0"):
        rproxjax.l1(-0.1)
    with pytest.raises(ValueError, match="mu must be finite and >= 0"):
        rproxjax.tangent_prox(x, g, 0.5, rproxjax.L1(jnp.array([0.1, -1.0, 0.2])))
    with pytest.raises(ValueError, match="one entry per column"):
        rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(jnp.ones(4)))
    with pytest.raises(ValueError, match="l21: mu must be a scalar"):
        rproxjax.tangent_prox(x, g, 0.5, rproxjax.l21(jnp.ones(3)))
    with pytest.raises(ValueError, match="float32 or float64"):
        rproxjax.tangent_prox(jnp.ones((8, 3), jnp.int32), jnp.ones((8, 3), jnp.int32), 0.5, reg)
    with pytest.raises(ValueError, match="same dtype"):
        rproxjax.tangent_prox(x, g.astype(jnp.float32), 0.5, reg)
    with pytest.raises(ValueError, match="use jax.vmap"):
        rproxjax.tangent_prox(x[None], g[None], 0.5, reg)
    with pytest.raises(ValueError, match="lam must have shape"):
        rproxjax.tangent_prox(x, g, 0.5, reg, lam=jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="linear_solver"):
        rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(linear_solver="lu"))
    with pytest.raises(ValueError, match="t must be a scalar"):
        rproxjax.tangent_prox(x, g, jnp.ones(2), reg)
    with pytest.raises(ValueError, match="float32 or float64"):
        rproxjax.tangent_prox(x.astype(jnp.float16), g.astype(jnp.float16), 0.5, reg)
    with pytest.raises(ValueError, match="rule must be one of"):
        rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(rule="newton"))
    with pytest.raises(ValueError, match="lam_h must have shape"):
        rproxjax.tangent_prox(x, g, 0.5, reg, lam_h=jnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="at most one warm start.*got lam and lam_h"):
        rproxjax.tangent_prox(x, g, 0.5, reg, lam=jnp.zeros((3, 3)), lam_h=jnp.zeros((3, 3)))
    with pytest.raises(ValueError, match="got lam_h and subgradient"):
        rproxjax.tangent_prox(x, g, 0.5, reg, lam_h=jnp.zeros((3, 3)), subgradient=g)
    with pytest.raises(ValueError, match=r"subgradient must have shape \(8, 3\)"):
        rproxjax.tangent_prox(x, g, 0.5, reg, subgradient=jnp.zeros((3, 3)))
    with pytest.raises(TypeError, match="subgradient must be a JAX or NumPy array"):
        rproxjax.tangent_prox(x, g, 0.5, reg, subgradient=g.tolist())
    with pytest.raises(ValueError, match="rtol must be finite and >= 0"):
        rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(rtol=-1e-3))
    with pytest.raises(ValueError, match="SSN.rule must be one of"):
        rproxjax.r_prox_sgd(0.1, 0.1, reg, ssn=rproxjax.SSN.stochastic(rule="newton"))


@pytest.mark.parametrize("method", [pytest.param("secant", marks=pytest.mark.slow), "adaptive",
                                    "reference"])
def test_lam_h_warm_start_equals_the_shifted_multiplier(method):
    # lam_h = Lambda - sym(X^T G) / 2 of a solve restarts the same solve at its solution, and
    # tangent_prox(lam_h=...) is tangent_prox(lam=lam_h + sym(X^T G) / 2).
    x, g = _instance(10, 30, 4)
    reg = rproxjax.l1(0.3)
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(rule=method))
    a = x.T @ g
    np.testing.assert_allclose(info.lam_h, info.lam - 0.25 * (a + a.T), atol=1e-14)
    zeta2, info2 = rproxjax.tangent_prox(x, g, 0.5, reg, lam_h=info.lam_h,
                                         ssn=rproxjax.SSN(rule=method))
    assert int(info2.num_steps) == 0
    np.testing.assert_allclose(zeta2, zeta, atol=1e-13)
    g_new = g + 0.1 * jax.random.normal(jax.random.key(11), g.shape)
    b = x.T @ g_new
    z_h, i_h = rproxjax.tangent_prox(x, g_new, 0.5, reg, lam_h=info.lam_h,
                                     ssn=rproxjax.SSN(rule=method, max_steps=1))
    z_l, i_l = rproxjax.tangent_prox(x, g_new, 0.5, reg, lam=info.lam_h + 0.25 * (b + b.T),
                                     ssn=rproxjax.SSN(rule=method, max_steps=1))
    np.testing.assert_allclose(z_h, z_l, atol=1e-12)


def test_a_non_symmetric_warm_start_gives_the_same_solution():
    x, g = _instance(13, 20, 3)
    reg = rproxjax.l1(0.2)
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, reg)
    skewed = info.lam + jnp.array([[0.0, 1.0, -2.0], [-1.0, 0.0, 0.5], [2.0, -0.5, 0.0]])
    for kw in ({"lam": skewed}, {"lam_h": info.lam_h + (skewed - info.lam)}):
        zeta2, info2 = rproxjax.tangent_prox(x, g, 0.5, reg, **kw)
        assert bool(info2.converged)
        np.testing.assert_allclose(zeta2, zeta, atol=1e-12)
        np.testing.assert_allclose(info2.lam, info2.lam.T, atol=0)


@pytest.mark.parametrize("reg", [rproxjax.l1(0.3), rproxjax.l1(jnp.array([0.1, 0.5, 0.3])),
                                 rproxjax.l21(2.0)], ids=["l1", "l1-columns", "l21"])
def test_subgradient_is_in_the_subdifferential_and_gives_the_multiplier(reg):
    # info.subgradient = (W - Y) / t is in the subdifferential of h at Y = X + zeta, and
    # Lambda = sym(X^T (G + V)) / 2 + E / (4t) (the optimality condition, exactly).
    x, g = _instance(21, 40, 3)
    t = 0.7
    zeta, info = rproxjax.tangent_prox(x, g, t, reg)
    assert bool(info.converged)
    y, v = np.asarray(x + zeta), np.asarray(info.subgradient)
    if isinstance(reg, rproxjax.L1):
        mu = np.broadcast_to(np.asarray(reg.mu), (3,))
        on = y != 0
        assert 0 < on.sum() < y.size  # both kinds of entries are checked
        np.testing.assert_allclose(v[on], (mu * np.sign(y))[on], rtol=1e-12)
        assert np.all(np.abs(v[~on]) <= (mu * np.ones_like(y))[~on] * (1 + 1e-12))
    else:
        rows = np.linalg.norm(y, axis=1) > 0
        assert 0 < rows.sum() < y.shape[0]
        unit = y[rows] / np.linalg.norm(y[rows], axis=1, keepdims=True)
        np.testing.assert_allclose(v[rows], 2.0 * unit, rtol=1e-10, atol=1e-13)
        assert np.all(np.linalg.norm(v[~rows], axis=1) <= 2.0 * (1 + 1e-12))
    e = np.asarray(x.T @ (x + zeta))
    e = e + e.T - 2 * np.eye(3)
    a = np.asarray(x.T @ (g + info.subgradient))
    np.testing.assert_allclose(info.lam, 0.25 * (a + a.T) + e / (4 * t), atol=1e-13)


@pytest.mark.parametrize("method", [pytest.param("secant", marks=pytest.mark.slow), "adaptive"])
def test_subgradient_warm_start_is_the_multiplier_at_the_new_point(method):
    # subgradient=V starts from Lambda_0 = sym(X^T (G + V)) / 2 at the new (X, G): the same
    # iterates as lam=Lambda_0, and the same solution as a cold start.
    x, g = _instance(22, 30, 4)
    reg = rproxjax.l1(0.3)
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(rule=method))
    x_new = stiefel.retract(x, 0.3 * zeta)
    g_new = g + 0.1 * jax.random.normal(jax.random.key(12), g.shape)
    a = x_new.T @ (g_new + info.subgradient)
    for max_steps in (0, 1, 100):
        z_s, i_s = rproxjax.tangent_prox(x_new, g_new, 0.5, reg, subgradient=info.subgradient,
                                         ssn=rproxjax.SSN(rule=method, max_steps=max_steps))
        z_l, i_l = rproxjax.tangent_prox(x_new, g_new, 0.5, reg, lam=0.25 * (a + a.T),
                                         ssn=rproxjax.SSN(rule=method, max_steps=max_steps))
        np.testing.assert_allclose(z_s, z_l, atol=1e-12)
        assert int(i_s.num_steps) == int(i_l.num_steps)
    cold, _ = rproxjax.tangent_prox(x_new, g_new, 0.5, reg, ssn=rproxjax.SSN(rule=method))
    assert bool(i_s.converged)
    np.testing.assert_allclose(z_s, cold, atol=1e-9)


def test_subgradient_is_zero_for_bad_inputs_and_kept_when_collapsed():
    x, g = _instance(23, 12, 3)
    reg = rproxjax.l1(0.2)
    _, info = rproxjax.tangent_prox(x, g.at[0, 0].set(jnp.nan), 0.5, reg)
    assert int(info.status) == rproxjax.Status.NONFINITE
    np.testing.assert_array_equal(info.subgradient, 0.0)
    _, info = rproxjax.tangent_prox(x, g, 0.5, reg, subgradient=g.at[1, 1].set(jnp.inf))
    assert int(info.status) == rproxjax.Status.NONFINITE
    np.testing.assert_array_equal(info.subgradient, 0.0)
    _, info = jax.jit(lambda t: rproxjax.tangent_prox(x, g, t, reg))(-1.0)
    assert int(info.status) == rproxjax.Status.INVALID
    np.testing.assert_array_equal(info.subgradient, 0.0)
    _, info = jax.jit(lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu)))(
        jnp.array([0.1, -0.2, 0.1]))
    assert int(info.status) == rproxjax.Status.INVALID
    np.testing.assert_array_equal(info.subgradient, 0.0)
    _, info = rproxjax.tangent_prox(x, g, 0.5, None)  # h = 0
    assert info.subgradient.shape == x.shape
    np.testing.assert_array_equal(info.subgradient, 0.0)
    # A collapsed iterate (t mu above every entry of W: Y = 0) refuses zeta but keeps its
    # subgradient W / t, a valid warm start for the next call.
    zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(100.0), ssn=rproxjax.SSN(max_steps=0))
    assert int(info.status) == rproxjax.Status.COLLAPSED
    np.testing.assert_array_equal(zeta, 0.0)
    w = x - 0.5 * g  # W at Lambda_0 = 0 (no warm start)
    np.testing.assert_allclose(info.subgradient, w / 0.5, atol=1e-13)
    assert float(jnp.max(jnp.abs(info.subgradient))) <= 100.0


def test_relative_tolerance_stops_early_with_a_bounded_error():
    x, g = _instance(12, 60, 5)
    reg = rproxjax.l1(0.4)
    tight, info = rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(tol=1e-12))
    loose, info_l = rproxjax.tangent_prox(x, g, 0.5, reg, ssn=rproxjax.SSN(rtol=1e-2))
    assert bool(info_l.converged)
    assert int(info_l.num_steps) < int(info.num_steps)
    assert float(info_l.residual) <= 1e-2 * float(jnp.linalg.norm(loose)) + 1e-10
    assert float(jnp.linalg.norm(loose - tight)) <= 10 * float(info_l.residual) + 1e-12


def test_l21_derivatives_at_a_zero_row_are_zero_not_nan():
    # The prox is identically 0 on a row with ||V_i|| <= t mu, and 0 is a subgradient of
    # the row norm at 0: the norm's derivative there was NaN (0/0).
    v = jnp.array([[0.0, 0.0], [1.0, 2.0], [0.1, 0.0]])
    reg = rproxjax.l21(0.3)
    for fn in (lambda a: reg.prox(a, 1.0).sum(), reg.value, lambda a: reg.subgradient(a).sum()):
        grad = jax.grad(fn)(v)
        assert bool(jnp.all(jnp.isfinite(grad)))
        np.testing.assert_array_equal(grad[0], 0.0)
        u = jnp.zeros_like(v).at[1:].set(jax.random.normal(jax.random.key(0), (2, 2)))
        fd = (fn(v + 1e-6 * u) - fn(v - 1e-6 * u)) / 2e-6
        np.testing.assert_allclose(jnp.sum(grad * u), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("mu", [np.float64(0.3), np.array(0.3), jnp.float64(0.3),
                                np.array([0.1, 0.2])])
@pytest.mark.parametrize("make", [rproxjax.l1, rproxjax.l21])
def test_regularizer_methods_follow_the_input_dtype(make, mu):
    # A float64 strength (x64 enabled) must not promote float32 inputs.
    if make is rproxjax.l21 and np.ndim(mu):
        pytest.skip("l21 has one strength")
    reg = make(mu)
    v = jnp.ones((4, 2), jnp.float32)
    for t in (1.0, jnp.float64(1.0)):
        outs = (reg.prox(v, t), reg.value(v), reg.subgradient(v), reg.prox_jacobian(v, t)[0])
        assert all(o.dtype == jnp.float32 for o in outs)
    # Integer and bool inputs: mu is not rounded to their dtype (it was: l1(0.3) gave 0).
    ints = jnp.array([[1, -2], [3, 0]])
    mu64 = np.broadcast_to(np.asarray(mu, np.float64), (2,))
    np.testing.assert_allclose(reg.prox(ints, 1.0), make(mu64 if np.ndim(mu) else float(mu))
                               .prox(ints.astype(jnp.float64), 1.0))
    assert float(rproxjax.l1(0.5).value(jnp.array([[True, False]]))) == 0.5


def test_describe_reads_integer_codes_on_the_host():
    # describe(1.7) and describe(True) gave the MAX_STEPS message; a 2-d array came back flat;
    # under jit it raised JAX's TracerArrayConversionError.
    for bad in (1.7, True, jnp.array([0.0, 1.0])):
        with pytest.raises(TypeError, match="integer status codes"):
            rproxjax.describe(bad)
    codes = jnp.array([[0, 1], [2, 3]], jnp.int32)
    assert rproxjax.describe(codes) == [[rproxjax.Status(int(c)).message for c in row]
                                        for row in np.asarray(codes)]
    with pytest.raises(TypeError, match="on the host"):
        jax.jit(rproxjax.describe)(jnp.int32(0))


_EAGER = """
import json, jax, numpy as np, rproxjax
count = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **k: count.__setitem__(0, count[0] + e.endswith("backend_compile_duration")))
rng = np.random.default_rng(0)
x = np.linalg.qr(rng.standard_normal((20, 3)))[0]
g = rng.standard_normal((20, 3))
counts = {}
zeta, info = rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))
counts["first"] = count[0]
count[0] = 0
rproxjax.tangent_prox(x, g, 0.3, rproxjax.l1(0.2), lam=np.asarray(info.lam))
rproxjax.tangent_prox(x, g, 0.3, rproxjax.l1(0.2), ssn=rproxjax.SSN(tol=1e-4))
t, mu = jax.device_put(np.float32(0.4)), jax.device_put(0.3)  # strong and weak JAX scalars
rproxjax.tangent_prox(x, g, t, rproxjax.l1(np.float32(0.2)))
rproxjax.tangent_prox(x, g, np.float64(0.4), rproxjax.l1(mu))
counts["new values"] = count[0]
print(json.dumps(counts))
"""


def test_an_eager_call_compiles_its_solve_alone():
    """A new process's first eager ``tangent_prox`` on NumPy input compiles one program, the
    solve: the step, the regularizer's strength, the warm start and the tolerances reach it
    by transfers (they compiled 3 copies and 3 operations of their own), and the multiplier
    is symmetrized inside it. New values (a warm start, mu, t, tol), given as Python, NumPy
    or JAX numbers, weakly or strongly typed, compile nothing: they reach the solve as one
    type."""
    import json
    import subprocess
    import sys

    from tests.subprocess_env import subprocess_env

    proc = subprocess.run([sys.executable, "-c", _EAGER], capture_output=True, text=True,
                          timeout=300, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"first": 1, "new values": 0}
