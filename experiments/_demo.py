"""The demonstration's record: ``<out>/demo.json`` and the README's table made from it.

``python -m rproxjax`` (:mod:`rproxjax._demo`) runs and prints the demonstration; this
module runs it at the README's settings and writes the file the README's table is
generated from (``python -m experiments --demo``, then ``--report --readme README.md``)::

    from experiments import _demo
    path = _demo.record("results")          # results/demo.json
    lines = _demo.table(json.loads(path.read_text()))
"""

from __future__ import annotations

import json
import pathlib

from experiments._store import machine, to_json

#: The summary fields :func:`save` writes (the curves and the point stay out).
FIELDS = ("loss", "explained_variance", "nonzeros", "run_time", "wall_time", "ifo_over_n",
          "feasibility")


def record(out_dir="results", *, n=20000, r=10, mu=0.2, budget=4.0, q=100, batch_size=100,
           seed=0) -> pathlib.Path:
    """Runs the demonstration with its default methods (:func:`rproxjax._demo.run`, no
    figures) and saves its table, settings and provenance to ``<out_dir>/demo.json``.

    Args:
      out_dir: the results folder.
      n, r, mu, budget, q, batch_size, seed: the demonstration's settings (its defaults
        are the README's).

    Returns:
      The path written.

    Raises:
      ValueError: settings the demonstration refuses (:func:`rproxjax._demo.run`).
    """
    from rproxjax import _demo

    run = {"n": n, "r": r, "mu": mu, "budget": budget, "q": q, "batch_size": batch_size,
           "seed": seed}
    results = _demo.run(**run, plot=False)
    return save(results, settings(results, **run), pathlib.Path(out_dir) / "demo.json")


def settings(results, *, n, r, mu, budget, q, batch_size, seed) -> dict:
    """The settings a demonstration ran with, as :func:`save` records them: those given,
    the data's dimension and dtype (read from ``results``) and the methods' step sizes
    (:data:`rproxjax._demo.STEPS`)."""
    from rproxjax import _demo

    point = next(iter(results.values()))["params"]
    return {"n": n, "d": point.shape[0], "r": r, "mu": mu, "budget": budget, "q": q,
            "batch_size": batch_size, "seed": seed, "dtype": str(point.dtype),
            "steps": {name: dict(steps) for name, steps in _demo.STEPS.items()}}


def save(results, settings, path) -> pathlib.Path:
    """Writes ``{"kind": "demo", "settings", "machine", "results"}`` to ``path`` (JSON):
    the summary of each method (:data:`FIELDS`), the run's settings, and where it was
    computed (version, git commit and clean tree, JAX, machine, solver defaults).

    Args:
      results: ``{method: summary}`` as :func:`rproxjax._demo.run` returns it.
      settings: the run's settings (JSON values).
      path: the file to write (its folder is made).

    Returns:
      ``path``, as a :class:`pathlib.Path`.
    """
    doc = {"kind": "demo", "settings": settings, "machine": machine(),
           "results": {name: {k: s[k] for k in FIELDS} for name, s in results.items()}}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(doc), indent=1) + "\n")
    print(f"saved {path}")
    return path


def replay(doc: dict, method: str) -> dict:
    """Reruns one method of a recorded demonstration (a file :func:`save` wrote) with the
    present library: :func:`rproxjax._demo.run` at the recorded settings, with that method
    alone and JAX's float64 switch as it was recorded (the demonstration runs in float32).

    Args:
      doc: the record (``results/demo.json`` read as JSON).
      method: one of its methods (``"R-ProxSPB"``, ``"R-ProxSGD"``, ``"R-Subgrad"``).

    Returns:
      The method's summary as :func:`save` records it (:data:`FIELDS`), for comparison with
      ``doc["results"][method]``: the same numbers where the library still computes what it
      computed then (the times differ).

    Raises:
      KeyError: ``method`` is not in the record.
      ValueError: the record is not a demonstration's, or its steps are no longer the
        demonstration's (:data:`rproxjax._demo.STEPS`): the record is then stale, whatever
        the replay gives.
    """
    import jax

    import rproxjax
    from rproxjax import _demo

    if doc.get("kind") != "demo":
        raise ValueError("not a demonstration's record (kind 'demo').")
    if method not in doc["results"]:
        raise KeyError(f"{method!r} is not a method of the record: {sorted(doc['results'])}.")
    st = doc["settings"]
    if st["steps"] != {name: dict(steps) for name, steps in _demo.STEPS.items()}:
        raise ValueError(f"the record's steps {st['steps']} are no longer the "
                         f"demonstration's {dict(_demo.STEPS)}: rerun it.")
    run = {k: st[k] for k in ("n", "r", "mu", "budget", "q", "batch_size", "seed")}
    with jax.enable_x64(bool(doc["machine"]["x64"])):
        methods = {method: _demo._methods(rproxjax.l1(st["mu"]), st["q"])[method]}
        results = _demo.run(**run, plot=False, methods=methods)
    return {k: results[method][k] for k in FIELDS}


def _device(text: str) -> str:
    """``platform: kind`` as recorded, once where the two agree (``cpu: cpu``)."""
    platform, _, kind = text.partition(": ")
    return platform if kind in ("", platform) else text


def table(doc: dict) -> list[str]:
    """The demonstration's Markdown table (a line of settings and provenance, then one row
    per method) from a file :func:`save` wrote: the README's, regenerated by
    ``python -m experiments --report --readme README.md``."""
    st, m = doc["settings"], doc["machine"]
    commit = (m.get("commit") or "no git checkout")[:10]
    steps = "; ".join(f"{name} " + ", ".join(f"{k} = {v:g}" for k, v in s.items())
                      for name, s in st["steps"].items())
    lines = [f"MNIST, n = {st['n']:,}, r = {st['r']}, mu = {st['mu']:g}, budget "
             f"{st['budget']:g} IFO/n, |S| = {st['batch_size']}, q = {st['q']}, {st['dtype']}; "
             f"steps: {steps}. Computed {m['date'][:10]} by rproxjax {m['rproxjax']} (commit "
             f"{commit}{'' if m.get('tree_clean') in (True, None) else ', uncommitted changes'}"
             f") on {m['cpu_count']} CPU cores ({_device(m['device'])}), JAX {m['jax']}.", "",
             "| method | loss F | explained variance | nonzeros | time (s) | IFO/n | "
             "\\|X^T X - I\\| |", "|---|---|---|---|---|---|---|"]
    for name, s in doc["results"].items():
        lines.append(f"| {name} | {s['loss']:.4f} | {s['explained_variance']:.4f} | "
                     f"{s['nonzeros']} | {s['run_time']:.2f} | {s['ifo_over_n']:.2f} | "
                     f"{s['feasibility']:.1e} |")
    return lines
