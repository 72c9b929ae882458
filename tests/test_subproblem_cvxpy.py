"""tangent_prox checked against an independent convex solver (cvxpy + Clarabel).

The subproblem, for X in St(d, r), G, t > 0 and a regularizer h,

    zeta* = argmin_{zeta^T X + X^T zeta = 0} <G, zeta> + ||zeta||_F^2 / (2t) + h(X + zeta),

is written directly in cvxpy (objective and regularizer in numpy/cvxpy terms,
nothing taken from rproxjax) and solved by Clarabel's interior-point method
with tight tolerances. Each case checks that rproxjax's step is within 1e-6
(relative) of cvxpy's, that its objective is no worse, that it is tangent and
that the Newton iteration reports convergence.

Scales: G is standard Gaussian, so the prox argument X - tG + 2tX Lambda has
entries of order t (X's entries are of order 1 / sqrt(d)). The l1 strengths
are mu = f * (1, or one value per column in [0.3, 3]) with f over three
decades (0.02, 0.2, 2: from about 1 % to 80 % zero entries); the l21
strengths are mu = f * sqrt(r) (row norms of G are about sqrt(r)), with
f = 0.05 (no zero rows: the smooth regime), 0.5 and 5 (most rows zero).

Accuracy: with l1 the cvxpy problem is a QP that Clarabel solves to "optimal"
and agrees with rproxjax to ~1e-9. With l21 it has second-order cones and
Clarabel stops at "optimal_inaccurate" (AlmostSolved) after its KKT solves
lose accuracy; its steps are then within ~1e-8 to ~7e-7 of rproxjax's, and
rproxjax's objective is the lower one (rproxjax's dual residual is ~1e-12).
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax._subproblem import CG_THRESHOLD

cp = pytest.importorskip("cvxpy")
if "CLARABEL" not in cp.installed_solvers():  # pragma: no cover
    pytest.skip("cvxpy's CLARABEL solver is not installed", allow_module_level=True)

# Clarabel keyword settings (names as in clarabel.DefaultSettings). The
# tolerances are the tightest it reaches; the static regularization and the
# iterative refinement are tightened too, which helps the second-order-cone
# (l21) problems by up to a factor 3 in the step's error.
CLARABEL_SETTINGS = dict(
    tol_gap_abs=1e-12,
    tol_gap_rel=1e-12,
    tol_feas=1e-12,
    static_regularization_constant=1e-12,
    iterative_refinement_reltol=1e-16,
    iterative_refinement_abstol=1e-16,
    iterative_refinement_max_iter=50,
)

STEP_RTOL = 1e-6  # ||zeta - zeta_cvx||_F / max(1, ||zeta_cvx||_F)
OBJ_SLACK = 1e-8  # obj_rprox <= obj_cvx + OBJ_SLACK * max(1, |obj_cvx|)
TANGENCY_ATOL = 1e-10  # ||zeta^T X + X^T zeta||_F


class Instance(NamedTuple):
    kind: str  # "l1", "l1-col" (one mu per column) or "l21"
    d: int
    r: int
    t: float
    f: float  # strength factor, see mu()
    seed: int

    @property
    def mu(self):
        if self.kind == "l1":
            return self.f
        if self.kind == "l1-col":
            return self.f * np.geomspace(0.3, 3.0, self.r)
        return self.f * np.sqrt(self.r)

    def reg(self):
        return rproxjax.l21(self.mu) if self.kind == "l21" else rproxjax.l1(self.mu)

    def data(self):
        rng = np.random.default_rng(self.seed)
        x, _ = np.linalg.qr(rng.standard_normal((self.d, self.r)))
        g = rng.standard_normal((self.d, self.r))
        return x, g

    def h(self, y):
        """The regularizer in numpy (independent of rproxjax)."""
        if self.kind == "l21":
            return self.mu * np.sum(np.linalg.norm(y, axis=1))
        return float(np.sum(np.broadcast_to(self.mu, y.shape) * np.abs(y)))

    def objective(self, zeta):
        x, g = self.data()
        return float(np.sum(g * zeta) + np.sum(zeta * zeta) / (2 * self.t) + self.h(x + zeta))

    def __str__(self):
        return f"{self.kind}-d{self.d}-r{self.r}-t{self.t}-f{self.f}"


L1_FACTORS = (0.02, 0.2, 2.0)
L21_FACTORS = (0.05, 0.5, 5.0)

# (kind, d, r, t, seed, factors). r >= CG_THRESHOLD runs the CG path under "auto".
_GRID = [
    ("l1", 30, 3, 0.5, 0, L1_FACTORS),
    ("l1", 80, 8, 1.0, 1, L1_FACTORS),
    ("l1", 200, 20, 2.0, 2, L1_FACTORS),
    ("l1-col", 60, 6, 0.7, 3, L1_FACTORS),
    ("l1-col", 120, 16, 1.0, 4, L1_FACTORS),
    ("l21", 40, 4, 0.5, 5, L21_FACTORS),
    ("l21", 100, 10, 1.0, 6, L21_FACTORS),
    ("l21", 150, 16, 0.7, 7, L21_FACTORS),
]
INSTANCES = [
    Instance(kind, d, r, t, f=f, seed=seed) for kind, d, r, t, seed, fs in _GRID for f in fs
]
# The largest l21 problem: about 3 s per cvxpy solve, so it is marked slow.
SLOW_INSTANCES = [Instance("l21", 200, 20, 1.5, f=f, seed=8) for f in L21_FACTORS]
# Mid-size instances also solved with the other linear solver forced: one whose
# "auto" choice is dense (r < 15) and one whose "auto" choice is CG.
SOLVER_PAIRS = [
    Instance("l21", 100, 10, 1.0, f=0.5, seed=6),
    Instance("l1-col", 120, 16, 1.0, f=0.2, seed=4),
]
assert all(p in INSTANCES for p in SOLVER_PAIRS)
assert any(inst.r >= CG_THRESHOLD for inst in INSTANCES)

CASES = [pytest.param(inst, "auto", id=str(inst)) for inst in INSTANCES]
CASES += [
    pytest.param(inst, "auto", id=str(inst), marks=pytest.mark.slow) for inst in SLOW_INSTANCES
]
CASES += [
    pytest.param(inst, solver, id=f"{inst}-{solver}")
    for inst in SOLVER_PAIRS
    for solver in ("dense", "cg")
]


def _tangent_constraint(x):
    """A with A vec(Z) = upper triangle of Z^T X + X^T Z (vec row-major)."""
    d, r = x.shape
    rows, cols = np.triu_indices(r)
    a = np.zeros((rows.size, d, r))
    idx = np.arange(rows.size)
    a[idx, :, rows] += x[:, cols].T
    a[idx, :, cols] += x[:, rows].T
    return a.reshape(rows.size, d * r)


@functools.cache
def solve_cvxpy(inst: Instance, settings: tuple = tuple(CLARABEL_SETTINGS.items())):
    """cvxpy's zeta, from the equivalent problem in Y = X + zeta:

    min_Y ||Y - (X - t G)||_F^2 / (2t) + h(Y)  s.t.  Y^T X + X^T Y = 2 X^T X,

    which Clarabel solves more accurately (about 30 times, for l21) than the
    same problem written in zeta.
    """
    x, g = inst.data()
    d, r = x.shape
    y = cp.Variable((d, r))
    if inst.kind == "l21":
        h = inst.mu * cp.sum(cp.norm(y, 2, axis=1))
    else:
        h = cp.sum(cp.multiply(np.broadcast_to(inst.mu, (d, r)), cp.abs(y)))
    objective = cp.sum_squares(y - (x - inst.t * g)) / (2 * inst.t) + h
    a = _tangent_constraint(x)
    constraint = a @ cp.vec(y, order="C") == a @ x.reshape(-1)
    prob = cp.Problem(cp.Minimize(objective), [constraint])
    with warnings.catch_warnings():
        # "Solution may be inaccurate": the l21 (cone) problems end AlmostSolved.
        warnings.filterwarnings("ignore", "Solution may be inaccurate", UserWarning)
        prob.solve(solver=cp.CLARABEL, **dict(settings))
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE), prob.status
    return y.value - x


@functools.cache
def solve_rprox(inst: Instance, linear_solver: str):
    x, g = inst.data()
    zeta, info = rproxjax.tangent_prox(
        jnp.asarray(x), jnp.asarray(g), inst.t, inst.reg(), linear_solver=linear_solver
    )
    return np.asarray(zeta), info


def _rel(a, b):
    return np.linalg.norm(a - b) / max(1.0, np.linalg.norm(b))


@pytest.mark.parametrize(("inst", "linear_solver"), CASES)
def test_step_matches_cvxpy(inst, linear_solver):
    zeta, _ = solve_rprox(inst, linear_solver)
    zeta_cvx = solve_cvxpy(inst)
    x, _ = inst.data()
    assert np.linalg.norm(zeta_cvx.T @ x + x.T @ zeta_cvx) <= 1e-9  # cvxpy's is feasible
    err = _rel(zeta, zeta_cvx)
    assert err <= STEP_RTOL, f"relative distance to cvxpy's step {err:.2e}"
    obj, obj_cvx = inst.objective(zeta), inst.objective(zeta_cvx)
    assert obj <= obj_cvx + OBJ_SLACK * max(1.0, abs(obj_cvx)), (obj, obj_cvx, obj - obj_cvx)


@pytest.mark.parametrize(("inst", "linear_solver"), CASES)
def test_step_is_tangent_and_converged(inst, linear_solver):
    zeta, info = solve_rprox(inst, linear_solver)
    x, _ = inst.data()
    tangency = np.linalg.norm(zeta.T @ x + x.T @ zeta)
    assert tangency <= TANGENCY_ATOL, tangency
    assert bool(info.converged), (int(info.num_steps), float(info.residual))
    assert int(info.status) == rproxjax.Status.SUCCESSFUL, rproxjax.describe(int(info.status))
    used_cg = int(info.num_linear_steps) > 0
    expect_cg = linear_solver == "cg" or (linear_solver == "auto" and inst.r >= CG_THRESHOLD)
    assert used_cg == expect_cg


@pytest.mark.parametrize("inst", SOLVER_PAIRS, ids=str)
def test_dense_and_cg_give_the_same_step(inst):
    zeta_dense, info_dense = solve_rprox(inst, "dense")
    zeta_cg, info_cg = solve_rprox(inst, "cg")
    assert int(info_dense.num_linear_steps) == 0 < int(info_cg.num_linear_steps)
    # Both residuals are <= 1e-10, far below the cvxpy comparison's 1e-6.
    assert _rel(zeta_cg, zeta_dense) <= 1e-8


@pytest.mark.parametrize("inst", INSTANCES, ids=str)
def test_instances_are_neither_all_zero_nor_dense(inst):
    """The strengths are in the interesting range (guards the scales above)."""
    zeta, _ = solve_rprox(inst, "auto")
    x, _ = inst.data()
    y = x + zeta
    zero = (y == 0) if inst.kind != "l21" else (np.linalg.norm(y, axis=1) == 0)
    frac = float(np.mean(zero))
    assert frac < 0.95
    if not (inst.kind == "l21" and inst.f == min(L21_FACTORS)):
        assert frac > 0.0
