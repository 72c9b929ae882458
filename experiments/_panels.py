"""Drawing pieces the figures share: curves with their spread over seeds, paired-difference
panels with their t intervals (the statistic of :mod:`experiments._paired`, the one the
verdicts use), the burn-in, end-of-budget zooms, markers for curves off an axis's range and
zeros on log axes. Every size and colour comes from :mod:`experiments._style`."""

from __future__ import annotations

import math

import numpy as np

from experiments import _paired
from experiments._style import LEGEND

#: A value at most this fraction of the largest drawn is a zero to rounding (a log axis
#: cannot show it: it is drawn on the axis's bottom edge and said so).
ZERO = 1e-12


def _f(values):
    return np.asarray(values, dtype=float)


def spread(xs, ys) -> dict:
    """Median and [min, max] over runs of curves (xs[i], ys[i]), read by linear interpolation
    on the union of their recorded x up to their common end: ``{"x", "median", "low",
    "high"}``."""
    end = min(float(_f(x)[-1]) for x in xs)
    grid = np.unique(np.concatenate([_f(x)[_f(x) <= end] for x in xs]))
    values = np.array([np.interp(grid, _f(x), _f(y)) for x, y in zip(xs, ys, strict=True)])
    return {"x": grid, "median": np.median(values, axis=0), "low": values.min(axis=0),
            "high": values.max(axis=0)}


def draw_spread(ax, s: dict, color, label=None, style="-", lw=1.3, alpha=0.15):
    """A :func:`spread`'s median (a line) and [min, max] (a band)."""
    ax.plot(s["x"], s["median"], color=color, label=label, linewidth=lw, linestyle=style)
    ax.fill_between(s["x"], s["low"], s["high"], color=color, alpha=alpha, linewidth=0)


def window(s: dict, start: float, end: float) -> tuple:
    """The lowest band value and the highest median of a :func:`spread` over x in
    [start, end] (NaNs where it has no point there)."""
    keep = (s["x"] >= start - 1e-12) & (s["x"] <= end + 1e-12)
    if not keep.any():
        return math.nan, math.nan
    return float(np.min(s["low"][keep])), float(np.max(s["median"][keep]))


def paired(xa, ya, xb, yb, burn_in: float, level: float = _paired.LEVEL) -> dict:
    """Method a minus method b, seed by seed, on the grid of :func:`experiments._paired.compare`
    after ``burn_in`` (the verdicts' grid and statistic): ``{"x", "diff"`` (seeds, points),
    ``"mean", "low", "high"`` (the pointwise t interval at ``level``), ``"end"`` (the
    end-of-budget interval of a - b: ``mean, low, high``), ``"verdict"`` (a against b),
    ``"end_x", "burn_in"}``; ``x`` is empty where the budget ends inside the burn-in."""
    end_x = _paired.common_end([*xa, *xb])
    if not end_x > burn_in:
        return {"x": np.empty(0), "diff": np.empty((len(xa), 0)), "verdict": _paired.UNDECIDED,
                "end": None, "end_x": end_x, "burn_in": float(burn_in)}
    c = _paired.compare(xa, ya, xb, yb, burn_in, level=level)
    diff = -c["d"]  # compare's d is b - a
    n = diff.shape[0]
    mean = diff.mean(axis=0)
    if n >= 2:
        half = (_paired.t_quantile(0.5 + level / 2, n - 1) * diff.std(axis=0, ddof=1)
                / math.sqrt(n))
    else:
        half = np.full_like(mean, np.nan)
    e = c["end"]
    return {"x": c["grid"], "diff": diff, "mean": mean, "low": mean - half,
            "high": mean + half, "verdict": c["verdict"], "end_x": c["end_x"],
            "burn_in": float(burn_in),
            "end": {"mean": -e["mean"], "low": -e["high"], "high": -e["low"]}}


def end_text(p: dict, fmt: str = "+.2f") -> str:
    """A :func:`paired`'s end-of-budget difference with its interval and the verdict."""
    if p["end"] is None:
        return "no grid after the burn-in"
    e = p["end"]
    ci = (f" [{format(e['low'], fmt)}, {format(e['high'], fmt)}]" if np.isfinite(e["low"])
          else "")
    return f"{format(e['mean'], fmt)}{ci} {p['verdict']}"


def draw_paired(ax, p: dict, color, label=None, seeds: bool = False, lw: float = 1.4):
    """A :func:`paired`'s mean over seeds (a line), its pointwise t interval (a band) and,
    with ``seeds``, each seed's difference (thin lines)."""
    if not p["x"].size:
        return
    ax.plot(p["x"], p["mean"], color=color, label=label, linewidth=lw)
    if np.all(np.isfinite(p["low"])):
        ax.fill_between(p["x"], p["low"], p["high"], color=color, alpha=0.2, linewidth=0)
    if seeds:
        for row in p["diff"]:
            ax.plot(p["x"], row, color=color, linewidth=0.6, alpha=0.5)


