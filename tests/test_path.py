"""The path-following Newton step of tight l1 solves (rproxjax._ssn.path).

E(Lambda) is piecewise affine for l1: along the homotopy E(Lambda(s)) = (1 - s) E_0 each
piece is a linear solve, and crossing a threshold changes the Newton matrix by a rank-one
term. The ratio test is checked against a brute-force NumPy scan, the Sherman-Morrison
updates against the invariant E(Lambda(s)) = (1 - s) E_0 and against a fresh dense solve,
and the step's place in ``tangent_prox`` (which solves take it, what they report).
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import rproxjax
from rproxjax import stiefel
from rproxjax._ssn import linear as _newton
from rproxjax._ssn import path as _path
from rproxjax._ssn import steps as _ssn_steps
from tests.subproblem_instances import load_instances


def _secant(path_steps: bool) -> rproxjax.Secant:
    """The secant rule with or without path steps."""
    return rproxjax.Secant(path=rproxjax.PathSteps() if path_steps else None)


def _brute_force_breakpoint(w, p, active, thr):
    best, where = np.inf, None
    for i in range(w.shape[0]):
        for c in range(w.shape[1]):
            if thr[c] <= 0 or p[i, c] == 0:
                continue
            for level in (thr[c], -thr[c]):
                tau = (level - w[i, c]) / p[i, c]
                if tau <= 0:
                    continue
                inside_after = abs(w[i, c] + 1.01 * tau * p[i, c]) < thr[c]
                # A crossing that leaves the set (active -> inside) or enters it.
                if active[i, c] == inside_after and tau < best:
                    best, where = tau, i * w.shape[1] + c
    return best, where


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_first_breakpoint_matches_a_brute_force_scan(seed, dtype):
    rng = np.random.default_rng(seed)
    d, r = 30, 4
    w = rng.normal(size=(d, r))
    p = rng.normal(size=(d, r))
    p[rng.random((d, r)) < 0.2] = 0.0
    mu = np.array([0.5, 0.0, 1.2, 0.3])  # a column with mu = 0 never crosses
    thr = 0.7 * mu
    active = np.abs(w) > thr
    tau, index = rproxjax.l1(jnp.asarray(mu, dtype)).first_breakpoint(
        jnp.asarray(w, dtype), jnp.asarray(p, dtype), jnp.asarray(active), jnp.asarray(0.7, dtype))
    w32, p32 = np.asarray(jnp.asarray(w, dtype), float), np.asarray(jnp.asarray(p, dtype), float)
    tau_ref, index_ref = _brute_force_breakpoint(w32, p32, active, np.asarray(
        jnp.asarray(thr, dtype), float))
    assert int(index) == index_ref
    # (thr - W) / P cancels where W is near the threshold: float32 keeps ~4 digits here.
    np.testing.assert_allclose(float(tau), tau_ref, rtol=1e-4 if dtype == jnp.float32 else 1e-12)


def test_first_breakpoint_is_inf_when_nothing_crosses():
    w = jnp.array([[2.0, -3.0], [0.1, 0.0]])
    p = jnp.array([[1.0, -1.0], [0.0, 0.0]])  # active entries moving outwards, others still
    tau, _ = rproxjax.l1(1.0).first_breakpoint(w, p, jnp.abs(w) > 0.5, 0.5)
    assert float(tau) == np.inf


def _instance(seed, d=40, r=3, mu=0.4, t=0.5):
    x = stiefel.random_point(jax.random.key(seed), d, r)
    g = jax.random.normal(jax.random.key(seed + 100), (d, r))
    return x, g, t, rproxjax.l1(mu)


def _start(x, g, t, reg):
    lam = 0.25 * (x.T @ g + g.T @ x)
    w = x - t * g + 2 * t * x @ lam
    problem = _ssn_steps.Problem(x, x.T, jnp.asarray(t), reg, 1e-10, 0.0)
    y, jac, e, norm_e = _ssn_steps.residual(problem, w)
    return lam, w, jac, e


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_path_keeps_the_residual_on_the_homotopy(seed):
    # Nondegenerate columns (d = 40 >> r = 3, a small mu): every piece's Newton matrix is
    # definite, so with rho ~ 0 the path satisfies E(Lambda_0 + dLambda) = (1 - s) E_0
    # exactly, across every rank-one update.
    x, g, t, reg = _instance(seed)
    lam, w, jac, e = _start(x, g, t, reg)
    r = x.shape[1]
    basis = _newton.typed_sym_basis(r, x.dtype)
    mat = 4 * t * reg.jacobian_gram(x, jac, basis) + 1e-14 * jnp.eye(basis[0].size)
    factor = jsl.cho_factor(mat)
    rhs = -_newton.vech(e, basis)
    coords = jsl.cho_solve(factor, rhs)
    cut_short = 0
    for budget in (1, 3, 8, 64):
        s, w_s, dlam, coords_s, n = _path._path(x, t, reg, factor, basis, w, jac > 0, coords,
                                                rhs, budget)
        # Cut short after `budget` crossings, or at s = 1 after fewer.
        assert (int(n) == budget and float(s) < 1.0) or (int(n) < budget and float(s) == 1.0)
        cut_short += float(s) < 1.0
        np.testing.assert_allclose(w_s, w + 2 * t * x @ dlam, atol=1e-12)
        e_s = _ssn_steps.residual(_ssn_steps.Problem(x, x.T, t, reg, 1e-10, 0.0), w_s).e
        np.testing.assert_allclose(e_s, (1 - float(s)) * e, atol=1e-10)
        # The updated direction is a fresh dense solve with the mask of the last piece
        # (read off just past W(s) along the direction itself).
        d_s = _newton.unvech(coords_s, basis, r)
        ahead = w_s + 1e-9 * (2 * t * x @ d_s)
        mask = (jnp.abs(ahead) > t * reg.mu).astype(x.dtype)
        fresh = jsl.solve(4 * t * reg.jacobian_gram(x, mask, basis)
                          + 1e-14 * jnp.eye(basis[0].size), rhs, assume_a="pos")
        np.testing.assert_allclose(coords_s, fresh, rtol=1e-8, atol=1e-10)
    assert cut_short >= 2 and float(s) == 1.0  # both ends of the path were checked


def test_vmapped_path_steps_match_a_loop(lanes):
    # Lanes over mu (each its own path and number of breakpoints), mapped one after another
    # or batched: the same results as a loop of single calls.
    insts = [i for i in load_instances(15, np.float64) if i["method"] == "R-ProxSGD"]
    inst = insts[1]
    mus = jnp.array([0.05, 0.2, 0.4, 0.8])

    def solve(mu):
        return rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"], rproxjax.l1(mu),
                                     lam=inst["lam0"], ssn=lanes.replace(tol=1e-8))

    zetas, infos = jax.jit(jax.vmap(solve))(mus)
    assert int(jnp.sum(infos.num_breakpoints)) > 0
    for k, mu in enumerate(mus):
        zeta, info = solve(mu)
        assert bool(info.converged) and bool(infos.converged[k])
        for field in ("num_steps", "num_breakpoints", "num_evaluations", "status"):
            assert int(getattr(infos, field)[k]) == int(getattr(info, field)), field
        np.testing.assert_allclose(zetas[k], zeta, atol=1e-10)


def test_which_solves_take_path_steps():
    inst = next(i for i in load_instances(15, np.float64) if i["mu"] == 0.2)
    args = (inst["x"], inst["g"], inst["t"])

    def solve(reg=None, **kw):
        reg = rproxjax.l1(inst["mu"]) if reg is None else reg
        return rproxjax.tangent_prox(*args, reg, lam=inst["lam0"], ssn=rproxjax.SSN(**kw))[1]

    tight = solve(tol=1e-8)
    assert int(tight.num_breakpoints) > 0 and int(tight.num_linear_steps) == 0
    cg = solve(tol=1e-8, linear_solver="cg")  # the matrix-free path keeps the secant shift
    assert int(cg.num_breakpoints) == 0 < int(cg.num_linear_steps)
    loose = solve(rtol=rproxjax.SSN_RTOL)  # loose solves: regularized Newton steps
    assert int(loose.num_breakpoints) == 0
    adaptive = solve(tol=1e-8, rule="adaptive")
    assert int(adaptive.num_breakpoints) == 0
    group = solve(reg=rproxjax.l21(inst["mu"]), tol=1e-8)  # no entrywise breakpoints
    assert int(group.num_breakpoints) == 0
    single = rproxjax.tangent_prox(*(np.float32(a) for a in args), rproxjax.l1(inst["mu"]),
                                   lam=np.float32(inst["lam0"]))[1]
    assert int(single.num_breakpoints) == 0  # float32 keeps the shifted steps
    single_path = rproxjax.tangent_prox(*(np.float32(a) for a in args), rproxjax.l1(inst["mu"]),
                                        lam=np.float32(inst["lam0"]),
                                        ssn=rproxjax.SSN(rule=rproxjax.Secant(
                                            path=rproxjax.PathSteps(float32=True))))[1]
    assert int(single_path.num_breakpoints) > 0  # unless the settings ask for path steps
    off = solve(tol=1e-8, path_steps=False)
    assert int(off.num_breakpoints) == 0
    for info in (tight, cg, loose, adaptive, group, single, single_path, off):
        assert bool(info.converged)


def test_the_path_and_the_shifted_steps_reach_the_same_solutions():
    # The former tight step (secant shift and exact line search) as an independent iteration.
    instances = [i for i in load_instances(10, np.float64) if i["mu"] in (0.2, 0.4)][:6]

    def solve(inst, path_steps=True):
        return rproxjax.tangent_prox(
            inst["x"], inst["g"], inst["t"], rproxjax.l1(inst["mu"]), lam=inst["lam0"],
            ssn=rproxjax.SSN(tol=1e-11, max_steps=200, rule=_secant(path_steps)))

    paths = [solve(i) for i in instances]
    shifted = [solve(i, path_steps=False) for i in instances]
    for (z_path, i_path), (z_shift, i_shift) in zip(paths, shifted, strict=True):
        assert bool(i_path.converged) and bool(i_shift.converged)
        assert int(i_shift.num_breakpoints) == 0
        np.testing.assert_allclose(z_path, z_shift, atol=1e-8)
    assert sum(int(i.num_breakpoints) for _, i in paths) > 0
    assert sum(int(i.num_steps) for _, i in paths) < sum(int(i.num_steps) for _, i in shifted)


@pytest.mark.parametrize("mu", [2.0, 3.0, 5.0])
def test_cold_sparse_solves_take_no_more_steps_than_shifted_ones(mu):
    # No warm start, most entries thresholded (d = 200, r = 15): the 16 crossings of a path
    # come within s = 0.001-0.05 and lower ||E|| by a hair; taking that instead of the line
    # search made these solves take 18 / 56 / 23 steps against 8 / 11 / 7 (found by a
    # review). Measured now: 7 / 10 / 7.
    x = stiefel.random_point(jax.random.key(1), 200, 15, jnp.float64)
    g = jax.random.normal(jax.random.key(1001), (200, 15), jnp.float64)

    def solve(path_steps=True):
        ssn = rproxjax.SSN(tol=1e-10, rule=_secant(path_steps))
        return rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu), ssn=ssn)

    zeta, info = solve()
    zeta_shift, info_shift = solve(path_steps=False)
    assert bool(info.converged) and bool(info_shift.converged)
    assert int(info.num_breakpoints) > 0
    assert int(info.num_steps) <= int(info_shift.num_steps), (info.num_steps,
                                                                info_shift.num_steps)
    np.testing.assert_allclose(zeta, zeta_shift, atol=1e-9)


@pytest.mark.parametrize("budget", [1, 2])
def test_paths_cut_short_still_converge_to_the_solution(budget):
    # A crossing budget of 1 or 2 cuts most paths short: the step then picks among the full
    # step, the last breakpoint, the completion along the last direction and the line search.
    instances = [i for i in load_instances(15, np.float64) if i["mu"] == 0.2][:4]

    assert rproxjax.PathSteps().max_breaks == 16

    def solve(inst, max_breaks=16):
        return rproxjax.tangent_prox(
            inst["x"], inst["g"], inst["t"], rproxjax.l1(inst["mu"]), lam=inst["lam0"],
            ssn=rproxjax.SSN(tol=1e-10, rule=rproxjax.Secant(
                path=rproxjax.PathSteps(max_breaks=max_breaks))))

    default = [solve(i) for i in instances]
    short = [solve(i, max_breaks=budget) for i in instances]
    for (zeta, info), (zeta_short, info_short) in zip(default, short, strict=True):
        assert bool(info.converged) and bool(info_short.converged)
        assert int(info_short.num_breakpoints) <= budget * int(info_short.num_steps)
        np.testing.assert_allclose(zeta_short, zeta, atol=1e-8)
    assert sum(int(i.num_breakpoints) for _, i in short) > 0
