"""The paper's claims, quoted where it makes them, each tested with one paired statistic.

:data:`CLAIMS` lists every empirical claim of the paper's section 4 verbatim, with the
figure or table it rests on and how it is tested here. :func:`rows` turns a results file
into one row per comparison:

* ``kind``: ``"paper"`` (a claim the paper makes, at its settings: the mu it ran, in the
  figure it names), ``"panel"`` (the same comparison at this project's mu panels, fractions
  of mu_deg: never the paper's), ``"project"`` (a comparison of this project's: the batch
  R-Subgrad, |S| = 100, beside the paper's single-sample one).
* ``counted``: a paper row counts unless it is foregone (ManPG: each comparison once, with
  the reason) or its panel is degenerate (R-ProxSPB's final iterates keep one entry above
  1e-3 in at least half the columns, median over seeds: shown and labelled, not counted).
* ``verdict``: :func:`experiments._paired.compare` after a burn-in of one refresh block of
  R-ProxSPB, the slowest method of a figure (its first block holds |S1| = n samples), on the
  figure's x axis; R-Subgrad is the paper's, one sample a step (R-Subgrad-1) where the file
  has it. The variance claim compares the tangent part of the estimate's error (the part the
  subproblem reads) per iteration, as log10 ratios; the Euclidean total and its normal part
  are reported beside it (:func:`variance_table`).
* ``v3``: the verdict the earlier accounting (:mod:`experiments._claims`, a win by more than
  the unpaired seed spread at every point after the first pass, against the batch R-Subgrad,
  the Euclidean variance) gives the same comparison, with ``v3_keys`` its keys; ``alt``: the
  present rule applied to v3's inputs (its baseline, its variance measure), from which
  :func:`reasons` tells why a verdict changed.

Every number is recomputed from the file's units; nothing is stored.
"""

from __future__ import annotations

import numpy as np

from experiments import _paired
from experiments._spca_protocol import SINGLE_SAMPLE, panel_mus

FIGS_1_2 = "Figures 1 and 2"

#: The paper's empirical claims (section 4), verbatim, with where it makes them and how each
#: is tested. ``files``: the results files that test it; ``counted``: whether its rows count.
CLAIMS = (
    {"id": "C1", "where": "section 4.1.1, Figures 1 and 2 (r = 10, mu = 0.2, 0.4): loss "
     "against IFO/n and against CPU time",
     "quote": "All the results in Figures 1 and 2 indicate that both R-ProxSGD and R-ProxSPB "
              "consistently outperform R-Subgrad in terms of CPU time and the number of IFO "
              "calls.",
     "test": "R-ProxSGD and R-ProxSPB each against R-Subgrad-1 (the paper's one-sample "
             "update), on the IFO/n axis and on the time axis: 4 rows per panel",
     "files": ("spca-mnist-r10", "spca-fashion-r10")},
    {"id": "C2", "where": "section 4.1.1, Figures 1 and 2",
     "quote": "Moreover, these figures show that R-Subgrad is not able to reduce the loss "
              "value to a desired accuracy, comparing with R-ProxSGD and R-ProxSPB.",
     "test": "the end-of-budget interval of C1's IFO rows (part of their verdict): not counted "
             "again", "files": ()},
    {"id": "C3", "where": "section 4.1.1, Figures 1 and 2, first column",
     "quote": "Furthermore, these results also show that R-ProxSPB usually performs better "
              "than R-ProxSGD, which is consistent with our theoretical results on the "
              "complexity bounds.",
     "test": "R-ProxSPB against R-ProxSGD on the IFO/n axis, one row per panel (\"usually\": "
             "the share of panels it wins)", "files": ("spca-mnist-r10", "spca-fashion-r10")},
    {"id": "C4", "where": "section 4.1.1, Figures 1 and 2, third column (variance against "
     "iterations, the measure of Defazio and Bottou)",
     "quote": "Figures 1 and 2 also imply that R-ProxSPB is effective to reduce the variance "
              "of the stochastic gradient on both datasets.",
     "test": "R-ProxSPB's tangent-space variance against R-ProxSGD's, per iteration (its "
             "R-SARAH steps), as log10 ratios: one row per panel",
     "files": ("spca-mnist-r10", "spca-fashion-r10")},
    {"id": "C5", "where": "section 4.1.1, Figure 3 (r = 15, mu = 0.2, 0.4, 0.8): loss "
     "against CPU time only",
     "quote": "Figure 3 gives more results on the case r = 15 and mu = 0.2, 0.4, 0.8, and "
              "here we only present the loss value versus the CPU time. These results further "
              "justify the advantages of our proposed R-ProxSGD and R-ProxSPB algorithms.",
     "test": "R-ProxSGD and R-ProxSPB each against R-Subgrad-1 on the time axis: 2 rows per "
             "panel", "files": ("spca-mnist-r15", "spca-fashion-r15")},
    {"id": "C6", "where": "section 4.1.2, Figures 1 and 2",
     "quote": "As shown in Figures 1 and 2, ManPG leads to larger loss values than our "
              "R-ProxSGD and R-ProxSPB given the same budget of gradient oracles or running "
              "time.",
     "test": "each method against ManPG once (both axes in one row), foregone: ManPG takes a "
             "handful of full-gradient iterations in the budget",
     "files": ("spca-mnist-r10", "spca-fashion-r10")},
    {"id": "C7", "where": "section 4.1.2, Table 4 (SPAMS)",
     "quote": "As shown in Table 4, our R-ProxSPB leads to better sparsity while achieving "
              "comparable explained variance.",
     "test": "not a curve comparison: the per-seed test of the peers files (fewer nonzeros at "
             "comparable explained variance on every seed), unchanged",
     "files": ("peers-mnist", "peers-fashion")},
    {"id": "C8", "where": "section 4.2, Figure 4 (robust matrix completion, budget "
     "4 |Omega|)",
     "quote": "The results in Figure 4 clearly show the advantage of our R-ProxSPB and "
              "R-ProxSGD algorithms over R-Subgrad algorithm.",
     "test": "R-ProxSPB and R-ProxSGD each against R-Subgrad (the paper's: 10% minibatches) "
             "on the IFO/|Omega| axis, in the objective F and in the background's error: 4 "
             "rows", "files": ("rmc-video",)},
    {"id": "S", "where": "abstract and section 5",
     "quote": "Experimental results on online sparse PCA and robust low-rank matrix "
              "completion show that our proposed methods significantly outperform the "
              "existing methods that use Riemannian subgradient information.",
     "test": "the summary of C1, C5 and C8: not counted again", "files": ()},
)

