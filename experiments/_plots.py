"""Figures from saved results (the CLI and the notebooks draw with these).

A sparse PCA file draws four figures, one row per mu panel in the first three:

* ``NAME.png``: the loss against IFO/n and against time, each over the whole budget (every
  method on the axis, ManPG included) and zoomed on the end of the budget, where the
  deciding differences lie; median and [min, max] band over the seeds (an unpaired
  spread: the verdicts' statistic is in the next figure).
* ``NAME-paired.png``: each method minus the paper's baseline R-Subgrad-1 (one sample a
  step), seed by seed, after the burn-in of the verdicts (one R-ProxSPB block): the mean
  over seeds with its pointwise t interval, R-ProxSPB's and R-ProxSGD's seeds, and the
  end-of-budget t interval of every method with its verdict
  (:mod:`experiments._paired`, the statistic of :mod:`experiments._paper_claims`); a fifth
  column draws the paper's C3, R-ProxSPB minus R-ProxSGD on IFO/n, with its intervals.
* ``NAME-variance.png``: the gradient estimate's error against the iteration: its tangent
  part (the main measure), the Euclidean total and the normal part; zeros to rounding
  (the refresh steps, where the estimate is the full gradient) on each log axis's bottom
  edge.
* ``NAME-gamma.png``: the gamma panel.
"""

from __future__ import annotations

import pathlib

import numpy as np

from experiments import _panels, _paper_claims, _peers_report, _rmc_report
from experiments._spca_protocol import SINGLE_SAMPLE, VARIANCE_METHODS
from experiments._style import COLORS, LABEL, LEGEND, STAND_INS, SUPTITLE, axes_text, figure

SPCA_METHODS = ("R-ProxSPB", "R-ProxSGD", "R-ProxSVRG", "R-ProxSARAH", "R-Subgrad",
                "R-Subgrad-1", "ManPG")
#: The methods whose seeds the paired panels draw (the paper's claims compare these).
CLAIMED = ("R-ProxSPB", "R-ProxSGD")
AXES = {"ifo_over_n": ("IFO / n", "IFO/n"), "time": ("time (s)", "s")}
SHORT = {"ifo_over_n": "IFO/n", "time": "time"}
#: The paired end-of-budget zooms show each curve's last third after the burn-in, their y
#: range set by each curve's last tenth and the end intervals.
TAIL, TAIL_RANGE = 1 / 3, 0.1


def plot(result: dict, out_dir=None) -> list:
    """Draws the figures of a result; saves PNGs to ``out_dir`` (returns their paths) or,
    with ``out_dir=None``, returns the matplotlib figures."""
    kind = result["config"]["kind"]
    draw = {"spca": spca_figures, "peers": _peers_report.figures, "rmc": _rmc_report.figures}
    figures = draw[kind](result)
    if out_dir is None:
        return list(figures.values())
    paths = []
    for suffix, fig in figures.items():
        path = pathlib.Path(out_dir) / f"{result['name']}{suffix}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths


def _f(values):
    return np.asarray(values, dtype=float)


def _label(method, run) -> str:
    """The legend's name of a method's curves, with its tuned steps."""
    steps = [f"{k}={run[k]:g}" for k in ("eta", "gamma") if run.get(k) is not None]
    return f"{method} ({', '.join(steps)})" if steps else f"{method} (t = 1/L)"


