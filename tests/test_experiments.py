"""Every experiment configuration end to end at its tiny size, results files, resume, CLI.

The tiny runs go to one folder per test session (``tiny_results`` in conftest.py), which the
notebook tests reuse: the notebooks' small versions then resume instead of recomputing.
"""

import dataclasses
import json
import re

import numpy as np
import pytest

import experiments
from experiments import __main__ as cli
from tests.experiment_checks import check_file as _check_file
from tests.experiment_checks import run_tiny as _run

SPCA = [name for name, cfg in experiments.CONFIGS.items() if cfg.kind == "spca"]


@pytest.mark.parametrize("name", [n if n == "spca-fashion-r10" else pytest.param(
    n, marks=pytest.mark.slow) for n in SPCA])  # one configuration in the default run
def test_sparse_pca_configuration_end_to_end(name, tiny_results):
    result = _run(name, tiny_results)
    _check_file(result, tiny_results)
    cfg, units, summary = result["config"], result["units"], result["summary"]
    seeds, panels = cfg["seeds"], summary["panels"]
    assert len(seeds) >= 2 and not set(seeds) & set(cfg["tuning_seeds"])
    assert [p["mu"] for p in panels] == pytest.approx(
        [f * units["setup"]["mu_degenerate"] for f in cfg["mu_fractions"]] + list(cfg["mus"]))
    stochastic = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad", "R-ProxSVRG", "R-ProxSARAH",
                  "R-Subgrad-1")
    for method in stochastic:
        _check_tuning(units[f"tuning/{method}"], method, cfg, panels, units)
    for panel in panels:  # single-sample R-Subgrad: one sample a step, b times the steps
        one = units[f"run/R-Subgrad-1/mu={panel['key']}/seed={seeds[0]}"]
        batch = units[f"run/R-Subgrad/mu={panel['key']}/seed={seeds[0]}"]
        assert one["steps"] == pytest.approx(cfg["batch_size"] * batch["steps"], rel=0.05)
    for panel in panels:
        for method in stochastic + ("ManPG",):
            for seed in seeds:
                run = units[f"run/{method}/mu={panel['key']}/seed={seed}"]
                assert run["seed"] == seed and run["feasibility"] < 1e-10 and not run["halted"]
                ifo = np.asarray(run["ifo_over_n"])
                assert ifo[0] == 0 and np.all(np.diff(ifo) > 0)
                assert np.all(np.diff(np.asarray(run["time"])) > 0)
                assert 0 <= run["degenerate_columns"] <= cfg["r"]
        # The block methods have curve points inside their blocks (every block_points steps).
        spb = units[f"run/R-ProxSPB/mu={panel['key']}/seed={seeds[0]}"]
        blocks = (len(spb["ifo_over_n"]) - 1) * cfg["block_points"] // cfg["q"]
        assert len(spb["ifo_over_n"]) - 1 == blocks * cfg["q"] // cfg["block_points"] > blocks
        # Different seeds: different X0 and samples, hence different curves.
        a, b = (units[f"run/R-ProxSGD/mu={panel['key']}/seed={s}"]["loss"] for s in seeds[:2])
        assert a[0] != b[0]
        np.testing.assert_allclose(np.diff(units[f"run/ManPG/mu={panel['key']}/seed=0"]
                                           ["ifo_over_n"]), 1.0)
        for seed in seeds:  # the Riemannian variance is the tangent part of the Euclidean one
            est = units[f"variance/R-ProxSPB/mu={panel['key']}/seed={seed}"]
            riem, eucl = (np.asarray(est[k], float) for k in ("riemannian_variance", "variance"))
            refresh = np.asarray(est["refresh"])
            assert riem.shape == (cfg["variance_steps"],) and refresh[0]
            assert np.all(riem[refresh] < 1e-20) and np.all(riem[~refresh] > 0)
            assert np.all(riem <= eucl * (1 + 1e-12)) and np.any(riem < 0.99 * eucl)
    _check_claims_over_seeds(result)
    assert {row["gamma"] for row in summary["gamma_table"]} == set(cfg["gammas"])
    assert len(summary["table"]) == 7 * len(panels)
    assert {(row["method"], row["panel"]) for row in summary["tuning"]} == {
        (m, p["key"]) for m in stochastic for p in panels}


