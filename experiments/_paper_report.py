"""Markdown for the paper's claims tested one by one (:mod:`experiments._paper_claims`), the
verdict rule (:data:`experiments._paired.RULE`), its sensitivity, the baseline's tuning, the
variance and the tuning as it was done (:mod:`experiments._tuning_report`): the sections of
``results/README.md`` that :mod:`experiments._report` assembles."""

from __future__ import annotations

from collections import Counter

import numpy as np

from experiments import _paired, _paper_claims, _tuning_report
from experiments._paper_claims import CLAIMS, reasons
from experiments._spca_protocol import SINGLE_SAMPLE

ORDER = (_paired.WIN, _paired.TIE, _paired.MIXED, _paired.LOSS, _paired.UNDECIDED)


def _cell(text) -> str:
    return str(text).replace("\\|", "|").replace("|", "\\|")


def counted(rows) -> list[dict]:
    """The rows that count: the paper's claims at its settings, neither foregone nor on a
    degenerate panel."""
    return [r for r in rows if r["kind"] == "paper" and r["counted"]]


def tally(rows) -> dict:
    """``{verdict: count}`` over the counted rows, with ``"total"`` and ``"shown"`` (paper
    rows shown but not counted)."""
    c = Counter(r["verdict"] for r in counted(rows))
    out = {v: c.get(v, 0) for v in ORDER}
    out["total"] = sum(c.values())
    out["shown"] = sum(r["kind"] == "paper" and not r["counted"] and r["verdict"] is not None
                       for r in rows)
    return out


def count_text(t) -> str:
    """``win / tie / mixed / loss of total`` (and undecided where any)."""
    text = (f"{t['win']} / {t['tie']} / {t['mixed']} / {t['loss']} of {t['total']}"
            if t["total"] else "")
    return text + (f" ({t['undecided']} undecided)" if t.get("undecided") else "")


def _short(row) -> str:
    why = row["not_counted"] or ""
    if why.startswith("degenerate"):
        return "degenerate panel"
    if why.startswith("foregone"):
        return "foregone"
    return "not the paper's claim here"


def _v4_cell(row) -> str:
    if row["kind"] == "paper" and row["counted"]:
        return f"**{row['verdict']}**"
    if row["verdict"] is None:
        return f"not counted: {_short(row)}"
    return f"not counted: {_short(row)} ({row['verdict']})"


def _comparison(row) -> str:
    if not row["a"]:
        return row["numbers"]
    axis = {"ifo_over_n": "equal IFOs", "time": "equal time",
            "ifo_over_nnz": "equal IFOs"}.get(row["axis"], row["axis"])
    return f"{row['a']} below {row['b']}, {axis}"


def claims_table(entries) -> list[str]:
    """The paper's claims, verbatim, with where it makes them, how each is tested, and the
    verdicts of its rows over every file."""
    rows = [r for _, _, rs in entries for r in rs]
    lines = ["| claim | where | the paper's words | how it is tested | counted: win / tie / "
             "mixed / loss | shown, not counted |", "|---|---|---|---|---|---|"]
    for c in CLAIMS:
        mine = [r for r in rows if r["claim"] == c["id"]]
        t = tally(mine)
        lines.append(f"| {c['id']} | {_cell(c['where'])} | \"{_cell(c['quote'])}\" | "
                     f"{_cell(c['test'])} | {count_text(t)} | {t['shown'] or ''} |")
    return lines


def comparison_table(entries) -> list[str]:
    """Every paper claim, each row of every file: its v3 and its present verdict, and for
    each that changed, why (rule, baseline, variance measure, counting)."""
    lines = ["| file | claim | panel | comparison | v3 | v4 | why it changed |",
             "|---|---|---|---|---|---|---|"]
    for name, _, rs in entries:
        for r in rs:
            if r["kind"] != "paper":
                continue
            why = reasons(r)
            v3 = "; ".join(r["v3"]) if r["v3"] else "(none)"
            lines.append(f"| {name} | {r['claim']} | {_cell(r['panel'])} | "
                         f"{_cell(_comparison(r))} | {_cell(v3)} | {_cell(_v4_cell(r))} | "
                         f"{', '.join(why) if why else 'unchanged'} |")
    return lines


def change_counts(entries) -> dict:
    """How many paper rows changed, by reason (a row may have several)."""
    c = Counter()
    for _, _, rs in entries:
        for r in rs:
            if r["kind"] == "paper":
                why = reasons(r)
                c["changed" if why else "unchanged"] += 1
                c.update(why)
    return dict(c)