#: How v3's verdict strings map onto the present ones.
V3_TO_V4 = {"pass": _paired.WIN, "FAIL": _paired.LOSS, "tie": _paired.TIE,
            "mixed": _paired.MIXED}


def v3_outcome(v3: str | None) -> str | None:
    """The present name of a v3 verdict string ("pass 5/5" -> "win", "mixed ..." -> "mixed",
    "foregone (...)" -> "foregone")."""
    if v3 is None:
        return None
    if v3.startswith("foregone"):
        return "foregone"
    return V3_TO_V4[v3.split()[0]]


def _f(values):
    return np.asarray(values, float)


def _runs(units, method, pkey, seeds, prefix="run"):
    return [units[f"{prefix}/{method}/mu={pkey}/seed={s}"] for s in seeds]


def spca_block(result) -> float:
    """R-ProxSPB's refresh block in IFO/n, from the configuration: a refresh of |S1| = n
    and q - 1 R-SARAH steps of 2 |S2| sample gradients."""
    from rproxjax._contract import block_cost

    cfg, n = result["config"], result["units"]["setup"]["n"]
    return block_cost(cfg["q"], cfg["batch_size"], n) / n


#: The burn-ins of the sensitivity table, in R-ProxSPB blocks ("one block" is the rule's).
BURN_INS = ((0.0, "none"), (0.5, "half a block"), (1.0, "one block"), (1.5, "1.5 blocks"))
#: The interval levels of the sensitivity table.
LEVELS = (0.9, 0.95, 0.99)


def _burn_ins(spb_runs, block, axis) -> dict:
    """The burn-ins of :data:`BURN_INS` on ``axis`` (time: the latest time over the seeds at
    which R-ProxSPB has spent that many blocks)."""
    out = {}
    for k, label in BURN_INS:
        if axis == "ifo_over_n":
            out[label] = k * block
        else:
            out[label] = max(float(np.interp(k * block, _f(r["ifo_over_n"]), _f(r["time"])))
                             for r in spb_runs)
    return out


def degenerate_columns(units, pkey, seeds) -> float:
    """R-ProxSPB's final iterates' degenerate columns (one entry above 1e-3), median over
    seeds."""
    return float(np.median([r["degenerate_columns"] for r in
                            _runs(units, "R-ProxSPB", pkey, seeds)]))


