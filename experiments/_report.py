"""``results/README.md``: the tables, figures and checked claims of every saved result.

Generated from the JSON files (``python -m experiments --report``), never edited by
hand, so that what it says is what the files hold: every summary and claim is recomputed
from the files' units. The paper's claims are tested one by one with the paired rule
(:mod:`experiments._paper_claims`, :mod:`experiments._paired`, rendered by
:mod:`experiments._paper_report`), beside v3's verdicts (:mod:`experiments._claims`); the
project's own checks keep v3's rule.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib

from experiments import _claims, _paper_claims, _paper_report, _peers_report, _rmc_report
from experiments._configs import CONFIGS
from experiments._spca_protocol import SINGLE_SAMPLE
from experiments._store import staleness, to_json
from experiments._style import STAND_INS


def _machine(result) -> str:
    m = result["machine"]
    load = m.get("load_average")
    load = f", load average {load[0]:.1f}" if load else ""
    line = (f"Computed {m['date']} on {m['device']} ({m['cpu_count']} CPUs{load}), "
            f"jax {m['jax']}, rproxjax {m['rproxjax']}, x64 {m['x64']}.")
    units = result.get("machines", {})
    versions = {}
    for unit, um in units.items():
        versions.setdefault(um.get("rproxjax"), []).append(unit)
    if len(versions) > 1:  # units resumed across library versions
        parts = [f"{v}: {len(u)} units" for v, u in sorted(versions.items(), key=str)]
        newest = max(versions, key=str)
        line += (" **Units from several rproxjax versions** (" + "; ".join(parts)
                 + f"; {newest}: " + ", ".join(sorted(versions[newest])) + "): times, and the "
                 "claims at equal time, compare runs of different versions.")
    return line


def _band(stat, fmt) -> str:
    return f"{stat['median']:{fmt}} [{stat['min']:{fmt}}, {stat['max']:{fmt}}]"


def _spca(result) -> list[str]:
    cfg, units, summary = result["config"], result["units"], result["summary"]
    setup = units["setup"]
    lines = [f"Data: {STAND_INS[cfg['dataset']]}, n = {setup['n']}, d = {setup['d']}; "
             f"r = {cfg['r']}; budget {cfg['budget']:g} IFO/n; reported seeds "
             f"{list(cfg['seeds'])} (X0 and sampling); eta (and gamma) tuned on the seeds "
             f"{list(cfg['tuning_seeds'])} from the grid eta in {list(cfg['etas'])} and "
             + (f"gamma in {list(cfg['tuning_gammas'])}, each axis extended by a factor 2 "
                "past an edge its best sat on (the tuning table below: choices may lie "
                "outside these ranges)"
                if "tuning_gammas" in cfg else f"gamma = {cfg['gamma']} fixed")
             + f"; |S| = |S2| = "
             f"{cfg['batch_size']} (R-Subgrad-1: |S| = 1), q = {cfg['q']}, |S1| = n; "
             f"{cfg['dtype']}.", "",
             f"mu_deg = {setup['mu_degenerate']:.4g}: the smallest mu at which the "
             f"one-pixel-per-column point of the {cfg['r']} largest-variance pixels is "
             "stationary. Panels at fractions of it, then the paper's nominal mu; a panel is "
             "marked degenerate where R-ProxSPB's final iterates keep one entry above 1e-3 per "
             "column (median over seeds).", "",
             f"![{result['name']}]({result['name']}.png)", "",
             "The paired differences that decide the verdicts: each method's loss minus "
             "R-Subgrad-1's, seed by seed after the burn-in, with the end-of-budget t "
             "intervals:", "",
             f"![{result['name']}-paired]({result['name']}-paired.png)", "",
             "The gradient estimate's error against the iteration (tangent part, Euclidean "
             "total, normal part):", "",
             f"![{result['name']}-variance]({result['name']}-variance.png)", "",
             "Medians over the seeds, with [min, max]:", "",
             "| panel | method | eta | gamma | loss F | nonzeros | exact zeros | expl. var. | "
             "stationarity | time (s) | IFO/n | mean SSN steps |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in summary["table"]:
        eta = "t = 1/L" if row["eta"] is None else f"{float(row['eta']):g}"
        gamma = "" if row.get("gamma") is None else f"{float(row['gamma']):g}"
        label = row["label"] + (f" ({row['degenerate']})" if row["degenerate"] else "")
        lines.append(f"| {label} | {row['method']} | {eta} | {gamma} | "
                     f"{_band(row['final_loss'], '.4f')}"
                     f" | {_band(row['nonzeros'], '.0f')} | "
                     f"{row['exact_zeros']['median']:.0f} | "
                     f"{row['explained_variance']['median']:.4f} | "
                     f"{row['stationarity']['median']:.3g} | {row['time']:.2f} | "
                     f"{row['ifo_over_n']:.2f} | {row['mean_ssn_steps']['median']:.2f} |")
    lines += ["", f"gamma sensitivity at mu = {cfg['gamma_mu_fraction']:g} mu_deg (steps "
              "re-tuned for each gamma on the tuning seeds):", "",
              "| gamma | method | eta | loss F | nonzeros | mean SSN steps |",
              "|---|---|---|---|---|---|"]
    for row in summary["gamma_table"]:
        lines.append(f"| {row['gamma']:g} | {row['method']} | {float(row['eta']):g} | "
                     f"{_band(row['final_loss'], '.4f')} | {row['nonzeros']:.0f} | "
                     f"{row['mean_ssn_steps']:.2f} |")
    lines += ["", "Table best_eta (chosen on the tuning seeds; the paper's value in "
              "parentheses, for its own data scaling"
              + (" and COIL-100" if cfg["dataset"] == "fashion_mnist" else "") + "):", ""]
    best = summary["best_eta"]
    methods = [m for m in ("R-Subgrad", "R-ProxSGD", "R-ProxSPB", "R-ProxSVRG", "R-ProxSARAH",
                           "R-Subgrad-1")
               if f"{m}/mu={summary['panels'][0]['key']}" in best]
    lines += ["| panel | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for panel in summary["panels"]:
        cells = []
        for m in methods:
            entry = best[f"{m}/mu={panel['key']}"]
            paper = "" if entry["paper"] is None else f" ({entry['paper']:g})"
            gamma = "" if entry.get("gamma") is None else f", gamma {float(entry['gamma']):g}"
            cells.append(f"{float(entry['chosen']):g}{gamma}{paper}")
        lines.append(f"| {panel['label']} | " + " | ".join(cells) + " |")
    lines += ["", summary["note"]]
    return lines + _tuning(summary.get("tuning", []))


def _tuning(rows) -> list[str]:
    """The tuning table: each choice, its mean F at the budget, and its neighbours'."""
    if not rows:
        return []
    lines = ["", "Tuning (mean final F over the tuning seeds at the reported budget; the "
             "neighbours are the pairs one grid step away on each axis, run at the same "
             r"budget; \* marks a choice the local search stopped at before it was the best "
             "of its neighbours; R-Subgrad-1's choices at the paper's panels come from a "
             "second search at the budget on an eta0 axis of ratio 2 around its tuned "
             "choice, which they name):", "",
             "| method | panel | screen's best (eta, gamma) | choice (eta, gamma) | F | "
             "neighbours (eta, gamma): F | eta range | gamma range | pairs screened / at "
             "budget |", "|---|---|---|---|---|---|---|---|---|"]

    def pair(e, g):
        return f"({e:g}" + ("" if g is None else f", {g:g}") + ")"

    for row in rows:
        gamma = row["gamma"]
        near = "; ".join(f"{pair(e, g if gamma is not None else None)}: {f:.4f}"
                         for e, g, f in row["neighbours"])
        star = "" if row["converged"] else r"\*"
        if row.get("refined_from") is not None:  # the baseline's ratio-2 search moved it
            star += f" (ratio-2 search from {row['refined_from']:g})"
        lines.append(
            f"| {row['method']} | {row['label']} | "
            f"{pair(row['screen'][0], row['screen'][1] if gamma is not None else None)} | "
            f"{pair(row['eta'], gamma)}{star} | {row['loss']:.4f} | {near} | "
            f"{row['etas'][0]:g} - {row['etas'][1]:g} | "
            + ("" if gamma is None else f"{row['gammas'][0]:g} - {row['gammas'][1]:g}")
            + f" | {row['screened']} / {row['at_budget']} |")
    return lines


