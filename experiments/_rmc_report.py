"""Robust matrix completion in reports and figures: its section of ``results/README.md``
and its PNG."""

from __future__ import annotations

import numpy as np

from experiments import _panels
from experiments._style import COLORS, LEGEND, SUPTITLE, TITLE, VIDEO, axes_text, figure

METHODS = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad")
#: The paired panels draw the error's differences in units of 1e-3.
ERROR_SCALE = 1e3


def _band(b: dict, spec: str) -> str:
    return f"{float(b['median']):{spec}} [{float(b['low']):{spec}}, {float(b['high']):{spec}}]"


def section(result) -> list[str]:
    """Data, the figure, the table at the chosen steps (median [min, max] over the reported
    seeds), the converged reference, and the step grid against the methods' gap."""
    cfg, summary = result["config"], result["summary"]
    setup = result["units"][f"setup/seed={cfg['seeds'][0]}"]
    lines = [f"Data: {VIDEO}, {setup['m']} pixels x {setup['n']} frames, |Omega| = "
             f"{setup['nnz']} (seed {cfg['seeds'][0]}); rank {cfg['rank']}; budget "
             f"{cfg['budget']:g} |Omega|. Reported seeds {list(summary['seeds'])}; each "
             f"method's step (eta, S scale) chosen once on the tuning seeds "
             f"{list(summary['tuning_seeds'])} by its mean final F. Initial error "
             f"{setup['error0']:.4f}. Values: median [min, max] over the reported seeds.", "",
             f"![{result['name']}]({result['name']}.png)", "",
             "| method | step (eta, S scale) | F | error | time (s) | IFO/\\|Omega\\| | "
             "S nonzero | F at its own best grid step |", "|---|---|---|---|---|---|---|---|"]
    for row in summary["table"]:
        own = np.median(np.asarray(row["own_best_F_per_seed"], float))
        lines.append(f"| {row['method']} | {row['eta']:g}, {row['step_scale']:g} | "
                     f"{_band(row['F'], '.6g')} | {_band(row['error'], '.4f')} | "
                     f"{_band(row['time'], '.2f')} | {float(row['ifo_over_nnz']):.2f} | "
                     f"{_band(row['S_nonzero_fraction'], '.3f')} | {own:.6g} |")
    ref = summary["reference"]
    lines.append(f"| converged reference ({cfg['reference_epochs']} full-gradient steps) | | "
                 f"{_band(ref['F'], '.6g')} | {_band(ref['error'], '.4f')} | | | | |")
    return lines + [""] + step_grid_lines(summary)


def step_grid_lines(summary) -> list[str]:
    """Each grid point's median final F per method on the reported seeds, and R-ProxSGD
    against R-Subgrad at that same step (paired by seed); chosen steps starred."""
    by = {row["method"]: row for row in summary["table"]}
    seeds = len(summary["seeds"])
    grid = summary["step_grid"]
    lines = ["Step grid on the reported seeds (final F, median over seeds; * the step chosen "
             "on the tuning seeds). At the same step R-ProxSGD and R-Subgrad take the same "
             "U update and differ only in the S update (proximal step against subgradient "
             "step of gamma \\|\\|S\\|\\|_1).", "",
             "| eta | S scale | " + " | ".join(METHODS) + " | R-ProxSGD < R-Subgrad "
             "(seeds) | median gap |", "|---|---|---|---|---|---|---|"]
    for k, point in enumerate(grid):
        cells = [f"{point['F'][m]:.6g}{'*' if by[m]['grid_index'] == k else ''}"
                 for m in METHODS]
        lines.append(f"| {point['eta']:g} | {point['step_scale']:g} | " + " | ".join(cells)
                     + f" | {point['sgd_wins']}/{seeds} | {100 * point['sgd_gap']:+.2f}% |")
    f0 = summary["curves"]["R-Subgrad"]["F"]["median"][0]
    return lines + ["", tuning_sentence(summary.get("tuning_grid")), "",
                    chosen_gap(summary) + " " + gap_against_grid(grid, seeds, f0)]


def tuning_sentence(tuning) -> str:
    """One sentence: the tuning grids tried (widened where a choice lay on an edge) and
    whether every final choice is inside the final grid."""
    if tuning is None:
        return ("Tuning: one grid, not widened at its edges (results of an earlier "
                "protocol).")
    rounds = tuning["rounds"]
    grids = "; then ".join(f"etas {r['etas']} x S scales {r['step_scales']}" for r in rounds)
    end = ("**a method's choice still lies on an edge of the last grid** (the extensions "
           "ran out): its best step may lie outside it" if tuning["chosen_at_edge"] else
           "every method's choice lies inside the last grid")
    return (f"Tuning grids (mean final F over the tuning seeds; widened past an edge that a "
            f"choice lay on): {grids}; {end}.")


