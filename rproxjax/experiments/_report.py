"""``results/README.md``: the tables, figures and checked claims of every saved result.

Generated from the JSON files (``python -m rproxjax.experiments --report``), never edited by
hand, so that what it says is what the files hold.
"""

from __future__ import annotations

import json
import pathlib

from rproxjax.experiments._configs import CONFIGS
from rproxjax.experiments._plots import STAND_INS, VIDEO


def _claims(result) -> list[str]:
    claims = result["summary"]["claims"]
    lines = [f"Claims checked on the data: **{sum(c['pass'] for c in claims)}/{len(claims)} "
             "pass**.", "", "| | claim | numbers |", "|---|---|---|"]
    for c in claims:
        lines.append(f"| {'pass' if c['pass'] else '**FAIL**'} | {c['claim']} | "
                     f"{c['numbers']} |")
    return lines


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


def _spca(result) -> list[str]:
    cfg, units = result["config"], result["units"]
    setup = units["setup"]
    lines = [f"Data: {STAND_INS[cfg['dataset']]}, n = {setup['n']}, d = {setup['d']}; "
             f"r = {cfg['r']}; budget {cfg['budget']:g} IFO/n; steps chosen after "
             f"{float(units['grid/R-ProxSGD']['ifo_over_n']):.2f} IFO/n from "
             f"{list(cfg['etas'])}; gamma = {cfg['gamma']}; "
             f"|S| = |S2| = {cfg['batch_size']}, q = {cfg['q']}, |S1| = n; {cfg['dtype']}.", "",
             f"![{result['name']}]({result['name']}.png)", "",
             "| mu | method | eta | loss F | IFO/n | time (s) | nonzeros | expl. var. | "
             "stationarity | mean SSN steps |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]["table"]:
        run = units[f"run/{row['method']}/mu={row['mu']}"]
        eta = "t = 1/L" if row["eta"] is None else f"{float(row['eta']):g}"
        lines.append(f"| {row['mu']} | {row['method']} | {eta} | {float(row['loss']):.4f} | "
                     f"{float(row['ifo_over_n']):.2f} | {float(row['time']):.2f} | "
                     f"{row['nonzeros']} | {float(row['explained_variance']):.4f} | "
                     f"{float(row['stationarity']):.3g} | {float(run['mean_ssn_steps']):.1f} |")
    lines += ["", "Table best_eta (chosen here; the paper's value in parentheses, for its own "
              "data scaling" + (" and COIL-100" if cfg["dataset"] == "fashion_mnist" else "")
              + "):", ""]
    best = result["summary"]["best_eta"]
    methods = [m for m in ("R-Subgrad", "R-ProxSGD", "R-ProxSPB", "R-ProxSVRG", "R-ProxSARAH")
               if f"{m}/mu={cfg['mus'][0]}" in best]
    lines += ["| mu | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for mu in cfg["mus"]:
        cells = []
        for m in methods:
            entry = best[f"{m}/mu={mu}"]
            paper = "" if entry["paper"] is None else f" ({entry['paper']:g})"
            cells.append(f"{float(entry['chosen']):g}{paper}")
        lines.append(f"| {mu} | " + " | ".join(cells) + " |")
    lines += ["", result["summary"]["note"]]
    return lines


def _peers(result) -> list[str]:
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


def _rmc(result) -> list[str]:
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


def write_report(out_dir="results") -> pathlib.Path:
    """Writes ``<out_dir>/README.md`` from the complete results files found there."""
    out_dir = pathlib.Path(out_dir)
    lines = ["# Results", "",
             "Generated by `python -m rproxjax.experiments --report` from the JSON files in this "
             "folder (every curve and number is in them). Rerun an experiment with "
             "`python -m rproxjax.experiments NAME`; the notebooks in `notebooks/` draw "
             "these files.", ""]
    sections = {"spca": _spca, "peers": _peers, "rmc": _rmc}
    for name in CONFIGS:
        path = out_dir / f"{name}.json"
        if not path.exists():
            lines += [f"## {name}", "", "Not run yet.", ""]
            continue
        result = json.loads(path.read_text())
        if not result.get("complete"):
            lines += [f"## {name}", "", "Incomplete (interrupted run; rerun to resume).", ""]
            continue
        lines += [f"## {name}", "", _machine(result), ""]
        lines += sections[result["config"]["kind"]](result)
        lines += [""] + _claims(result) + [""]
    path = out_dir / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path