def sensitivity_lines(entries) -> list[str]:
    """Counts of the counted rows' verdicts under each burn-in and interval level, and the
    rows whose verdict depends on them."""
    rows = [r for _, _, rs in entries for r in counted(rs) if r["sensitivity"]]
    keys = [f"{label}, {lv:g}" for _, label in _paper_claims.BURN_INS
            for lv in _paper_claims.LEVELS]
    lines = ["| burn-in | level | win | tie | mixed | loss | undecided |",
             "|---|---|---|---|---|---|---|"]
    for key in keys:
        c = Counter(r["sensitivity"][key] for r in rows)
        burn, level = key.rsplit(", ", 1)
        mark = " (the rule's)" if key == f"one block, {_paired.LEVEL:g}" else ""
        lines.append(f"| {burn}{mark} | {level} | " + " | ".join(str(c.get(v, 0))
                                                                 for v in ORDER) + " |")
    moved = []
    for r in rows:
        other = {k: v for k, v in r["sensitivity"].items() if v != r["verdict"]}
        if other:
            by = Counter(other.values())
            moved.append(f"`{r['file']}` {r['claim']} {r['panel']}, {_comparison(r)}: "
                         f"{r['verdict']}; otherwise "
                         + ", ".join(f"{v} under {n} of {len(keys)} settings ("
                                     + "; ".join(k for k, x in other.items() if x == v) + ")"
                                     for v, n in by.items()))
    lines += ["", f"Rows of the paper's claims (C7 aside: no curve) whose verdict depends on "
              f"the burn-in or the level: **{len(moved)} of {len(rows)}**."]
    lines += [""] + [f"* {_cell(m)}" for m in moved] if moved else []
    return lines


def baseline_lines(spca) -> list[str]:
    """Whether R-Subgrad-1 was tuned as finely as the proximal methods at the paper's
    panels (its refined search: what it ran, what it moved), and its time per IFO."""
    rows, refined, per_ifo = [], {}, []
    for name, result in spca:
        rows += _tuning_report.tuning_rows(name, result)
        cost = _tuning_report.refined_cost(result)
        if cost:
            refined[name] = cost
        units = result["units"]
        for m in ("R-Subgrad", SINGLE_SAMPLE):
            runs = [v for k, v in units.items() if k.startswith(f"run/{m}/")]
            if runs:
                per_ifo.append((name, m, float(np.median([r["time"][-1] / r["ifo_over_n"][-1]
                                                          for r in runs]))))
    sub = [r for r in rows if r["method"] == SINGLE_SAMPLE and r["nominal"]]
    prox = [r for r in rows if r["method"] in ("R-ProxSGD", "R-ProxSPB") and r["nominal"]]
    if not sub or not prox:
        return []

    def gap(r):
        lo, hi = r["bracket"]
        return max(1 / lo if lo else np.inf, hi if hi else np.inf)

    done = all(r["refined_from"] is not None for r in sub)
    lines = [
        "Was R-Subgrad-1 (the paper's baseline) tuned on a grid as fine as the proximal "
        f"methods' at the paper's panels? **{'Yes' if done else 'No'}.** Its tuning runs the "
        "paper's eta0 grid {5e-5, 1e-4, 5e-4, ..., 1} (neighbours a factor 2 or 5 apart); "
        + ("then a second local search at the budget, on an eta0 axis of ratio 2 around each "
           "paper panel's choice (the pairs the tuning ran reused), moves it until it is the "
           "best of its two ratio-2 neighbours (at most max_moves moves). "
           if refined else "no second search was run. ")
        + f"At the paper's panels its choice's nearest step run at the budget lies within a "
        f"factor {max(gap(r) for r in sub):.3g}; R-ProxSGD's and R-ProxSPB's step eta gamma "
        f"(eta and gamma on a 2-D grid) within a factor {max(gap(r) for r in prox):.3g} "
        f"(median {np.median([gap(r) for r in prox]):.2g}).", ""]
    if refined:
        lines += ["| file | panels | pairs run | reused | seconds | choices moved (eta0: "
                  "tuned -> refined) | out of moves |", "|---|---|---|---|---|---|---|"]
        for name, c in refined.items():
            moved = "; ".join(f"{a:g} -> {b:g}" for a, b in c["moved"].values()) or "none"
            lines.append(f"| {name} | {c['panels']} | {c['ran']} | {c['reused']} | "
                         f"{c['seconds']:.0f} | {moved} | {c['unconverged']} |")
        lines += ["", "Where a choice moved, the reported runs of R-Subgrad-1 at that panel "
                  "ran again with it; every method's reported runs at the paper's panels ran "
                  "again at the same commit on the same machine, so that the time axis of "
                  "each panel compares runs of one machine.", ""]
    lines.append("Time per IFO/n (median over the reported runs; the time axis of C1 and C5): "
                 + "; ".join(f"`{n}` {m} {s:.2f} s" for n, m, s in per_ifo)
                 + ". R-Subgrad-1 takes one step per sample, so at equal time it has spent a "
                 "small fraction of the others' IFOs: its time rows measure the cost of its "
                 "per-sample steps here as much as its progress per IFO.")
    return lines


