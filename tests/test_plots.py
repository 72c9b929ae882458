"""The figures, drawn from the committed results files: every method on its axes (or marked
off scale with its value), the paired panels' numbers and verdicts the same as the claims',
one colour per method, legible text, zeros on log axes shown."""

import copy
import io
import json
import pathlib

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.text import Text

from experiments import _paired, _panels, _paper_claims, _peers_report, _plots, _rmc_report
from experiments._style import COLORS, LEGEND

RESULTS = pathlib.Path(__file__).resolve().parent.parent / "results"


def _load(name):
    path = RESULTS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no {path}")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def spca():
    result = _load("spca-mnist-r10")
    return result, _plots.spca_figures(result)


@pytest.fixture(scope="module")
def rmc():
    result = _load("rmc-video")
    return result, _rmc_report.figures(result)[""]


def _drawn(fig):
    fig.savefig(io.BytesIO(), format="png", dpi=40)  # lays out and makes the tick labels
    return fig


def _texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_one_colour_per_method():
    methods = {*_plots.SPCA_METHODS, *_rmc_report.METHODS, "SPAMS", "MiniBatchSparsePCA"}
    assert methods <= set(COLORS)
    assert len({to_hex(c) for c in COLORS.values()}) == len(COLORS)


def test_every_method_is_drawn_in_its_colour(spca, rmc):
    figs = [*spca[1].values(), rmc[1]]
    seen = set()
    for fig in figs:
        for ax in fig.axes:
            for line in ax.get_lines():
                name = line.get_label().split(" (")[0].split(":")[0]
                if name in COLORS:
                    seen.add(name)
                    assert to_hex(line.get_color()) == to_hex(COLORS[name]), (name, ax.get_title())
    assert set(_plots.SPCA_METHODS) <= seen


def test_the_text_is_legible(spca, rmc):
    result = _load("peers-mnist")
    for fig in [*spca[1].values(), rmc[1], _peers_report.figures(result)[""]]:
        small = [(t.get_text(), t.get_fontsize()) for t in _texts(_drawn(fig))
                 if t.get_fontsize() < 8]
        assert not small, small[:5]
    assert LEGEND >= 8


def _loss_axes(fig):
    """(whole budget, zoom) pairs of the loss figure's rows."""
    axes = [ax for ax in fig.axes if ax.get_ylabel() == "loss F"]
    return list(zip(axes[::2], axes[1::2], strict=True))


def test_every_method_is_visible_on_the_loss_axes(spca):
    result, figs = spca
    for whole, zoom in _loss_axes(figs[""]):
        low, high = whole.get_ylim()
        curves = [ln for ln in whole.get_lines() if ln.get_label().split(" (")[0] in COLORS]
        assert {ln.get_label().split(" (")[0] for ln in curves} == set(_plots.SPCA_METHODS)
        for line in curves:  # on the whole budget's axis: every curve's end inside the range
            y = np.asarray(line.get_ydata(), float)
            x = np.asarray(line.get_xdata(), float)
            inside = x <= whole.get_xlim()[1]
            assert low <= y[inside][-1] <= high, line.get_label()
        # on the zoom: inside the range somewhere, or marked off scale with its value
        zlow, zhigh = zoom.get_ylim()
        notes = " ".join(t.get_text() for t in zoom.texts)
        for line in zoom.get_lines():
            y = np.asarray(line.get_ydata(), float)
            x = np.asarray(line.get_xdata(), float)
            window = (x >= zoom.get_xlim()[0]) & (x <= zoom.get_xlim()[1])
            shown = window.any() and np.any((y[window] >= zlow) & (y[window] <= zhigh))
            color = to_hex(line.get_color())
            name = next((m for m, c in COLORS.items() if to_hex(c) == color), None)
            if name is not None and y.size > 1 and not shown:
                assert f"{name}" in notes and "off scale" in notes, (name, notes)
        assert "ManPG" in notes  # ManPG lies above every zoom: marked with its value


def test_the_paired_panels_state_the_claims_numbers(spca):
    result, figs = spca
    rows = _paper_claims.rows("spca-mnist-r10", result, result["summary"]["claims"])
    legends = [ax.get_legend() for ax in figs["-paired"].axes if ax.get_legend()]
    panels = [p for p in result["summary"]["panels"]]
    assert len(legends) == len(panels)
    label = {p["key"]: p["label"] for p in panels}
    checked = 0
    for panel, leg in zip(panels, legends, strict=True):
        texts = {t.get_text().split("\n")[0]: t.get_text() for t in leg.get_texts()}
        for row in rows:
            if (row["pkey"] != panel["key"] or row["b"] != "R-Subgrad-1"
                    or row["axis"] not in ("ifo_over_n", "time")):
                continue
            st = row["stats"]
            short = _plots.SHORT[row["axis"]]
            want = (f"{short}: {-st['mean']:+.2f} [{-st['high']:+.2f}, {-st['low']:+.2f}] "
                    f"{row['verdict']}")
            assert want in texts[row["a"]], (label[panel["key"]], want, texts[row["a"]])
            checked += 1
    assert checked == 4 * len(panels)