def chosen_gap(summary) -> str:
    """One sentence: the steps R-ProxSGD and R-Subgrad chose, and their final paired gap."""
    by = {row["method"]: row for row in summary["table"]}
    same = by["R-ProxSGD"]["grid_index"] == by["R-Subgrad"]["grid_index"]
    gap = summary["paired_gap"]
    final = {f: {k: 100 * gap[f][k][-1] for k in ("median", "low", "high")}
             for f in ("F", "error")}
    return (f"R-ProxSGD and R-Subgrad chose {'the same step' if same else 'different steps'} "
            f"on the tuning seeds; at the end of the budget R-ProxSGD's F is "
            f"{_band(final['F'], '+.2f')}% and its error {_band(final['error'], '+.2f')}% "
            "relative to R-Subgrad's, paired by seed (median [min, max] over the seeds; the "
            "figure's paired panels show the absolute differences with their t intervals).")


def gap_against_grid(grid, seeds, f0) -> str:
    """One sentence: how large the methods' gap at equal step is against the step's effect
    (R-Subgrad's best grid point against its second best), over the grid steps where both
    methods end below the starting F ``f0`` (the others diverged)."""
    kept = [p for p in grid if p["F"]["R-ProxSGD"] < f0 and p["F"]["R-Subgrad"] < f0]
    if not kept:
        return "No grid step lowers F for both R-ProxSGD and R-Subgrad."
    wins = sum(p["sgd_wins"] == seeds for p in kept)
    losses = sum(p["sgd_wins"] == 0 for p in kept)
    largest = max(abs(p["sgd_gap"]) for p in kept)
    sub = np.sort([p["F"]["R-Subgrad"] for p in kept])
    step = (sub[1] - sub[0]) / sub[0] if len(sub) > 1 else float("nan")
    return (f"Over the {len(kept)} grid steps where both end below the starting F, R-ProxSGD's "
            f"F is below R-Subgrad's on every seed at {wins} and above it on every seed at "
            f"{losses}; the median gap at equal step is at most {100 * largest:.2f}% in "
            f"absolute value, while R-Subgrad's second-best grid step ends "
            f"{100 * step:.1f}% above its best.")


def figures(result: dict) -> dict:
    """Top: original frame, observed frame, temporal median, each method's background
    (first seed). Middle: F and the background error against IFO / |Omega| (median and
    [min, max] band over the reported seeds, with the converged reference), then each
    method minus R-Subgrad in F and in the error, seed by seed after the burn-in of the
    verdicts (one R-ProxSPB block): mean and pointwise t interval. Bottom: each middle panel
    at the end of the budget on a linear axis, the paired ones with the end-of-budget t
    intervals that decide the verdicts."""
    images = _image_panels(result)
    fig = figure(figsize=(16.5, 11.0), layout="constrained")
    grid = fig.add_gridspec(3, 12, height_ratios=(0.62, 1.2, 1.2))
    for i, (title, img) in enumerate(images):
        ax = fig.add_subplot(grid[0, 2 * i:2 * i + 2])
        img = np.asarray(img, dtype=float).reshape(tuple(result["units"]["images"]["shape"]))
        ax.imshow(np.where(np.isfinite(img), img, 0.0), cmap="gray", vmin=0, vmax=1)
        ax.set_title(title, fontsize=TITLE)
        ax.axis("off")
    middle = [fig.add_subplot(grid[1, 3 * i:3 * i + 3]) for i in range(4)]
    bottom = [fig.add_subplot(grid[2, 3 * i:3 * i + 3]) for i in range(4)]
    summary = result["summary"]
    for i, (field, label) in enumerate((("F", "objective F"),
                                        ("error", "background error vs temporal median"))):
        _curve_axes(middle[i], summary, field, label)
        _last_pass(bottom[i], summary, field, label)
    burn, paired = _paired_curves(result)
    for i, field in enumerate(("F", "error")):
        _paired_axes(middle[2 + i], bottom[2 + i], paired[field], burn, field)
    fig.suptitle(f"Background estimation, {VIDEO}; budget {result['config']['budget']:g} "
                 f"|Omega| stochastic gradients; seeds {list(summary['seeds'])}",
                 fontsize=SUPTITLE)
    return {"": fig}


def _image_panels(result) -> list:
    images = result["units"]["images"]
    seed = result["config"]["seeds"][0]
    panels = [("original frame", images["frame"]),
              ("observed (50%, outliers)", images["observed"]),
              ("temporal median", images["median"])]
    for method in METHODS:
        run = result["units"][f"run/{method}/seed={seed}"]
        panels.append((f"{method} (seed {seed})\ntime = {float(run['time']):.2f} s, "
                       f"error = {float(run['error']):.4f}", images[method]))
    return panels


def _curve_axes(ax, summary, field, label):
    """One quantity against IFO / |Omega|: each method's median and [min, max] band, and
    the converged reference's median (dashed) and band over seeds; a log axis (every value
    is positive)."""
    for method in METHODS:
        curve = summary["curves"][method]
        x = np.asarray(curve["ifo_over_nnz"], float)
        ax.plot(x, curve[field]["median"], marker="o", ms=3, color=COLORS[method],
                label=method)
        ax.fill_between(x, curve[field]["low"], curve[field]["high"], color=COLORS[method],
                        alpha=0.25, linewidth=0)
    ref = summary["reference"][field]
    ax.axhline(float(ref["median"]), color="k", ls="--", lw=1, label="converged reference")
    ax.axhspan(float(ref["low"]), float(ref["high"]), color="k", alpha=0.1)
    ax.set_yscale("log")
    axes_text(ax, title=f"{label.split(' vs ')[0]}: median, [min, max] over seeds",
              xlabel="IFO / |Omega|", ylabel=label)
    ax.legend(fontsize=LEGEND)