def _check_tuning(tuned, method, cfg, panels, units):
    """The reported step (and gamma) is the best pair run at the reported budget on the
    tuning seeds, its neighbours on each axis were run at that budget too, and the screen
    covered the whole (extended) grid on every tuning seed."""
    seeds = cfg["seeds"]
    records = tuned["records"]
    assert set(cfg["etas"]) <= set(tuned["etas"])
    proximal = not method.startswith("R-Subgrad")
    assert tuned["tuned_gamma"] == proximal
    if proximal:
        assert set(cfg["tuning_gammas"]) <= set(tuned["gammas"])
    for rec in records:
        assert len(rec["loss_per_seed"]) == len(cfg["tuning_seeds"])
        assert rec["loss"] == pytest.approx(np.mean(rec["loss_per_seed"]))
    budget_ifo = {rec["ifo_over_n"] for rec in records if rec["stage"] == "budget"}
    run_ifo = units[f"run/{method}/mu={panels[0]['key']}/seed={seeds[0]}"]["ifo_over_n"][-1]
    assert budget_ifo and all(v == pytest.approx(run_ifo) for v in budget_ifo)  # at budget
    for i, panel in enumerate(panels):
        stage = "budget" if tuned["screen_steps"] == tuned["budget_steps"] else "screen"
        screened = {(r["eta"], r["gamma"]) for r in records
                    if r["stage"] == stage and r["panel"] == i}
        grid = {(e, g) for e in tuned["screen_etas"] for g in tuned["screen_gammas"]}
        # the screen ran the whole (extended) grid; where it ran at the budget, its records
        # also hold the local search's pairs past the grid's edges
        assert screened == grid if stage == "screen" else screened >= grid
        at_budget = {(r["eta"], r["gamma"]): r["loss"] for r in records
                     if r["stage"] == "budget" and r["panel"] == i}
        run = units[f"run/{method}/mu={panel['key']}/seed={seeds[0]}"]
        choice = (run["eta"], run["gamma"] if proximal else tuned["gammas"][0])
        if method == "R-Subgrad-1" and panel["nominal"]:
            _check_refined(units, i, choice, at_budget)
            continue
        assert at_budget[choice] == min(at_budget.values())
        etas = sorted(tuned["etas"])
        k = etas.index(choice[0])
        for j in (k - 1, k + 1):  # its eta neighbours ran at the budget (inside the grid)
            if 0 <= j < len(etas):
                assert (etas[j], choice[1]) in at_budget
    assert units["setup"]["n"] == 400


def _check_refined(units, panel, choice, tuned_at_budget):
    """At the paper's panels R-Subgrad-1 runs its refined step: the best pair at the budget
    of those its tuning ran and its refined search ran, with both ratio-2 neighbours among
    them (to rounding)."""
    refined = units["refine/R-Subgrad-1"]
    assert refined["ratio"] == 2.0 and panel in refined["panels"]
    ran = {(r["eta"], r["gamma"]): r["loss"] for r in refined["records"]
           if r["panel"] == panel}
    seen = {**tuned_at_budget, **ran}
    assert seen[choice] == min(seen.values())
    (found,) = [c for i, c in zip(refined["panels"], refined["choices"], strict=True)
                if i == panel]
    assert found["eta"] == choice[0]
    if not found["converged"]:  # out of moves: marked, as the tuning's are
        assert found["moves"] == refined["max_moves"] >= 1
        return
    for neighbour in (choice[0] / 2, choice[0] * 2):
        assert any(abs(e - neighbour) <= 1e-9 * neighbour for e, _ in seen)


def _check_claims_over_seeds(result):
    """Each claim holds one verdict per reported seed, the paper's are quoted, and one
    comparison recomputed from the saved curves gives the same verdicts."""
    cfg, units, claims = result["config"], result["units"], result["summary"]["claims"]
    assert {c["kind"] for c in claims} <= {"paper", "panel", "check"}
    assert {"panel", "check"} <= {c["kind"] for c in claims}
    for c in claims:
        assert len(c["per_seed"]) == c["seeds"] == len(cfg["seeds"])
        assert c["wins"] == c["per_seed"].count("win")
        assert c["pass"] == (c["wins"] == c["seeds"])
        assert (c["kind"] in ("paper", "panel")) == bool(c["quote"])
    panel = result["summary"]["panels"][0]
    text = (f"{panel['label']}: R-ProxSPB ends the budget at a lower loss than R-ProxSGD at "
            "equal IFOs")
    (found,) = [c for c in claims if c["claim"].startswith(text)]
    runs = {m: [units[f"run/{m}/mu={panel['key']}/seed={seed}"] for seed in cfg["seeds"]]
            for m in ("R-ProxSPB", "R-ProxSGD")}
    x = min(r["ifo_over_n"][-1] for rs in runs.values() for r in rs)
    fa, fb = (np.array([np.interp(x, r["ifo_over_n"], r["loss"]) for r in runs[m]])
              for m in ("R-ProxSPB", "R-ProxSGD"))
    margin = max(np.ptp(fa), np.ptp(fb))  # a win only by more than the seed spread
    expected = ["win" if b - a > margin else "loss" if a - b > margin else "tie"
                for a, b in zip(fa, fb, strict=True)]
    assert found["per_seed"] == expected


