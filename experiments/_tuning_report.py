"""The sparse PCA tuning as it was done, from the files' tuning units: the grids, the
parametrization against the paper's, choices at a grid's edge, and whether the paper's
baseline (R-Subgrad-1) was tuned as finely as the proximal methods.

The paper tunes one step per method, eta0 (R-Subgrad, R-ProxSGD: eta_t = eta0 / sqrt(t + 1))
or eta (R-ProxSPB), over {5e-5, 1e-4, 5e-4, ..., 1}, with the proximal step gamma tied to it
(R-ProxSGD's Algorithm 1: gamma = 2 eta / (2 L eta^2 + eta + 1); R-ProxSPB's Theorem:
gamma = 2/5; its experiments state no gamma). Here eta and gamma are tuned separately: the
update is X_{t+1} = Retr(eta_t zeta_t) with zeta_t the subproblem's solution at proximal step
gamma (zeta ~ -gamma P_X(v_t) where h is inactive), so the step on the smooth part is the
product eta_t gamma. R-Subgrad has no gamma: its step is eta_t.
"""

from __future__ import annotations

import math

import numpy as np

from experiments._spca_protocol import (
    SINGLE_SAMPLE,
    STOCHASTIC,
    choices,
    panel_mus,
    refined_key,
)

#: The paper's grid's ends.
PAPER_RANGE = (5e-5, 1.0)
DECAYING = ("R-ProxSGD", "R-Subgrad", SINGLE_SAMPLE)


def _bracket(value, values) -> tuple:
    """(next lower / value, next higher / value) among ``values`` (None where none)."""
    lower = [v for v in values if v < value * (1 - 1e-12)]
    upper = [v for v in values if v > value * (1 + 1e-12)]
    return (max(lower) / value if lower else None, min(upper) / value if upper else None)


def steps_above_one(eta0: float, steps: int) -> float:
    """The fraction of ``steps`` iterations of eta_t = eta0 / sqrt(t + 1), t = 0, 1, ...,
    with eta_t > 1."""
    return min(steps, max(0, math.ceil(eta0 ** 2) - 1)) / steps if steps else 0.0


def tuning_rows(name, result) -> list[dict]:
    """Per stochastic method and panel: the axes after extension, the choice, the step
    (eta gamma for the proximal methods, eta for R-Subgrad), the neighbouring steps run at
    the budget (as ratios to the choice) and the flags: ``edge`` (the choice on an edge of
    its final axis), ``outside`` (eta outside the paper's grid), ``above_one`` (for the
    decaying schedules: the fraction of the reported run's steps with eta_t > 1)."""
    cfg, units = result["config"], result["units"]
    panels = panel_mus(cfg["mu_fractions"], cfg["mus"], units["setup"]["mu_degenerate"])
    seed = cfg["seeds"][0]
    out = []
    for m in STOCHASTIC:
        t = units.get(f"tuning/{m}")
        if t is None:
            continue
        refined = units.get(refined_key(m), {"records": []})["records"]
        for i, (panel, c) in enumerate(zip(panels, choices(units, m), strict=True)):
            run = units[f"run/{m}/mu={panel['key']}/seed={seed}"]
            gamma = c["gamma"] if t["tuned_gamma"] else None
            step = c["eta"] * (gamma or 1.0)
            budget = [r for r in t["records"] + (refined if c.get("refined") else [])
                      if r["stage"] == "budget" and r["panel"] == i]
            steps_run = sorted({r["eta"] * (r["gamma"] if t["tuned_gamma"] else 1.0)
                                for r in budget})
            edge = []
            if not c.get("refined") and c["eta"] in (min(t["etas"]), max(t["etas"])):
                edge.append("eta")
            if gamma is not None and gamma in (min(t["gammas"]), max(t["gammas"])):
                edge.append("gamma")
            outside = not PAPER_RANGE[0] <= c["eta"] <= PAPER_RANGE[1]
            above = steps_above_one(c["eta"], run["steps"]) if m in DECAYING else None
            out.append({"file": name, "method": m, "panel": panel["label"],
                        "nominal": panel["nominal"], "eta": c["eta"], "gamma": gamma,
                        "step": step, "etas": len(t["etas"]),
                        "eta_range": [min(t["etas"]), max(t["etas"])],
                        "gammas": list(t["gammas"]) if t["tuned_gamma"] else None,
                        "pairs_screened": sum(r["stage"] == "screen" and r["panel"] == i
                                              for r in t["records"]),
                        "pairs_at_budget": len(budget), "steps_at_budget": len(steps_run),
                        "bracket": _bracket(step, steps_run), "edge": edge,
                        "outside": outside, "above_one": above, "converged": c["converged"],
                        "refined_from": c.get("tuned_eta") if c.get("refined") else None})
    return out


def refined_cost(result) -> dict:
    """What the baseline's refined search (:func:`experiments._spca_tuning.refine`) ran:
    its panels, pairs run and reused, seconds, and the choices it moved
    (``{panel index: (tuned eta, refined eta)}``); empty without one."""
    r = result["units"].get(refined_key(SINGLE_SAMPLE))
    if r is None:
        return {}
    moved = {i: (c["tuned_eta"], c["eta"]) for i, c in zip(r["panels"], r["choices"],
                                                               strict=True)
             if c["eta"] != c["tuned_eta"]}
    return {"panels": len(r["panels"]), "ran": len(r["records"]), "reused": len(r["reused"]),
            "seconds": r["wall_time"], "moved": moved, "ratio": r["ratio"],
            "unconverged": sum(not c["converged"] for c in r["choices"])}


def fineness(rows) -> dict:
    """Per file: the largest gap (ratio) between R-Subgrad-1's choice and its nearest step
    run at the budget, against the proximal methods' (over the paper's panels)."""
    out = {}
    for r in rows:
        if not r["nominal"]:
            continue
        gaps = [1 / r["bracket"][0] if r["bracket"][0] else math.inf,
                r["bracket"][1] if r["bracket"][1] else math.inf]
        key = "subgrad" if r["method"] == SINGLE_SAMPLE else (
            "proximal" if r["gamma"] is not None else None)
        if key:
            out.setdefault(r["file"], {}).setdefault(key, []).append(max(gaps))
    return {f: {k: float(np.max(v)) for k, v in d.items()} for f, d in out.items()}
