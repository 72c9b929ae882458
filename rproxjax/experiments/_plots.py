"""Figures from saved results (the CLI and the notebooks draw with these)."""

from __future__ import annotations

import pathlib

import numpy as np

from rproxjax.experiments import _peers_report, _rmc_report
from rproxjax.experiments._style import COLORS, STAND_INS, figure

SPCA_METHODS = ("R-ProxSPB", "R-ProxSGD", "R-ProxSVRG", "R-ProxSARAH", "R-Subgrad", "ManPG")


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


def _median_band(xs, ys, grid):
    """Median and [min, max] over runs of curves (xs[i], ys[i]) read on ``grid``."""
    values = np.array([np.interp(grid, _f(x), _f(y)) for x, y in zip(xs, ys, strict=True)])
    return np.median(values, axis=0), values.min(axis=0), values.max(axis=0)


def _spca_curves(ax, runs, axis, color, label, style="-"):
    xs = [run[axis] for run in runs]
    end = min(float(_f(x)[-1]) for x in xs)
    grid = np.unique(np.concatenate([_f(x)[_f(x) <= end] for x in xs]))
    med, lo, hi = _median_band(xs, [run["loss"] for run in runs], grid)
    ax.plot(grid, med, color=color, label=label, linewidth=1.2, linestyle=style)
    ax.fill_between(grid, lo, hi, color=color, alpha=0.2, linewidth=0)


def spca_figures(result: dict) -> dict:
    """One row per mu panel: loss vs IFO/n, loss vs time (median over the seeds with the
    [min, max] band), the Riemannian variance of the estimate vs iteration (median over the
    seeds); and a figure of the gamma panel."""
    cfg, units, summary = result["config"], result["units"], result["summary"]
    seeds, panels = cfg["seeds"], summary["panels"]
    marks = {row["panel"]: row["degenerate"] for row in summary["table"]}
    fig = figure(figsize=(13, 3.4 * len(panels)))
    axes = fig.subplots(len(panels), 3, squeeze=False)
    for row, panel in zip(axes, panels, strict=True):
        for method in SPCA_METHODS:
            if f"run/{method}/mu={panel['key']}/seed={seeds[0]}" not in units:
                continue
            runs = [units[f"run/{method}/mu={panel['key']}/seed={s}"] for s in seeds]
            eta = runs[0]["eta"]
            label = method if eta is None else f"{method} (eta={eta:g})"
            for ax, axis in zip(row[:2], ("ifo_over_n", "time"), strict=True):
                _spca_curves(ax, runs, axis, COLORS[method], label)
            if f"variance/{method}/mu={panel['key']}/seed={seeds[0]}" in units:
                est = [units[f"variance/{method}/mu={panel['key']}/seed={s}"] for s in seeds]
                var = np.median([_f(e["riemannian_variance"]) for e in est], axis=0)
                # at a refresh V_t is the full gradient: zero by construction, not drawn
                var[np.asarray(est[0]["refresh"], bool)] = np.nan
                row[2].semilogy(np.arange(1, len(var) + 1), var, color=COLORS[method],
                                label=method, linewidth=0.8)
        title = panel["label"] + (f" ({marks[panel['key']]})" if marks[panel["key"]] else "")
        for ax, xlabel in zip(row, ("IFO / n", "time (s)", "iteration"), strict=True):
            ax.set_xlabel(xlabel)
            ax.set_title(title, fontsize=8)
        for ax in row[:2]:
            ax.set_ylabel("loss F")
            ax.set_yscale("log")
        row[2].set_ylabel("||P_X(V_t - grad f(X_t))||^2 (median;\nrefresh steps, 0, not drawn)",
                          fontsize=8)
        row[0].legend(fontsize=7)
    fig.suptitle(f"Online sparse PCA on {STAND_INS[cfg['dataset']]}: n = "
                 f"{units['setup']['n']}, r = {cfg['r']}, |S| = |S2| = q = "
                 f"{cfg['batch_size']}, |S1| = n; {cfg['dtype']}; median and [min, max] over "
                 f"seeds {list(seeds)}", fontsize=10)
    fig.tight_layout()
    return {"": fig, "-gamma": _gamma_figure(result)}


def _gamma_figure(result):
    cfg, units = result["config"], result["units"]
    fig = figure(figsize=(6, 3.6))
    ax = fig.subplots(1, 1)
    for method in ("R-ProxSPB", "R-ProxSGD"):
        runs = {g: [units[f"gamma/{method}/gamma={g:g}/seed={s}"] for s in cfg["seeds"]]
                for g in cfg["gammas"]}
        for (g, rs), style in zip(runs.items(), ["-", "--", ":", "-."] * 4, strict=False):
            _spca_curves(ax, rs, "ifo_over_n", COLORS[method],
                         f"{method}, gamma = {g:g} (eta = {rs[0]['eta']:g})", style)
    ax.set_xlabel("IFO / n")
    ax.set_ylabel("loss F")
    ax.set_yscale("log")
    ax.set_title(f"gamma sensitivity at mu = {cfg['gamma_mu_fraction']:g} mu_deg", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig
