"""The paper's claims tested one by one (experiments/_paper_claims.py) on the committed
results: the quotes are the paper's, the rows recompute from the curves, each comparison
is counted once and only where the paper makes it, degenerate panels and ManPG are shown
but not counted, the tangent variance is the main measure, and the reasons for a changed
verdict follow from the rows; the tuning disclosure's flags (experiments/_tuning_report.py)."""

import json
import pathlib
import re

import numpy as np
import pytest

from experiments import _paired, _paper_claims, _tuning_report
from experiments._paper_claims import CLAIMS, reasons

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PAPER = pathlib.Path("/work/shared/paper/riemannian-stochastic-proximal-gradient.tex")
NUMBERS = {"fig1": "1", "fig2": "2", "fig3": "3", "rmc_fig": "4", "added_exp": "4"}


def _plain(tex: str) -> str:
    """The TeX as the quotes write it: \\ref as its number, math as plain text, one space."""
    tex = re.sub(r"\\ref\{([^}]*)\}", lambda m: NUMBERS.get(m.group(1), m.group(1)), tex)
    tex = tex.replace("~", " ").replace("$", "").replace("\\mu", "mu")
    return re.sub(r"\s+", " ", tex)


@pytest.mark.skipif(not PAPER.exists(), reason="the paper's source is not here")
@pytest.mark.parametrize("claim", CLAIMS, ids=[c["id"] for c in CLAIMS])
def test_every_quote_is_the_papers_words(claim):
    assert claim["quote"] in _plain(PAPER.read_text())


def _load(name):
    from experiments._report import summarize

    path = RESULTS / f"{name}.json"
    if not path.exists():
        pytest.skip("no committed results (an installed copy)")
    result = json.loads(path.read_text())
    result["summary"] = summarize(result)
    v3 = result["summary"]["claims"]
    rows = _paper_claims.rows(name, result, v3)
    return result, rows + _paper_claims.orphans(name, v3, rows)


@pytest.fixture(scope="module")
def mnist_r10():
    return _load("spca-mnist-r10")


@pytest.fixture(scope="module")
def mnist_r15():
    return _load("spca-mnist-r15")


def _row(rows, **match):
    (row,) = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return row


def test_a_row_recomputes_from_the_saved_curves(mnist_r10):
    """R-ProxSPB against the batch R-Subgrad at mu = 0.2, equal IFOs, read directly from
    the curves: the end-of-budget paired difference, its t interval, the burn-in at the end
    of R-ProxSPB's first block (from the configuration)."""
    result, rows = mnist_r10
    row = _row(rows, kind="project", pkey="0.2", a="R-ProxSPB", axis="ifo_over_n")
    units, cfg = result["units"], result["config"]
    n, q, b = units["setup"]["n"], cfg["q"], cfg["batch_size"]
    block = (n + (q - 1) * 2 * b) / n
    assert row["stats"]["burn_in"] == pytest.approx(block)
    runs = {m: [units[f"run/{m}/mu=0.2/seed={s}"] for s in cfg["seeds"]]
            for m in ("R-ProxSPB", "R-Subgrad")}
    end = min(r["ifo_over_n"][-1] for rs in runs.values() for r in rs)
    d = np.array([np.interp(end, s["ifo_over_n"], s["loss"]) -
                  np.interp(end, p["ifo_over_n"], p["loss"])
                  for p, s in zip(runs["R-ProxSPB"], runs["R-Subgrad"], strict=True)])
    half = 2.7764451051977987 * d.std(ddof=1) / np.sqrt(d.size)  # t_{0.975, 4}
    assert row["stats"]["mean"] == pytest.approx(d.mean())
    assert row["stats"]["low"] == pytest.approx(d.mean() - half)
    grid = np.linspace(block, end, _paired.POINTS)
    mean = np.mean([np.interp(grid, s["ifo_over_n"], s["loss"]) -
                    np.interp(grid, p["ifo_over_n"], p["loss"])
                    for p, s in zip(runs["R-ProxSPB"], runs["R-Subgrad"], strict=True)], axis=0)
    lead, lag = np.mean(mean > 0), np.mean(mean < 0)
    assert (row["stats"]["lead_mean"], row["stats"]["lag_mean"]) == (lead, lag)
    expected = ("win" if d.mean() - half > 0 and lead >= _paired.FRACTION else
                "loss" if d.mean() + half < 0 and lag >= _paired.FRACTION else None)
    if expected:
        assert row["verdict"] == expected
    else:
        assert row["verdict"] in ("tie", "mixed")
    # the same comparison with the methods swapped gives the swapped verdict
    xa = [r["ifo_over_n"] for r in runs["R-ProxSPB"]]
    ya = [r["loss"] for r in runs["R-ProxSPB"]]
    xb = [r["ifo_over_n"] for r in runs["R-Subgrad"]]
    yb = [r["loss"] for r in runs["R-Subgrad"]]
    assert _paired.compare(xb, yb, xa, ya, block)["verdict"] == _paired.swap(row["verdict"])