def _panels_of(result) -> list[dict]:
    """Per mu panel: its title, runs per method, the baseline, the burn-in on each axis
    (one R-ProxSPB block, as the verdicts'), the end of the time axis."""
    cfg, units, summary = result["config"], result["units"], result["summary"]
    seeds = list(cfg["seeds"])
    data = STAND_INS[cfg["dataset"]].split(" (")[0]
    marks = {row["panel"]: row["degenerate"] for row in summary["table"]}
    block = _paper_claims.spca_block(result)
    out = []
    for panel in summary["panels"]:
        key = panel["key"]
        runs = {m: [units[f"run/{m}/mu={key}/seed={s}"] for s in seeds]
                for m in SPCA_METHODS if f"run/{m}/mu={key}/seed={seeds[0]}" in units}
        if "R-ProxSPB" not in runs:
            continue
        cols = _paper_claims.degenerate_columns(units, key, seeds)
        mark = marks.get(key) or ""
        if cols >= cfg["r"] / 2:
            mark = (mark + "; " if mark else "") + "shown, not counted"
        title = f"{data}, r = {cfg['r']}: {panel['label']}" + (f"\n({mark})" if mark else "")
        ends = {m: float(np.median([r["time"][-1] for r in rs])) for m, rs in runs.items()}
        # The time axis ends with the minibatch methods: the single-sample R-Subgrad, whose
        # steps cost as much as a minibatch's, would squeeze them to its left edge.
        t_end = max(e for m, e in ends.items() if m != SINGLE_SAMPLE)
        burn = {"ifo_over_n": block,
                "time": _paper_claims._burn_ins(runs["R-ProxSPB"], block, "time")["one block"]}
        out.append({"key": key, "title": title, "runs": runs, "ends": ends, "t_end": t_end,
                    "burn": burn, "nominal": panel["nominal"],
                    "base": SINGLE_SAMPLE if SINGLE_SAMPLE in runs else "R-Subgrad"})
    return out


def _zoom_start(p, axis, spreads) -> float:
    """Where an end-of-budget zoom starts: halfway from the burn-in to the earliest end of
    the methods drawn in it (halfway from 0 where the budget ends inside the burn-in)."""
    ends = [float(s["x"][-1]) for m, s in spreads.items() if m != "ManPG"
            and not (axis == "time" and p["ends"][m] > p["t_end"])]
    first, burn = min(ends), p["burn"][axis]
    return burn + 0.5 * (first - burn) if first > burn else 0.5 * first


def _loss_row(row, p) -> None:
    """Loss against IFO/n and time, each whole and zoomed on the end of the budget."""
    for (full, zoom), axis in zip((row[:2], row[2:4]), AXES, strict=True):
        xlabel, unit = AXES[axis]
        spreads = {m: _panels.spread([r[axis] for r in rs], [r["loss"] for r in rs])
                   for m, rs in p["runs"].items()}
        late = {m for m in spreads if axis == "time" and p["ends"][m] > p["t_end"]}
        right = 1.02 * p["t_end"] if axis == "time" else None
        for m, s in spreads.items():
            for ax in (full, zoom):
                _panels.draw_spread(ax, s, COLORS[m],
                                    label=_label(m, p["runs"][m][0]) if ax is full else None)
        # the whole budget: every method on the axis
        lows = [float(np.min(s["low"])) for s in spreads.values()]
        highs = [float(np.max(s["high"])) for s in spreads.values()]
        _panels.set_range(full, min(lows), max(highs), pad=0.03)
        if right is not None:
            full.set_xlim(0.0, right)
        else:
            full.set_xlim(left=0.0)
        burn = p["burn"][axis]
        full.axvline(burn, color="0.3", linewidth=0.9, linestyle=":")
        full.text(burn, 0.98, " burn-in: one R-ProxSPB block", transform=full.get_xaxis_transform(),
                  ha="left", va="top", fontsize=LEGEND, color="0.25")
        for m in sorted(late):
            s = spreads[m]
            y = float(np.interp(right, s["x"], s["median"]))
            full.plot([right], [y], marker=">", color=COLORS[m], ms=8, markeredgecolor="k",
                      markeredgewidth=0.6, clip_on=False, zorder=7)
            full.annotate(f"{m} goes on to {p['ends'][m]:.3g} s\n(ends at F = "
                          f"{float(s['median'][-1]):.4g})", (right, y), xytext=(-8, 6),
                          textcoords="offset points", ha="right", va="bottom",
                          fontsize=LEGEND, color=COLORS[m],
                          bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                                "alpha": 0.8})
        # the end of the budget
        start = _zoom_start(p, axis, spreads)
        stop = p["t_end"] if axis == "time" else max(float(s["x"][-1])
                                                      for s in spreads.values())
        inside = [_panels.window(s, start, stop) for m, s in spreads.items() if m != "ManPG"]
        low = min((v[0] for v in inside if np.isfinite(v[0])), default=min(lows))
        high = max((v[1] for v in inside if np.isfinite(v[1])), default=max(highs))
        _panels.set_range(zoom, low, high)
        zoom.set_xlim(start, stop + 0.02 * (stop - start))
        _panels.mark_window(full, start, stop, *zoom.get_ylim())
        off = []
        for m, s in spreads.items():
            keep = (s["x"] >= start) & (s["x"] <= stop)
            if keep.any():
                off.append((float(s["x"][keep][-1]), float(s["median"][keep][-1]), COLORS[m],
                            m))
            elif s["x"][-1] < start:  # ended before the window: its final value at the left
                off.append((start, float(s["median"][-1]), COLORS[m],
                            f"{m} (ended at {float(s['x'][-1]):.3g} {unit})"))
        _panels.mark_off_scale(zoom, off)
        axes_text(full, title="loss F against " + xlabel.split(" (")[0] + ": the whole budget",
                  xlabel=xlabel, ylabel="loss F")
        axes_text(zoom, title="the end of the budget (linear, zoomed)", xlabel=xlabel,
                  ylabel="loss F")


