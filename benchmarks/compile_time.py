"""Benchmark: where a first result's wall time goes (compilation against running).

Run from the repository root (about 2-3 minutes on 2 CPU cores)::

    python benchmarks/compile_time.py            # tables, saved to benchmarks/results/
    python benchmarks/compile_time.py --no-save
    PYTHONPATH=/path/to/other/checkout python benchmarks/compile_time.py --label before

Each scenario runs in a fresh subprocess (``--scenario``), so that none sees another's
compilations:

* ``quickstart``: the README's quickstart, ``rproxjax.sparse_pca(load_mnist(n=2000), 10,
  nonzeros=200)`` (a path over mu, one ``vmap`` program; loading the data is not timed),
  then in the same process a compiled ``nonzeros=300`` call, a first single-mu call (the
  default mu: it compiles the one-lane run) and a compiled one (half that mu).
* ``sklearn``: the ratios' reference, scikit-learn's ``MiniBatchSparsePCA(10, alpha=1,
  random_state=0).fit`` on the same 2,000 digits, first and second call (import and data
  loading not timed).
* ``first_fit``: a first fit on a NumPy matrix, as a new user writes it: 2,000 x 100
  Gaussian data (float32), X0 from a QR factor, ``rproxjax.fit`` of R-ProxSGD
  (``r_prox_sgd(0.5, 1.0, l1(0.1))``) and then of R-ProxSPB (q = 10) for r = 5, b = 50,
  3 epochs; then both again with new values of mu and the step sizes (compiles nothing).
* ``first_fit_steps``: the same first fits with ``num_steps=100`` (epochs of 40 steps, the
  last one partial), in a process of their own.
* ``demo``: the main demonstration, ``python -m rproxjax --quick --no-plot --no-cache``
  (run in this process with ``runpy``): R-ProxSPB, R-ProxSGD and R-Subgrad on 5,000 MNIST
  digits at 4 IFO/n, without its figures.
* ``loop``: ``rproxjax.fit`` of R-ProxSGD (r = 10, |S| = 100, 1 epoch over 5,000 MNIST
  digits) for mu in (0.1, 0.2, 0.4), one call per value.
* ``*_cached``: ``quickstart``, ``first_fit`` and ``demo`` in a second process with JAX's persistent
  compilation cache (``jax_compilation_cache_dir``, every program cached): a first process
  fills a fresh cache folder, and the second one, which is measured, loads from it. This
  is what a second ``python -m rproxjax`` does (the command turns the cache on).

A second table states the goals of a first answer as ratios to scikit-learn's first call
in the same run (machines differ about 2.6x in absolute seconds), each the median of
``REPEATS`` (3) fresh processes of its scenario over the median reference, with the range
of the ratios: the quickstart's first
call <= 3x, its compiled ``nonzeros=`` call <= 1.5x, a compiled single-mu call <= 1x, the
quickstart's first call in a second process with the cache on <= 1.5x.

For each it reports the wall time, the XLA compilation time (the sum of JAX's
``/jax/core/compile/backend_compile_duration`` events, and their count; a program loaded
from the persistent cache still counts one, of the load's duration), the tracing and lowering time
(``jaxpr_trace_duration`` + ``jaxpr_to_mlir_module_duration``) and the rest (running,
data loading, Python). Run it with ``PYTHONPATH`` pointing at another checkout to measure
that version, with ``--label`` naming the results file (``results/compile_time_<label>.md``,
for a comparison; the committed table, ``results/compile_time.md``, is this version's).
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", False)  # the demonstration's float32 default

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.compile_time`
    from benchmarks import _timing

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
"""Fresh processes of the ratios' scenarios (the quickstart, scikit-learn's reference, the
cached quickstart): one process's times vary by up to 2x on a shared 2-core machine."""

EVENTS = {
    "/jax/core/compile/backend_compile_duration": "compile",
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
}


class Recorder:
    """Sums JAX's compile-time events while it is registered."""

    def __init__(self):
        self.seconds = {v: 0.0 for v in EVENTS.values()}
        self.compilations = 0

    def __call__(self, event, duration, **kwargs):
        name = EVENTS.get(event)
        if name is not None:
            self.seconds[name] += duration
            self.compilations += name == "compile"


def _measure(fn):
    rec = Recorder()
    jax.monitoring.register_event_duration_secs_listener(rec)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    jax.monitoring.unregister_event_duration_listener(rec)
    return {"wall_s": wall, "compile_s": rec.seconds["compile"], "compilations": rec.compilations,
            "trace_lower_s": rec.seconds["trace"] + rec.seconds["lower"],
            "rest_s": wall - rec.seconds["compile"] - rec.seconds["trace"] - rec.seconds["lower"]}