def summarize(result: dict) -> dict:
    """The summary of a results file recomputed from its units with the present accounting
    (the file's own ``summary`` is what its run printed): one source, the units."""
    from experiments import _peers_table, _rmc, _spca_summary

    kind = result["config"]["kind"]
    module = {"spca": _spca_summary, "peers": _peers_table, "rmc": _rmc}[kind]
    return to_json(module.summarize(result))


def _count(tally, kind) -> str:
    """``pass / tie / mixed / fail of total`` of one kind of claim ('' where there is none)."""
    c = tally[kind]
    return f"{c['pass']} / {c['tie']} / {c['mixed']} / {c['fail']} of {c['total']}" if c[
        "total"] else ""


def _commits(result) -> list[tuple[str, int]]:
    """``(rproxjax <version> (<commit>), units)`` of each commit that computed units of a
    results file (a resumed or partly rerun file holds several), the file's last first."""
    def label(m):
        commit = m.get("commit")
        return f"rproxjax {m['rproxjax']}" + (f" ({commit[:10]})" if commit else "")

    counts = collections.Counter(label(m) for m in
                                 (result.get("machines") or {"": result["machine"]}).values())
    last = label(result["machine"])
    return sorted(counts.items(), key=lambda item: item[0] != last)  # stable: the rest in order