def _legend_column(ax, source, title) -> None:
    _panels.legend_axes(ax, source, title=title)


def _loss_figure(result, panels) -> object:
    cfg, units = result["config"], result["units"]
    fig = figure(figsize=(20, 3.9 * len(panels) + 0.9), layout="constrained")
    axes = fig.subplots(len(panels), 5, squeeze=False,
                        gridspec_kw={"width_ratios": (1, 1, 1, 1, 0.62)})
    for row, p in zip(axes, panels, strict=True):
        _loss_row(row, p)
        row[0].annotate(p["title"], (0.0, 1.0), xytext=(0, 22), xycoords="axes fraction",
                        textcoords="offset points", ha="left", va="bottom",
                        fontsize=LABEL + 1, fontweight="bold")
        _legend_column(row[4], row[0], "method (tuned steps)")
    fig.suptitle(f"Online sparse PCA on {STAND_INS[cfg['dataset']]}: n = "
                 f"{units['setup']['n']}, r = {cfg['r']}, |S| = |S2| = q = "
                 f"{cfg['batch_size']}, |S1| = n; {cfg['dtype']}.\nLines: median over seeds "
                 f"{list(cfg['seeds'])}; bands: [min, max] over them (unpaired: the paired "
                 f"differences that decide the verdicts are in {result['name']}-paired.png). "
                 "Dashed box: the zoom at its right.", fontsize=SUPTITLE)
    return fig