def _last_pass(ax, summary, field, label):
    """The curves and bands of :func:`_curve_axes` over the last pass (IFO / |Omega| from the
    budget less 1), on a linear axis around their final values: the end-of-budget
    differences, which the whole run's range hides."""
    end = max(float(summary["curves"][m]["ifo_over_nnz"][-1]) for m in METHODS)
    start = end - 1.0 - 1e-9
    finals = []
    for method in METHODS:
        curve = summary["curves"][method]
        x = np.asarray(curve["ifo_over_nnz"], float)
        keep = x >= start
        med, low, high = (np.asarray(curve[field][k], float)
                          for k in ("median", "low", "high"))
        ax.plot(x[keep], med[keep], marker="o", ms=3, color=COLORS[method], label=method)
        ax.fill_between(x[keep], low[keep], high[keep], color=COLORS[method], alpha=0.25,
                        linewidth=0)
        finals += [med[-1], low[-1], high[-1]]
    low, high = min(finals), max(finals)
    pad = 0.5 * (high - low) or 0.01 * abs(high) or 1.0
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlim(end - 1.0, end)
    axes_text(ax, title=f"{label.split(' vs ')[0]}: the end of the budget (linear)",
              xlabel="IFO / |Omega| (the last pass)",
              ylabel=f"{label.split(' vs ')[0]} (last pass)")


def _paired_curves(result):
    """The burn-in of the verdicts (one R-ProxSPB block, in IFO / |Omega|) and, per field,
    each method minus R-Subgrad seed by seed (:func:`experiments._panels.paired`)."""
    from rproxjax._tasks.rmc import spb_blocks

    cfg, units = result["config"], result["units"]
    seeds = list(result["summary"]["seeds"])
    nnz = units[f"setup/seed={cfg['seeds'][0]}"]["nnz"]
    blocks, _ = spb_blocks(nnz, cfg["budget"], cfg["batch_fraction"], cfg["q"])
    burn = cfg["budget"] / blocks
    runs = {m: [units[f"run/{m}/seed={s}"] for s in seeds] for m in METHODS}
    base = runs["R-Subgrad"]
    out = {}
    for field in ("F", "error"):
        scale = ERROR_SCALE if field == "error" else 1.0
        out[field] = {m: _panels.paired([r["ifo_curve"] for r in runs[m]],
                                        [scale * np.asarray(r[f"{field}_curve"], float)
                                         for r in runs[m]],
                                        [r["ifo_curve"] for r in base],
                                        [scale * np.asarray(r[f"{field}_curve"], float)
                                         for r in base], burn)
                      for m in METHODS if m != "R-Subgrad"}
    return burn, out


def _paired_axes(full, zoom, items, burn, field):
    """Each method minus R-Subgrad after the burn-in (``full``), and the end of the budget
    with the end-of-budget t intervals (``zoom``)."""
    what = "F" if field == "F" else "error"
    unit = "" if field == "F" else f" (x {1 / ERROR_SCALE:g})"
    for m, p in items.items():
        label = f"{m}: {_panels.end_text(p, '+.3g')}"
        for ax in (full, zoom):
            _panels.draw_paired(ax, p, COLORS[m], label=label if ax is zoom else None,
                                seeds=True)
            ax.axhline(0.0, color="k", linewidth=0.9)
    drawn = [p for p in items.values() if p["x"].size]
    ends = [p["end_x"] for p in drawn]
    stop = max(ends) if ends else burn
    full.set_xlim(0.0, stop * 1.02 if stop > 0 else 1.0)
    _panels.set_range(full, *_panels.paired_limits(drawn))
    _panels.mark_burn_in(full, burn, "burn-in: one\nR-ProxSPB block")
    axes_text(full, title=f"{what}(method) - {what}(R-Subgrad), by seed",
              xlabel="IFO / |Omega|", ylabel=f"{what} difference{unit}")
    if drawn:  # the end of the budget: its range set by the end-of-budget intervals
        start = burn + 0.5 * (min(ends) - burn)
        zoom.set_xlim(start, stop)
        low, high = _panels.paired_limits(drawn, stop)
        _panels.set_range(zoom, low, high, pad=0.5)
        _panels.end_bars(zoom, [(p, COLORS[m]) for m, p in items.items()], stop)
    axes_text(zoom, title=f"{what} difference at the end; bars: t intervals",
              xlabel="IFO / |Omega|", ylabel=f"{what} difference{unit}")
    zoom.legend(fontsize=LEGEND, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                title="at the end: mean [95% t interval] verdict", title_fontsize=LEGEND,
                frameon=False)
