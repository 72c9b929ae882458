"""The README's Python examples run as written."""

import pathlib
import re

import numpy as np
import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def namespace():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    exec(compile("\n".join(blocks), str(README), "exec"), ns)  # noqa: S102
    return ns


def test_readme_examples_run(namespace):
    assert bool(namespace["info"].converged)
    assert float(namespace["rproxjax"].stiefel.feasibility(namespace["x"])) < 1e-10
    assert namespace["params"].shape == (4, 784, 10)
    sharded = namespace["sharded"]  # the Scaling out example
    assert float(sharded.epoch_loss[-1]) < float(sharded.epoch_loss[0])
    assert float(namespace["rproxjax"].stiefel.feasibility(sharded.params)) < 1e-4


def test_readme_rmc_example_improves_on_its_start(namespace):
    ns = namespace
    truth, prob = ns["truth"], ns["prob"]
    start = ns["problems"].rmc_background({"U": ns["u0"], "S": 0.0 * ns["prob"].values}, prob)
    err = lambda low: np.linalg.norm(low - truth) / np.linalg.norm(truth)  # noqa: E731
    assert err(ns["low_rank"]) < 0.25
    assert err(ns["low_rank"]) < 0.5 * err(start)
    # Outliers are absorbed by the sparse block: S is sparse.
    s = np.asarray(ns["res"].params["S"])
    assert np.mean(np.abs(s) > 0.1) < 0.2