def _made(result) -> str:
    """What computed a results file: ``rproxjax <version> (<commit>)``, with the units of
    each where several commits did."""
    commits = _commits(result)
    if len(commits) == 1:
        return commits[0][0]
    return "; ".join(f"{label}: {n} units" for label, n in commits)


def _outcome_row(name, result, missing=(), rows=()) -> str:
    """A file's row of the outcome table: what computed it, whether its settings are the
    present ones, the counts of its paper rows (v4, with v3's beside) and of its checks."""
    t = _claims.tally(result["summary"]["claims"])
    v4 = _paper_report.tally(rows)
    m = result["machine"]
    made = _made(result)

    stale = staleness(result)
    fresh = "the present defaults" if stale is None else f"**stale**: {stale}"
    if missing:
        fresh += "; **an earlier protocol** (no " + ", ".join(missing) + ")"
    if m.get("tree_clean") is False:
        made += ", uncommitted changes"
    checks = [c for c in result["summary"]["claims"] if _kept_check(c)]
    passed = sum(_claims.verdict(c).startswith("pass") for c in checks)
    return (f"| `{name}` | {made} | {fresh} | {_paper_report.count_text(v4)} | "
            f"{v4['shown'] or ''} | {_count(t, 'paper')} | {passed}/{len(checks)} pass |")


def _missing_settings(name, result) -> list[str]:
    """Settings of the present configuration class that the results file does not record."""
    fields = {f.name for f in dataclasses.fields(CONFIGS[name])}
    return sorted(fields - set(result["config"]))


OUTCOME_RULES = (
    "The paper's claims, each where the paper makes it, tested with one paired statistic "
    "and one rule (the sections below). v3's counts (`experiments/_claims.py`: a win by more "
    "than the unpaired seed spread at every point after the first pass, against the batch "
    "R-Subgrad, every panel and both axes counted) are beside them for comparison; the "
    "project's own checks keep v3's rule.")
OUTCOME_HEADER = ("| configuration | computed with | solver settings | the paper's claims (v4): "
                  "win / tie / mixed / loss of counted | shown, not counted | v3: pass / tie / "
                  "mixed / FAIL of total | the project's checks (v3's rule) |",
                  "|---|---|---|---|---|---|---|")


def _kept_check(c) -> bool:
    """A v3 check the present report keeps: the project's own checks, less those the paired
    rows now make (R-Subgrad-1 against the proximal methods; the variance)."""
    key = c.get("key", c["claim"])
    return c.get("kind") == _claims.CHECK and SINGLE_SAMPLE not in key and (
        "/variance" not in key)


def paper_rows(name, result) -> list[dict]:
    """The paper's claims' rows of a results file whose ``summary`` is recomputed
    (:func:`summarize`), with v3's paper claims that no row tests."""
    v3 = result["summary"]["claims"]
    rows = _paper_claims.rows(name, result, v3)
    return rows + _paper_claims.orphans(name, v3, rows)
#: The lines around the README's generated block (:func:`update_readme`).
README_BEGIN = ("<!-- generated by `python -m experiments --report --readme README.md` "
                "from results/*.json: do not edit -->")
README_END = "<!-- end of the generated block -->"
#: The opening line the block had while the lab was ``rproxjax.experiments`` (rproxjax 0.3),
#: which :func:`update_readme` also finds, and replaces with :data:`README_BEGIN`.
README_BEGIN_0_3 = ("<!-- generated by `python -m rproxjax.experiments --report --readme "
                    "README.md` from results/*.json: do not edit -->")


def _complete(out_dir):
    """``(name, result)`` of each complete results file in ``out_dir``, in CONFIGS order."""
    for name in CONFIGS:
        path = pathlib.Path(out_dir) / f"{name}.json"
        if path.exists():
            result = json.loads(path.read_text())
            if result.get("complete"):
                yield name, result