def variance_lines(spca) -> list[str]:
    """The variance table (tangent part, Euclidean total, normal part) and why the normal
    part is not reduced."""
    lines = ["Medians over the seeds of the per-step medians (R-ProxSPB's refresh steps, "
             "where the estimate is the full gradient, left out), at the steps of "
             "R-ProxSPB's first block and of its later blocks; R-ProxSGD over all the same "
             "steps. tangent: ||P_X(V_t - grad f(X_t))||^2 (the main measure); total: "
             "||V_t - grad f(X_t)||^2; normal: total - tangent.", "",
             "| file | panel | R-ProxSPB block 1: tangent / total / normal | R-ProxSPB later "
             "blocks | R-ProxSGD | tangent, R-ProxSGD / R-ProxSPB later |",
             "|---|---|---|---|---|---|"]
    found = False
    for name, result in spca:
        for row in _paper_claims.variance_table(result):
            found = True

            def cell(c):
                return f"{c['tangent']:.3g} / {c['total']:.3g} / {c['normal']:.3g}"

            ratio = row["R-ProxSGD"]["tangent"] / max(row["R-ProxSPB later"]["tangent"], 1e-300)
            lines.append(f"| {name} | {row['panel']} | {cell(row['R-ProxSPB block 1'])} | "
                         f"{cell(row['R-ProxSPB later'])} | {cell(row['R-ProxSGD'])} | "
                         f"{ratio:.3g} |")
    if not found:
        return []
    return lines + ["", _paper_claims.VARIANCE_NOTE]


PARAMETRIZATION = (
    "The paper tunes one step per method over {5e-5, 1e-4, 5e-4, ..., 1}: eta0 of "
    "eta_t = eta0 / sqrt(t + 1) for R-Subgrad and R-ProxSGD, the constant eta for R-ProxSPB, "
    "with the proximal step gamma tied to it (R-ProxSGD's Algorithm 1: gamma = 2 eta / "
    "(2 L eta^2 + eta + 1); R-ProxSPB's theorem: gamma = 2/5; the experiments state no "
    "gamma). Here eta and gamma are separate and tuned together on a 2-D grid (the screen "
    "of every pair, each axis extended by a factor 2 past an edge its best sat on, then a "
    "local search at the budget): the update is X_{t+1} = Retr(eta_t zeta_t) with zeta_t ~ "
    "-gamma P_X(v_t) where h is inactive, so the step on the smooth part is the product "
    "eta_t gamma, and an eta above the paper's range with a small gamma is an ordinary "
    "step. Flags: **edge**, the choice on an edge of its final axis (eta capped at 1 for "
    "R-ProxSARAH, gamma not extended further); **outside**, eta outside the paper's grid; "
    "for the decaying schedules, the share of the reported run's iterations with eta_t > 1.")