def _stats(c) -> dict:
    e, lead = c["end"], c["lead"]
    return {"mean": e["mean"], "low": e["low"], "high": e["high"], "sd": e["sd"],
            "t": e["t"], "crossover": c.get("crossover"), "every": lead["every"],
            "lead_mean": lead["mean"], "lag_mean": lead["mean_b"],
            "end_x": c.get("end_x"), "burn_in": c.get("burn_in")}


def _curve_row(runs, a, b, axis, burn_ins, unit) -> dict:
    xa, ya = [r[axis] for r in runs[a]], [r["loss"] for r in runs[a]]
    xb, yb = [r[axis] for r in runs[b]], [r["loss"] for r in runs[b]]
    c = _paired.compare(xa, ya, xb, yb, burn_ins["one block"])
    sens = _paired.sensitivity(xa, ya, xb, yb, burn_ins, LEVELS)
    return {"a": a, "b": b, "axis": axis, "verdict": c["verdict"],
            "numbers": _paired.describe(c, unit, a, b), "stats": _stats(c),
            "sensitivity": {f"{k[0]}, {k[1]:g}": v for k, v in sens.items()}}


def _variance_d(units, pkey, seeds, field) -> tuple:
    """Per seed, log10(V_SGD / V_SPB) at R-ProxSPB's R-SARAH steps (its refresh steps,
    where the estimate is the full gradient, left out): (seeds, steps)."""
    spb = _runs(units, "R-ProxSPB", pkey, seeds, "variance")
    sgd = _runs(units, "R-ProxSGD", pkey, seeds, "variance")
    rows = []
    for a, b in zip(spb, sgd, strict=True):
        keep = ~np.asarray(a["refresh"], bool)
        rows.append(np.log10(_f(b[field])[keep]) - np.log10(_f(a[field])[keep]))
    return np.array(rows)


def _variance_row(units, pkey, seeds) -> dict:
    d = _variance_d(units, pkey, seeds, "riemannian_variance")
    c = _paired.compare_summary(d.mean(axis=1), d)
    eu = _paired.compare_summary(*(lambda e: (e.mean(axis=1), e))(
        _variance_d(units, pkey, seeds, "variance")))
    e = c["end"]
    numbers = (f"log10(tangent variance of R-ProxSGD / R-ProxSPB), mean over the "
               f"{d.shape[1]} R-SARAH steps: {e['mean']:+.2f} [{e['low']:+.2f}, "
               f"{e['high']:+.2f}] ({c['level']:.0%} t; a factor {10 ** e['mean']:.3g}); "
               f"R-ProxSPB lower on every seed at {c['lead']['every']:.0%} of the steps; the "
               f"Euclidean total: {eu['end']['mean']:+.2f} [{eu['end']['low']:+.2f}, "
               f"{eu['end']['high']:+.2f}] (verdict {eu['verdict']})")
    # no burn-in applies to a variance against iterations: every burn-in's column is the same
    by_level = {lv: _paired.compare_summary(d.mean(axis=1), d, level=lv)["verdict"]
                for lv in LEVELS}
    sens = {f"{label}, {lv:g}": by_level[lv] for _, label in BURN_INS for lv in LEVELS}
    return {"a": "R-ProxSPB", "b": "R-ProxSGD", "axis": "variance (tangent)",
            "verdict": c["verdict"], "numbers": numbers, "stats": _stats(c),
            "sensitivity": sens, "alt": {"variance measure": eu["verdict"]}}


def _v3_index(v3_claims) -> dict:
    from experiments._claims import verdict

    return {c.get("key", c["claim"]): {"verdict": verdict(c), "kind": c.get("kind"),
                                       "foregone": c.get("foregone")} for c in v3_claims}


