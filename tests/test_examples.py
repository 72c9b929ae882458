"""The examples run (small sizes) and print what they promise."""

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sparse_pca_on_a_numpy_matrix(capsys):
    res = _load("sparse_pca_numpy").main(["--n", "1000", "--components", "4",
                                          "--nonzeros", "80"])
    out = capsys.readouterr().out
    assert f"{res.nonzeros} nonzeros (target 80)" in out
    assert abs(res.nonzeros - 80) <= 4
    assert out.count("\n") > len(res.path.mu)  # one line per point of the path
    x = np.asarray(res.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(4)) < 1e-4


def test_grid_search_over_mu(capsys):
    search = _load("grid_search_mu").main(["--n", "600"])
    out = capsys.readouterr().out
    assert out.count("held-out reconstruction error") == 4
    assert f"best mu = {search.best_params_['mu']}" in out
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
