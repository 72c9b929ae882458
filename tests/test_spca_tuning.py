"""The sparse PCA experiment's tuning protocol on synthetic loss surfaces: the screen extends
the grid past an edge where the best sits there, the local search at the budget ends at the
best pair it ran, and the move limit is reported."""

import math

import pytest

from experiments import _spca_tuning as tuning


class FakeEvaluator(tuning.Evaluator):
    """The evaluator with the compiled runs replaced by a loss surface of (panel, eta,
    gamma): the protocol's logic on its own."""

    def __init__(self, surface, panels):
        self.mus, self.surface = list(range(panels)), surface
        self.cache, self.records, self.calls = {}, [], []

    def __call__(self, lanes):
        todo = sorted({lane for lane in lanes if lane not in self.cache})
        self.calls.append(todo)
        for lane in todo:
            self.cache[lane] = self.surface(*lane)


def bowl(centre_eta, centre_gamma):
    """A bowl in (log eta, log gamma) around the given centre (per panel)."""
    def surface(panel, eta, gamma):
        ce, cg = centre_eta[panel], centre_gamma[panel]
        return (math.log(eta / ce)) ** 2 + 0.5 * (math.log(gamma / cg)) ** 2
    return surface


def test_axis_extends_past_either_edge_and_respects_a_cap():
    axis = tuning.Axis([0.5, 0.1, 1.0])
    assert axis.values == [0.1, 0.5, 1.0]
    assert axis.at_edge(1.0) == 1 and axis.at_edge(0.1) == -1 and axis.at_edge(0.5) == 0
    assert axis.neighbours(1.0) == [0.5, 2.0] and axis.values[-1] == 2.0
    assert axis.neighbours(0.1) == [0.05, 0.5] and axis.values[0] == 0.05
    capped = tuning.Axis([0.5, 1.0], cap=1.0)
    assert capped.at_edge(1.0) == 0 and capped.neighbours(1.0) == [0.5]
    assert capped.extend(+1) is None and capped.values == [0.5, 1.0]


def test_the_screen_extends_the_grid_until_the_best_is_inside():
    ev = FakeEvaluator(bowl([3.5, 0.01], [0.3, 0.3]), panels=2)
    etas, gammas = tuning.Axis([0.01, 0.1, 0.5, 1.0]), tuning.Axis([0.1, 0.3, 1.0])
    best = tuning._screen(ev, etas, gammas, max_extensions=3)
    assert etas.values[-1] == 8.0  # 1 -> 2 -> 4 -> 8: 8 is past the best, 4
    assert best[0] == (4.0, 0.3)
    assert best[1] == (0.01, 0.3) and etas.values[0] == 0.005  # extended below once
    # every pair of the extended grid was screened on every panel
    assert {(p, e, g) for p in range(2) for e in etas.values for g in gammas.values} <= set(
        ev.cache)


def test_the_screen_stops_extending_after_max_extensions():
    ev = FakeEvaluator(bowl([1e3], [0.3]), panels=1)
    etas = tuning.Axis([0.1, 1.0])
    best = tuning._screen(ev, etas, tuning.Axis([0.3]), max_extensions=2)
    assert etas.values == [0.1, 1.0, 2.0, 4.0] and best == [(4.0, 0.3)]


def test_the_local_search_ends_at_the_best_pair_it_ran():
    """A surface whose minimum at the budget lies two grid steps from the screen's best:
    the search moves there, and the choice is the least loss of every pair run."""
    surface = bowl([0.5], [1.0])
    ev = FakeEvaluator(surface, panels=1)
    etas, gammas = tuning.Axis([0.05, 0.1, 0.5, 1.0]), tuning.Axis([0.1, 0.3, 1.0])
    (choice,) = tuning._local_search(ev, [(0.1, 0.3)], etas, gammas, max_moves=4,
                                     tune_gamma=True)
    assert (choice["eta"], choice["gamma"]) == (0.5, 1.0)
    assert choice["moves"] == 2 and choice["converged"]
    assert choice["loss"] == min(ev.cache.values())
    assert gammas.values[-1] == 2.0  # the neighbour past gamma's edge was run
    # each round runs only the pairs not run before
    ran = [lane for call in ev.calls for lane in call]
    assert len(ran) == len(set(ran))


def test_a_search_out_of_moves_is_marked_unconverged():
    ev = FakeEvaluator(bowl([10.0], [1.0]), panels=1)
    etas = tuning.Axis([0.1, 0.5, 1.0])
    (choice,) = tuning._local_search(ev, [(0.1, 1.0)], etas, tuning.Axis([1.0]),
                                     max_moves=1, tune_gamma=False)
    assert choice["eta"] == 0.5 and choice["moves"] == 1 and not choice["converged"]
    assert choice["loss"] == min(ev.cache.values())


def test_a_diverged_grid_is_an_error():
    ev = FakeEvaluator(lambda p, e, g: math.inf, panels=1)
    with pytest.raises(ValueError, match="diverged"):
        tuning._screen(ev, tuning.Axis([0.1, 1.0]), tuning.Axis([0.1]), max_extensions=1)