def spca_rows(name, result, v3_claims) -> list[dict]:
    """The rows of a sparse PCA file: C1, C3, C4 and C6 (r = 10) or C5 (r = 15) at the
    paper's mu (``paper``) and at the project's panels (``panel``), and the batch R-Subgrad
    comparisons (``project``)."""
    cfg, units = result["config"], result["units"]
    seeds, r = list(cfg["seeds"]), cfg["r"]
    panels = panel_mus(cfg["mu_fractions"], cfg["mus"], units["setup"]["mu_degenerate"])
    block = spca_block(result)
    v3 = _v3_index(v3_claims)
    figure = "r10" if r == 10 else "r15"
    out = []
    for panel in panels:
        pkey = panel["key"]
        if f"run/R-ProxSPB/mu={pkey}/seed={seeds[0]}" not in units:
            continue
        runs = {m: _runs(units, m, pkey, seeds) for m in
                ("R-ProxSPB", "R-ProxSGD", "R-Subgrad", SINGLE_SAMPLE, "ManPG")
                if f"run/{m}/mu={pkey}/seed={seeds[0]}" in units}
        base = SINGLE_SAMPLE if SINGLE_SAMPLE in runs else "R-Subgrad"
        cols = degenerate_columns(units, pkey, seeds)
        degenerate = cols >= r / 2
        kind = "paper" if panel["nominal"] else "panel"
        label = panel["label"] + (f" ({cols:g} of {r} columns degenerate)" if cols else "")
        skip = (f"degenerate panel: {cols:g} of {r} columns hold one entry above 1e-3 (median "
                "over seeds); shown, not counted") if degenerate else None
        burn = {axis: _burn_ins(runs["R-ProxSPB"], block, axis)
                for axis in ("ifo_over_n", "time")}

        def add(claim, row, kind=kind, skip=skip, v3_keys=(), label=label, pkey=pkey,
                **extra):
            found = [v3[k] for k in v3_keys if k in v3]
            row.update(file=name, claim=claim, kind=kind, panel=label, pkey=pkey,
                       counted=kind == "paper" and skip is None, not_counted=skip,
                       v3_keys=list(v3_keys), v3=[f["verdict"] for f in found],
                       v3_counted=any(f["kind"] == "paper" and not f["foregone"]
                                      for f in found), **extra)
            row.setdefault("alt", {})
            out.append(row)

        axes = (("ifo_over_n", "IFO/n"), ("time", "s")) if figure == "r10" else (
            (("time", "s"),))
        for m in ("R-ProxSGD", "R-ProxSPB"):
            for axis, unit in axes:
                row = _curve_row(runs, m, base, axis, burn[axis], unit)
                batch = _curve_row(runs, m, "R-Subgrad", axis, burn[axis], unit)
                row["alt"] = {"baseline": batch["verdict"]}
                add("C1" if figure == "r10" else "C5", row,
                    v3_keys=(f"{pkey}/{m}<R-Subgrad/{axis}",))
                if kind == "paper":
                    add("project", batch, kind="project", skip=None)
        if figure == "r10":
            add("C3", _curve_row(runs, "R-ProxSPB", "R-ProxSGD", "ifo_over_n",
                                 burn["ifo_over_n"], "IFO/n"),
                v3_keys=(f"{pkey}/R-ProxSPB<R-ProxSGD/ifo_over_n",))
            if f"variance/R-ProxSPB/mu={pkey}/seed={seeds[0]}" in units:
                add("C4", _variance_row(units, pkey, seeds),
                    v3_keys=(f"{pkey}/variance/variance",))
            if kind == "paper":
                steps = int(np.median([len(x["loss"]) - 1 for x in runs["ManPG"]]))
                for m in ("R-ProxSGD", "R-ProxSPB"):
                    ifo = _curve_row(runs, m, "ManPG", "ifo_over_n", burn["ifo_over_n"],
                                     "IFO/n")
                    time = _curve_row(runs, m, "ManPG", "time", burn["time"], "s")
                    ends = max(float(x["time"][-1]) for x in runs["ManPG"])
                    row = dict(ifo, axis="IFO/n and time",
                               numbers=f"IFO/n: {ifo['numbers']}; time: {time['numbers']}",
                               verdict=f"{ifo['verdict']} / {time['verdict']}")
                    add("C6", row, skip=(
                        f"foregone: ManPG takes {steps} full-gradient iterations in the "
                        f"budget (done by {ends:.2f} s); the same comparison on both axes, "
                        "counted once, not counted as a win"),
                        v3_keys=(f"{pkey}/{m}<ManPG/ifo_over_n", f"{pkey}/{m}<ManPG/time"))
    return out