def test_degenerate_mu_is_where_the_one_pixel_point_becomes_stationary():
    """mu_deg from the covariance, checked with the library's stationarity measure: the
    point of the r largest-variance pixels is stationary just above mu_deg, not below."""
    import jax.numpy as jnp

    import rproxjax
    from experiments._spca import degenerate_mu
    from rproxjax import problems

    rng = np.random.default_rng(0)
    data = rng.normal(size=(300, 12)) * np.linspace(2.0, 0.5, 12) + rng.normal(size=(300, 1))
    data -= data.mean(axis=0)
    out = degenerate_mu(data, 3)
    x = np.zeros((12, 3))
    x[out["pixels"], range(3)] = 1.0
    z = jnp.asarray(data)
    grad = -2.0 * z.T @ (z @ jnp.asarray(x)) / data.shape[0]
    stat = [float(problems.stationarity(jnp.asarray(x), grad, 0.1, rproxjax.l1(m))[0])
            for m in (1.01 * out["mu_degenerate"], 0.95 * out["mu_degenerate"])]
    assert stat[0] < 1e-8 < 1e-3 < stat[1]


def test_tuning_seeds_must_be_disjoint_from_the_reported_ones(tmp_path):
    cfg = dataclasses.replace(experiments.get_config("spca-mnist-r10", "tiny"),
                              tuning_seeds=(0,))
    with pytest.raises(ValueError, match="disjoint"):
        experiments.run("spca-mnist-r10", out_dir=tmp_path, config=cfg, progress=False)


def test_resume_reads_saved_units_and_refuses_another_configuration(tiny_results, tmp_path):
    """A rerun takes every saved unit from the file as it is there (a mark added to each
    saved unit comes back), computes again only the unit missing from it (the same curve),
    and refuses a file of another configuration."""
    name = "spca-fashion-r10"
    first = _run(name, tiny_results)
    saved = json.loads((tiny_results / f"{name}.json").read_text())
    missing = (f"run/R-ProxSGD/mu={first['summary']['panels'][0]['key']}/"
               f"seed={first['config']['seeds'][0]}")
    del saved["units"][missing]
    for unit in saved["units"].values():
        unit["mark"] = "saved"  # no computation writes this field
    (tmp_path / f"{name}.json").write_text(json.dumps(saved))
    again = _run(name, tmp_path)
    computed = {key for key, unit in again["units"].items() if unit.pop("mark", None) is None}
    assert computed == {missing}
    assert ({k: v for k, v in again["units"].items() if k != missing}
            == {k: v for k, v in first["units"].items() if k != missing})
    for field in ("loss", "ifo_over_n", "final_loss", "nonzeros", "eta"):
        np.testing.assert_allclose(again["units"][missing][field],
                                   first["units"][missing][field], rtol=1e-10)
    other = dataclasses.replace(experiments.get_config(name, "tiny"), seed=7)
    with pytest.raises(ValueError, match="another configuration"):
        experiments.run(name, out_dir=tmp_path, config=other, progress=False)


def test_a_run_saved_with_a_step_since_refined_runs_again(tiny_results, tmp_path):
    """A reported run carries its step: where its method's choice is not that step (the
    baseline's refined tuning moved it), resuming computes the run again with the choice,
    and leaves every other saved unit as it is."""
    name = "spca-fashion-r10"
    first = _run(name, tiny_results)
    saved = json.loads((tiny_results / f"{name}.json").read_text())
    nominal = next(p for p in first["summary"]["panels"] if p["nominal"])
    key = f"run/R-Subgrad-1/mu={nominal['key']}/seed={first['config']['seeds'][0]}"
    saved["units"][key] = dict(saved["units"][key], eta=saved["units"][key]["eta"] * 5)
    for unit in saved["units"].values():
        unit["mark"] = "saved"
    (tmp_path / f"{name}.json").write_text(json.dumps(saved))
    again = _run(name, tmp_path)
    computed = {k for k, unit in again["units"].items() if unit.pop("mark", None) is None}
    assert computed == {key}
    assert again["units"][key]["eta"] == first["units"][key]["eta"]
    np.testing.assert_allclose(again["units"][key]["loss"], first["units"][key]["loss"],
                               rtol=1e-10)