def test_tune_runs_a_screen_then_a_search_at_the_budget():
    """The compiled protocol end to end on a small problem (R-Subgrad, two stages): the
    screen covers the grid on both tuning seeds at its budget, the choice is the best pair
    run at the reported budget, and the reported runs' schedule is that budget."""
    import dataclasses

    import numpy as np

    from experiments import _spca
    from experiments._configs import get_config

    cfg = dataclasses.replace(get_config("spca-fashion-r10", "tiny"), budget=1.0,
                              grid_budget=0.5, etas=(0.05, 0.5), max_extensions=1,
                              max_moves=2, tuning_lanes=4)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(200, 12)) * np.linspace(2.0, 0.5, 12)
    data -= data.mean(axis=0)
    out = _spca._tune("R-Subgrad", cfg, data, [0.05, 0.2])
    screen = [r for r in out["records"] if r["stage"] == "screen"]
    budget = [r for r in out["records"] if r["stage"] == "budget"]
    assert out["screen_ifo_over_n"] == pytest.approx(0.5)
    assert out["budget_ifo_over_n"] == pytest.approx(1.0)
    assert {(r["panel"], r["eta"]) for r in screen} == {
        (p, e) for p in (0, 1) for e in out["screen_etas"]}
    assert all(len(r["loss_per_seed"]) == 2 for r in out["records"])
    for p, choice in enumerate(out["choices"]):
        mine = {r["eta"]: r["loss"] for r in budget if r["panel"] == p}
        assert choice["loss"] == mine[choice["eta"]] == min(mine.values())
        assert len(mine) >= 2  # the choice and a neighbour, at the budget


def _tuned(choices, budget_records):
    """A one-axis tuning's record: its choices and its pairs run at the budget."""
    return {"tuned_gamma": False,
            "choices": [{"eta": e, "gamma": 0.1} for e in choices],
            "records": [{"stage": "budget", "panel": p, "eta": e, "gamma": 0.1, "loss": loss}
                        for p, e, loss in budget_records]}


def test_the_refined_search_moves_on_a_ratio_two_axis_and_reuses_the_tuned_pairs():
    """The paper's grid leaves a factor 5 between 0.05 and 0.01; the best step (0.02 on
    panel 0) lies between. The refined search reaches it on the ratio-2 axis, reads the
    pairs the tuning ran (0.05, 0.1) instead of running them again, and leaves a panel
    outside ``panels`` alone."""
    surface = bowl([0.02, 0.5, 0.3], [0.1, 0.1, 0.1])
    ev = FakeEvaluator(lambda j, e, g: surface((0, 2)[j], e, g), panels=2)
    tuned = _tuned([0.05, 0.5, 0.3], [(0, 0.05, surface(0, 0.05, 0.1)),
                                      (0, 0.1, surface(0, 0.1, 0.1)),
                                      (2, 0.3, surface(2, 0.3, 0.1))])
    found, reused = tuning.refine_search(ev, tuned, [0, 2], 2.0, max_moves=4)
    assert found[0]["eta"] == pytest.approx(0.0125 * 2)  # 0.05 -> 0.025 -> (0.0125 worse)
    assert found[0]["tuned_eta"] == 0.05 and found[0]["converged"]
    run = {e for calls in ev.calls for (_, e, _) in calls}
    assert 0.05 not in run and 0.1 not in run  # read from the tuning
    assert {r["eta"] for r in reused} == {0.05, 0.1, 0.3}
    # panel 2: its choice is the bowl's centre; only its two ratio-2 neighbours ran
    assert found[1]["eta"] == 0.3 and found[1]["moves"] == 0
    assert {e for calls in ev.calls for (j, e, _) in calls if j == 1} == {0.15, 0.6}


def test_a_refined_neighbour_equal_to_a_tuned_step_is_read_not_rerun():
    """A choice of 0.1 + 0.2 = 0.30000000000000004 doubles to 0.6000000000000001, the tuned
    0.6 to rounding: the search takes the tuned value (its key in the cache) and runs only
    the new neighbour below."""
    centre = 0.1 + 0.2
    assert centre * 2 != 0.6
    tuned = _tuned([centre], [(0, 0.6, 1.0), (0, centre, 0.5)])
    ev = FakeEvaluator(lambda j, e, g: 2.0, panels=1)
    found, _ = tuning.refine_search(ev, tuned, [0], 2.0, max_moves=4)
    assert found[0]["converged"] and found[0]["eta"] == centre
    assert [e for calls in ev.calls for (_, e, _) in calls] == [centre / 2]


def test_refine_runs_the_compiled_search_at_the_budget():
    """End to end on a small problem (R-Subgrad-1): the refined choice is the best pair at
    the budget among those run and reused, and every pair it ran is a ratio-2 multiple of
    the tuned choice."""
    import dataclasses

    import numpy as np

    from experiments import _spca
    from experiments._configs import get_config

    cfg = dataclasses.replace(get_config("spca-fashion-r10", "tiny"), budget=1.0,
                              grid_budget=1.0, etas=(0.01, 0.05, 0.25), max_extensions=1,
                              max_moves=2, tuning_lanes=4)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(120, 10)) * np.linspace(2.0, 0.5, 10)
    data -= data.mean(axis=0)
    tuned = _spca._tune("R-Subgrad-1", cfg, data, [0.05, 0.2])
    out = tuning.refine("R-Subgrad-1", cfg, data, [0.05, 0.2], tuned, [1], ratio=2.0,
                        optimizer=_spca.optimizer, schedule=_spca.schedule,
                        seed_keys=_spca._tuning_keys(cfg))
    assert out["panels"] == [1] and len(out["choices"]) == 1
    seen = {r["eta"]: r["loss"] for r in out["records"] + out["reused"] if r["panel"] == 1}
    choice = out["choices"][0]
    assert choice["loss"] == seen[choice["eta"]] == min(seen.values())
    tuned_eta = tuned["choices"][1]["eta"]
    for r in out["records"]:
        ratio = math.log2(r["eta"] / tuned_eta)
        assert abs(ratio - round(ratio)) < 1e-9 and r["eta"] not in {
            x["eta"] for x in out["reused"]}