def rmc_rows(name, result, v3_claims) -> list[dict]:
    """C8: R-ProxSPB and R-ProxSGD each against R-Subgrad, in F and in the background's
    error, on IFO/|Omega| after R-ProxSPB's first block (budget / blocks)."""
    from rproxjax._tasks.rmc import spb_blocks

    cfg, units = result["config"], result["units"]
    seeds = list(cfg["seeds"])
    nnz = units[f"setup/seed={seeds[0]}"]["nnz"]
    blocks, _ = spb_blocks(nnz, cfg["budget"], cfg["batch_fraction"], cfg["q"])
    block = cfg["budget"] / blocks
    v3 = {c["claim"]: c for c in v3_claims}
    from experiments._claims import verdict

    out = []
    runs = {m: [units[f"run/{m}/seed={s}"] for s in seeds]
            for m in ("R-ProxSPB", "R-ProxSGD", "R-Subgrad")}
    burn = {label: k * block for k, label in BURN_INS}
    for m in ("R-ProxSPB", "R-ProxSGD"):
        for field, what, prefix in (
                ("F", "objective F", f"{m} reaches a lower objective F than R-Subgrad"),
                ("error", "background error", f"{m}'s background is closer")):
            xa = [r["ifo_curve"] for r in runs[m]]
            xb = [r["ifo_curve"] for r in runs["R-Subgrad"]]
            ya = [r[f"{field}_curve"] for r in runs[m]]
            yb = [r[f"{field}_curve"] for r in runs["R-Subgrad"]]
            c = _paired.compare(xa, ya, xb, yb, block)
            sens = _paired.sensitivity(xa, ya, xb, yb, burn, LEVELS)
            found = [v for k, v in v3.items() if k.startswith(prefix)]
            out.append({"file": name, "claim": "C8", "kind": "paper", "panel": what,
                        "pkey": field, "a": m, "b": "R-Subgrad", "axis": "ifo_over_nnz",
                        "verdict": c["verdict"], "stats": _stats(c),
                        "numbers": _paired.describe(c, "IFO/|Omega|", m, "R-Subgrad"),
                        "sensitivity": {f"{k[0]}, {k[1]:g}": v for k, v in sens.items()},
                        "counted": True, "not_counted": None, "alt": {},
                        "v3_keys": [f["claim"] for f in found],
                        "v3": [verdict(f) for f in found],
                        "v3_counted": any(f.get("kind") == "paper" for f in found)})
    return out


def peers_rows(name, result, v3_claims) -> list[dict]:
    """C7: the peers files' paper claim, carried over (a per-seed test of sparsity at
    comparable explained variance, not a curve comparison)."""
    from experiments._claims import verdict

    out = []
    for c in v3_claims:
        if c.get("kind") != "paper":
            continue
        v = verdict(c)
        out.append({"file": name, "claim": "C7", "kind": "paper", "panel": "operating point",
                    "pkey": "single", "a": "R-ProxSPB", "b": "SPAMS", "axis": "table",
                    "verdict": v3_outcome(v), "stats": {}, "numbers": c["numbers"],
                    "sensitivity": {}, "counted": True, "not_counted": None, "alt": {},
                    "v3_keys": [c.get("key", c["claim"])], "v3": [v], "v3_counted": True})
    return out


def rows(name, result, v3_claims) -> list[dict]:
    """The rows of one results file (see the module's docstring)."""
    kind = result["config"]["kind"]
    return {"spca": spca_rows, "rmc": rmc_rows, "peers": peers_rows}[kind](
        name, result, v3_claims)


def orphans(name, v3_claims, present) -> list[dict]:
    """v3's paper claims of a file that no present row tests (``present``: the rows), with
    why: claims the paper does not make at that setting."""
    from experiments._claims import verdict

    seen = {k for r in present for k in r["v3_keys"]}
    out = []
    for c in v3_claims:
        key = c.get("key", c["claim"])
        if c.get("kind") != "paper" or key in seen:
            continue
        if "/variance-falls/" in key:
            why = ("the project's test, not the paper's (the paper shows the variance "
                   "against iterations, not a fall after the first block): see the variance "
                   "table")
        elif name.endswith("r15"):
            why = ("not a claim of the paper at r = 15: its Figure 3 shows the loss against "
                   "time only, and no ManPG, variance or R-ProxSPB-against-R-ProxSGD panel")
        else:
            why = "no longer a separate claim"
        out.append({"file": name, "claim": "-", "kind": "paper", "panel": "", "pkey": key,
                    "a": "", "b": "", "axis": "", "verdict": None, "stats": {},
                    "numbers": c["claim"], "sensitivity": {}, "counted": False,
                    "not_counted": why, "alt": {}, "v3_keys": [key], "v3": [verdict(c)],
                    "v3_counted": not c.get("foregone")})
    return out


