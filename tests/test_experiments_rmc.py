"""The robust matrix completion experiment end to end at its tiny size."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import experiments
import rproxjax
from experiments import _rmc, _rmc_report
from rproxjax import problems
from tests.experiment_checks import check_file, run_tiny

METHODS = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad")


@pytest.fixture(scope="module")
def result(tiny_results):
    out = run_tiny("rmc-video", tiny_results)
    check_file(out, tiny_results)
    return out


def test_rmc_runs_end_to_end(result):
    units, cfg = result["units"], result["config"]
    sizes = {units[f"setup/seed={s}"]["nnz"] for s in cfg["seeds"]}
    m, n = units[f"setup/seed={cfg['seeds'][0]}"]["m"], units[f"setup/seed={cfg['seeds'][0]}"]["n"]
    assert sizes == {round(cfg["observed"] * m * n)}  # |Omega| the same on every seed
    for seed in cfg["seeds"]:
        setup = units[f"setup/seed={seed}"]
        ref = units[f"reference/seed={seed}"]
        assert ref["F"] <= ref["F_half"] and ref["error"] < setup["error0"]
        for method in METHODS:
            run = units[f"run/{method}/seed={seed}"]
            assert run["U_orthonormality"] < 1e-10
            assert run["ifo_over_nnz"] <= cfg["budget"] + 1e-9
            assert run["F"] < setup["F0"]
            assert ref["F"] < run["F"]  # the converged reference is below every budgeted run
    assert len(units[f"run/R-ProxSGD/seed={cfg['seeds'][0]}"]["background_frame"]) == \
        units[f"setup/seed={cfg['seeds'][0]}"]["m"]


def test_rmc_steps_are_chosen_on_tuning_seeds_only(result):
    units, cfg, summary = result["units"], result["config"], result["summary"]
    seeds, tuning = summary["seeds"], summary["tuning_seeds"]
    assert len(seeds) >= 2 and tuning and not set(seeds) & set(tuning)
    assert {k.split("=")[-1] for k in units if k.startswith("tune/")} == {str(s) for s in tuning}
    assert {k.split("=")[-1] for k in units if k.startswith("run/")} == {str(s) for s in seeds}
    final = units["tuning_grid"]
    last = len(final["rounds"]) - 1
    assert 1 <= len(final["rounds"]) <= cfg["max_extensions"] + 1
    assert (final["rounds"][0]["etas"], final["rounds"][0]["step_scales"]) == (
        cfg["etas"], cfg["step_scales"])
    grid_eta, grid_scale = np.meshgrid(final["etas"], final["step_scales"])
    for method in METHODS:
        # the least mean F over the tuning seeds on the last grid, recomputed from its runs
        tuned = [units[f"tune/{method}/seed={s}" if last == 0 else
                       f"tune/{method}/extension={last}/seed={s}"] for s in tuning]
        assert all((u["etas"], u["step_scales"]) == (final["etas"], final["step_scales"])
                   for u in tuned)
        mean = np.mean([u["grid_F"] for u in tuned], axis=0)
        k = int(np.nanargmin(mean))
        for seed in seeds:
            run = units[f"run/{method}/seed={seed}"]
            assert run["grid_index"] == k
            assert (run["eta"], run["step_scale"]) == (grid_eta.ravel()[k],
                                                       grid_scale.ravel()[k])
            # the segmented, timed run ends where the vmapped grid's run of that step does
            assert run["F"] == pytest.approx(units[f"grid/{method}/seed={seed}"]["grid_F"][k],
                                             rel=1e-9)
    overlapping = dataclasses.replace(experiments.get_config("rmc-video", "tiny"),
                                      tuning_seeds=(cfg["seeds"][0],))
    with pytest.raises(ValueError, match="disjoint"):
        _rmc.run("rmc-video", overlapping, "/nonexistent", progress=False)


def test_rmc_grid_extends_past_the_edges_chosen():
    # a choice at the top of a descending eta axis adds a point above it, at the edge's ratio
    assert _rmc.extend_axis((2.0, 1.0, 0.5, 0.1, 0.01), [0]) == (4.0, 2.0, 1.0, 0.5, 0.1, 0.01)
    assert _rmc.extend_axis((2.0, 1.0, 0.5, 0.1, 0.01), [4, 2]) == (
        2.0, 1.0, 0.5, 0.1, 0.01, 0.001)
    assert _rmc.extend_axis((0.03, 0.1, 0.3, 1.0), [0, 3]) == (0.009, 0.03, 0.1, 0.3, 1.0, 3.33)
    assert _rmc.extend_axis((0.03, 0.1, 0.3, 1.0), [1, 2]) == (0.03, 0.1, 0.3, 1.0)  # inside
    assert _rmc.extend_axis((0.3,), [0]) == (0.3,)  # one point: a fixed value


def test_rmc_tuning_widens_the_grid_until_the_choices_are_inside(tmp_path):
    # a synthetic F per grid point, least at eta = 8, S scale 0.1: the grid must widen twice
    def fake_grids(seed, cfg):
        eta, scale = _rmc.step_grid(cfg)
        return lambda method: {"grid_F": (np.log2(eta) - 3.0) ** 2 + np.log10(scale / 0.1) ** 2}

    cfg = dataclasses.replace(experiments.get_config("rmc-video", "tiny"),
                              etas=(2.0, 1.0, 0.5), step_scales=(0.1, 0.3),
                              max_extensions=3)
    store = _rmc.Store(str(tmp_path), "rmc-fake", dataclasses.asdict(cfg))
    final, chosen = _rmc.tune(store, "rmc-fake", cfg, progress=False, grid_runs=fake_grids)
    assert final.etas == (16.0, 8.0, 4.0, 2.0, 1.0, 0.5)  # 8 inside, one point past it
    assert final.step_scales == (0.0333, 0.1, 0.3)
    eta, scale = _rmc.step_grid(final)
    assert all((eta[k], scale[k]) == (8.0, 0.1) for k in chosen.values())
    grid = store.get("tuning_grid")
    assert len(grid["rounds"]) == 4 and not grid["chosen_at_edge"]
    # with fewer extensions allowed, the result says the choice is still on an edge
    store = _rmc.Store(str(tmp_path), "rmc-fake-1", dataclasses.asdict(cfg))
    short = dataclasses.replace(cfg, max_extensions=1)
    final, _ = _rmc.tune(store, "rmc-fake-1", short, progress=False, grid_runs=fake_grids)
    assert final.etas == (4.0, 2.0, 1.0, 0.5) and store.get("tuning_grid")["chosen_at_edge"]
    assert "still lies on an edge" in _rmc_report.tuning_sentence(store.get("tuning_grid"))


def test_rmc_choose_step_skips_diverged_points():
    assert _rmc.choose_step([[3.0, 1.0, 2.0], [3.0, np.inf, 2.0]]) == 2
    with pytest.raises(ValueError, match="diverged"):
        _rmc.choose_step([[np.nan, np.inf]])


def test_rmc_curves_of_f_and_error_against_ifo(result):
    units, cfg = result["units"], result["config"]
    passes = int(round(cfg["budget"]))
    for seed in cfg["seeds"]:
        setup = units[f"setup/seed={seed}"]
        for method in METHODS:
            run = units[f"run/{method}/seed={seed}"]
            ifo = np.asarray(run["ifo_curve"])
            assert ifo[0] == 0 and np.all(np.diff(ifo) > 0) and ifo[-1] == run["ifo_over_nnz"]
            # every method spends the budget, to the rounding down of its minibatches (at
            # most one sample a step); R-ProxSPB's |S2| makes its blocks spend it exactly
            steps = passes * round(1 / cfg["batch_fraction"])
            slack = 2 * (cfg["q"] - 1) if method == "R-ProxSPB" else steps
            assert cfg["budget"] - slack / setup["nnz"] <= run["ifo_over_nnz"] <= cfg["budget"]
            # R-ProxSPB: a point after every step, inside its blocks
            expected = 1 + (_rmc.spb_blocks(setup["nnz"], _config(cfg))[0] * cfg["q"]
                            if method == "R-ProxSPB" else passes * cfg["points_per_pass"])
            assert len(run["F_curve"]) == len(run["error_curve"]) == len(ifo) == expected
            assert run["F_curve"][0] == pytest.approx(setup["F0"], rel=1e-12)
            assert run["error_curve"][0] == pytest.approx(setup["error0"], rel=1e-12)
            assert run["F_curve"][-1] == run["F"] and run["error_curve"][-1] == run["error"]
    curves = result["summary"]["curves"]
    for method in METHODS:
        runs = [units[f"run/{method}/seed={s}"] for s in cfg["seeds"]]
        rows = np.asarray([r["F_curve"] for r in runs])
        assert np.allclose(curves[method]["F"]["median"], np.median(rows, axis=0))
        assert np.allclose(curves[method]["F"]["low"], rows.min(axis=0))
        errors = np.asarray([r["error_curve"] for r in runs])
        assert np.allclose(curves[method]["error"]["high"], errors.max(axis=0))
    # R-ProxSGD's gap to R-Subgrad, paired by seed, at the same curve points
    gap = result["summary"]["paired_gap"]
    sgd, sub = ([units[f"run/{m}/seed={s}"] for s in cfg["seeds"]]
                for m in ("R-ProxSGD", "R-Subgrad"))
    assert all(a["ifo_curve"] == b["ifo_curve"] for a, b in zip(sgd, sub, strict=True))
    ratio = [np.asarray(a["F_curve"]) / np.asarray(b["F_curve"]) - 1
             for a, b in zip(sgd, sub, strict=True)]
    assert np.allclose(gap["F"]["median"], np.median(ratio, axis=0))
    # The same start: each run evaluates F(X0) in its own compiled program, whose reductions
    # may round differently off CPU (-3e-18 on an H200).
    assert abs(gap["F"]["median"][0]) <= 1e-14


def test_rmc_curve_points_lie_on_the_uninterrupted_run(result):
    """The prefix reruns and the resumed epochs give the iterates of one uninterrupted run:
    the runner's F at the curve points against its F after every step (``Recording.loss``) of
    a single call."""
    cfg = experiments.get_config("rmc-video", "tiny")
    seed = cfg.seeds[0]
    prob, u0 = _rmc.video_problem(cfg, seed)[:2]
    nnz = prob.values.shape[0]
    for method in ("R-ProxSGD", "R-ProxSPB"):
        run = result["units"][f"run/{method}/seed={seed}"]
        opt, kw = _rmc.method_setup(method, run["eta"], run["step_scale"], nnz, cfg)
        res = rproxjax.fit(opt, lambda p, b: problems.rmc_batch_loss(p, b, prob),
                           {"U": u0, "S": jnp.zeros(nnz, u0.dtype)}, jnp.arange(nnz),
                           key=jax.random.key(seed + 1),
                           recording=rproxjax.Recording(loss=True), **kw)
        ifo = np.asarray(res.history.ifo) / nnz
        steps = [int(np.argmin(abs(ifo - x))) for x in run["ifo_curve"][1:]]
        assert np.allclose(ifo[steps], run["ifo_curve"][1:], rtol=1e-12)
        assert np.allclose(np.asarray(res.history.loss)[steps], run["fit_loss_curve"][1:],
                           rtol=1e-9)
        assert run["fit_loss_curve"][0] == pytest.approx(float(res.epoch_loss[0]), rel=1e-12)


def _by_margin(a, b):
    """Per seed, a below b by more than the larger seed spread: win; above by it: loss."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    margin = max(np.ptp(a), np.ptp(b))
    return ["win" if y - x > margin else "loss" if x - y > margin else "tie"
            for x, y in zip(a, b, strict=True)]


