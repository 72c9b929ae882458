"""Every experiment configuration end to end at its tiny size, results files, resume, CLI.

The tiny runs go to one folder per test session (``tiny_results`` in conftest.py), which the
notebook tests reuse: the notebooks' small versions then resume instead of recomputing.
"""

import dataclasses

import numpy as np
import pytest

from rproxjax import experiments
from rproxjax.experiments import __main__ as cli
from tests.experiment_checks import check_file as _check_file
from tests.experiment_checks import run_tiny as _run

SPCA = [name for name, cfg in experiments.CONFIGS.items() if cfg.kind == "spca"]


@pytest.mark.parametrize("name", SPCA)
def test_sparse_pca_configuration_end_to_end(name, tiny_results):
    result = _run(name, tiny_results)
    _check_file(result, tiny_results)
    cfg, units = result["config"], result["units"]
    n = units["setup"]["n"]
    stochastic = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad", "R-ProxSVRG", "R-ProxSARAH")
    for method in stochastic:
        grid = units[f"grid/{method}"]
        loss = np.asarray(grid["loss"], float)
        assert loss.shape == (len(cfg["mus"]), len(cfg["etas"]))
        for i, mu in enumerate(cfg["mus"]):
            run = units[f"run/{method}/mu={mu}"]
            # the chosen step is the grid's best by its loss
            assert run["eta"] == cfg["etas"][int(np.argmin(loss[i]))]
    # every method's grid search had the same budget (one R-ProxSPB block here)
    grid_ifo = {units[f"grid/{m}"]["ifo_over_n"] for m in stochastic}
    assert len(grid_ifo) == 1 and grid_ifo.pop() >= cfg["grid_budget"]
    for mu in cfg["mus"]:
        for method in stochastic + ("ManPG",):
            run = units[f"run/{method}/mu={mu}"]
            assert run["feasibility"] < 1e-10 and not run["halted"]
            ifo = np.asarray(run["ifo_over_n"])
            assert ifo[0] == 0 and np.all(np.diff(ifo) > 0)
            assert np.all(np.diff(np.asarray(run["time"])) > 0)
            assert np.isfinite(run["stationarity"]) and run["stationarity"] >= 0
        # ManPG spends n sample gradients per iteration.
        np.testing.assert_allclose(np.diff(units[f"run/ManPG/mu={mu}"]["ifo_over_n"]), 1.0)
        # The estimators: at a refresh |S1| = n, so V_t is the full gradient (zero variance);
        # R-ProxSVRG and R-ProxSARAH refresh on the same blocks as R-ProxSPB (m = q), and
        # their IFOs are counted alike (n per refresh, 2 |S2| per step).
        for method in ("R-ProxSPB", "R-ProxSVRG", "R-ProxSARAH"):
            est = units[f"variance/{method}/mu={mu}"]
            var, refresh = np.asarray(est["variance"], float), np.asarray(est["refresh"])
            assert var.shape == (cfg["variance_steps"],) and refresh[0]
            assert np.all(var[refresh] < 1e-20) and np.all(var[~refresh] > 0)
            np.testing.assert_array_equal(units[f"run/{method}/mu={mu}"]["ifo_over_n"],
                                          units[f"run/R-ProxSPB/mu={mu}"]["ifo_over_n"])
        sgd = np.asarray(units[f"variance/R-ProxSGD/mu={mu}"]["variance"], float)
        assert np.all(sgd > 0)
    assert len(result["summary"]["table"]) == 6 * len(cfg["mus"])
    assert n == 400


def test_resume_reads_saved_units_and_refuses_another_configuration(tiny_results, monkeypatch):
    name = "spca-fashion-r10"
    first = _run(name, tiny_results)
    from rproxjax.experiments import _spca

    def fail(*args, **kwargs):
        raise AssertionError("a saved unit was recomputed")

    monkeypatch.setattr(_spca, "_run", fail)
    monkeypatch.setattr(_spca, "_grid_search", fail)
    again = _run(name, tiny_results)
    assert again["units"] == first["units"]
    other = dataclasses.replace(experiments.get_config(name, "tiny"), seed=7)
    with pytest.raises(ValueError, match="another configuration"):
        experiments.run(name, out_dir=tiny_results, config=other, progress=False)


def test_bad_names_and_sizes():
    with pytest.raises(ValueError, match="unknown experiment"):
        experiments.get_config("spca-coil100")
    with pytest.raises(ValueError, match="size"):
        experiments.get_config("rmc-video", size="huge")
    with pytest.raises(FileNotFoundError, match="python -m rproxjax.experiments"):
        experiments.load("no/such/spca-mnist-r10.json")


def test_command_line(tiny_results, capsys):
    assert cli.main(["--list"]) == 0
    assert "spca-mnist-r10" in capsys.readouterr().out
    assert cli.main(["spca-mnist-r10", "--size", "tiny", "--out", str(tiny_results),
                     "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "claims pass" in out and "saved" in out
    with pytest.raises(SystemExit) as exc:  # a usage error on stderr, not a traceback
        cli.main(["nope", "--size", "tiny"])
    assert exc.value.code == 2 and "unknown experiment" in capsys.readouterr().err
    assert cli.main(["--report", "--out", str(tiny_results)]) == 0
    report = (tiny_results / "README.md").read_text()
    assert "## spca-mnist-r10" in report and "claims" in report.lower()