def test_rerun_drops_the_matching_units_and_resumes(tiny_results, tmp_path, capsys):
    """``--rerun PATTERN`` drops the units whose keys match (their machines too), so that
    the resumed run computes exactly those again; a pattern matching nothing is an error
    before anything is dropped."""
    import shutil

    name = "spca-fashion-r10"
    first = _run(name, tiny_results)
    shutil.copy(tiny_results / f"{name}.json", tmp_path / f"{name}.json")
    panel = first["summary"]["panels"][-1]["key"]
    pattern = f"run/*/mu={panel}/seed=0"
    with pytest.raises(ValueError, match="no unit matches"):
        experiments.drop_units(tmp_path, name, [pattern, "run/nothing/*"])
    assert json.loads((tmp_path / f"{name}.json").read_text()) == json.loads(
        (tiny_results / f"{name}.json").read_text())
    assert cli.main([name, "--size", "tiny", "--out", str(tmp_path), "--rerun", pattern,
                     "--no-plot", "--quiet"]) == 0
    assert "dropped 7 unit(s) to rerun" in capsys.readouterr().out
    again = json.loads((tmp_path / f"{name}.json").read_text())
    assert again["complete"]
    rerun = {k for k in again["units"] if again["machines"][k] != first["machines"][k]}
    assert rerun == {k for k in first["units"] if re.fullmatch(
        rf"run/[^/]+/mu={re.escape(panel)}/seed=0", k)}
    with pytest.raises(SystemExit):
        cli.main([name, "--size", "tiny", "--out", str(tmp_path), "--rerun", pattern,
                  "--force"])


class _Interrupted(Exception):
    pass


def test_an_interrupted_tuning_resumes_from_its_checkpoint_bit_identically(tmp_path):
    """A tuning (hours at paper size) saves each chunk of runs as it finishes: stopped after
    two chunks, a resumed tuning reads those two back, runs the rest, and chooses and
    records exactly what an uninterrupted one does; its checkpoint is dropped once the
    tuning is saved, and pieces from another source are never reused."""
    import jax.numpy as jnp

    from experiments import _spca
    from experiments._store import Checkpoint, Store

    cfg = dataclasses.replace(experiments.get_config("spca-mnist-r10", "tiny"),
                              tuning_lanes=1)  # one lane a chunk: several chunks
    data = jnp.asarray(_spca.load_data(cfg.dataset, cfg.n, cfg.seed, np.float64))
    here = {"commit": "a" * 40, "tree_clean": True}
    key, method, mus = "tuning/R-Subgrad", "R-Subgrad", [0.2]

    def tune(checkpoint):
        out = _spca._tune(method, cfg, data, mus, checkpoint=checkpoint)
        out.pop("wall_time")
        return out

    whole = tune(Checkpoint(Store(tmp_path / "whole", "x", {}), key, here))

    class StopsAfterTwo(Checkpoint):
        def put(self, piece, value):
            super().put(piece, value)
            if len(self.pieces) == 2:
                raise _Interrupted

    with pytest.raises(_Interrupted):
        tune(StopsAfterTwo(Store(tmp_path, "x", {}), key, here))
    assert len(json.loads((tmp_path / "x.json").read_text())["checkpoints"][key]["pieces"]) == 2
    store = Store(tmp_path, "x", {})  # a new process: the file read back
    resumed = Checkpoint(store, key, here)
    assert tune(resumed) == whole
    assert resumed.reused == 2 and len(resumed.pieces) > 2
    store.put(key, {"choices": whole["choices"]})
    resumed.close()
    assert "checkpoints" not in json.loads((tmp_path / "x.json").read_text())

    with pytest.raises(_Interrupted):
        tune(StopsAfterTwo(Store(tmp_path / "other", "x", {}), key, here))
    store = Store(tmp_path / "other", "x", {})
    elsewhere = Checkpoint(store, key, {"commit": "b" * 40, "tree_clean": True})
    dirty = Checkpoint(store, key, dict(here, tree_clean=False))
    assert elsewhere.pieces == {} and dirty.pieces == {}
    assert tune(elsewhere) == whole and elsewhere.reused == 0