def test_counting_degenerate_panels_and_manpg(mnist_r10):
    result, rows = mnist_r10
    r = result["config"]["r"]
    paper = [x for x in rows if x["kind"] == "paper" and x["claim"] != "-"]
    for x in paper:
        cols = _paper_claims.degenerate_columns(result["units"], x["pkey"],
                                                result["config"]["seeds"])
        if x["claim"] == "C6":  # ManPG: foregone, one row per panel and method
            assert not x["counted"] and x["not_counted"].startswith("foregone")
        else:
            assert x["counted"] == (cols < r / 2), x
            assert ("degenerate" in x["panel"]) == (cols > 0)
    manpg = [(x["pkey"], x["a"]) for x in paper if x["claim"] == "C6"]
    assert len(manpg) == len(set(manpg)) == 2 * len(result["config"]["mus"])
    keys = [k for x in rows for k in x["v3_keys"]]
    assert len(keys) == len(set(keys))  # each v3 comparison answered by one row
    assert {x["claim"] for x in paper} == {"C1", "C3", "C4", "C6"}
    # the paper's baseline is the single-sample R-Subgrad; the batch one is the project's
    assert {x["b"] for x in paper if x["claim"] == "C1"} == {"R-Subgrad-1"}
    assert {x["b"] for x in rows if x["kind"] == "project"} == {"R-Subgrad"}


def test_r15_counts_only_loss_against_time(mnist_r15):
    """Figure 3 shows the loss against time only: C5 rows on the time axis; v3's other
    claims at r = 15 are listed as not the paper's."""
    _, rows = mnist_r15
    paper = [x for x in rows if x["kind"] == "paper"]
    tested = [x for x in paper if x["claim"] != "-"]
    assert {x["claim"] for x in tested} == {"C5"} and {x["axis"] for x in tested} == {"time"}
    orphans = [x for x in paper if x["claim"] == "-"]
    assert orphans and all(not x["counted"] and "r = 15" in x["not_counted"]
                           for x in orphans if "variance-falls" not in x["pkey"])


def test_variance_claim_uses_the_tangent_part(mnist_r10):
    result, rows = mnist_r10
    row = _row(rows, kind="paper", pkey="0.2", claim="C4")
    units, seeds = result["units"], result["config"]["seeds"]
    logs = []
    for s in seeds:
        spb, sgd = (units[f"variance/{m}/mu=0.2/seed={s}"] for m in ("R-ProxSPB", "R-ProxSGD"))
        keep = ~np.asarray(spb["refresh"], bool)
        logs.append(np.mean(np.log10(np.asarray(sgd["riemannian_variance"])[keep])
                            - np.log10(np.asarray(spb["riemannian_variance"])[keep])))
    assert row["stats"]["mean"] == pytest.approx(np.mean(logs))
    assert "variance measure" in row["alt"]  # the Euclidean total's verdict beside it
    for panel in _paper_claims.variance_table(result):
        for who in ("R-ProxSPB block 1", "R-ProxSPB later", "R-ProxSGD"):
            c = panel[who]
            assert 0 <= c["tangent"] <= c["total"] * (1 + 1e-12) and c["normal"] >= 0