def tail_start(p: dict, tail: float) -> float:
    """Where the last ``tail`` of a :func:`paired`'s grid (from its burn-in to its end)
    starts."""
    return p["end_x"] - tail * (p["end_x"] - p["burn_in"])


def paired_limits(items, start: float = -math.inf, tail: float | None = None) -> tuple:
    """The range of the pointwise intervals (and means) of the :func:`paired` ``items`` over
    x >= ``start`` (with ``tail``: over each one's last ``tail`` of its grid, see
    :func:`tail_start`), and of their end intervals, with 0."""
    lows, highs = [0.0], [0.0]
    for p in items:
        first = start if tail is None else tail_start(p, tail)
        keep = p["x"] >= first - 1e-12
        if not keep.any():
            continue
        for key, out in (("low", lows), ("mean", lows), ("high", highs), ("mean", highs)):
            v = p[key][keep]
            v = v[np.isfinite(v)]
            if v.size:
                out.append(float(v.min()) if out is lows else float(v.max()))
        if p["end"] is not None and np.isfinite(p["end"]["low"]):
            lows.append(p["end"]["low"])
            highs.append(p["end"]["high"])
    return min(lows), max(highs)


def set_range(ax, low: float, high: float, pad: float = 0.06):
    """A y range [low, high] with a margin (at least a small one where low == high)."""
    span = high - low
    margin = pad * span if span > 0 else 0.05 * max(abs(high), 1.0)
    ax.set_ylim(low - margin, high + margin)


def end_bars(ax, items, end_x: float) -> None:
    """Each :func:`paired`'s end-of-budget interval (items: ``(paired, colour)``) as an error
    bar right of the common end ``end_x``, the x axis widened to hold them."""
    left, right = ax.get_xlim()
    step = 0.035 * (end_x - left)
    k = 0
    for p, color in items:
        if p["end"] is None or not np.isfinite(p["end"]["low"]):
            continue
        k += 1
        e = p["end"]
        ax.errorbar([end_x + k * step], [e["mean"]],
                    yerr=[[e["mean"] - e["low"]], [e["high"] - e["mean"]]], color=color,
                    marker="o", ms=4, capsize=3, linewidth=1.4, zorder=5)
    if k:
        ax.axvline(end_x, color="0.4", linewidth=0.8, linestyle="--")
        ax.set_xlim(left, end_x + (k + 1) * step)


def mark_burn_in(ax, x: float, text: str) -> None:
    """Shades the axis left of the burn-in ``x`` (nothing compared there) and names it."""
    left = ax.get_xlim()[0]
    ax.axvspan(min(left, 0.0), x, color="0.5", alpha=0.12, linewidth=0)
    ax.axvline(x, color="0.3", linewidth=0.9, linestyle=":")
    ax.text((min(left, 0.0) + x) / 2, 0.5, text, transform=ax.get_xaxis_transform(),
            rotation=90, ha="center", va="center", fontsize=LEGEND, color="0.25")


def mark_off_scale(ax, points) -> None:
    """For each ``(x, y, colour, text)`` whose y lies outside the axis's y range: a marker
    on the edge it lies beyond, at x, and the text with the value (stacked where several
    share an edge). Draw after the ranges are set."""
    low, high = ax.get_ylim()
    left, right = ax.get_xlim()
    stack = {"top": 0, "bottom": 0}
    for x, y, color, text in points:
        if not np.isfinite(y) or low <= y <= high:
            continue
        side = "top" if y > high else "bottom"
        edge = high if side == "top" else low
        ax.plot([x], [edge], marker="^" if side == "top" else "v", color=color, ms=9,
                markeredgecolor="k", markeredgewidth=0.6, clip_on=False, zorder=7)
        k = stack[side]
        stack[side] += 1
        dy = -(9 + 11 * k) if side == "top" else (9 + 11 * k)
        inward = "left" if x - left < 0.5 * (right - left) else "right"
        ax.annotate(f"{text}: {y:.4g} (off scale)", (x, edge),
                    xytext=(8 if inward == "left" else -8, dy), textcoords="offset points",
                    ha=inward,
                    va="top" if side == "top" else "bottom", fontsize=LEGEND, color=color,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.8}, zorder=7)


def mark_window(ax, x0: float, x1: float, y0: float, y1: float) -> None:
    """A dashed rectangle where an end-of-budget zoom of ``ax`` looks."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor="0.2",
                           linestyle="--", linewidth=0.9, zorder=6))


def legend_axes(ax, handles_from, title=None, labels=None, loc="upper left") -> None:
    """Turns ``ax`` (a narrow column of the figure) into a legend of the handles of
    ``handles_from`` (axes; the first one's labelled artists, or ``labels`` in their place)."""
    handles, names = handles_from.get_legend_handles_labels()
    if labels is not None:
        names = [labels.get(n, n) for n in names]
    ax.axis("off")
    if handles:
        ax.legend(handles, names, loc=loc, fontsize=LEGEND, title=title,
                  title_fontsize=LEGEND, frameon=False, borderaxespad=0.0)