def reasons(row) -> list[str]:
    """Why a row's verdict differs from v3's: ``counting`` (counted in one accounting, not
    in the other), ``rule`` (the present rule on v3's inputs disagrees with v3),
    ``baseline`` (R-Subgrad-1 in place of the batch R-Subgrad changes the present verdict),
    ``variance measure`` (the tangent part in place of the Euclidean total changes it).
    Empty where nothing changed."""
    v3 = [v3_outcome(v) for v in row["v3"]]
    out = []
    if bool(row["counted"]) != bool(row["v3_counted"]):
        out.append("counting")
    if not row["counted"] or row["verdict"] is None:
        return out
    inputs = row["alt"].get("baseline") or row["alt"].get("variance measure") or row["verdict"]
    if v3 and any(v not in (inputs, "foregone") for v in v3):
        out.append("rule")
    if "baseline" in row["alt"] and row["alt"]["baseline"] != row["verdict"]:
        out.append("baseline")
    if ("variance measure" in row["alt"]
            and row["alt"]["variance measure"] != row["verdict"]):
        out.append("variance measure")
    return out


def variance_table(result) -> list[dict]:
    """Per panel of a file with variance runs: medians over seeds of the tangent part, the
    Euclidean total and the normal part (total minus tangent: the two are orthogonal) of the
    gradient estimate's error, for R-ProxSPB's R-SARAH steps in block 1 and in the later
    blocks, and for R-ProxSGD over the same steps."""
    cfg, units = result["config"], result["units"]
    seeds = list(cfg["seeds"])
    panels = panel_mus(cfg["mu_fractions"], cfg["mus"], units["setup"]["mu_degenerate"])
    out = []
    for panel in panels:
        pkey = panel["key"]
        if f"variance/R-ProxSPB/mu={pkey}/seed={seeds[0]}" not in units:
            continue
        cols = degenerate_columns(units, pkey, seeds)
        row = {"panel": panel["label"] + (f" ({cols:g} of {cfg['r']} columns degenerate)"
                                          if cols else ""),
               "nominal": panel["nominal"], "degenerate": cols >= cfg["r"] / 2}
        spb = _runs(units, "R-ProxSPB", pkey, seeds, "variance")
        sgd = _runs(units, "R-ProxSGD", pkey, seeds, "variance")
        for who, runs_, part in (("R-ProxSPB block 1", spb, 0), ("R-ProxSPB later", spb, 1),
                                 ("R-ProxSGD", sgd, None)):
            cell = {}
            for field, name in (("riemannian_variance", "tangent"), ("variance", "total")):
                per_seed = []
                for v, s in zip(runs_, spb, strict=True):
                    refresh = np.asarray(s["refresh"], bool)
                    blk = np.cumsum(refresh) - 1
                    keep = ~refresh & ((blk == 0) if part == 0 else (blk >= 1) if part == 1
                                       else True)
                    per_seed.append(_f(v[field])[keep])
                cell[name] = per_seed
            tangent = float(np.median([np.median(t) for t in cell["tangent"]]))
            total = float(np.median([np.median(t) for t in cell["total"]]))
            normal = float(np.median([np.median(np.maximum(b - a, 0.0)) for a, b in
                                      zip(cell["tangent"], cell["total"], strict=True)]))
            row[who] = {"tangent": tangent, "total": total, "normal": normal}
        out.append(row)
    return out


VARIANCE_NOTE = (
    "Why the normal part is not reduced: R-ProxSPB's estimate is R-SARAH's, V_t = "
    "grad f_S2(X_t) - P_{X_t}(grad f_S2(X_{t-1}) - V_{t-1}): the correction is transported "
    "by projection onto the tangent space at X_t, so it cancels the minibatch noise of the "
    "tangent part only, and the normal part of V_t is the raw minibatch noise of "
    "grad f_S2(X_t) (the size of R-ProxSGD's). The subproblem reads V_t only through "
    "<V_t, zeta> with zeta tangent, that is through its tangent part: the normal part never "
    "reaches the step. The Euclidean total therefore cannot fall by construction; the tangent "
    "part is the variance the method reduces and the one the paper's Manopt code measures "
    "(Riemannian gradients), and it is the measure of claim C4 here. The Euclidean total and "
    "its normal part are shown beside it.")
