"""The paper's experiments, reproducible from named configurations.

The repository's lab, beside the library: it is not in the wheel and runs from the
repository root. Run one from the command line (results and figures go to ``results/``;
``--demo`` records the demonstration of ``python -m rproxjax`` in ``results/demo.json``)::

    python -m experiments spca-mnist-r10
    python -m experiments --list
    python -m experiments all --size tiny --out /tmp/results

or from Python::

    import experiments
    result = experiments.run("spca-mnist-r10")          # resumes from results/*.json
    experiments.plot(result, "results")                  # the PNG figures

Each run writes ``<out>/<name>.json`` (every curve and number, the configuration, the
machine, the JAX version and the date) after every finished unit, so an interrupted run
resumes where it stopped. ``summary.claims`` lists the paper's claims at its settings
(quoted), the same comparisons at the project's own panels, the project's checks and the
foregone comparisons, each with its outcome on every reported seed (a win only by more
than the seed-to-seed spread) and its numbers (:mod:`experiments._claims`);
:func:`claim_lines` recomputes them from a file's units with the present accounting.

Configurations (see :data:`CONFIGS`): ``spca-{mnist,fashion}-r{10,15}`` (Figures 1-3 and
Table best_eta), ``peers-{mnist,fashion}`` (Table added_exp: against SPAMS and
scikit-learn), ``rmc-video`` (the robust matrix completion figure). Fashion-MNIST stands in
for the paper's COIL-100 and the shipped surveillance video for its "Hall"/"Airport" videos.

The experiments need float64 (as the paper's MATLAB code) for every configuration at its
paper size: the command line enables ``jax_enable_x64``; from Python, enable it first. The
SPAMS and scikit-learn comparisons need ``pip install -e ".[experiments]"``.
"""

from __future__ import annotations

from experiments._configs import (
    CONFIGS,
    PAPER_ETAS,
    PeersConfig,
    RMCConfig,
    SPCAConfig,
    get_config,
)
from experiments._plots import plot
from experiments._store import drop_units, load

__all__ = [
    "CONFIGS",
    "PAPER_ETAS",
    "PeersConfig",
    "RMCConfig",
    "SPCAConfig",
    "claim_lines",
    "drop_units",
    "get_config",
    "load",
    "plot",
    "run",
]


def run(name: str, *, size: str = "paper", out_dir="results", force: bool = False,
        progress: bool = True, config=None) -> dict:
    """Runs (or resumes) the experiment ``name`` and returns its results (as saved).

    Args:
      name: a key of :data:`CONFIGS`.
      size: "paper" or "tiny" (a CI-sized version of the same protocol).
      out_dir: the folder of ``<name>.json``.
      force: recompute even if a results file exists (it is overwritten).
      progress: progress lines on stderr.
      config: a configuration object to use instead of the named one (e.g.
        ``dataclasses.replace(get_config(name), n=5000)``).

    Returns:
      The results dictionary (as in the JSON file), with ``summary``.
    """
    cfg = config if config is not None else get_config(name, size)
    if cfg.kind == "spca":
        from experiments import _spca as module
    elif cfg.kind == "peers":
        from experiments import _peers_table as module
    else:
        from experiments import _rmc as module
    return module.run(name, cfg, out_dir, force=force, progress=progress)


def _label(row) -> str:
    """A row's claim and kind (``C1 paper``), or its kind alone for the project's rows."""
    return row["kind"] if row["claim"] == row["kind"] else f"{row['claim']} {row['kind']}"


def claim_lines(result: dict, name: str | None = None) -> list[str]:
    """The paper's claims of a results file by the paired rule (``experiments._paired.RULE``),
    recomputed from its units: one line of counts (win / tie / mixed / loss of the counted
    rows, and how many are shown but not counted), then one line per row with its verdict,
    whether it counts and its numbers; then the project's remaining checks under v3's rule.
    ``name``: the file's name (default: its configuration's)."""
    from experiments import _claims, _paper_claims, _paper_report
    from experiments._report import summarize

    name = name or result["config"].get("name", "")
    v3 = summarize(result)["claims"]
    rows = _paper_claims.rows(name, result, v3)
    t = _paper_report.tally(rows)
    lines = [f"the paper's claims (paired rule): {_paper_report.count_text(t) or 'none'} "
             f"counted (win / tie / mixed / loss); {t['shown']} shown, not counted"]
    lines += [f"  [{_label(r)}: {_paper_report._v4_cell(r)}] {r['a']} vs "
              f"{r['b']}" + (f" ({r['axis']})" if r.get("axis") else "")
              + (f", {r['panel']}" if r.get("panel") else "") + f": {r['numbers']}"
              for r in rows]
    checks = [c for c in v3 if c["kind"] == "check"]
    if checks:
        lines.append("the project's checks (v3's rule):")
        lines += [f"  [{_claims.verdict(c)}] {c['claim']}: {c['numbers']}" for c in checks]
    return lines
