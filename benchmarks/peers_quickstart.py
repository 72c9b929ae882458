"""Benchmark: ``rproxjax.sparse_pca`` with its defaults against SPAMS and scikit-learn at
matched nonzeros, on the shipped data, in one run.

Run from the repository root (about 10-15 minutes on 2 CPU cores; ``--quick``: 2-3)::

    python benchmarks/peers_quickstart.py [--quick] [--no-save] [--full DATA_DIR] [--r R ...]
        [--peers-from FILE]

What a user gets from each library when asking for sparse loadings with a given number of
nonzeros. Protocol:

* Data: ``rproxjax.datasets.load_mnist(n=20000, seed=0)`` and
  ``load_fashion_mnist(n=10000, seed=0)``, float64, centred by the loaders (the peers expect
  centred data; ``sparse_pca`` centres again, a no-op); d = 784, r = 10 components.
  ``--quick``: MNIST only, n = 5,000.
* Budget: 10 passes over the data for the peers (``budget_ifo = 10 n``); ``sparse_pca``
  at its defaults: its path's runs take 10 passes up to about 2,000 rows and 450
  minibatches' worth above (3.2 passes at n = 20,000, 2 at 70,000; the table's heading
  says), its single fit 10 passes. scikit-learn's ``MiniBatchSparsePCA``
  cannot keep it: its randomized-SVD initialisation and final Lasso readout alone cost 17 n,
  so it runs its minimum of one mini-batch pass (18 n in all; "over budget" in the notes).
* Targets: 100, 300, 1,000, 3,000 total nonzeros of d r = 7,840 (very sparse to dense;
  ``--quick``: 100 and 1,000). Every count, for every method, is
  ``experiments._peers.loadings_metrics`` (``nonzeros_normalized``: entries above
  1e-3 of the column-normalised loadings); every variance is its ``adjusted_variance``
  (Zou-Hastie-Tibshirani: sum of R_jj^2 / ||A||_F^2 with A^T X_n = Q R, X_n the
  column-normalised loadings, A = data^T), so all numbers are computed the same way.
* rproxjax: ``sparse_pca(data, 10, nonzeros=k)`` with every other setting at its default
  (R-ProxSPB; it runs its own regularization path over mu as vmapped programs, then refits
  the best of several zero patterns with at most k nonzeros: the run nearest k with at most
  k, denser runs and the principal directions cut to their k largest entries; the notes
  say which won). Timed on the first call, after ``jax.clear_caches()`` and clearing the
  task's program cache, so that it includes every compilation a fresh process would pay,
  and on a second call with the same shapes (compiled). Then a single fit
  ``sparse_pca(data, 10, mu=m)`` at the mu m of the run nearest k on the model's own path
  (``sparse_pca(data, 10, nonzeros=k, refit=False)``, which refines until a count is
  within 2% of k: what a user who knew mu would run), first call (it compiles the
  one-lane program) and second call (compiled), and the same fit with ``refit=False``
  (compiled): the model's point before the refit. XLA uses both cores.
* Peers (``run_spams``: ``spams.trainDL`` in sparse PCA mode, ``gamma1`` the penalty,
  ``lambda2 = 0.1``, batch 100; ``run_sklearn``: ``MiniBatchSparsePCA``, ``alpha`` the
  penalty, batch 100 features, ``method="lars"``; both seed 0 and one BLAS thread, as
  ``experiments._peers`` calls them): the penalty is swept over the peer's grid
  (``SPAMS_GAMMA1_GRID``; ``SKLEARN_ALPHA_GRID_N20000`` times ``sqrt(n / 20000)``), widened
  (up to 3 times, x2 or /4) if the grid does not bracket the target, then bisected
  geometrically between the largest penalty with more nonzeros than the target and the
  next larger one with fewer, for up to 5 steps (``--quick``: 2), stopping once a count is
  within 2% of the target (the tolerance ``sparse_pca``'s path uses); the run nearest the
  target wins (ties: the larger penalty). Each target's bracketing and bisection start from
  the grid alone. A run that raises is recorded and skipped. The reported "first call" is the
  matched run's own fit time during the search; "second call" is one rerun at the matched
  penalty after the searches (what a user who knew the penalty would pay). "search" is the
  whole grid sweep plus that target's widening and bisection fits, outer wall time (data
  preparation included). With ``--peers-from FILE`` (an earlier results file of the same
  data) each peer runs once at the penalty it matched there, and its search time and fits
  are that file's (marked in the notes): rproxjax's rows are rerun in full.
* Wall times are ``time.perf_counter`` seconds: the peers' fit call only (as ``run_*``
  measures it), ``sparse_pca`` whole (centring, scales, warm start, runs, metrics), synced.
* Verdict per target: rproxjax's adjusted variance (the ``nonzeros=k`` result) minus the best
  peer's at its matched nonzeros; two time ratios: reaching the target (rproxjax's compiled
  ``nonzeros=k`` call over the fastest peer's search for its penalty), and a fit at a known
  penalty (rproxjax's compiled single fit over the fastest peer's single fit, second calls).

Only Markdown is written, ``benchmarks/results/peers_quickstart.md`` (overwritten; a machine
header, a PCA reference per dataset, one table per dataset and the verdicts).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

# the repository root, for the lab's peers (experiments/, which the wheel does not ship)
sys.path.append(str(Path(__file__).resolve().parents[1]))

import rproxjax  # noqa: E402
from experiments._peers import (  # noqa: E402
    SKLEARN_ALPHA_GRID_N20000,
    SPAMS_GAMMA1_GRID,
    loadings_metrics,
    run_sklearn,
    run_spams,
)
from rproxjax._tasks import spca as _spca  # noqa: E402  (to clear its program cache)

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.peers_quickstart`
    from benchmarks import _timing

NAME = "peers_quickstart"
R = 10
PASSES = 10
RTOL = 0.02
WIDEN = 3


def _load(name, n, data_dir=None):
    """The first ``n`` rows (shuffled with seed 0) of the shipped set, or with ``data_dir``
    all 70,000 images of ``<data_dir>/{mnist,fashion_mnist}70k.npz`` (uint8 pixels), scaled
    to [0, 1] and centred as the loaders do."""
    if data_dir is not None:
        stem = {"MNIST": "mnist", "Fashion-MNIST": "fashion_mnist"}[name]
        x = np.load(Path(data_dir) / f"{stem}70k.npz")["X"].astype(np.float64) / 255.0
        return np.ascontiguousarray(x - x.mean(axis=0))
    loader = {"MNIST": rproxjax.datasets.load_mnist,
              "Fashion-MNIST": rproxjax.datasets.load_fashion_mnist}[name]
    return np.ascontiguousarray(loader(n, seed=0, dtype=np.float64))


def span_variance(x, data) -> float:
    """The fraction of the variance of ``data`` in the span of the columns of ``x`` (the
    projection's, which counts correlated columns' shared variance once; at most the
    adjusted variance's ceiling for orthonormal columns, and above the adjusted variance
    where columns correlate)."""
    q = np.linalg.qr(np.asarray(x, np.float64))[0]
    return float(np.sum((data @ q) ** 2) / np.sum(data ** 2))


def _pca_reference(data, r):
    """Adjusted variance of the top-r principal directions (dense; the ceiling)."""
    cov = data.T @ data
    _, vecs = np.linalg.eigh(cov)
    m = loadings_metrics(vecs[:, ::-1][:, :r], data)
    return m["adjusted_variance"], m["nonzeros_normalized"]


# ------------------------------------------------------------------------ peers


def earlier_penalties(path) -> dict:
    """{(dataset, n, r): {peer: {target: (penalty, search s, fits)}}} read off an earlier
    results file of this script (its tables' peer rows)."""
    found, block = {}, None
    for line in Path(path).read_text().splitlines():
        head = re.match(r"## (.+), n = (\d+), d = \d+, r = (\d+)", line)
        if head:
            block = found.setdefault((head[1], int(head[2]), int(head[3])), {})
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if block is None or len(cells) < 9 or cells[1] not in ("SPAMS", "MiniBatchSparsePCA"):
            continue
        penalty = re.fullmatch(r"(?:gamma1|alpha)=(\S+)", cells[2])
        fits = re.search(r"(\d+) fits", cells[-1])  # the last columns: search (s), notes
        if penalty:
            block.setdefault(cells[1], {})[int(cells[0])] = (
                float(penalty[1]), float(cells[-2]), int(fits[1]) if fits else 0)
    return found



class Peer:
    """One peer's runs on one dataset: penalty -> record (summary or error, outer time)."""

    def __init__(self, name, runner, grid, data, r=R):
        self.name, self.runner, self.grid, self.data, self.r = name, runner, tuple(grid), data, r
        self.n = data.shape[0]

    def fit(self, penalty):
        tic = time.perf_counter()
        try:
            summary, x = self.runner(self.data, r=self.r, penalty=float(penalty),
                                     budget_ifo=PASSES * self.n, seed=0)
            rec = {"penalty": float(penalty), "ok": True, "summary": summary,
                   "span": span_variance(x, self.data),
                   "nnz": summary["nonzeros_normalized"],
                   "adjusted": summary["adjusted_variance"], "fit_s": summary["wall_time"]}
        except Exception as exc:  # noqa: BLE001 - recorded, the search goes on
            rec = {"penalty": float(penalty), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        rec["outer_s"] = time.perf_counter() - tic
        state = (f"{rec['nnz']} nnz, adj {rec['adjusted']:.4f}, {rec['fit_s']:.2f} s"
                 if rec["ok"] else rec["error"])
        print(f"    {self.name} penalty {penalty:.4g}: {state}", flush=True)
        return rec

    def sweep(self):
        tic = time.perf_counter()
        self.grid_runs = [self.fit(p) for p in self.grid]
        self.grid_s = time.perf_counter() - tic

    def match(self, target, steps):
        """(best record, the records searched, search seconds) for ``target``."""
        runs = list(self.grid_runs)
        search = self.grid_s

        def add(p):
            nonlocal search
            rec = self.fit(p)
            runs.append(rec)
            search += rec["outer_s"]

        def close():
            return any(r["ok"] and abs(r["nnz"] - target) <= RTOL * target for r in runs)

        for _ in range(WIDEN):  # widen the grid until it brackets the target
            ok = [r for r in runs if r["ok"]]
            if not ok or close():
                break
            if all(r["nnz"] > target for r in ok):
                add(max(r["penalty"] for r in runs) * 2.0)
            elif all(r["nnz"] < target for r in ok):
                add(min(r["penalty"] for r in runs if r["penalty"] > 0) / 4.0)
            else:
                break
        for _ in range(steps):
            if close():
                break
            ok = [r for r in runs if r["ok"]]
            above = [r["penalty"] for r in ok if r["nnz"] > target]
            if not above:
                break
            lo = max(above)
            below = [r["penalty"] for r in ok if r["nnz"] < target and r["penalty"] > lo]
            if not below:
                break
            hi = min(below)
            mid = math.sqrt(lo * hi) if lo > 0 else hi / 4.0
            if any(math.isclose(mid, r["penalty"], rel_tol=1e-9) for r in runs):
                break
            add(mid)
        ok = [r for r in runs if r["ok"]]
        if not ok:
            return None, runs, search
        err = min(abs(r["nnz"] - target) for r in ok)
        best = max((r for r in ok if abs(r["nnz"] - target) == err), key=lambda r: r["penalty"])
        return best, runs, search


# --------------------------------------------------------------------- rproxjax


def _clear():
    jax.clear_caches()
    _spca._cached_program.cache_clear()  # the task's cache of jitted runs


def _timed(fn):
    tic = time.perf_counter()
    out = fn()
    jax.block_until_ready(out.loadings)
    return out, time.perf_counter() - tic


def run_rproxjax(data, target, r=R):
    _clear()
    before = _timing.compile_count()
    path, first = _timed(lambda: rproxjax.sparse_pca(data, r, nonzeros=target))
    compiles = _timing.compile_count()[0] - before[0]
    _, second = _timed(lambda: rproxjax.sparse_pca(data, r, nonzeros=target))
    m = loadings_metrics(np.asarray(path.loadings), data)
    mu, support = float(path.mu), path.settings["support"]
    print(f"    rproxjax nonzeros={target}: mu {mu:.4g} ({support}), {m['nonzeros_normalized']} "
          f"nnz, adj {m['adjusted_variance']:.4f}, first {first:.1f} s ({compiles} compiles), "
          f"second {second:.2f} s, {len(path.path.mu)} mus", flush=True)
    # the like-for-like single fit: the mu of the model's own path (refit=False refines
    # until a count is within 2% of the target; with the refit the path stops earlier, at a
    # denser run it cuts), refitted on its own
    mu = float(rproxjax.sparse_pca(data, r, nonzeros=target, refit=False).mu)
    single, s_first = _timed(lambda: rproxjax.sparse_pca(data, r, mu=mu))
    _, s_second = _timed(lambda: rproxjax.sparse_pca(data, r, mu=mu))
    ms = loadings_metrics(np.asarray(single.loadings), data)
    print(f"    rproxjax mu={mu:.4g}: {ms['nonzeros_normalized']} nnz, adj "
          f"{ms['adjusted_variance']:.4f}, first {s_first:.2f} s, second {s_second:.2f} s",
          flush=True)
    model, m_time = _timed(lambda: rproxjax.sparse_pca(data, r, mu=mu, refit=False))
    mm_ = loadings_metrics(np.asarray(model.loadings), data)
    print(f"    rproxjax mu={mu:.4g}, refit=False: {mm_['nonzeros_normalized']} nnz, adj "
          f"{mm_['adjusted_variance']:.4f}, {m_time:.2f} s", flush=True)
    return {
        "model": {"mu": mu, "nnz": mm_["nonzeros_normalized"],
                  "adjusted": mm_["adjusted_variance"], "second_s": m_time},
        "path": {"mu": float(path.mu), "support": support, "nnz": m["nonzeros_normalized"],
                 "adjusted": m["adjusted_variance"],
                 "span": span_variance(np.asarray(path.loadings), data),
                 "first_s": first, "second_s": second, "compiles_first": compiles,
                 "path_mus": len(path.path.mu), "passes": float(path.passes),
                 "zero_columns": m["zero_columns"]},
        "single": {"mu": mu, "nnz": ms["nonzeros_normalized"],
                   "adjusted": ms["adjusted_variance"], "first_s": s_first,
                   "second_s": s_second, "passes": float(single.passes)},
    }


# ------------------------------------------------------------------------ report


def _notes(summary, n):
    notes = []
    if summary.get("zero_columns"):
        notes.append(f"{summary['zero_columns']} zero columns")
    if summary.get("over_budget"):
        notes.append(f"over budget: {summary['ifo'] / n:.0f} n IFOs")
    return ", ".join(notes)


def dataset_block(name, n, data, targets, steps, r=R, earlier=None):
    """One dataset's rows. With ``earlier`` (:func:`earlier_penalties` of this dataset), each
    peer runs once at its matched penalty from that file instead of searching for it (its
    search time and fits are the file's)."""
    print(f"\n{name} (n = {n}): PCA reference", flush=True)
    pca_adj, pca_nnz = _pca_reference(data, r)
    sk_grid = tuple(a * math.sqrt(n / 20000) for a in SKLEARN_ALPHA_GRID_N20000)
    peers = [Peer("SPAMS", run_spams, SPAMS_GAMMA1_GRID, data, r),
             Peer("MiniBatchSparsePCA", run_sklearn, sk_grid, data, r)]
    for peer in peers:
        if earlier is None:
            print(f"  {peer.name}: grid sweep", flush=True)
            peer.sweep()
    results = []
    for target in targets:
        print(f"  target {target}", flush=True)
        row = {"target": target, "peers": {}}
        for peer in peers:
            if earlier is not None:
                penalty, search, fits = earlier[peer.name][target]
                best = peer.fit(penalty)
                row["peers"][peer.name] = {
                    "best": best if best["ok"] else None, "search_s": search, "fits": fits,
                    "failures": [] if best["ok"] else [best], "earlier": True}
                continue
            best, runs, search = peer.match(target, steps)
            row["peers"][peer.name] = {
                "best": best, "search_s": search, "fits": len(runs),
                "failures": [r for r in runs if not r["ok"]]}
        results.append(row)
    # reruns at the matched penalties, for the single-fit time
    for row in results:
        for peer in peers:
            rec = row["peers"][peer.name]
            if rec["best"] is not None:
                print(f"  {peer.name} rerun at target {row['target']}", flush=True)
                again = peer.fit(rec["best"]["penalty"])
                rec["rerun_s"] = again["fit_s"] if again["ok"] else float("nan")
    for row in results:
        print(f"  rproxjax, target {row['target']}", flush=True)
        row["rproxjax"] = run_rproxjax(data, row["target"], r)
    return {"dataset": name, "n": n, "r": r, "pca_adjusted": pca_adj,
            "pca_nonzeros": pca_nnz, "rows": results}


SUPPORT = {"run": "the run nearest k with at most k",
           "fill": "the run nearest k with at most k, filled from a denser run",
           "cut": "a denser run cut to k",
           "start": "the principal directions cut to k"}


def render(block):
    name, n = block["dataset"], block["n"]
    r = block.get("r", R)
    passes = sorted({f"{row['rproxjax']['path']['passes']:.3g}" for row in block["rows"]})
    lines = [f"## {name}, n = {n}, d = 784, r = {r}, {PASSES} passes (the peers' budget; "
             f"rproxjax's path runs: {', '.join(passes)} passes each, its default)",
             "",
             f"PCA (dense, top {r} eigenvectors): adjusted variance "
             f"{block['pca_adjusted']:.4f}, {block['pca_nonzeros']} nonzeros.",
             ""]
    headers = ["target", "method", "penalty", "nonzeros", "adj. variance", "span variance",
               "first call (s)", "second call (s)", "search (s)", "notes"]
    rows, verdicts = [], []
    for row in block["rows"]:
        k, rp = row["target"], row["rproxjax"]
        p, s = rp["path"], rp["single"]
        rows.append((k, "rproxjax `nonzeros=k` (path)", f"mu={p['mu']:.4g}", p["nnz"],
                     f"{p['adjusted']:.4f}", f"{p['span']:.4f}", f"{p['first_s']:.1f}",
                     f"{p['second_s']:.2f}",
                     f"{p['first_s']:.1f}",
                     f"{p['path_mus']} mus, {p['compiles_first']} XLA compiles in call 1; "
                     f"support: {SUPPORT[p['support']]}"))
        rows.append((k, "rproxjax `mu=` (single fit)", f"mu={s['mu']:.4g}", s["nnz"],
                     f"{s['adjusted']:.4f}", "", f"{s['first_s']:.2f}", f"{s['second_s']:.2f}",
                     "", "at the mu of the path's run nearest k (refit=False), default budget"))
        md = rp["model"]
        rows.append((k, "rproxjax `mu=`, `refit=False`", f"mu={md['mu']:.4g}", md["nnz"],
                     f"{md['adjusted']:.4f}", "", "", f"{md['second_s']:.2f}", "",
                     "the model's point, no refit"))
        best_var, fastest, quickest = None, None, None
        for pname, rec in row["peers"].items():
            b = rec["best"]
            fails = f"{len(rec['failures'])} failed fits" if rec["failures"] else ""
            if b is None:
                rows.append((k, pname, "", "", "", "", "", "", f"{rec['search_s']:.1f}",
                             f"all fits failed ({fails})"))
                continue
            label = "gamma1" if pname == "SPAMS" else "alpha"
            fits = (f"penalty and search ({rec['fits']} fits) from the earlier run"
                    if rec.get("earlier") else f"{rec['fits']} fits")
            notes = ", ".join(x for x in (_notes(b["summary"], n), fits, fails) if x)
            rows.append((k, pname, f"{label}={b['penalty']:.4g}", b["nnz"],
                         f"{b['adjusted']:.4f}", f"{b['span']:.4f}", f"{b['fit_s']:.2f}",
                         f"{rec['rerun_s']:.2f}",
                         f"{rec['search_s']:.1f}", notes))
            if best_var is None or b["adjusted"] > best_var[1]:
                best_var = (pname, b["adjusted"], b["nnz"])
            if np.isfinite(rec["rerun_s"]) and (fastest is None or rec["rerun_s"] < fastest[1]):
                fastest = (pname, rec["rerun_s"])
            if np.isfinite(rec["search_s"]) and (quickest is None
                                                  or rec["search_s"] < quickest[1]):
                quickest = (pname, rec["search_s"])
        if best_var is not None and fastest is not None:
            verdicts.append(
                f"- target {k}: rproxjax {p['adjusted']:.4f} ({p['nnz']} nnz) - best peer "
                f"{best_var[0]} {best_var[1]:.4f} ({best_var[2]} nnz) = "
                f"**{p['adjusted'] - best_var[1]:+.4f}**; to reach the target: rproxjax "
                f"`nonzeros=k` compiled {p['second_s']:.2f} s / fastest peer search "
                f"{quickest[0]} {quickest[1]:.1f} s = **{p['second_s'] / quickest[1]:.2f}x**; "
                f"at a known penalty: rproxjax single fit compiled {s['second_s']:.2f} s / "
                f"fastest peer single fit {fastest[0]} {fastest[1]:.2f} s = "
                f"**{s['second_s'] / fastest[1]:.2f}x**")
    table = _timing.markdown_table(headers, rows)
    return "\n".join(lines + [table, "", "Verdicts:", ""] + verdicts + [""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="MNIST n = 5,000 only, targets 100 and 1,000, 2 bisection steps")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--full", metavar="DATA_DIR",
                        help="all 70,000 images of MNIST and Fashion-MNIST from "
                             "DATA_DIR/{mnist,fashion_mnist}70k.npz (the team's ../shared/data); "
                             "saved as peers_quickstart_full.md (peers_quickstart_full_r<R>.md "
                             "for another --r)")
    parser.add_argument("--peers-from", metavar="FILE",
                        help="an earlier results file of the same data: each peer runs once "
                             "at its matched penalty there instead of searching for it "
                             "(rproxjax is rerun in full)")
    parser.add_argument("--r", type=int, nargs="+", default=[R],
                        help="numbers of components, one block per dataset each (default 10)")
    args = parser.parse_args(argv)
    if args.quick:
        datasets, targets, steps = [("MNIST", 5000)], (100, 1000), 2
    elif args.full:
        datasets, targets, steps = [("MNIST", 70000), ("Fashion-MNIST", 70000)], \
            (300, 1000, 2000, 3000), 5
    else:
        datasets, targets, steps = [("MNIST", 20000), ("Fashion-MNIST", 10000)], \
            (100, 300, 1000, 3000), 5
    machine = _timing.machine_info()
    tic = time.perf_counter()
    blocks = []
    earlier = earlier_penalties(args.peers_from) if args.peers_from else None
    for r in args.r:
        for name, n in datasets:
            known = None if earlier is None else earlier[(name, n, r)]
            blocks.append(dataset_block(name, n, _load(name, n, args.full), targets, steps, r,
                                        known))
    wall = time.perf_counter() - tic
    load_end = [round(v, 2) for v in os.getloadavg()]
    import sklearn

    try:
        from importlib.metadata import version
        spams_version = version("spams-bin")
    except Exception:  # noqa: BLE001
        spams_version = "unknown"
    head = [f"# rproxjax `sparse_pca` (defaults) against SPAMS and scikit-learn at matched "
            f"nonzeros{' (--quick)' if args.quick else ''}",
            "",
            f"Run: `python benchmarks/{NAME}.py{' --quick' if args.quick else ''}"
            f"{' --full DATA_DIR' if args.full else ''}"
            f"{'' if args.r == [R] else ' --r ' + ' '.join(map(str, args.r))}"
            f"{' --peers-from ' + Path(args.peers_from).name if args.peers_from else ''}`; "
            f"whole run "
            f"{wall / 60:.1f} min; load average at the end {load_end} (at the start: above). "
            f"scikit-learn {sklearn.__version__}, spams-bin {spams_version}. Peers run with "
            f"one BLAS thread; XLA uses every core. Protocol: the script's docstring. Nonzeros "
            f"and adjusted variance by `loadings_metrics` for every method; \"second call\" "
            f"is compiled for rproxjax and a rerun at the matched penalty for the peers.",
            ""]
    markdown = "\n".join(head + [render(b) for b in blocks])
    print("\n" + markdown, flush=True)
    if not args.no_save:
        lines = [f"# Benchmark `{NAME}`", ""]
        lines += [f"- {key}: {value}" for key, value in machine.items()]
        lines += ["", markdown.rstrip(), ""]
        tag = "" if args.r == [R] else "_r" + "_".join(map(str, args.r))
        path = _timing.RESULTS_DIR / f"{NAME}{'_full' if args.full else ''}{tag}.md"
        path.write_text("\n".join(lines))
        print("saved", path)


if __name__ == "__main__":
    main()
