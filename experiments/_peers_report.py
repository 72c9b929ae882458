"""The peers comparison (Table added_exp) in reports and figures: its section of
``results/README.md`` and its PNG."""

from __future__ import annotations

import numpy as np

from experiments._style import COLORS, LEGEND, STAND_INS, SUPTITLE, axes_text, figure

OURS = "R-ProxSPB"


def _range(values, fmt) -> str:
    """``median [min, max]`` of ``values``."""
    vals = [float(v) for v in values]
    return (f"{format(float(np.median(vals)), fmt)} [{format(min(vals), fmt)}, "
            f"{format(max(vals), fmt)}]")


def _budget_lines(result) -> list[str]:
    """What each method consumed against the budget B (R-ProxSPB's IFO count)."""
    s, cfg = result["summary"], result["config"]
    n, budget = result["units"]["setup"]["n"], s["budget"]
    rows = s["table"]
    lines = [f"Budget B = {budget} sample gradients ({budget / n:.2f} n, n = {n}): R-ProxSPB's "
             f"count in {cfg['iterations']} iterations (|S2| = {cfg['batch_size']}, |S1| = n "
             f"every q = {cfg['q']}). What each method used:", ""]
    for method in ("R-ProxSPB", "SPAMS", "MiniBatchSparsePCA"):
        sub = [r for r in rows if r["method"] == method]
        ifo = sorted({int(r["ifo"]) for r in sub})
        over = sum(bool(r.get("over_budget")) for r in sub)
        extra = ""
        if method == "MiniBatchSparsePCA" and sub:
            extra = (f" (its PCA warm start and final readout, {sub[0]['ifo_overheads']} "
                     "samples, counted inside B; whole passes over the data fill the rest)")
        lines.append(f"- {method}: {', '.join(map(str, ifo))} sample gradients "
                     f"({max(ifo) / budget:.3f} B at most){extra}; runs over budget: {over}.")
    seeds, tuning = s["seeds"], s["tuning_seeds"]
    lines += ["", f"Reported seeds {seeds} (R-ProxSPB: X0 and sampling; SPAMS: column order and "
              f"initial dictionary; MiniBatchSparsePCA: random_state). Every choice (eta per "
              f"mu, the operating mu, the peers' matched penalties) was made on the disjoint "
              f"tuning seeds {tuning}."]
    return lines