def test_bad_names_and_sizes():
    with pytest.raises(ValueError, match="unknown experiment"):
        experiments.get_config("spca-coil100")
    with pytest.raises(ValueError, match="size"):
        experiments.get_config("rmc-video", size="huge")
    with pytest.raises(FileNotFoundError, match="python -m experiments"):
        experiments.load("no/such/spca-mnist-r10.json")


def test_command_line(tiny_results, capsys):
    assert cli.main(["--list"]) == 0
    assert "spca-mnist-r10" in capsys.readouterr().out
    assert cli.main(["spca-mnist-r10", "--size", "tiny", "--out", str(tiny_results),
                     "--quiet"]) == 0
    out = capsys.readouterr().out
    # The paper's claims by the paired rule, then the project's checks by v3's.
    assert "the paper's claims (paired rule): " in out and "the project's checks (v3" in out
    assert "saved" in out and re.search(r"\[C\d (paper|panel): ", out)
    with pytest.raises(SystemExit) as exc:  # a usage error on stderr, not a traceback
        cli.main(["nope", "--size", "tiny"])
    assert exc.value.code == 2 and "unknown experiment" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # --report of a folder that does not exist
        cli.main(["--report", "--out", str(tiny_results / "absent")])
    assert exc.value.code == 2 and "no results folder" in capsys.readouterr().err
    assert cli.main(["--report", "--out", str(tiny_results)]) == 0
    report = (tiny_results / "README.md").read_text()
    assert "## spca-mnist-r10" in report and "claims" in report.lower()
    assert "| `spca-mnist-r10` |" in report  # the outcome table
    assert (tiny_results / "spca-mnist-r10.png").exists()  # --report redraws the figures


def test_degenerate_panels_are_marked():
    """A panel is marked from R-ProxSPB's final iterates: every column with at most one entry
    above 1e-3 (median over the seeds), some columns, or none."""
    from experiments._spca_summary import degeneracy

    def units(cols):
        return {f"run/R-ProxSPB/mu=p/seed={s}": {"degenerate_columns": c}
                for s, c in enumerate(cols)}

    assert degeneracy(units([10, 10, 9]), "p", [0, 1, 2], 10) == "degenerate"
    assert degeneracy(units([9, 10, 3]), "p", [0, 1, 2], 10) == "9 of 10 columns degenerate"
    assert degeneracy(units([0, 1, 0]), "p", [0, 1, 2], 10) == ""


def test_report_names_results_of_an_earlier_protocol(tiny_results, tmp_path):
    """A results file whose configuration lacks settings of the present protocol is marked
    in its section and in the outcome table: the report says to rerun it."""
    from experiments._report import write_report

    result = _run("spca-fashion-r10", tiny_results)
    old = dict(result, config={k: v for k, v in result["config"].items()
                               if k != "tuning_lanes"})
    (tmp_path / "spca-fashion-r10.json").write_text(json.dumps(old))
    (tmp_path / "spca-mnist-r10.json").write_text(json.dumps(result | {"name": "spca-mnist-r10"}))
    text = write_report(tmp_path).read_text()
    section = text.split("## spca-fashion-r10")[1].split("## ")[0]
    assert "earlier version of the protocol" in section and "tuning_lanes" in section
    (old_row,) = [line for line in text.splitlines()
                  if line.startswith("| `spca-fashion-r10` |")]
    assert "an earlier protocol" in old_row
    assert "The paper's claims in this file" in text.split("## spca-mnist-r10")[1].split("## ")[0]
    assert "Not run yet" in text.split("## spca-mnist-r15")[1].split("## ")[0]
    # the outcome table: a fresh run names its solver settings as the present defaults; a
    # file without recorded settings is stale
    (row,) = [line for line in text.splitlines() if line.startswith("| `spca-mnist-r10` |")]
    assert "the present defaults" in row and "stale" not in row
    unrecorded = json.loads(json.dumps(result))  # a copy: the tiny results are shared
    del unrecorded["machine"]["solver_defaults"]
    (tmp_path / "spca-mnist-r10.json").write_text(
        json.dumps(unrecorded | {"name": "spca-mnist-r10"}))
    text = write_report(tmp_path).read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| `spca-mnist-r10` |")]
    assert "**stale**: its solver settings were not recorded" in row