def _synthetic(**kw):
    row = {"kind": "paper", "counted": True, "verdict": "win", "v3": ["pass 5/5"],
           "v3_counted": True, "alt": {}}
    return row | kw


def test_reasons_name_what_changed():
    assert reasons(_synthetic()) == []
    assert reasons(_synthetic(v3=["FAIL"], alt={"baseline": "win"})) == ["rule"]
    assert reasons(_synthetic(alt={"baseline": "mixed"})) == ["rule", "baseline"]
    assert reasons(_synthetic(v3=["mixed 1/4/0 (win/tie/loss)"],
                              alt={"baseline": "mixed"})) == ["baseline"]
    assert reasons(_synthetic(alt={"variance measure": "tie"}, v3=["tie"])) == [
        "variance measure"]
    assert reasons(_synthetic(counted=False)) == ["counting"]
    assert reasons(_synthetic(counted=False, v3_counted=False)) == []


def test_v3_verdicts_map_onto_the_present_names():
    assert _paper_claims.v3_outcome("pass 5/5") == "win"
    assert _paper_claims.v3_outcome("FAIL") == "loss"
    assert _paper_claims.v3_outcome("mixed 2/3/0 (win/tie/loss)") == "mixed"
    assert _paper_claims.v3_outcome("foregone (pass 5/5)") == "foregone"


def test_tuning_flags(mnist_r15):
    result, _ = mnist_r15
    assert _tuning_report.steps_above_one(8.0, 1200) == 63 / 1200
    assert _tuning_report.steps_above_one(0.5, 1200) == 0.0
    rows = _tuning_report.tuning_rows("spca-mnist-r15", result)
    for r in rows:
        t = result["units"][f"tuning/{r['method']}"]
        assert ("eta" in r["edge"]) == (r["eta"] in (min(t["etas"]), max(t["etas"])))
        assert r["outside"] == (not 5e-5 <= r["eta"] <= 1.0)
        assert r["step"] == pytest.approx(r["eta"] * (r["gamma"] or 1.0))
        if r["method"] == "R-Subgrad-1" and r["nominal"]:  # refined on the ratio-2 axis
            assert r["refined_from"] is not None and not r["edge"]
            lo, hi = r["bracket"]
            assert lo is not None and hi is not None and 1 / lo <= 2.0 + 1e-9 and hi <= 2.0 + 1e-9
    cost = _tuning_report.refined_cost(result)
    assert cost["panels"] == 3 and cost["ran"] + cost["reused"] >= 3 * 3


def test_the_report_quotes_the_rule_and_counts_the_rows(tmp_path):
    """results/README.md (generated) quotes the rule, lists every claim, and its outcome
    table counts each file's counted rows."""
    import shutil

    from experiments import _paper_report
    from experiments._report import paper_rows, summarize, write_report

    committed = sorted(RESULTS.glob("*.json"))
    if not committed:
        pytest.skip("no committed results (an installed copy)")
    for path in committed:
        shutil.copy(path, tmp_path / path.name)
    text = write_report(tmp_path).read_text()
    assert _paired.RULE in text
    claims = text.split("### The paper's claims")[1].split("###")[0]
    assert all(f"| {c['id']} |" in claims for c in CLAIMS)
    result = json.loads((RESULTS / "spca-mnist-r10.json").read_text())
    result["summary"] = summarize(result)
    rows = paper_rows("spca-mnist-r10", result)
    (line,) = [x for x in text.splitlines() if x.startswith("| `spca-mnist-r10` |")]
    assert f"| {_paper_report.count_text(_paper_report.tally(rows))} |" in line
    table = text.split("### Every paper claim: v3 and v4")[1].split("###")[0]
    listed = [x for x in table.splitlines() if x.startswith("| spca-mnist-r10 |")]
    assert len(listed) == sum(r["kind"] == "paper" for r in rows)