def _demo():
    """``python -m rproxjax --quick --no-plot`` in this process (its compilations are
    recorded; the cache, where a scenario wants it, is set up by :func:`main`)."""
    import rproxjax._demo

    argv = sys.argv  # --no-cache: the scenario decides; versions before the flag had no cache
    flag = ["--no-cache"] if "--no-cache" in Path(rproxjax._demo.__file__).read_text() else []
    sys.argv = ["python -m rproxjax", "--quick", "--no-plot", *flag]
    try:
        runpy.run_module("rproxjax", run_name="__main__", alter_sys=True)
    finally:
        sys.argv = argv


def scenario_demo() -> dict:
    return {"total": _measure(_demo)}


def scenario_quickstart() -> dict:
    """The quickstart's first call, then in the same process a compiled ``nonzeros=`` call
    (another target, same shape), a first single-mu call (it compiles the one-lane run) and
    a compiled one (another mu)."""
    import rproxjax

    data = rproxjax.datasets.load_mnist(n=2000)

    last = []

    def call(**kw):
        def once():
            last[:] = [rproxjax.sparse_pca(data, 10, **kw)]
            jax.block_until_ready(last[0].loadings)
        return _measure(once)

    out = {"sparse_pca(nonzeros=200)": call(nonzeros=200)}
    out["sparse_pca(nonzeros=300), compiled"] = call(nonzeros=300)
    out["sparse_pca() single mu, first"] = call()
    out["sparse_pca(mu=half the default) single mu, compiled"] = call(
        mu=float(last[0].mu) / 2)
    return out


def scenario_sklearn() -> dict:
    """The reference of the ratios: scikit-learn's ``MiniBatchSparsePCA(10, alpha=1)
    .fit`` on the quickstart's data (import and data loading not timed), its first call
    in a fresh process and a second one."""
    import numpy as np
    from sklearn.decomposition import MiniBatchSparsePCA

    import rproxjax

    data = np.asarray(rproxjax.datasets.load_mnist(n=2000))
    return {f"MiniBatchSparsePCA(10, alpha=1).fit, {label}": _measure(
        lambda: MiniBatchSparsePCA(10, alpha=1, random_state=0).fit(data))
        for label in ("first", "second")}


def scenario_first_fit() -> dict:
    import numpy as np

    import rproxjax

    rng = np.random.default_rng(0)
    data = rng.standard_normal((2000, 100)).astype(np.float32)
    x0 = np.linalg.qr(rng.standard_normal((100, 5)))[0].astype(np.float32)
    key = jax.random.key(0)
    out = {}
    for label, (mu, eta, gamma) in (("first", (0.1, 0.5, 1.0)), ("new values", (0.2, 0.3, 0.7))):
        makers = (("R-ProxSGD", lambda e=eta, g=gamma, m=mu: rproxjax.r_prox_sgd(
                       e, g, rproxjax.l1(m))),
                  ("R-ProxSPB", lambda e=eta, g=gamma, m=mu: rproxjax.r_prox_spb(
                       e, g, rproxjax.l1(m), q=10)))
        for name, make in makers:
            out[f"{name}, {label}"] = _measure(lambda make=make: jax.block_until_ready(
                rproxjax.fit(make(), rproxjax.problems.spca_loss, x0, data, key=key,
                             batch_size=50, num_epochs=3).params))
    return out


def scenario_first_fit_steps() -> dict:
    """``first_fit``'s data and optimizers with ``num_steps=100`` instead of 3 epochs: epochs
    of 40 steps, the last one partial (20 steps)."""
    import numpy as np

    import rproxjax

    rng = np.random.default_rng(0)
    data = rng.standard_normal((2000, 100)).astype(np.float32)
    x0 = np.linalg.qr(rng.standard_normal((100, 5)))[0].astype(np.float32)
    key = jax.random.key(0)
    makers = (("R-ProxSGD", lambda: rproxjax.r_prox_sgd(0.5, 1.0, rproxjax.l1(0.1))),
              ("R-ProxSPB", lambda: rproxjax.r_prox_spb(0.5, 1.0, rproxjax.l1(0.1), q=10)))
    return {f"{name}, first": _measure(lambda make=make: jax.block_until_ready(
        rproxjax.fit(make(), rproxjax.problems.spca_loss, x0, data, key=key, batch_size=50,
                     num_steps=100).params)) for name, make in makers}


def scenario_loop() -> dict:
    import rproxjax
    from rproxjax import datasets, problems

    data = jax.numpy.asarray(datasets.load_mnist(5000, seed=0))
    x0 = rproxjax.stiefel.random_point(jax.random.key(0), data.shape[1], 10, data.dtype)
    calls = {}

    def loop():
        for mu in (0.1, 0.2, 0.4):
            opt = rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 0.1, rproxjax.l1(mu))
            calls[f"mu={mu}"] = _measure(lambda opt=opt: jax.block_until_ready(rproxjax.fit(
                opt, problems.spca_loss, x0, data, key=jax.random.key(1), batch_size=100,
                num_epochs=1).params))

    out = {"total": _measure(loop)}
    out.update(calls)
    return out


