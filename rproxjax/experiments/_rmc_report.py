"""Robust matrix completion in reports and figures: its section of ``results/README.md``
and its PNG."""

from __future__ import annotations

import numpy as np

from rproxjax.experiments._plots import VIDEO, _pyplot


def section(result) -> list[str]:
    cfg = result["config"]
    setup = result["units"][f"setup/seed={cfg['seeds'][0]}"]
    lines = [f"Data: {VIDEO}, {setup['m']} pixels x {setup['n']} frames, |Omega| = "
             f"{setup['nnz']}; rank {cfg['rank']}; budget {cfg['budget']:g} |Omega|; "
             f"seeds {list(cfg['seeds'])}. Initial error {setup['error0']:.4f}.", "",
             f"![{result['name']}]({result['name']}.png)", "",
             "| method | F (mean) | error (mean) | error per seed | best grid error | "
             "time (s) | IFO/\\|Omega\\| | S nonzero |", "|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]["table"]:
        per_seed = ", ".join(f"{e:.4f}" for e in row["error_per_seed"])
        lines.append(f"| {row['method']} | {float(row['F']):.6g} | {float(row['error']):.4f} | "
                     f"{per_seed} | {float(row['best_grid_error']):.4f} | "
                     f"{float(row['time']):.2f} | {float(row['ifo_over_nnz']):.2f} | "
                     f"{float(row['S_nonzero_fraction']):.3f} |")
    ref = result["summary"].get("reference")
    if ref is not None:
        per_seed = ", ".join(f"{e:.4f}" for e in ref["error_per_seed"])
        lines.append(f"| converged reference ({cfg['reference_epochs']} full-gradient steps) | "
                     f"{float(ref['F']):.6g} | {float(ref['error']):.4f} | {per_seed} | | | | |")
        check = result["summary"]["model_check"]
        lines += ["", f"Model check ({'passes' if check['pass'] else 'FAILS'}): {check['check']}:"
                      f" {check['numbers']}."]
    return lines


def figures(result: dict) -> dict:
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
