"""Paired comparisons of two methods' curves over seeds, and the one verdict rule.

Pure NumPy functions on per-seed curves (values of a loss, lower is better) of a method
``a`` and a method ``b`` that ran on the same seeds (same start and data), read on a common
x grid (IFO/n, or time in seconds). The difference on seed k at grid point x is

    d_k(x) = F_b,k(x) - F_a,k(x),

so that d > 0 where ``a`` is lower ("a leads"). Everything is decided after a *burn-in*: the
grid starts at ``burn_in`` (one refresh block of the slowest method compared, known from the
configuration: R-ProxSPB's first block holds |S1| = n samples, so the block ends at
(n + (q - 1) 2 |S2|) / n IFO/n) and ends at the common end of the budget (the smallest final
x over the seeds and both methods).

:data:`RULE` is the verdict rule, stated once; :func:`verdict` applies it; the report quotes
:data:`RULE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

WIN, LOSS, TIE, MIXED, UNDECIDED = "win", "loss", "tie", "mixed", "undecided"
VERDICTS = (WIN, TIE, MIXED, LOSS, UNDECIDED)
#: The interval level of the end-of-budget confidence interval.
LEVEL = 0.95
#: The fraction of the post-burn-in grid on which the mean difference must favour a method.
FRACTION = 0.75
#: Points of the fixed grid between the burn-in and the common end (both included).
POINTS = 81

RULE = (
    "For each seed k, d_k(x) = F_b,k(x) - F_a,k(x) at the points x of a fixed grid of "
    f"{POINTS} points from the burn-in (one refresh block of the slowest method compared) to "
    "the common end of the budget, the curves read there by linear interpolation between "
    "their recorded points; d > 0 where the method a is lower (leads). The end-of-budget "
    "paired difference is the mean over seeds of d_k at the common end, with a two-sided t "
    f"confidence interval (level {LEVEL:g}, n - 1 degrees of freedom). **a wins** when the "
    f"interval lies above 0 and the mean difference favours a on at least {FRACTION:.0%} of "
    "the post-burn-in grid; **a loses** when the interval lies below 0 and the mean "
    f"difference favours b on at least {FRACTION:.0%} of the grid; a **tie** when the interval "
    f"holds 0 and neither method is favoured on {FRACTION:.0%} of the grid; otherwise "
    "**mixed** (the end and the course disagree). Swapping a and b swaps win and loss. "
    "**undecided**: fewer than two seeds, or no grid after the burn-in. Reported beside the "
    "verdict, not part of it: the crossover (the first grid point from which a leads on "
    "every seed to the end) and the fractions of the grid where a leads on every seed and on "
    "the mean.")


def grid(start: float, end: float, points: int = POINTS) -> np.ndarray:
    """``points`` evenly spaced x from ``start`` to ``end`` (both included); empty where
    ``end <= start``."""
    if not end > start:
        return np.empty(0)
    return np.linspace(float(start), float(end), int(points))


def common_end(xs: Sequence) -> float:
    """The common end of the budget: the smallest final x over the curves ``xs`` (each
    increasing)."""
    return min(float(np.asarray(x, float)[-1]) for x in xs)


def on_grid(xs: Sequence, ys: Sequence, at: np.ndarray) -> np.ndarray:
    """The curves (xs[k], ys[k]) read at ``at`` by linear interpolation: shape
    (seeds, points). A point outside a curve's recorded x range is an error (no
    extrapolation)."""
    at = np.asarray(at, float)
    rows = []
    for x, y in zip(xs, ys, strict=True):
        x, y = np.asarray(x, float), np.asarray(y, float)
        if at.size and (at[0] < x[0] - 1e-12 or at[-1] > x[-1] + 1e-12):
            raise ValueError(f"grid [{at[0]:g}, {at[-1]:g}] outside the curve's "
                             f"[{x[0]:g}, {x[-1]:g}]")
        rows.append(np.interp(at, x, y))
    return np.array(rows).reshape(len(rows), at.size)


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(p, df))


def t_interval(values, level: float = LEVEL) -> dict:
    """Mean of ``values`` (one per seed) with its two-sided t interval at ``level``:
    ``{"mean", "low", "high", "sd", "n", "t"}`` (t: mean / standard error; NaN bounds for
    fewer than two values; a zero spread gives the point interval [mean, mean])."""
    v = np.asarray(values, float)
    n = v.size
    mean = float(v.mean()) if n else math.nan
    if n < 2:
        return {"mean": mean, "low": math.nan, "high": math.nan, "sd": math.nan, "n": n,
                "t": math.nan}
    sd = float(v.std(ddof=1))
    se = sd / math.sqrt(n)
    half = t_quantile(0.5 + level / 2, n - 1) * se
    t = mean / se if se > 0 else (math.inf if mean > 0 else -math.inf if mean < 0 else 0.0)
    return {"mean": mean, "low": mean - half, "high": mean + half, "sd": sd, "n": n, "t": t}


def crossover(d: np.ndarray, at: np.ndarray):
    """The first x of ``at`` from which d > 0 on every seed (rows of ``d``) at every later
    point, or None where a does not lead on every seed at the end."""
    every = np.all(np.asarray(d) > 0, axis=0)
    if every.size == 0 or not every[-1]:
        return None
    k = every.size
    while k > 0 and every[k - 1]:
        k -= 1
    return float(np.asarray(at)[k])


def lead_fractions(d: np.ndarray) -> dict:
    """Fractions of the grid's points where a leads on every seed (``every``), where the
    mean over seeds favours a (``mean``) and where it favours b (``mean_b``)."""
    d = np.asarray(d, float)
    if d.size == 0:
        return {"every": math.nan, "mean": math.nan, "mean_b": math.nan}
    m = d.mean(axis=0)
    return {"every": float(np.mean(np.all(d > 0, axis=0))), "mean": float(np.mean(m > 0)),
            "mean_b": float(np.mean(m < 0))}


def verdict(low: float, high: float, lead_mean: float, lag_mean: float,
            fraction: float = FRACTION) -> str:
    """The rule of :data:`RULE` from the end-of-budget interval [low, high] of the mean
    difference (b - a) and the fractions of the grid on which the mean favours a
    (``lead_mean``) and b (``lag_mean``). ``fraction`` must exceed 1/2, so that a win and
    a loss exclude each other."""
    if not fraction > 0.5:
        raise ValueError(f"fraction must exceed 1/2, got {fraction}")
    if not (np.isfinite(low) and np.isfinite(high) and np.isfinite(lead_mean)
            and np.isfinite(lag_mean)):
        return UNDECIDED
    end = 1 if low > 0 else -1 if high < 0 else 0
    lead, lag = lead_mean >= fraction, lag_mean >= fraction
    if end > 0 and lead:
        return WIN
    if end < 0 and lag:
        return LOSS
    if end == 0 and not lead and not lag:
        return TIE
    return MIXED


def swap(v: str) -> str:
    """The verdict of the comparison with a and b swapped."""
    return {WIN: LOSS, LOSS: WIN}.get(v, v)


def compare(xa: Sequence, ya: Sequence, xb: Sequence, yb: Sequence, burn_in: float, *,
            level: float = LEVEL, fraction: float = FRACTION, points: int = POINTS) -> dict:
    """The paired comparison of a's curves (xa[k], ya[k]) with b's (xb[k], yb[k]), seed k
    against seed k, after ``burn_in``: ``{"verdict", "grid", "d", "end", "crossover",
    "lead", "burn_in", "end_x", "level", "fraction"}`` with ``d`` the (seeds, points)
    differences b - a on ``grid``, ``end`` the :func:`t_interval` of d at the common end,
    ``lead`` the :func:`lead_fractions`. An empty grid (the budget ends before the burn-in)
    or fewer than two seeds is "undecided"."""
    if len(xa) != len(xb):
        raise ValueError(f"paired comparison needs the same seeds: {len(xa)} vs {len(xb)}")
    end_x = common_end([*xa, *xb])
    at = grid(burn_in, end_x, points)
    d = on_grid(xb, yb, at) - on_grid(xa, ya, at)
    end = t_interval(d[:, -1] if at.size else [], level)
    lead = lead_fractions(d)
    v = verdict(end["low"], end["high"], lead["mean"], lead["mean_b"], fraction)
    return {"verdict": v, "grid": at, "d": d, "end": end, "crossover": crossover(d, at),
            "lead": lead, "burn_in": float(burn_in), "end_x": end_x, "level": level,
            "fraction": fraction}


def compare_summary(d_summary, d_course, *, level: float = LEVEL,
                    fraction: float = FRACTION) -> dict:
    """The same rule where the end-of-budget difference is replaced by a per-seed summary
    ``d_summary`` (one value per seed, b - a; e.g. the mean log-ratio of two variance
    curves) and the course by ``d_course`` (seeds, points): for comparisons whose last
    point alone is not the claim (a variance against iterations)."""
    d = np.asarray(d_course, float)
    end = t_interval(d_summary, level)
    lead = lead_fractions(d)
    return {"verdict": verdict(end["low"], end["high"], lead["mean"], lead["mean_b"],
                               fraction),
            "d": d, "end": end, "crossover": None, "lead": lead, "level": level,
            "fraction": fraction}


def sensitivity(xa, ya, xb, yb, burn_ins: dict, levels: Sequence[float] = (0.9, 0.95, 0.99),
                *, fraction: float = FRACTION, points: int = POINTS) -> dict:
    """Verdicts of :func:`compare` under other burn-ins (``burn_ins``: a label -> x) and
    interval levels: ``{(label, level): verdict}``."""
    return {(label, level): compare(xa, ya, xb, yb, x, level=level, fraction=fraction,
                                    points=points)["verdict"]
            for label, x in burn_ins.items() for level in levels}


def describe(c: dict, unit: str, a: str = "a", b: str = "b") -> str:
    """One line of a comparison's numbers (``a`` and ``b`` the methods' names): the
    end-of-budget paired difference with its interval, the crossover and the lead
    fractions."""
    e, lead = c["end"], c["lead"]
    if not np.isfinite(e["mean"]):
        return f"no grid after the burn-in at {c['burn_in']:.3g} {unit}"
    ci = (f"[{e['low']:+.3g}, {e['high']:+.3g}]" if np.isfinite(e["low"]) else "[n/a]")
    cross = ("no crossover" if c.get("crossover") is None else
             f"{a} leads on every seed from {c['crossover']:.3g} {unit}")
    where = (f" at {c['end_x']:.3g} {unit}" if "end_x" in c else "")
    return (f"F({b}) - F({a}){where}: {e['mean']:+.3g} {ci} ({c['level']:.0%} t, sd "
            f"{e['sd']:.2g}); {cross}; {a} leads on every seed on {lead['every']:.0%} of "
            f"the grid, on the mean on {lead['mean']:.0%} ({b} on {lead['mean_b']:.0%})")