def _paired_row(row, p) -> dict:
    """Each method minus the baseline on IFO/n and on time: the whole budget after the
    burn-in, and the end of the budget with the end-of-budget intervals. Returns the
    legend's labels."""
    base = p["runs"][p["base"]]
    texts = {}
    for (full, zoom), axis in zip((row[:2], row[2:4]), AXES, strict=True):
        xlabel, unit = AXES[axis]
        burn = p["burn"][axis]
        items = {}
        for m, rs in p["runs"].items():
            if m == p["base"]:
                continue
            items[m] = _panels.paired([r[axis] for r in rs], [r["loss"] for r in rs],
                                      [r[axis] for r in base], [r["loss"] for r in base], burn)
            texts.setdefault(m, []).append(f"{SHORT[axis]}: {_panels.end_text(items[m])}")
        drawn = {m: q for m, q in items.items() if m != "ManPG" and q["x"].size}
        for m, q in items.items():
            for ax in (full, zoom):
                _panels.draw_paired(ax, q, COLORS[m], label=m if ax is full else None,
                                    seeds=m in CLAIMED)
        for ax in (full, zoom):
            ax.axhline(0.0, color="k", linewidth=0.9)
        ends = [q["end_x"] for q in drawn.values()]
        stop = max(ends) if ends else burn
        full.set_xlim(0.0, stop * 1.02 if stop > 0 else 1.0)
        low, high = _panels.paired_limits(drawn.values())
        _panels.set_range(full, low, high)
        _panels.mark_burn_in(full, burn, "burn-in: one R-ProxSPB block,\nnot compared")
        off = [(float(q["x"][-1]), float(q["mean"][-1]), COLORS[m],
                f"{m} at its end ({q['end_x']:.3g} {unit})")
               for m, q in items.items() if m not in drawn and q["x"].size]
        _panels.mark_off_scale(full, off)
        for m, q in items.items():
            if not q["x"].size:
                texts[m][-1] = (f"{SHORT[axis]}: ends at {q['end_x']:.3g} {unit}, inside the "
                                f"burn-in ({burn:.3g} {unit}): not compared")
        if not drawn:
            for ax in (full, zoom):
                ax.text(0.5, 0.5, "the budget ends inside the burn-in:\nno paired grid",
                        transform=ax.transAxes, ha="center", va="center", fontsize=LABEL)
        else:
            # x: each curve's last third; y: the end intervals and each curve's last tenth
            # (in time the single-sample baseline is still falling fast before: differences
            # of tens of units would hide the end's)
            start = min(_panels.tail_start(q, TAIL) for q in drawn.values())
            zoom.set_xlim(start, stop)
            low, high = _panels.paired_limits(drawn.values(), tail=TAIL_RANGE)
            _panels.set_range(zoom, low, high)
            _panels.end_bars(zoom, [(q, COLORS[m]) for m, q in drawn.items()], stop)
            _panels.mark_off_scale(zoom, [
                (min(max(q["end_x"], start), stop), float(q["mean"][-1]), COLORS[m],
                 f"{m} at its end ({q['end_x']:.3g} {unit})")
                for m, q in items.items() if m not in drawn and q["x"].size])
        what = f"F(method) - F({p['base']}), paired by seed"
        axes_text(full, title=f"{what}: after the burn-in", xlabel=xlabel, ylabel="loss difference")
        axes_text(zoom, title="the end of the budget; bars: end-of-budget t intervals",
                  xlabel=xlabel + ("" if axis == "ifo_over_n" else
                                   "; bars at each method's own end"),
                  ylabel="loss difference")
    return {m: f"{m}\n  " + "\n  ".join(t) for m, t in texts.items()}


def _c3_axis(ax, p) -> str:
    """The paper's C3 (R-ProxSPB usually beats R-ProxSGD): R-ProxSPB minus R-ProxSGD on
    IFO/n, seed by seed after the burn-in, with its pointwise and end-of-budget t intervals;
    returns the legend's line."""
    runs = p["runs"]
    if not {"R-ProxSPB", "R-ProxSGD"} <= set(runs):
        ax.set_axis_off()
        return ""
    a, b = runs["R-ProxSPB"], runs["R-ProxSGD"]
    burn = p["burn"]["ifo_over_n"]
    q = _panels.paired([r["ifo_over_n"] for r in a], [r["loss"] for r in a],
                       [r["ifo_over_n"] for r in b], [r["loss"] for r in b], burn)
    color = COLORS["R-ProxSPB"]
    _panels.draw_paired(ax, q, color, seeds=True)
    ax.axhline(0.0, color="k", linewidth=0.9)
    if q["x"].size:
        ax.set_xlim(0.0, q["end_x"] * 1.02)
        _panels.set_range(ax, *_panels.paired_limits([q]))
        _panels.mark_burn_in(ax, burn, "burn-in")
        _panels.end_bars(ax, [(q, color)], q["end_x"])
    else:
        ax.text(0.5, 0.5, "the budget ends inside the burn-in:\nno paired grid",
                transform=ax.transAxes, ha="center", va="center", fontsize=LABEL)
    axes_text(ax, title="C3: F(R-ProxSPB) - F(R-ProxSGD), paired;\nbar: end-of-budget t "
              "interval", xlabel=AXES["ifo_over_n"][0], ylabel="loss difference")
    return f"C3, R-ProxSPB - R-ProxSGD\n  IFO/n: {_panels.end_text(q)}"


