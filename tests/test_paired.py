"""The paired statistics and the one verdict rule (experiments/_paired.py), on synthetic
curves: a method that trails inside its first block and leads after it wins; a tie; a loss;
a mixed case; swapping the methods swaps win and loss."""

import numpy as np
import pytest

from experiments import _paired

SEEDS = 5
X = np.linspace(0.0, 6.0, 61)  # IFO/n
BLOCK = 1.99  # R-ProxSPB's first block ends here (|S1| = n, q = 100, |S2| = 100)


def _curves(shift, noise=0.02, x=X, rng=0):
    """Per-seed curves 40 + 10 exp(-x) + shift(x) with a seed offset and small noise."""
    rng = np.random.default_rng(rng)
    base = 40.0 + 10.0 * np.exp(-x)
    ys = [base + shift(x) + 0.5 * k + noise * rng.standard_normal(x.size)
          for k in range(SEEDS)]
    return [x] * SEEDS, ys


def _pair(shift_a, shift_b, **kw):
    xa, ya = _curves(shift_a, rng=0, **kw)
    xb, yb = _curves(shift_b, rng=1, **kw)
    return xa, ya, xb, yb


def _zero(x):
    return 0.0 * x


def _trails_then_leads(x):
    """Above b by 5 inside the first block, below it by 0.5 after."""
    return np.where(x <= BLOCK, 5.0, -0.5)


def test_a_method_that_trails_inside_its_first_block_and_leads_after_it_wins():
    xa, ya, xb, yb = _pair(_trails_then_leads, _zero)
    c = _paired.compare(xa, ya, xb, yb, BLOCK)
    assert c["verdict"] == "win"
    assert c["grid"][0] == pytest.approx(BLOCK) and c["grid"][-1] == pytest.approx(6.0)
    assert c["end"]["low"] > 0 and c["end"]["mean"] == pytest.approx(0.5, abs=0.05)
    assert c["lead"]["every"] > 0.95 and c["crossover"] <= 2.1
    # without the burn-in the first block decides: the lead covers too little of the grid
    early = _paired.compare(xa, ya, xb, yb, 0.0)
    assert early["lead"]["mean"] < 0.75 and early["verdict"] == "mixed"


def test_a_tie():
    """Differences that are pure noise around 0: the interval holds 0, no side leads."""
    rng = np.random.default_rng(1)
    xa, ya = [X] * SEEDS, [40.0 + 0.05 * rng.standard_normal(X.size) for _ in range(SEEDS)]
    xb, yb = [X] * SEEDS, [40.0 + 0.05 * rng.standard_normal(X.size) for _ in range(SEEDS)]
    c = _paired.compare(xa, ya, xb, yb, BLOCK)
    assert c["end"]["low"] < 0 < c["end"]["high"]
    assert max(c["lead"]["mean"], c["lead"]["mean_b"]) < 0.75
    assert c["verdict"] == "tie" and c["crossover"] is None


def test_a_loss():
    xa, ya, xb, yb = _pair(lambda x: 0.0 * x + 0.7, _zero)
    c = _paired.compare(xa, ya, xb, yb, BLOCK)
    assert c["verdict"] == "loss" and c["end"]["high"] < 0 and c["lead"]["mean_b"] == 1.0
    assert c["crossover"] is None and c["lead"]["every"] == 0.0


def test_mixed_the_end_and_the_course_disagree():
    """a is lower at the end but higher over most of the budget: neither a win nor a loss."""
    xa, ya, xb, yb = _pair(lambda x: np.where(x < 5.5, 1.0, -1.0), _zero)
    c = _paired.compare(xa, ya, xb, yb, BLOCK)
    assert c["end"]["low"] > 0 and c["lead"]["mean_b"] > 0.75
    assert c["verdict"] == "mixed"
    # the other way: a leads over the course, the end is a tie
    xa, ya, xb, yb = _pair(lambda x: np.where(x < 5.5, -1.0, 0.0), _zero, noise=0.2)
    c = _paired.compare(xa, ya, xb, yb, BLOCK)
    assert c["end"]["low"] < 0 < c["end"]["high"] and c["lead"]["mean"] > 0.75
    assert c["verdict"] == "mixed"


@pytest.mark.parametrize("shift", [_trails_then_leads, lambda x: 0.0 * x + 0.7,
                                   lambda x: np.where(x < 5.5, 1.0, -1.0), _zero])
