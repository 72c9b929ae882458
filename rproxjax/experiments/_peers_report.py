"""The peers comparison (Table added_exp) in reports and figures: its section of
``results/README.md`` and its PNG."""

from __future__ import annotations

from rproxjax.experiments._plots import COLORS, STAND_INS, _pyplot


def section(result) -> list[str]:
    lines = [f"![{result['name']}]({result['name']}.png)", "",
             "| method | penalty | expl. var. | adj. var. | nonzeros (unit columns) | "
             "nonzeros (as returned) | \\|\\|X^T X - I\\|\\| | IFO | time (s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]["table"]:
        lines.append(f"| {row['method']} | {float(row['penalty']):g} | "
                     f"{float(row['explained_variance']):.4f} | "
                     f"{float(row['adjusted_variance']):.4f} | {row['nonzeros_normalized']} | "
                     f"{row['nonzeros']} | {float(row['orthonormality']):.1e} | {row['ifo']} | "
                     f"{float(row['wall_time']):.2f} |")
    lines += ["", "How each method was called:", ""]
    seen = set()
    for row in result["summary"]["table"]:
        if row["method"] not in seen:
            seen.add(row["method"])
            lines.append(f"- {row['method']}: `{row['config']}`")
    return lines


def figures(result: dict) -> dict:
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