def _paired_figure(result, panels) -> object:
    cfg = result["config"]
    fig = figure(figsize=(26, 3.9 * len(panels) + 1.2), layout="constrained")
    axes = fig.subplots(len(panels), 6, squeeze=False,
                        gridspec_kw={"width_ratios": (1, 1, 1, 1, 1, 0.95)})
    for row, p in zip(axes, panels, strict=True):
        labels = _paired_row(row, p)
        c3 = _c3_axis(row[4], p)
        if c3:
            labels = dict(labels, **{"R-ProxSPB": labels.get("R-ProxSPB", "R-ProxSPB")
                                     + "\n" + c3})
        row[0].annotate(p["title"], (0.0, 1.0), xytext=(0, 22), xycoords="axes fraction",
                        textcoords="offset points", ha="left", va="bottom",
                        fontsize=LABEL + 1, fontweight="bold")
        _panels.legend_axes(row[5], row[0], labels=labels,
                            title=f"method - {p['base']} at the end:\nmean [95% t interval] "
                                  "verdict")
    base = panels[0]["base"] if panels else SINGLE_SAMPLE
    fig.suptitle(f"Online sparse PCA on {STAND_INS[cfg['dataset']]}, r = {cfg['r']}: each "
                 f"method's loss minus {base}'s (the paper's R-Subgrad, one sample a step), "
                 f"seed by seed over seeds {list(cfg['seeds'])}.\nLines: mean over seeds; "
                 "bands: pointwise 95% t interval; thin lines: R-ProxSPB's and R-ProxSGD's "
                 "seeds. Below 0: the method is lower. The verdicts' grid starts after the "
                 "burn-in (shaded).", fontsize=SUPTITLE)
    return fig


def _variance_values(units, key, seeds, method, part) -> tuple:
    est = [units[f"variance/{method}/mu={key}/seed={s}"] for s in seeds]
    tangent = np.array([_f(e["riemannian_variance"]) for e in est])
    total = np.array([_f(e["variance"]) for e in est])
    values = {"tangent": tangent, "total": total,
              "normal": np.maximum(total - tangent, 0.0)}[part]
    return values, np.asarray(est[0]["refresh"], bool)


VARIANCE_PARTS = (
    ("tangent", "||P_X(V_t - grad f(X_t))||^2", "tangent part (the measure of claim C4)"),
    ("total", "||V_t - grad f(X_t)||^2", "Euclidean total"),
    ("normal", "total - tangent part", "normal part (the subproblem never reads it)"),
)


def _variance_row(row, p, units, seeds) -> bool:
    """The three parts of the estimate's error against the iteration, median and [min, max]
    over the seeds, on log axes whose bottom edge holds the zeros to rounding."""
    methods = [m for m in VARIANCE_METHODS
               if f"variance/{m}/mu={p['key']}/seed={seeds[0]}" in units]
    if not methods:
        return False
    for ax, (part, ylabel, title) in zip(row, VARIANCE_PARTS, strict=True):
        values = {m: _variance_values(units, p["key"], seeds, m, part) for m in methods}
        peak = max(float(np.max(v)) for v, _ in values.values())
        positive = np.concatenate([v[v > _panels.ZERO * peak] for v, _ in values.values()])
        floor = float(np.min(positive)) / 4 if positive.size else 1.0
        zeros_seen = False
        for m, (v, _) in values.items():
            zero = v <= _panels.ZERO * peak
            shown = np.where(zero, floor, v)
            it = np.arange(1, v.shape[1] + 1)
            at_zero = np.median(np.where(zero, 0.0, v), axis=0) == 0.0
            # a zero median is a marker on the bottom edge, not a spike down to it
            med = np.where(at_zero, np.nan, np.median(shown, axis=0))
            ax.semilogy(it, med, color=COLORS[m], label=m, linewidth=0.9)
            ax.fill_between(it, shown.min(axis=0), shown.max(axis=0), where=~at_zero,
                            color=COLORS[m], alpha=0.2, linewidth=0)
            if at_zero.any():
                zeros_seen = True
                ax.plot(it[at_zero], np.full(int(at_zero.sum()), floor), linestyle="none",
                        marker="v", ms=6, color=COLORS[m], markeredgecolor="k",
                        markeredgewidth=0.5, clip_on=False, zorder=6)
            zeros_seen |= bool(zero.any())
        ax.set_ylim(bottom=floor)
        if zeros_seen:
            ax.text(0.99, 0.02, f"bottom edge ({floor:.1e}): 0 to rounding; v: a zero "
                    "median\n(R-ProxSPB's refresh steps: the full gradient)",
                    transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=LEGEND, color="0.2",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.7",
                          "alpha": 0.85})
        axes_text(ax, title=title, xlabel="iteration", ylabel=ylabel)
    row[0].legend(fontsize=LEGEND, loc="upper left")
    return True


