"""Benchmark: what ``sparse_pca(nonzeros=k)``'s regularization path costs and reaches.

Run from the repository root (about 2 minutes on 2 CPU cores)::

    python benchmarks/path_rounds.py                  # results/path_rounds_after.{md,json}
    PYTHONPATH=/path/to/other/checkout python benchmarks/path_rounds.py --label before

For MNIST and Fashion-MNIST (2,000 rows each, ``seed=0``, float32: the README's quickstart
data) and r = 10, every target k in ``TARGETS`` runs ``rproxjax.sparse_pca(data, 10,
nonzeros=k)`` with its defaults (R-ProxSPB, 10 passes, the refit). Per target: the path's
rounds (one compiled ``vmap`` call each: the grid of 12 values of mu, then refinements of 8),
the wall time of the call once its programs are compiled (the smaller of two calls), the
result's nonzeros, adjusted variance and where its pattern came from. With a ``before``
table saved (the same script run on another checkout), the ``after`` table adds its rounds
and the change in adjusted variance.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import jax

import rproxjax
from rproxjax._tasks.spca import PATH_FRACTIONS, REFINE_POINTS

jax.config.update("jax_enable_x64", False)  # the quickstart's float32

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.path_rounds`
    from benchmarks import _timing

GRID, REFINE = len(PATH_FRACTIONS), REFINE_POINTS  # values of mu: the first round, each later
TARGETS = (30, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1200, 1600, 2500, 3000)


def library() -> str:
    """The measured library's checkout: its commit, and whether rproxjax/ had changes."""
    where = Path(rproxjax.__file__).resolve().parent
    try:
        def git(*a):
            return subprocess.run(["git", "-C", str(where), *a], capture_output=True,
                                  text=True, check=True).stdout.strip()
        dirty = git("status", "--porcelain", "--", ".")
        return git("rev-parse", "HEAD") + (" + uncommitted changes" if dirty else " (clean)")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def measure(name: str) -> list[dict]:
    load = {"mnist": rproxjax.datasets.load_mnist,
            "fashion": rproxjax.datasets.load_fashion_mnist}[name]
    data = load(n=2000, seed=0)
    rproxjax.sparse_pca(data, 10, nonzeros=200)  # compiles the path's program
    rows = []
    for k in TARGETS:
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            res = rproxjax.sparse_pca(data, 10, nonzeros=k)
            jax.block_until_ready(res.components)
            times.append(time.perf_counter() - t0)
        values = int(res.path.mu.shape[0])
        rows.append(dict(data=name, target=k, rounds=1 + (values - GRID) // REFINE,
                         values=values, seconds=min(times), nonzeros=int(res.nonzeros),
                         adjusted_variance=float(res.adjusted_variance),
                         support=res.settings["support"]))
        print(rows[-1], flush=True)
    return rows


def render(rows: list[dict], before: list[dict] | None, label: str) -> str:
    old = {(r["data"], r["target"]): r for r in before or []}
    headers = ["data", "target k", "rounds", "values of mu", "compiled call (s)",
               "nonzeros", "adjusted variance", "pattern"]
    if old:
        headers += ["rounds before", "call before (s)", "adjusted variance - before"]
    table = []
    for r in rows:
        row = [r["data"], r["target"], r["rounds"], r["values"], f"{r['seconds']:.2f}",
               r["nonzeros"], f"{r['adjusted_variance']:.4f}", r["support"]]
        b = old.get((r["data"], r["target"]))
        if old:
            row += ["", "", ""] if b is None else [
                b["rounds"], f"{b['seconds']:.2f}",
                f"{r['adjusted_variance'] - b['adjusted_variance']:+.4f}"]
        table.append(row)
    lines = [f"## The path of `sparse_pca(data, 10, nonzeros=k)` ({label})", "",
             f"rproxjax {rproxjax.__version__}, commit {library()}.", "",
             _timing.markdown_table(headers, table), ""]
    for name in sorted({r["data"] for r in rows}):
        mine = [r for r in rows if r["data"] == name]
        text = (f"{name}: {sum(r['rounds'] for r in mine)} rounds, "
                f"{sum(r['seconds'] for r in mine):.1f} s for the {len(mine)} targets")
        theirs = [old[(name, r["target"])] for r in mine if (name, r["target"]) in old]
        if theirs:
            text += (f" (before: {sum(r['rounds'] for r in theirs)} rounds, "
                     f"{sum(r['seconds'] for r in theirs):.1f} s)")
        lines.append(f"- {text}.")
    lines += ["", "Protocol: the script's docstring. 'pattern': run (the path's run nearest "
              "k, refitted), cut (a denser run cut to its k largest entries, refitted) or "
              "start (the principal directions cut)."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--data", nargs="+", default=["mnist", "fashion"])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    rows = [row for name in args.data for row in measure(name)]
    before_path = _timing.RESULTS_DIR / "path_rounds_before.json"
    before = None
    if args.label != "before" and before_path.exists():
        before = json.loads(before_path.read_text())["results"]["rows"]
    markdown = render(rows, before, args.label)
    print(markdown)
    if not args.no_save:
        _timing.save_results(f"path_rounds_{args.label}", {"rows": rows}, markdown)


if __name__ == "__main__":
    main()