def tuning_lines(spca) -> list[str]:
    """The tuning disclosed: the parametrization against the paper's, and per paper panel
    the grids, the choice, the step and the flags."""
    rows = []
    for name, result in spca:
        rows += [r for r in _tuning_report.tuning_rows(name, result) if r["nominal"]
                 and r["method"] in ("R-ProxSPB", "R-ProxSGD", "R-Subgrad", SINGLE_SAMPLE)]
    if not rows:
        return []
    lines = [PARAMETRIZATION, "",
             "| file | method | panel | eta (eta0) | gamma | step eta gamma | eta axis "
             "(values) | gamma axis | steps at the budget | nearest steps run (x choice) | "
             "flags |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        flags = []
        if r["edge"]:
            flags.append("**edge** (" + ", ".join(r["edge"]) + ")")
        if r["outside"]:
            flags.append("**outside** the paper's grid")
        if r["above_one"]:
            flags.append(f"eta_t > 1 on {r['above_one']:.1%} of the steps")
        lo, hi = r["bracket"]
        near = " / ".join("-" if b is None else f"{b:.3g}" for b in (lo, hi))
        gammas = "" if r["gammas"] is None else (f"{min(r['gammas']):g} - "
                                                 f"{max(r['gammas']):g} ({len(r['gammas'])})")
        lines.append(f"| {r['file']} | {r['method']} | {r['panel']} | {r['eta']:g} | "
                     f"{'' if r['gamma'] is None else format(r['gamma'], 'g')} | "
                     f"{r['step']:.3g} | {r['eta_range'][0]:g} - {r['eta_range'][1]:g} "
                     f"({r['etas']}) | {gammas} | {r['steps_at_budget']} | {near} | "
                     f"{', '.join(flags)} |")
    return lines


def outcome_lines(entries, spca) -> list[str]:
    """The report's account of the paper's claims: the rule, the claims, every row's v3 and
    v4 verdicts, the sensitivity, the baseline, the variance and the tuning.
    ``entries``: (name, result, rows) of every complete file; ``spca``: (name, result) of the
    sparse PCA files."""
    all_rows = [r for _, _, rs in entries for r in rs]
    t = tally(all_rows)
    changes = change_counts(entries)
    lines = ["### The rule", "", "Verdicts by `experiments/_paired.py` (the rule below, "
             "quoted from it), rows by `experiments/_paper_claims.py`:", "",
             f"> {_paired.RULE}", "",
             "The x axis is the figure's (IFO/n, or seconds); the burn-in is one refresh block "
             "of R-ProxSPB, the slowest method of every figure (its first block holds |S1| = n "
             "samples: (n + (q - 1) 2 |S2|) / n IFO/n; in time, the latest time over the seeds "
             "at which it has spent it). C4 compares variance curves against iterations: the "
             "end-of-budget difference is replaced by each seed's mean log10 ratio over "
             "R-ProxSPB's R-SARAH steps, and no burn-in applies. R-Subgrad is the paper's, one "
             "sample a step (R-Subgrad-1; in RMC the paper's 10% minibatches); the batch "
             "R-Subgrad (|S| = 100) is the project's extra comparison, in each file's "
             "section. Counted: the paper's claims where the paper makes them; each ManPG "
             "comparison once, as foregone; degenerate panels (R-ProxSPB keeps one entry "
             "above 1e-3 in at least half the columns, median over seeds) shown and labelled, "
             "not counted.", "",
             f"All files: **{count_text(t)}** counted rows of the paper's claims "
             f"(win / tie / mixed / loss), {t['shown']} shown but not counted. Against v3: "
             f"{changes.get('changed', 0)} of "
             f"{changes.get('changed', 0) + changes.get('unchanged', 0)} rows changed ("
             + ", ".join(f"{k} {changes[k]}" for k in ("rule", "baseline", "variance measure",
                                                      "counting") if k in changes)
             + "; a row may have several reasons).", "",
             "### The paper's claims", "",
             "Quoted from the paper's TeX source (\\ref as the number it produces, math as "
             "plain text). COIL-100 (Figure 2) is stood in for by Fashion-MNIST.", "",
             *claims_table(entries), "",
             "### Every paper claim: v3 and v4", "",
             "v3: `experiments/_claims.py` (a win by more than the unpaired seed spread at "
             "every recorded point after the first pass, against the batch R-Subgrad, the "
             "Euclidean variance; computed now from the same files). Why it changed: "
             "**rule** (the present rule on v3's inputs disagrees with v3), **baseline** "
             "(R-Subgrad-1 in place of the batch R-Subgrad changes the present verdict), "
             "**variance measure** (the tangent part in place of the Euclidean total changes "
             "it), **counting** (counted in one accounting and not in the other).", "",
             *comparison_table(entries), "",
             "### Sensitivity", "",
             "The counted rows' verdicts under other burn-ins (in R-ProxSPB blocks) and "
             "interval levels (a burn-in at or past the common end leaves no grid: "
             "undecided):", "", *sensitivity_lines(entries), ""]
    base = baseline_lines(spca)
    if base:
        lines += ["### The paper's baseline: R-Subgrad-1 and its tuning", "", *base, ""]
    var = variance_lines(spca)
    if var:
        lines += ["### Variance (C4)", "", *var, ""]
    tun = tuning_lines(spca)
    if tun:
        lines += ["### Tuning as it was done", "", *tun, ""]
    return lines


def file_lines(rows) -> list[str]:
    """A file's rows: the paper's claims, the same comparisons at the project's panels, the
    project's batch R-Subgrad comparisons; with their numbers."""
    lines = []
    for kind, title in (
            ("paper", "The paper's claims in this file (v4)"),
            ("panel", "The same comparisons at the project's panels (mu as a fraction of "
                      "mu_deg; the paper never ran them: not its claims)"),
            ("project", "The project's comparisons with the batch R-Subgrad (|S| = 100; the "
                        "paper's R-Subgrad takes one sample a step)")):
        mine = [r for r in rows if r["kind"] == kind and r["verdict"] is not None]
        if not mine:
            continue
        t = tally(mine) if kind == "paper" else Counter(r["verdict"] for r in mine)
        summary = (count_text(t) + " counted (win / tie / mixed / loss)" if kind == "paper"
                   else ", ".join(f"{t[v]} {v}" for v in ORDER if t.get(v)))
        lines += [f"{title}: **{summary}**.", "",
                  "| claim | verdict | panel | comparison | numbers |", "|---|---|---|---|---|"]
        for r in mine:
            verdict = _v4_cell(r) if kind == "paper" else r["verdict"]
            lines.append(f"| {r['claim']} | {_cell(verdict)} | {_cell(r['panel'])} | "
                         f"{_cell(_comparison(r))} | {_cell(r['numbers'])} |")
        lines.append("")
    return lines