def _variance_figure(result, panels):
    cfg, units = result["config"], result["units"]
    seeds = list(cfg["seeds"])
    rows = [p for p in panels if any(f"variance/{m}/mu={p['key']}/seed={seeds[0]}" in units
                                     for m in VARIANCE_METHODS)]
    fig = figure(figsize=(17, 3.9 * max(len(rows), 1) + 0.9), layout="constrained")
    axes = fig.subplots(max(len(rows), 1), 3, squeeze=False)
    for row, p in zip(axes, rows, strict=False):
        _variance_row(row, p, units, seeds)
        row[0].annotate(p["title"], (0.0, 1.0), xytext=(0, 22), xycoords="axes fraction",
                        textcoords="offset points", ha="left", va="bottom",
                        fontsize=LABEL + 1, fontweight="bold")
    if not rows:
        axes[0, 0].text(0.5, 0.5, "no variance runs in this file", ha="center",
                        transform=axes[0, 0].transAxes, fontsize=LABEL)
    fig.suptitle(f"Online sparse PCA on {STAND_INS[cfg['dataset']]}, r = {cfg['r']}: the "
                 "error of the gradient estimate V_t against the iteration (median and [min, "
                 f"max] over seeds {seeds}).\nR-ProxSPB's R-SARAH steps reduce the tangent "
                 "part; the normal part is the raw minibatch noise, which the subproblem "
                 "never reads.", fontsize=SUPTITLE)
    return fig


def spca_figures(result: dict) -> dict:
    """The four figures of a sparse PCA file (see the module's docstring), by file-name
    suffix."""
    panels = _panels_of(result)
    return {"": _loss_figure(result, panels), "-paired": _paired_figure(result, panels),
            "-variance": _variance_figure(result, panels), "-gamma": _gamma_figure(result)}


def _gamma_figure(result):
    cfg, units = result["config"], result["units"]
    fig = figure(figsize=(13, 4.6), layout="constrained")
    full, zoom = fig.subplots(1, 2)
    spreads = []
    for method in ("R-ProxSPB", "R-ProxSGD"):
        runs = {g: [units[f"gamma/{method}/gamma={g:g}/seed={s}"] for s in cfg["seeds"]]
                for g in cfg["gammas"]}
        for (g, rs), style in zip(runs.items(), ["-", "--", ":", "-."] * 4, strict=False):
            s = _panels.spread([r["ifo_over_n"] for r in rs], [r["loss"] for r in rs])
            spreads.append(s)
            for ax in (full, zoom):
                _panels.draw_spread(ax, s, COLORS[method], style=style, alpha=0.15,
                                    label=(f"{method}, gamma = {g:g} (eta = {rs[0]['eta']:g})"
                                           if ax is full else None))
    end = min(float(s["x"][-1]) for s in spreads)
    start = end / 2
    inside = [_panels.window(s, start, end) for s in spreads]
    _panels.set_range(zoom, min(v[0] for v in inside), max(v[1] for v in inside))
    zoom.set_xlim(start, end * 1.01)
    _panels.mark_window(full, start, end, *zoom.get_ylim())
    data = STAND_INS[cfg["dataset"]].split(" (")[0]
    axes_text(full, title="the whole budget", xlabel="IFO / n", ylabel="loss F")
    axes_text(zoom, title="the second half of the budget (linear, zoomed)", xlabel="IFO / n",
              ylabel="loss F")
    full.legend(fontsize=LEGEND, loc="upper right")
    fig.suptitle(f"{data}, r = {cfg['r']}: gamma sensitivity at mu = "
                 f"{cfg['gamma_mu_fraction']:g} mu_deg (lines: median; bands: [min, max] over "
                 f"seeds {list(cfg['seeds'])})", fontsize=SUPTITLE)
    return fig
