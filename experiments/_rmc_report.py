"""Robust matrix completion in reports and figures: its section of ``results/README.md``
and its PNG."""

from __future__ import annotations

import numpy as np

from experiments._style import VIDEO, figure

METHODS = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad")


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
            "relative to R-Subgrad's, paired by seed (the figure's right panel).")


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
    (first seed). Bottom: F and the background error against IFO / |Omega|, median and
    band (min to max) over the reported seeds, with the converged reference; R-ProxSGD's
    relative gap to R-Subgrad in both, paired by seed. Below each: its last pass, on a
    linear axis around the final values."""
    panels = _image_panels(result)
    fig = figure(figsize=(2.6 * len(panels), 9.2))
    grid = fig.add_gridspec(3, len(panels), height_ratios=(1.0, 1.25, 1.0))
    for i, (title, img) in enumerate(panels):
        ax = fig.add_subplot(grid[0, i])
        img = np.asarray(img, dtype=float).reshape(tuple(result["units"]["images"]["shape"]))
        ax.imshow(np.where(np.isfinite(img), img, 0.0), cmap="gray", vmin=0, vmax=1)
        ax.set_title(title, fontsize=8)
        ax.axis("off")
    third = len(panels) // 3
    axes = []
    for i, (field, label) in enumerate((("F", "objective F"),
                                        ("error", "background error vs temporal median"))):
        axes.append(fig.add_subplot(grid[1, i * third:(i + 1) * third]))
        _curve_axes(axes[-1], result["summary"], field, label)
    axes.append(fig.add_subplot(grid[1, 2 * third:]))
    _gap_axes(axes[-1], result["summary"]["paired_gap"])
    for i, ax in enumerate(axes):  # below each: its last pass, on a linear axis
        _last_pass(ax, fig.add_subplot(grid[2, i * third:(i + 1) * third]))
    fig.suptitle(f"Background estimation, {VIDEO}; budget {result['config']['budget']:g} "
                 f"|Omega| stochastic gradients; {len(result['summary']['seeds'])} seeds",
                 fontsize=9)
    fig.tight_layout()
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
    """One quantity against IFO / |Omega|: each method's median and band, and the converged
    reference's median (dashed) and band over seeds."""
    for method in METHODS:
        curve = summary["curves"][method]
        x = np.asarray(curve["ifo_over_nnz"], float)
        line, = ax.plot(x, curve[field]["median"], marker="o", ms=3, label=method)
        ax.fill_between(x, curve[field]["low"], curve[field]["high"], color=line.get_color(),
                        alpha=0.25)
    ref = summary["reference"][field]
    ax.axhline(float(ref["median"]), color="k", ls="--", lw=1, label="converged reference")
    ax.axhspan(float(ref["low"]), float(ref["high"]), color="k", alpha=0.1)
    ax.set_yscale("log")
    ax.set_xlabel("IFO / |Omega|")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _last_pass(ax, zoom):
    """``ax``'s curves and bands over the last pass (IFO / |Omega| from the budget less 1) on
    a linear axis whose range is set by where they end: the end-of-budget differences that
    decide the verdicts, which the whole run's range hides."""
    curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
    end = max(float(np.max(ln.get_xdata())) for ln in curves)
    start = end - 1.0 - 1e-9
    finals = []
    for band, line in zip(ax.collections, curves, strict=True):
        x, y = (np.asarray(a, float) for a in (line.get_xdata(), line.get_ydata()))
        zoom.plot(x[x >= start], y[x >= start], marker="o", ms=3, color=line.get_color(),
                  label=line.get_label())
        edge = band.get_paths()[0].vertices
        edge = edge[edge[:, 0] >= start]
        zoom.fill(edge[:, 0], edge[:, 1], color=line.get_color(), alpha=0.25, lw=0)
        finals += [y[-1], *edge[np.isclose(edge[:, 0], x[-1]), 1]]
    low, high = min(finals), max(finals)
    pad = 0.5 * (high - low) or 0.01 * abs(high) or 1.0
    zoom.set_ylim(low - pad, high + pad)
    zoom.set_xlim(end - 1.0, end)
    if low - pad < 0.0 < high + pad:
        zoom.axhline(0.0, color="k", lw=0.8)
    zoom.set_xlabel("IFO / |Omega| (the last pass; linear axis around the final values)")
    zoom.set_title(f"{ax.get_ylabel()}: the end of the budget", fontsize=8)
    zoom.grid(alpha=0.3)
    zoom.legend(fontsize=7)


def _gap_axes(ax, gap):
    """(R-ProxSGD - R-Subgrad) / R-Subgrad of F and of the error, paired by seed: median and
    band over seeds (below zero: R-ProxSGD lower)."""
    x = np.asarray(gap["ifo_over_nnz"], float)
    for field, label in (("F", "F"), ("error", "error")):
        line, = ax.plot(x, 100 * np.asarray(gap[field]["median"]), marker="o", ms=3,
                        label=label)
        ax.fill_between(x, 100 * np.asarray(gap[field]["low"]),
                        100 * np.asarray(gap[field]["high"]), color=line.get_color(),
                        alpha=0.25)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlabel("IFO / |Omega|")
    ax.set_ylabel(f"({gap['method']} - {gap['against']}) / {gap['against']} (%)")
    ax.set_title("paired by seed", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