def test_swapping_the_methods_swaps_win_and_loss(shift):
    xa, ya, xb, yb = _pair(shift, _zero)
    ab = _paired.compare(xa, ya, xb, yb, BLOCK)
    ba = _paired.compare(xb, yb, xa, ya, BLOCK)
    assert ba["verdict"] == _paired.swap(ab["verdict"])
    assert ba["end"]["mean"] == pytest.approx(-ab["end"]["mean"])
    assert ba["lead"]["mean"] == ab["lead"]["mean_b"]


def test_the_rule_itself_is_symmetric_and_needs_more_than_half():
    for low, high, lead, lag in [(0.1, 0.3, 0.8, 0.1), (-0.2, 0.1, 0.3, 0.6),
                                 (0.1, 0.2, 0.2, 0.8), (-0.1, 0.1, 0.5, 0.5)]:
        v = _paired.verdict(low, high, lead, lag)
        assert _paired.verdict(-high, -low, lag, lead) == _paired.swap(v)
    assert _paired.verdict(0.1, 0.3, 0.8, 0.1) == "win"
    assert _paired.verdict(-0.3, -0.1, 0.1, 0.8) == "loss"
    assert _paired.verdict(float("nan"), float("nan"), 1.0, 0.0) == "undecided"
    with pytest.raises(ValueError, match="exceed 1/2"):
        _paired.verdict(0.1, 0.2, 0.5, 0.5, fraction=0.5)


def test_the_interval_is_students_t():
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ci = _paired.t_interval(v, 0.95)
    half = 2.7764451051977987 * v.std(ddof=1) / np.sqrt(5)  # t_{0.975, 4}
    assert ci["mean"] == 3.0 and ci["high"] - 3.0 == pytest.approx(half)
    assert _paired.t_interval(v, 0.99)["high"] > ci["high"]
    assert np.isnan(_paired.t_interval([1.0])["low"])  # one seed: no interval
    assert _paired.t_interval([2.0, 2.0])["low"] == 2.0  # no spread: a point


def test_undecided_without_a_grid_after_the_burn_in_or_with_one_seed():
    xa, ya, xb, yb = _pair(_zero, _zero)
    assert _paired.compare(xa, ya, xb, yb, 7.0)["verdict"] == "undecided"
    assert _paired.compare(xa[:1], ya[:1], xb[:1], yb[:1], BLOCK)["verdict"] == "undecided"
    with pytest.raises(ValueError, match="same seeds"):
        _paired.compare(xa, ya, xb[:2], yb[:2], BLOCK)


def test_curves_on_other_grids_are_read_by_interpolation_without_extrapolation():
    x_sparse = np.array([0.0, 1.09, 1.99, 3.08, 3.98, 5.07, 5.97])
    ys = [10.0 - x_sparse]
    got = _paired.on_grid([x_sparse], ys, np.array([2.5, 5.5]))
    np.testing.assert_allclose(got, [[7.5, 4.5]])
    with pytest.raises(ValueError, match="outside"):
        _paired.on_grid([x_sparse], ys, np.array([2.5, 6.0]))
    # the common end is the shortest curve's: a comparison never reads past it
    c = _paired.compare([x_sparse] * 2, [10 - x_sparse, 10.1 - x_sparse],
                        [X] * 2, [11 - X, 11.2 - X], BLOCK)
    assert c["end_x"] == pytest.approx(5.97) and c["verdict"] == "win"


def test_crossover_is_the_start_of_the_final_run_of_leads():
    at = np.arange(6.0)
    d = np.array([[1, -1, 1, 1, 1, 1], [1, 1, -1, 1, 1, 1]], float)
    assert _paired.crossover(d, at) == 3.0
    assert _paired.crossover(-d, at) is None
    assert _paired.crossover(np.ones((2, 6)), at) == 0.0


def test_sensitivity_table_covers_burn_ins_and_levels():
    xa, ya, xb, yb = _pair(_trails_then_leads, _zero)
    table = _paired.sensitivity(xa, ya, xb, yb, {"none": 0.0, "one block": BLOCK})
    assert set(table) == {(b, lv) for b in ("none", "one block") for lv in (0.9, 0.95, 0.99)}
    assert table[("one block", 0.95)] == "win" and table[("none", 0.95)] == "mixed"


def test_the_rule_is_stated_once_with_its_constants():
    assert f"{_paired.FRACTION:.0%}" in _paired.RULE and f"{_paired.LEVEL:g}" in _paired.RULE
    assert "Swapping a and b swaps win and loss" in _paired.RULE
