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
    figures = {"spca": spca_figures, "peers": peers_figures, "rmc": rmc_figures}[kind](result)
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


def peers_figures(result: dict) -> dict:
    """Explained variance against nonzeros for each method's sparsity sweep."""
    plt = _pyplot()
    cfg, rows = result["config"], result["summary"]["table"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for method in dict.fromkeys(row["method"] for row in rows):
        sub = [row for row in rows if row["method"] == method]
        nnz = [row["nonzeros_normalized"] for row in sub]
        for ax, metric in zip(axes, ("explained_variance", "adjusted_variance"), strict=True):
            ax.plot(nnz, [row[metric] for row in sub], marker="o", color=COLORS[method],
                    label=method)
    for ax, title in zip(axes, ("explained variance tr(X^T A A^T X) / tr(X^T X) / ||A||_F^2",
                                "adjusted variance (QR of A^T X, Zou et al. 2006)"), strict=True):
        ax.set_xscale("log")
        total = result["units"]["setup"]["d"] * cfg["r"]
        ax.set_xlabel(f"nonzeros of X (|X_ij| > 1e-3, unit columns; of {total})")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"Sparse PCA loadings on {STAND_INS[cfg['dataset']]}, r = {cfg['r']}; "
                 "R-ProxSPB and SPAMS: equal batch size and sample budget; MiniBatchSparsePCA: "
                 "its passes, see the table", fontsize=9)
    fig.tight_layout()
    return {"": fig}


def rmc_figures(result: dict) -> dict:
    """Original frame, observed frame, and each method's background (first seed)."""
    plt = _pyplot()
    images = result["units"]["images"]
    shape = tuple(images["shape"])
    panels = [("original frame", images["frame"]), ("observed (50%, outliers)",
                                                    images["observed"]),
              ("temporal median", images["median"])]
    table = {row["method"]: row for row in result["summary"]["table"]}
    for method in ("R-ProxSPB", "R-ProxSGD", "R-Subgrad"):
        row = table[method]
        panels.append((f"{method}\ntime = {row['time']:.2f} s, error = {row['error']:.4f}",
                       images[method]))
    fig, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels), 2.6))
    for ax, (title, img) in zip(axes, panels, strict=True):
        img = np.asarray(img, dtype=float).reshape(shape)
        ax.imshow(np.where(np.isfinite(img), img, 0.0), cmap="gray", vmin=0, vmax=1)
        ax.set_title(title, fontsize=8)
        ax.axis("off")
    fig.suptitle(f"Background estimation, {VIDEO}; budget {result['config']['budget']:g} "
                 "|Omega| stochastic gradients", fontsize=9)
    fig.tight_layout()
    return {"": fig}