def _single_lines(result) -> list[str]:
    """The paper's single-point comparison: medians over seeds, then each seed."""
    s, cfg = result["summary"], result["config"]
    single = s["single_point"]
    lines = ["", f"**The paper's single point** ({cfg['iterations']} iterations, batch "
             f"{cfg['batch_size']}; R-ProxSPB at the mu whose median nonzeros on the tuning "
             f"seeds was nearest {cfg['target_nonzeros']}; each peer at its penalty whose median "
             "explained variance on the tuning seeds was nearest R-ProxSPB's), median [min, "
             "max] over the seeds:", "",
             "| method | penalty | nonzeros | expl. var. | expl. var., the paper's scale | "
             "adj. var. | zero columns | time (s) | IFO |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in single:
        pen = (f"{e['penalty']:.4g}" + (f" (eta {e['eta']:g})" if e.get("eta") else "")
               + (f", lambda2 {e['lambda2']:g}" if e.get("lambda2") is not None else ""))
        paper = e.get("explained_variance_paper")
        lines.append(f"| {e['method']} | {pen} | {_range(e['nonzeros_normalized'], '.0f')} | "
                     f"{_range(e['explained_variance'], '.4f')} | "
                     f"{_range(paper, '.5g') if paper else ''} | "
                     f"{_range(e['adjusted_variance'], '.4f')} | "
                     f"{_range(e['zero_columns'], '.0f')} | "
                     f"{_range(e['wall_time'], '.2f')} | {_range(e['ifo'], '.0f')} |")
    lines += ["", "The explained variance divides by tr(X^T X): it averages over the nonzero "
              "columns, and zero columns do not lower it; the adjusted variance sums over the "
              "columns. \"The paper's scale\" is its tr(X^T A A^T X) / tr(X^T X) with A the "
              "centred data (pixels in [0, 1]) as given, not divided by ||A||_F^2; it grows with "
              "n and the pixel scale, so the paper's values (its own data scaling) compare only "
              "as ratios between methods.", "",
              "Paired by seed (nonzeros / explained variance):", "",
              "| seed | " + " | ".join(e["method"] for e in single) + " |",
              "|---" * (len(single) + 1) + "|"]
    for i, seed in enumerate(single[0]["seeds"]):
        cells = [f"{e['nonzeros_normalized'][i]} / {float(e['explained_variance'][i]):.4f}"
                 for e in single]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return lines


def _tuning_lines(result) -> list[str]:
    """R-ProxSPB's eta per mu and the search for the operating point (tuning seeds)."""
    s = result["summary"]
    tuning, op = s["tuning"], s["tuning"]["operating_point"]
    lines = ["", f"**Tuning** (seeds {s['tuning_seeds']}): R-ProxSPB's eta per mu (lowest mean "
             "final F), and the mu search (grid, then bisection "
             f"{[float(m) for m in tuning['bisection']]}); operating point mu = "
             f"{op['mu']:.6g}, eta = {op['eta']:g}.", "",
             "| mu | eta chosen | mean final F per eta | median nonzeros | median expl. var. |",
             "|---|---|---|---|---|"]
    for p in tuning["points"]:
        losses = ", ".join(f"{float(e):g}: {float(v):.4f}" for e, v in p["mean_loss"].items())
        mark = " (operating point)" if p["mu"] == op["mu"] else ""
        lines.append(f"| {p['mu']:.6g}{mark} | {p['eta']:g} | {losses} | "
                     f"{p['nonzeros']:g} | {p['explained_variance']:.4f} |")
    for method, m in s["matched"].items():
        evs = ", ".join(f"{k}: {float(v):.4f}"
                        for k, v in m["median_explained_variance"].items())
        l2 = "" if m.get("lambda2") is None else f", lambda2 = {float(m['lambda2']):g}"
        lines.append(f"\n{method}: matched penalty {float(m['penalty']):g}{l2} (median "
                     f"explained variance per setting: {evs}).")
    return lines


def _front_lines(result) -> list[str]:
    """Every method's sweep: median [min, max] over the seeds."""
    lines = ["", "**The fronts** (every reported run; median [min, max] over the seeds):", "",
             "| method | penalty | eta | nonzeros | expl. var. | adj. var. | "
             "max \\|\\|X^T X - I\\|\\| |", "|---|---|---|---|---|---|---|"]
    for e in result["summary"]["front"]:
        rng = {m: e[m] for m in ("nonzeros_normalized", "explained_variance",
                                 "adjusted_variance")}
        cell = {m: f"{v['median']:.4g} [{v['min']:.4g}, {v['max']:.4g}]"
                for m, v in rng.items()}
        mark = " (operating point)" if e.get("operating_point") else ""
        eta = "" if e.get("eta") is None else f"{e['eta']:g}"
        l2 = "" if e.get("lambda2") is None else f", lambda2 {e['lambda2']:g}"
        lines.append(f"| {e['method']} | {e['penalty']:.6g}{l2}{mark} | {eta} | "
                     f"{cell['nonzeros_normalized']} | {cell['explained_variance']} | "
                     f"{cell['adjusted_variance']} | {e['orthonormality']['max']:.1e} |")
    return lines


def section(result) -> list[str]:
    """The section of ``results/README.md`` (the claims are rendered after it)."""
    lines = [f"![{result['name']}]({result['name']}.png)", ""]
    lines += _budget_lines(result) + _single_lines(result) + _tuning_lines(result)
    lines += _front_lines(result) + ["", "How each method was called:", ""]
    seen = set()
    for row in result["summary"]["table"]:
        if row["method"] not in seen and row.get("config"):
            seen.add(row["method"])
            lines.append(f"- {row['method']}: `{row['config']}`")
    return lines


def figures(result: dict) -> dict:
    """Explained and adjusted variance against nonzeros: each seed's runs (dots), the median
    over seeds of each penalty (a line per SPAMS lambda2) and the single-point comparison
    (stars)."""
    cfg, s = result["config"], result["summary"]
    fig = figure(figsize=(12, 4.9), layout="constrained")
    axes = fig.subplots(1, 2)
    metrics = ("explained_variance", "adjusted_variance")
    for method in (OURS, "SPAMS", "MiniBatchSparsePCA"):
        rows = [r for r in s["table"] if r["method"] == method]
        lambda2s = sorted({e.get("lambda2") or 0.0 for e in s["front"]
                           if e["method"] == method})
        for k, l2 in enumerate(lambda2s):
            front = sorted((e for e in s["front"] if e["method"] == method
                            and (e.get("lambda2") or 0.0) == l2), key=lambda e: e["penalty"])
            name = method + (f", lambda2 = {l2:g}" if len(lambda2s) > 1 else "")
            for ax, metric in zip(axes, metrics, strict=True):
                ax.plot([e["nonzeros_normalized"]["median"] for e in front],
                        [e[metric]["median"] for e in front], marker="os^v"[k % 4], ms=3,
                        linestyle=("-", "--", ":", "-.")[k % 4], color=COLORS[method],
                        label=name)
        for ax, metric in zip(axes, metrics, strict=True):
            ax.scatter([r["nonzeros_normalized"] for r in rows], [r[metric] for r in rows],
                       s=8, alpha=0.35, color=COLORS[method])
    # stars that coincide (the methods' single points can) nest: each smaller than the last
    for k, e in enumerate(s["single_point"]):
        for ax, metric in zip(axes, metrics, strict=True):
            ax.scatter([np.median(e["nonzeros_normalized"])], [np.median(e[metric])],
                       marker="*", s=360 / (1 + 1.2 * k), color=COLORS[e["method"]],
                       edgecolor="k", linewidth=0.8, zorder=5 + k)
    total = result["units"]["setup"]["d"] * cfg["r"]
    for ax, title in zip(axes, ("explained variance tr(X^T A A^T X) / tr(X^T X) / ||A||_F^2",
                                "adjusted variance (QR of A^T X, Zou et al. 2006)"), strict=True):
        ax.set_xscale("log")  # nonzeros: at least one per column, never 0
        axes_text(ax, title=title, xlabel=f"nonzeros of X (|X_ij| > 1e-3, unit columns; of "
                                          f"{total})")
        ax.legend(fontsize=LEGEND)
    fig.suptitle(f"Sparse PCA loadings on {STAND_INS[cfg['dataset']]}, r = {cfg['r']}, "
                 f"{len(s['seeds'])} seeds (dots: runs; lines: medians); batch "
                 f"{cfg['batch_size']}\nevery method within R-ProxSPB's sample budget "
                 "(MiniBatchSparsePCA's PCA warm start counted in it); stars: the single-point "
                 "comparison (medians over seeds)", fontsize=SUPTITLE - 1)
    return {"": fig}
