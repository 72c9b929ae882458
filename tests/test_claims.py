"""v3's accounting (experiments/_claims.py; the project's checks and the v3 column of the
report; the paper's claims use experiments/_paired.py, tests/test_paired.py): a win needs a
margin above the seed spread (else a tie),
"consistently" holds at every point after the first pass, a claim with fewer wins than
seeds is mixed and never a pass, foregone comparisons are counted apart, no comparison is
counted twice, and the paper's settings are reported apart from the project's panels."""

import numpy as np
import pytest

from experiments import _claims
from experiments._spca_summary import _lower_claim


def test_outcome_needs_a_margin_above_the_spread():
    assert _claims.outcome(0.5, 0.1) == "win"
    assert _claims.outcome(0.05, 0.1) == "tie"  # below b, but within the seed spread
    assert _claims.outcome(-0.05, 0.1) == "tie"
    assert _claims.outcome(-0.5, 0.1) == "loss"
    assert _claims.outcome([0.5, 0.5, 0.05], 0.1) == "tie"  # not at every point
    assert _claims.outcome([0.5, -0.5], 0.1) == "loss"
    assert _claims.outcome(float("nan"), 0.1) == "loss"


def test_lower_uses_the_larger_seed_spread_as_the_margin():
    a = np.array([1.0, 1.1, 1.2])  # spread 0.2
    b = np.array([1.5, 1.5, 1.5])  # spread 0
    assert _claims.lower(a, b) == ["win", "win", "win"]
    b = np.array([1.3, 1.3, 1.3])  # gaps 0.3, 0.2, 0.1 against a margin of 0.2
    assert _claims.lower(a, b) == ["win", "tie", "tie"]


def _curve(ifo, loss, time=None):
    ifo = np.asarray(ifo, float)
    return {"ifo_over_n": ifo.tolist(), "time": (ifo if time is None else time).tolist(),
            "loss": np.asarray(loss, float).tolist()}


IFO = np.linspace(0.0, 4.0, 9)


def test_a_win_at_the_end_only_is_not_consistent():
    """Along the curve: a below b at the end but above it at 2 IFO/n is a loss on every
    seed, while the end-of-budget comparison alone would call it a win."""
    b = 10.0 - IFO
    a = np.where(IFO == 2.0, b + 1.0, b - 1.0)
    runs_a = [_curve(IFO, a + 0.01 * s) for s in range(3)]
    runs_b = [_curve(IFO, b + 0.01 * s) for s in range(3)]
    end = _lower_claim("end", "q", runs_a, runs_b, "ifo_over_n", "IFO/n",
                       kind="paper", key="end")
    along = _lower_claim("along", "q", runs_a, runs_b, "ifo_over_n", "IFO/n",
                         kind="paper", key="along", along=True)
    assert _claims.verdict(end) == "pass 3/3"
    assert _claims.verdict(along) == "FAIL"


def test_a_gap_within_the_seed_spread_is_a_tie():
    """a below b by 0.05 on each seed, the seeds 0.5 apart: a tie, not a pass."""
    runs_b = [_curve(IFO, 10.0 - IFO + 0.5 * s) for s in range(3)]
    runs_a = [_curve(IFO, 10.0 - IFO + 0.5 * s - 0.05) for s in range(3)]
    c = _lower_claim("tie", "q", runs_a, runs_b, "ifo_over_n", "IFO/n", kind="paper",
                     key="tie", along=True)
    assert c["per_seed"] == ["tie"] * 3 and _claims.verdict(c) == "tie"
    assert not c["pass"]


def test_mixed_claims_are_never_passes():
    c = _claims.claim("x", ["win", "win", "tie"], "n", quote="the paper's words")
    assert _claims.verdict(c) == "mixed 2/1/0 (win/tie/loss)" and not c["pass"]
    c = _claims.claim("x", [True, False, True], "n", quote="q")
    assert (c["wins"], c["losses"], c["pass"]) == (2, 1, False)
    assert _claims.tally([c])["paper"] == {"pass": 0, "tie": 0, "mixed": 1, "fail": 0,
                                           "total": 1}
    assert _claims.verdict(_claims.check("y", [True] * 5, "n")) == "pass 5/5"
    assert _claims.verdict(_claims.check("y", [False] * 5, "n")) == "FAIL"
    assert _claims.verdict(_claims.check("y", True, "n")) == "pass"  # unseeded


def test_a_comparison_counted_twice_is_an_error():
    a = _claims.claim("R-ProxSGD beats R-Subgrad", [True], "n", quote="q", key="k")
    b = _claims.claim("the same, in other words", [True], "n", quote="q", key="k")
    with pytest.raises(ValueError, match="counted twice"):
        _claims.tally([a, b])
    with pytest.raises(ValueError, match="counted twice"):
        _claims.render([a, b])


def test_foregone_comparisons_and_panels_are_counted_apart():
    claims = [_claims.claim("claim-A", [True, True], "1", quote="q", key="1"),
              _claims.claim("claim-B", [False, False], "2", quote="q", kind="panel", key="2"),
              _claims.claim("claim-C", [True, True], "3", quote="q", key="3",
                            foregone="6 full-gradient steps"),
              _claims.check("claim-D", ["tie", "tie"], "4", key="4")]
    t = _claims.tally(claims)
    assert t["paper"]["pass"] == 1 and t["paper"]["total"] == 1
    assert t["panel"]["fail"] == 1 and t["check"]["tie"] == 1 and t["foregone"] == 1
    assert _claims.verdict(claims[2]) == "foregone (pass 2/2)"
    text = "\n".join(_claims.render(claims))
    a, rest = text.split("(b) The paper's comparisons at this project's settings")
    b, rest = rest.split("(c) The project's own checks")
    c, d = rest.split("(d) Foregone comparisons")
    assert "claim-A" in a and all(f"claim-{k}" not in a for k in "BCD")
    assert "claim-B" in b and "**FAIL**" in b and "claim-C" not in b
    assert "claim-D" in c and "**tie**" in c and "claim-C" not in c
    assert "claim-C" in d and "6 full-gradient steps" in d


def test_bad_claims_are_errors():
    with pytest.raises(ValueError, match="quote"):
        _claims.claim("x", [True], "n")  # a claim of the paper without its words
    with pytest.raises(ValueError, match="kind"):
        _claims.claim("x", [True], "n", quote="q", kind="other")
    with pytest.raises(ValueError, match="at least one"):
        _claims.check("x", [], "n")
    with pytest.raises(ValueError, match="outcomes"):
        _claims.check("x", ["won"], "n")


def test_render_escapes_bars():
    claims = [_claims.claim("R-ProxSGD beats R-Subgrad", [True, True], "1 vs 2",
                            quote="a budget of $4|\\Omega|$"),
              _claims.check("a check of ours", [False, True], "3 |x| 4")]
    text = "\n".join(_claims.render(claims))
    paper, checks = text.split("(c) The project's own checks")
    assert "1/1 pass on every seed" in paper
    assert "a check of ours" in checks and "a check of ours" not in paper
    for part, bars in ((paper, 5), (checks, 4)):  # every row keeps its columns
        rows = [line for line in part.splitlines() if line.startswith("|")]
        assert len(rows) == 3
        assert all(row.replace("\\|", "").count("|") == bars for row in rows), rows
