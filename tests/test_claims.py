"""Claims checked on the data: verdicts counted over seeds, the paper's apart from the
project's checks, Markdown that a "|" cannot break."""

import pytest

from rproxjax.experiments import _claims


def test_verdicts_count_the_seeds_that_pass():
    c = _claims.claim("x", [True, False, True], "n", quote="the paper's words")
    assert (c["seeds_passed"], c["seeds"], c["pass"]) == (2, 3, False)
    assert _claims.verdict(c) == "mixed 2/3"
    assert _claims.verdict(_claims.check("y", [True] * 5, "n")) == "pass 5/5"
    assert _claims.verdict(_claims.check("y", [False] * 5, "n")) == "FAIL"
    assert _claims.verdict(_claims.check("y", True, "n")) == "pass"  # unseeded


def test_bad_claims_are_errors():
    with pytest.raises(ValueError, match="quote"):
        _claims.claim("x", [True], "n")  # a claim of the paper without its words
    with pytest.raises(ValueError, match="kind"):
        _claims.claim("x", [True], "n", quote="q", kind="other")
    with pytest.raises(ValueError, match="at least one"):
        _claims.check("x", [], "n")


def test_render_separates_the_paper_from_the_checks_and_escapes_bars():
    claims = [_claims.claim("R-ProxSGD beats R-Subgrad", [True, True], "1 vs 2",
                            quote="a budget of $4|\\Omega|$"),
              _claims.check("a check of ours", [False, True], "3 |x| 4")]
    text = "\n".join(_claims.render(claims))
    paper, checks = text.split("(b) The project's own checks")
    assert "(a) The paper's claims: **1/1 pass on every seed**" in paper
    assert "a check of ours" in checks and "a check of ours" not in paper
    assert "**mixed 1/2**" in checks
    for part, bars in ((paper, 5), (checks, 4)):  # every row keeps its columns
        rows = [line for line in part.splitlines() if line.startswith("|")]
        assert len(rows) == 3
        assert all(row.replace("\\|", "").count("|") == bars for row in rows), rows