def test_rmc_verdicts_are_counted_over_seeds(result):
    units, cfg, summary = result["units"], result["config"], result["summary"]
    seeds = cfg["seeds"]
    claims = {c["claim"]: c for c in summary["claims"]}
    assert all(c["seeds"] == len(seeds) and c["wins"] == c["per_seed"].count("win")
               for c in claims.values())

    def per_seed(method, field):
        return [units[f"run/{method}/seed={s}"][field] for s in seeds]

    paper = [c for c in summary["claims"] if c["kind"] == "paper"]
    assert len(paper) == 4 and all("4|\\Omega|" in c["quote"] for c in paper)
    for c, (method, field) in zip(paper, [(m, f) for m in ("R-ProxSPB", "R-ProxSGD")
                                          for f in ("F", "error")], strict=True):
        assert c["claim"].startswith(method)
        assert c["per_seed"] == _by_margin(per_seed(method, field),
                                           per_seed("R-Subgrad", field))
    model = next(c for c in summary["claims"] if c["claim"].startswith("the converged"))
    assert model["kind"] == "check"
    assert model["per_seed"] == _by_margin(
        [units[f"reference/seed={s}"]["error"] for s in seeds],
        [min(units[f"run/{m}/seed={s}"]["error"] for m in METHODS) for s in seeds])
    oracle = [c for c in summary["claims"] if "own best grid step" in c["claim"]]
    sub = [np.nanmin(units[f"grid/R-Subgrad/seed={s}"]["grid_F"]) for s in seeds]
    for c in oracle:
        method = c["claim"].split()[0]
        own = [np.nanmin(units[f"grid/{method}/seed={s}"]["grid_F"]) for s in seeds]
        assert c["kind"] == "check" and c["per_seed"] == _by_margin(own, sub)


