"""Figures from saved results (the CLI and the notebooks draw with these)."""

from __future__ import annotations

import pathlib

import numpy as np

COLORS = {"R-ProxSPB": "C0", "R-ProxSGD": "C1", "R-Subgrad": "C2", "ManPG": "C3",
          "SPAMS": "C4", "MiniBatchSparsePCA": "C5", "R-ProxSVRG": "C6", "R-ProxSARAH": "C7"}
SPCA_METHODS = ("R-ProxSPB", "R-ProxSGD", "R-ProxSVRG", "R-ProxSARAH", "R-Subgrad", "ManPG")
STAND_INS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST (stand-in for the paper's COIL-100)",
}
VIDEO = "surveillance video (stand-in for the paper's Hall/Airport videos)"


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(result: dict, out_dir=None) -> list:
    """Draws the figures of a result; saves PNGs to ``out_dir`` (returns their paths) or,
    with ``out_dir=None``, returns the matplotlib figures."""
    kind = result["config"]["kind"]
    from rproxjax.experiments import _peers_report, _rmc_report

    draw = {"spca": spca_figures, "peers": _peers_report.figures, "rmc": _rmc_report.figures}
    figures = draw[kind](result)
    if out_dir is None:
        return list(figures.values())
    plt = _pyplot()
    paths = []
    for suffix, fig in figures.items():
        path = pathlib.Path(out_dir) / f"{result['name']}{suffix}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _f(values):
    return np.asarray(values, dtype=float)


def spca_figures(result: dict) -> dict:
    """One row per mu: loss vs IFO/n, loss vs time, variance vs iteration (Figures 1-3)."""
    plt = _pyplot()
    cfg, units = result["config"], result["units"]
    mus = cfg["mus"]
    n = units["setup"]["n"]
    fig, axes = plt.subplots(len(mus), 3, figsize=(13, 3.4 * len(mus)), squeeze=False)
    for row, mu in zip(axes, mus, strict=True):
        for method in SPCA_METHODS:
            if f"run/{method}/mu={mu}" not in units:  # results made before the method existed
                continue
            run = units[f"run/{method}/mu={mu}"]
            label = method if run["eta"] is None else f"{method} (eta={run['eta']:g})"
            kw = dict(color=COLORS[method], label=label, marker="." if method != "ManPG" else "o",
                      markersize=3)
            row[0].plot(_f(run["ifo_over_n"]), _f(run["loss"]), **kw)
            row[1].plot(_f(run["time"]), _f(run["loss"]), **kw)
            var_key = f"variance/{method}/mu={mu}"
            if var_key in units:
                var = _f(units[var_key]["variance"])
                row[2].semilogy(np.arange(1, len(var) + 1), var, color=COLORS[method],
                                label=method, linewidth=0.8)
        row[0].set_xlabel("IFO / n")
        row[1].set_xlabel("time (s)")
        row[2].set_xlabel("iteration")
        for ax in row[:2]:
            ax.set_ylabel(f"loss (mu = {mu})")
            ax.set_yscale("log")
        row[2].set_ylabel("||V_t - grad f(X_t)||^2")
        row[0].legend(fontsize=7)
    fig.suptitle(f"Online sparse PCA on {STAND_INS[cfg['dataset']]}: n = {n}, r = {cfg['r']}, "
                 f"|S| = |S2| = q = {cfg['batch_size']}, |S1| = n; {cfg['dtype']}", fontsize=10)
    fig.tight_layout()
    return {"": fig}