def test_the_paired_panels_mark_the_burn_in_and_the_end_intervals(spca):
    result, figs = spca
    block = _paper_claims.spca_block(result)
    full = [ax for ax in figs["-paired"].axes if "after the burn-in" in ax.get_title()]
    assert full
    for ax in full[::2]:  # the IFO/n ones
        assert any(len(ln.get_xdata()) == 2 and np.allclose(ln.get_xdata(), block)
                   for ln in ax.get_lines())
        assert any("burn-in" in t.get_text() for t in ax.texts)
    zooms = [ax for ax in figs["-paired"].axes if "end-of-budget t intervals" in ax.get_title()]
    assert zooms and all(ax.containers for ax in zooms)  # the error bars


def test_paired_is_the_verdicts_statistic():
    rng = np.random.default_rng(0)
    x = [np.linspace(0, 4, 21)] * 5
    base = [10 - xi + 0.1 * rng.standard_normal(21) for xi in x]
    lower = [b - 0.5 + 0.05 * rng.standard_normal(21) for b in base]
    p = _panels.paired(x, lower, x, base, 1.0)
    c = _paired.compare(x, lower, x, base, 1.0)
    assert np.allclose(p["diff"], -c["d"]) and p["verdict"] == c["verdict"] == "win"
    assert p["end"]["mean"] == pytest.approx(-c["end"]["mean"])
    assert p["end"]["low"] == pytest.approx(-c["end"]["high"])
    assert np.all(p["low"] <= p["mean"]) and np.all(p["mean"] <= p["high"])
    inside = _panels.paired(x, lower, x, base, 5.0)  # the budget ends inside the burn-in
    assert inside["x"].size == 0 and inside["verdict"] == _paired.UNDECIDED


def test_log_axes_show_their_zeros(spca):
    result, figs = spca
    fig = figs["-variance"]
    tangent = [ax for ax in fig.axes if ax.get_title().startswith("tangent part")]
    assert len(tangent) == len(result["summary"]["panels"])
    for ax in tangent:
        assert ax.get_yscale() == "log"
        marks = [ln for ln in ax.get_lines() if ln.get_marker() == "v"]
        assert marks  # R-ProxSPB's refresh steps: a zero variance, on the bottom edge
        bottom = ax.get_ylim()[0]
        assert all(np.allclose(ln.get_ydata(), bottom) for ln in marks)
        assert any("0 to rounding" in t.get_text() for t in ax.texts)


def test_a_budget_inside_the_burn_in_still_draws(spca):
    """A budget that ends inside R-ProxSPB's first block (the tiny configurations): the
    figures draw and say that no paired grid exists."""
    result = copy.deepcopy(spca[0])
    block = _paper_claims.spca_block(result)
    for key, unit in result["units"].items():
        if key.startswith("run/"):
            x = np.asarray(unit["ifo_over_n"], float)
            keep = x <= 0.8 * block
            for field in ("ifo_over_n", "loss", "time"):
                unit[field] = list(np.asarray(unit[field], float)[keep])
    figs = _plots.spca_figures(result)
    notes = [t.get_text() for ax in figs["-paired"].axes for t in ax.texts]
    assert any("inside the burn-in" in n for n in notes)
    _drawn(figs[""])


def test_rmc_paired_panels(rmc):
    result, fig = rmc
    rows = _paper_claims.rmc_rows("rmc-video", result, result["summary"]["claims"])
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()
               and "verdict" in ax.get_legend().get_title().get_text()]
    assert len(legends) == 2
    for leg, field in zip(legends, ("F", "error"), strict=True):
        texts = [t.get_text() for t in leg.get_texts()]
        for row in rows:
            if row["pkey"] == field:
                assert any(t.startswith(row["a"]) and t.endswith(row["verdict"]) for t in texts)
        for line in leg.get_lines():  # R-ProxSGD in its own colour, not R-ProxSPB's
            name = next(t for t in texts if line.get_label() == t).split(":")[0]
            assert to_hex(line.get_color()) == to_hex(COLORS[name])
