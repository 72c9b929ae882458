"""The paper's experiments, reproducible from named configurations.

Run one from the command line (results and figures go to ``results/``)::

    python -m rproxjax.experiments spca-mnist-r10
    python -m rproxjax.experiments --list
    python -m rproxjax.experiments all --size tiny --out /tmp/results

or from Python::

    from rproxjax import experiments
    result = experiments.run("spca-mnist-r10")          # resumes from results/*.json
    experiments.plot(result, "results")                  # the PNG figures

Each run writes ``<out>/<name>.json`` (every curve and number, the configuration, the
machine, the JAX version and the date) after every finished unit, so an interrupted run
resumes where it stopped. ``summary.claims`` in the file lists the paper's claims (quoted)
and, apart, the project's own checks, each checked on every reported seed with the count
that pass and its numbers (:mod:`rproxjax.experiments._claims`).

Configurations (see :data:`CONFIGS`): ``spca-{mnist,fashion}-r{10,15}`` (Figures 1-3 and
Table best_eta), ``peers-{mnist,fashion}`` (Table added_exp: against SPAMS and
scikit-learn), ``rmc-video`` (the robust matrix completion figure). Fashion-MNIST stands in
for the paper's COIL-100 and the shipped surveillance video for its "Hall"/"Airport" videos.

The experiments need float64 (as the paper's MATLAB code) for every configuration at its
paper size: the command line enables ``jax_enable_x64``; from Python, enable it first. The
SPAMS and scikit-learn comparisons need ``pip install -e ".[experiments]"``.
"""

from __future__ import annotations

from rproxjax.experiments._configs import (
    CONFIGS,
    PAPER_ETAS,
    PeersConfig,
    RMCConfig,
    SPCAConfig,
    get_config,
)
from rproxjax.experiments._plots import plot
from rproxjax.experiments._store import load

__all__ = [
    "CONFIGS",
    "PAPER_ETAS",
    "PeersConfig",
    "RMCConfig",
    "SPCAConfig",
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
        from rproxjax.experiments import _spca as module
    elif cfg.kind == "peers":
        from rproxjax.experiments import _peers_table as module
    else:
        from rproxjax.experiments import _rmc as module
    return module.run(name, cfg, out_dir, force=force, progress=progress)