def test_rmc_reference_and_curves_are_on_the_plot(result):
    ref = result["summary"]["reference"]
    units, seeds = result["units"], result["config"]["seeds"]
    assert ref["F"]["median"] == pytest.approx(
        np.median([units[f"reference/seed={s}"]["F"] for s in seeds]))
    (fig,) = experiments.plot(result)
    axes = {ax.get_ylabel(): ax for ax in fig.axes if ax.get_ylabel()}
    for field, label in (("F", "objective F"), ("error", "background error vs temporal median")):
        lines = axes[label].get_lines()
        flat = [np.unique(ln.get_ydata()) for ln in lines]
        assert any(len(y) == 1 and y[0] == pytest.approx(ref[field]["median"]) for y in flat)
        drawn = {ln.get_label(): ln for ln in lines}
        for method in METHODS:
            curve = result["summary"]["curves"][method]
            assert np.allclose(drawn[method].get_xdata(), curve["ifo_over_nnz"])
            assert np.allclose(drawn[method].get_ydata(), curve[field]["median"])


def test_rmc_section_shows_the_step_grid(result):
    lines = _rmc_report.section(result)
    grid = result["summary"]["step_grid"]
    cfg, final = result["config"], result["units"]["tuning_grid"]
    assert len(grid) == len(final["etas"]) * len(final["step_scales"])
    rows = [ln for ln in lines if ln.startswith("| ") and "%" in ln]
    assert len(rows) == len(grid)
    assert any(ln.startswith("Tuning grids") for ln in lines)
    for point in grid:  # the wins are R-ProxSGD's paired wins at that step
        k = grid.index(point)
        wins = sum(result["units"][f"grid/R-ProxSGD/seed={s}"]["grid_F"][k]
                   < result["units"][f"grid/R-Subgrad/seed={s}"]["grid_F"][k]
                   for s in cfg["seeds"])
        assert point["sgd_wins"] == wins


def _config(cfg: dict):
    """The configuration object of a results file's ``config``."""
    from experiments._configs import RMCConfig

    fields = {f.name for f in dataclasses.fields(RMCConfig)}
    return RMCConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()
                        if k in fields})


def test_spb_blocks_spend_the_budget_exactly():
    """At the paper's q = 5 and 10% minibatches, whole blocks of |S2| = 10% spend 3.6
    |Omega| of 4; |S2| = 12.5% makes two blocks spend all of it."""
    from experiments._configs import RMCConfig
    from rproxjax._contract import block_cost

    cfg = RMCConfig()
    for nnz in (691200, 528, 1001):
        blocks, batch = _rmc.spb_blocks(nnz, cfg)
        spent = blocks * block_cost(cfg.q, batch, nnz)
        assert spent <= cfg.budget * nnz < spent + 2 * (cfg.q - 1) * blocks + 1
    assert _rmc.spb_blocks(691200, cfg) == (2, 86400)
