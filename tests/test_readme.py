"""The Python examples of the README and of the documentation pages run as written.

Each page's ```python blocks run in order, in one namespace per page; the tests then check
what the examples say they compute.
"""

import pathlib
import re

import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The pages whose Python blocks run (every other page must have none).
PAGES = ("README.md", "docs/subproblem.md", "docs/contract.md", "docs/usage.md")
#: Pages whose Python blocks another test runs.
RUN_ELSEWHERE = {"docs/getting_started.md": "tests/test_docs.py"}


def python_blocks(page):
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


def run_page(page):
    ns: dict = {}
    exec(compile("\n".join(python_blocks(page)), str(ROOT / page), "exec"), ns)  # noqa: S102
    return ns


@pytest.fixture(scope="module")
def readme():
    return run_page("README.md")


@pytest.fixture(scope="module")
def subproblem_page():
    return run_page("docs/subproblem.md")


@pytest.fixture(scope="module")
def contract_page():
    return run_page("docs/contract.md")


@pytest.fixture(scope="module")
def usage_page():
    return run_page("docs/usage.md")


def test_every_python_block_runs():
    assert len(python_blocks("README.md")) >= 3  # the two tasks, and the optimizers beneath them
    for page in sorted((ROOT / "docs").glob("*.md")):
        name = page.relative_to(ROOT).as_posix()
        if name not in PAGES and name not in RUN_ELSEWHERE:
            assert not python_blocks(name), f"{name} has Python blocks: add it to PAGES"


def test_readme_api_table_lists_the_public_names():
    api = (ROOT / "README.md").read_text().split("## API", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for row in api.splitlines():
        if row.startswith("| `"):
            listed |= set(re.findall(r"`(\w+)`", row.split(" | ", 1)[0]))
    assert listed == set(rproxjax.__all__)


def _decreasing(losses):
    losses = np.asarray(losses)
    return bool(np.all(losses[..., -1] < losses[..., 0]))


def test_readme_tasks(readme):
    spca, rmc, M = readme["spca"], readme["rmc"], readme["M"]
    assert abs(spca.nonzeros - 200) <= 4  # the path's target, within 2%
    x = np.asarray(spca.loadings, np.float64)
    assert x.shape == (784, 10) and np.linalg.norm(x.T @ x - np.eye(10)) < 1e-4
    assert spca.path is not None and 0.0 < float(spca.adjusted_variance) < 1.0
    assert rmc.low_rank.shape == M.shape == rmc.outliers.shape
    assert float(rmc.objective) < float(rmc.initial_objective)
    assert np.all(np.asarray(rmc.outliers)[~readme["mask"]] == 0)


def test_readme_quickstart(readme):
    res = readme["res"]
    assert _decreasing(res.epoch_loss)
    assert int(res.epoch_ifo[-1]) > 0


def test_subproblem_page(subproblem_page):
    ns = subproblem_page
    rproxjax, x, g = ns["rproxjax"], ns["x"], ns["g"]
    assert bool(ns["info"].converged)
    # A warm start at the solution's multiplier leaves no Newton step.
    assert bool(ns["warm"].converged) and int(ns["warm"].num_steps) == 0
    np.testing.assert_allclose(ns["again"], ns["zeta"], atol=1e-8)
    assert bool(jnp.all(ns["infos"].converged)) and ns["zetas"].shape == (8, 100, 5)
    # The derivative in mu is the solution map's: central differences agree.
    solve = lambda mu: rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(mu))[0]  # noqa: E731
    h = 1e-6
    diff = (solve(0.1 + h) - solve(0.1 - h)) / (2 * h)
    np.testing.assert_allclose(ns["dzeta_dmu"], diff, atol=1e-4 * float(jnp.max(jnp.abs(diff))))
    ssn, dense = ns["ssn"], ns["dense"]
    assert (ssn.method, float(ssn.rtol), ssn.max_steps) == ("adaptive", rproxjax.SSN_RTOL, 20)
    assert (ssn.linear_solver, dense.linear_solver) == (rproxjax.AutoLinearSolver(),
                                                        rproxjax.Dense())


def test_contract_page(contract_page):
    ns = contract_page
    rproxjax = ns["rproxjax"]
    # r_prox_sgd(eta, gamma, reg) is chain(proximal_step(gamma, reg), retract(eta)).
    np.testing.assert_array_equal(ns["x_named"], ns["x_chain"])
    assert not bool(rproxjax.step_info(ns["s_named"]).halted)
    # IFOs: |S1| = n = 400 at each snapshot (every m = 5 steps), 2b = 40 otherwise.
    np.testing.assert_array_equal(ns["step_ifo"][:10], [400, 40, 40, 40, 40] * 2)
    assert _decreasing(ns["res"].epoch_loss)


def test_usage_page_sweeps(usage_page):
    for name in ("per_lane", "shared"):
        assert usage_page[name].shape == (4, 2)
        assert _decreasing(usage_page[name])


def test_usage_page_scaling_out(usage_page):
    rproxjax, sharded = usage_page["rproxjax"], usage_page["sharded"]
    assert _decreasing(sharded.epoch_loss)
    assert float(rproxjax.stiefel.feasibility(sharded.params)) < 1e-4


def test_usage_page_rmc_improves_on_its_start(usage_page):
    ns = usage_page
    truth, prob = ns["truth"], ns["prob"]
    start = ns["problems"].rmc_background({"U": ns["u0"], "S": 0.0 * prob.values}, prob)
    err = lambda low: np.linalg.norm(low - truth) / np.linalg.norm(truth)  # noqa: E731
    assert err(ns["low_rank"]) < 0.25
    assert err(ns["low_rank"]) < 0.5 * err(start)
    # Outliers are absorbed by the sparse block: S is sparse.
    s = np.asarray(ns["res"].params["S"])
    assert np.mean(np.abs(s) > 0.1) < 0.2