def _rows(name, result):
    return [(name, part, f"{r['wall_s']:.2f}", f"{r['compile_s']:.2f}", str(r["compilations"]),
             f"{r['trace_lower_s']:.2f}", f"{r['rest_s']:.2f}") for part, r in result.items()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scenario", choices=tuple(SCENARIOS))
    parser.add_argument("--cache", help="a persistent compilation cache folder (scenarios)")
    parser.add_argument("--label", default="", help="a label for this version (e.g. before)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    if args.scenario:  # one scenario in this process: print JSON for the parent
        if args.cache:  # this benchmark's own process: it may configure JAX
            jax.config.update("jax_compilation_cache_dir", args.cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        print(json.dumps(SCENARIOS[args.scenario]()))
        return
    machine = _timing.machine_info()
    results = {}

    def run(name, *extra):
        proc = subprocess.run([sys.executable, __file__, "--scenario", name, *extra],
                              check=True, capture_output=True, text=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def cached(name):
        with tempfile.TemporaryDirectory() as cache:
            run(name, "--cache", cache)  # fills the cache
            return run(name, "--cache", cache)

    for name in SCENARIOS:
        results[name] = run(name)
    for name in ("quickstart", "first_fit", "demo"):
        results[f"{name}_cached"] = cached(name)
    # the ratios' scenarios again, each in fresh processes: the ratios are medians
    repeats = {name: [results[name]] + [run(name) for _ in range(REPEATS - 1)]
               for name in ("quickstart", "sklearn")}
    repeats["quickstart_cached"] = [results["quickstart_cached"]] + [
        cached("quickstart") for _ in range(REPEATS - 1)]
    import rproxjax

    title = (f"## Wall time: compilation against running ({args.label or 'this version'}, "
             f"rproxjax {rproxjax.__version__} from {Path(rproxjax.__file__).parent})")
    print(f"\n{title}\n")
    headers = ("scenario", "part", "wall s", "XLA compile s", "compilations",
               "trace + lower s", "rest s")
    rows = [row for name, res in results.items() for row in _rows(name, res)]
    table = _timing.print_table(headers, rows)
    ratios = _ratios(repeats)
    ratio_table = _timing.print_table(("goal", "measured (s)", "reference (s)", "ratio",
                                       "ratio range", "target", "met"), ratios)
    table += ("\n\n## Ratios to scikit-learn's first `MiniBatchSparsePCA(10, alpha=1).fit` "
              f"on the same data, in this run (medians of {REPEATS} fresh processes each)\n\n"
              + ratio_table)
    if not args.no_save:
        stem = "compile_time" + (f"_{args.label}" if args.label else "")
        out = ROOT / "benchmarks" / "results"
        (out / f"{stem}.json").write_text(json.dumps(
            {"machine": machine, "label": args.label, "results": results,
             "repeats": repeats}, indent=1))
        (out / f"{stem}.md").write_text(f"{title}\n\n{table}\n\nmachine: {machine}\n")


def _ratios(repeats) -> list[tuple]:
    """The issue's goals as ratios to scikit-learn's first call (same data, same run): the
    median of each time over its fresh processes, and the range of the ratios, each time
    over the median reference."""
    def times(name, part):
        return [r[part]["wall_s"] for r in repeats[name]]

    ref = float(statistics.median(times("sklearn", "MiniBatchSparsePCA(10, alpha=1).fit, first")))
    goals = (("quickstart first call", "quickstart", "sparse_pca(nonzeros=200)", 3.0),
             ("compiled nonzeros= call", "quickstart", "sparse_pca(nonzeros=300), compiled",
              1.5),
             ("compiled single-mu call", "quickstart",
              "sparse_pca(mu=half the default) single mu, compiled", 1.0),
             ("second process, cache on", "quickstart_cached", "sparse_pca(nonzeros=200)",
              1.5))
    rows = []
    for goal, name, part, target in goals:
        t = times(name, part)
        mid = float(statistics.median(t))
        rows.append((goal, f"{mid:.2f}", f"{ref:.2f}", f"{mid / ref:.2f}",
                     f"{min(t) / ref:.2f}-{max(t) / ref:.2f}", f"<= {target:g}",
                     "yes" if mid / ref <= target else "no"))
    return rows


SCENARIOS = {"quickstart": scenario_quickstart, "sklearn": scenario_sklearn,
             "first_fit": scenario_first_fit, "first_fit_steps": scenario_first_fit_steps,
             "demo": scenario_demo, "loop": scenario_loop}


if __name__ == "__main__":
    main()
