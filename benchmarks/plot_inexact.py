"""Figure of ``benchmarks/results/inexact.json``: F against IFO/n by rtol, with the seed band.

One column per (method, mu). Top: the mean over seeds of F = mean loss + mu ||X||_1 against
IFO/n for each rtol, the exact solves' (rtol = 0) min-max band over the seeds shaded, and
the mean Newton steps per call in the legend. Bottom: the same means minus the exact solves'
mean, against the half-width of that seed band (shaded): the curves are indistinguishable at
the top scale. Run from the repository root after
``benchmarks/inexact.py``: ``python benchmarks/plot_inexact.py`` writes
``benchmarks/results/inexact.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main():
    runs = json.loads((RESULTS / "inexact.json").read_text())["results"]["runs"]
    panels = sorted({(r["method"], r["mu"]) for r in runs})
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 6.4), squeeze=False)
    for ax, low, (method, mu) in zip(axes[0], axes[1], panels, strict=True):
        group = sorted((r for r in runs if (r["method"], r["mu"]) == (method, mu)),
                       key=lambda r: r["rtol"])
        exact = group[0]
        ax.fill_between(exact["ifo_over_n"], exact["F_min"], exact["F_max"], color="0.85",
                        label="rtol = 0: seed range")
        for r in group:
            ax.plot(r["ifo_over_n"], r["F_mean"], marker=".",
                    label=f"rtol {r['rtol']:g}: {r['ssn_steps_mean']:.2f} Newton steps/call")
        ax.set_title(f"{method}, mu = {mu}")
        ax.set_xlabel("IFO / n")
        ax.set_ylabel("F (mean over 3 seeds)")
        ax.legend(fontsize=7)
        half = [0.5 * (hi - lo) for lo, hi in zip(exact["F_min"], exact["F_max"], strict=True)]
        low.fill_between(exact["ifo_over_n"], [-h for h in half], half, color="0.85",
                         label="half the rtol = 0 seed range")
        for r in group[1:]:
            diff = [a - b for a, b in zip(r["F_mean"], exact["F_mean"], strict=True)]
            low.plot(r["ifo_over_n"], diff, marker=".", label=f"rtol {r['rtol']:g}")
        low.set_xlabel("IFO / n")
        low.set_ylabel("F mean - F mean at rtol = 0")
        low.set_ylim(-0.3, 0.3)
        low.legend(fontsize=7)
    fig.tight_layout()
    out = RESULTS / "inexact.png"
    fig.savefig(out, dpi=110)
    print("saved", out)


if __name__ == "__main__":
    main()
