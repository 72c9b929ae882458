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
from experiments._store import load

__all__ = [
    "CONFIGS",
    "PAPER_ETAS",
    "PeersConfig",
    "RMCConfig",
    "SPCAConfig",
    "claim_lines",
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


def claim_lines(result: dict) -> list[str]:
    """The claims of a results file, recomputed from its units with the present accounting:
    one line of counts per kind (the paper's claims, the project's panels, its checks, the
    foregone comparisons), then one line per claim with its verdict over the seeds."""
    from experiments import _claims
    from experiments._report import summarize

    claims = summarize(result)["claims"]
    t = _claims.tally(claims)
    names = {"paper": "the paper's claims", "panel": "the project's panels",
             "check": "the project's checks"}
    lines = [f"{names[k]}: {t[k]['pass']}/{t[k]['total']} pass, {t[k]['tie']} ties, "
             f"{t[k]['mixed']} mixed, {t[k]['fail']} FAIL" for k in names if t[k]["total"]]
    lines.append(f"foregone (not counted): {t['foregone']}")
    lines += [f"  [{c['kind']}: {_claims.verdict(c)}] {c['claim']}: {c['numbers']}"
              for c in claims]
    return lines