def _demo_section(out_dir, heading="###") -> list[str]:
    """The demonstration's table from ``<out_dir>/demo.json``, if there is one."""
    from experiments import _demo

    path = pathlib.Path(out_dir) / "demo.json"
    if not path.exists():
        return []
    return [f"{heading} The demonstration", "",
            "`python -m rproxjax` at its defaults, recorded by `python -m experiments --demo` "
            "(R-ProxSPB, R-ProxSGD and R-Subgrad at equal IFO budgets; time: run time after "
            "compilation):", "",
            *_demo.table(json.loads(path.read_text())), ""]


def readme_block(out_dir="results") -> list[str]:
    """The README's generated block: the demonstration's table and one line on the complete
    results files in ``out_dir``: their commits and which are stale (the claim counts are
    in ``results/README.md``)."""
    made, stale = set(), []
    for name, result in _complete(out_dir):
        made.update(label for label, _ in _commits(result))
        if staleness(result) is not None or _missing_settings(name, result):
            stale.append(f"`{name}`")
    lines = [README_BEGIN, "", *_demo_section(out_dir)]
    if made:
        lines += ["The paper's claims, counted per configuration: "
                  "[results/README.md](results/README.md), computed with "
                  + ", ".join(sorted(made)) + "."
                  + (f" **Stale** (other solver defaults or an earlier protocol; to be "
                     f"rerun): {', '.join(stale)}." if stale else ""), ""]
    return [*lines, README_END]


def update_readme(readme, out_dir="results") -> pathlib.Path:
    """Rewrites the block between :data:`README_BEGIN` (or :data:`README_BEGIN_0_3`) and
    :data:`README_END` of the file ``readme`` with :func:`readme_block`.

    Raises:
      ValueError: when the file does not hold the two marker lines, in that order.
    """
    path = pathlib.Path(readme)
    lines = path.read_text().split("\n")
    begins = [i for i, line in enumerate(lines) if line in (README_BEGIN, README_BEGIN_0_3)]
    try:
        begin, end = begins[0] if begins else -1, lines.index(README_END)
    except ValueError:
        begin = end = -1
    if not 0 <= begin < end:
        raise ValueError(f"{path} has no generated block: add the lines {README_BEGIN!r} and "
                         f"{README_END!r} where it goes.")
    path.write_text("\n".join(lines[:begin] + readme_block(out_dir) + lines[end + 1:]))
    return path


def write_report(out_dir="results", figures: bool = False) -> pathlib.Path:
    """Writes ``<out_dir>/README.md`` from the complete results files found there (and,
    with ``figures``, redraws their PNG figures there)."""
    out_dir = pathlib.Path(out_dir)
    lines = ["# Results", "",
             "Generated by `python -m experiments --report` from the JSON files in this "
             "folder (every curve and number is in them). Rerun an experiment with "
             "`python -m experiments NAME`; the notebooks in `notebooks/` draw "
             "these files.", ""]
    sections = {"spca": _spca, "peers": _peers_report.section, "rmc": _rmc_report.section}
    outcome = ["## Outcome", "", OUTCOME_RULES, "", *OUTCOME_HEADER]
    body, entries, spca = [], [], []
    for name in CONFIGS:
        path = out_dir / f"{name}.json"
        if not path.exists():
            lines += [f"## {name}", "", "Not run yet.", ""]
            continue
        result = json.loads(path.read_text())
        if not result.get("complete"):
            body += [f"## {name}", "", "Incomplete (interrupted run; rerun to resume).", ""]
            continue
        missing = _missing_settings(name, result)
        result["summary"] = summarize(result)
        if figures:
            from experiments._plots import plot

            plot(result, out_dir)
        rows = paper_rows(name, result)
        entries.append((name, result, rows))
        if result["config"]["kind"] == "spca":
            spca.append((name, result))
        outcome.append(_outcome_row(name, result, missing, rows))
        body += [f"## {name}", ""]
        if missing:
            body += [f"**Made by an earlier version of the protocol** (its configuration lacks "
                     f"{', '.join(missing)}): the numbers below follow that protocol; rerun "
                     f"with `python -m experiments {name} --force`.", ""]
        body += [_machine(result), ""]
        body += sections[result["config"]["kind"]](result)
        body += [""] + _paper_report.file_lines(rows)
        body += _claims.render([c for c in result["summary"]["claims"] if _kept_check(c)])
    outcome += [""] + _paper_report.outcome_lines(entries, spca)
    demo = _demo_section(out_dir, heading="##")
    path = out_dir / "README.md"
    path.write_text("\n".join(lines + outcome + [""] + demo + body) + "\n")
    return path
