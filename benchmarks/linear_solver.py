"""Benchmark: dense versus CG Newton systems in ``rproxjax.tangent_prox``, by rank r.

Run from the repository root (a few minutes on a 2-core CPU)::

    python benchmarks/linear_solver.py            # table, saved
    python benchmarks/linear_solver.py --no-save

The library's ``linear_solver="auto"`` takes the dense r(r+1)/2 system for r <= 15 and
matrix-free CG from r = 16 on (from r = 15 before the secant rule, whose dense systems take
fewer steps at r = 15 on real subproblems: ``subproblem_real.py``; inside runs at r = 32 see
``linear_solver_runs.py``). This script measures
both paths on the sparse-PCA-like
instances of ``benchmarks/subproblem.py`` (cold and warm calls, float64, median wall time
of a compiled call after warm-up) so that the threshold can be set from data.
"""

from __future__ import annotations

import argparse
import statistics

import jax

jax.config.update("jax_enable_x64", True)

import _timing  # noqa: E402
from subproblem import make_instance  # noqa: E402

import rproxjax  # noqa: E402


def _solver(linear_solver, warm):
    ssn = rproxjax.SSN(linear_solver=linear_solver)
    if warm:
        def fn(x, g, t, mu, lam):
            return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), lam=lam, ssn=ssn)
    else:
        def fn(x, g, t, mu):
            return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), ssn=ssn)
    return jax.jit(fn)


def bench(d, r, repeats, max_seconds):
    inst = make_instance(d, r, "float64")
    x, g, t, mu = inst["x"], inst["g"], inst["t"], inst["mu"]
    _, info = _solver("dense", False)(x, g, t, mu)
    lam = info.lam  # warm start: the multiplier at the perturbed gradient's neighbour
    out = {"d": d, "r": r}
    for solver in ("dense", "cg"):
        for warm in (False, True):
            fn = _solver(solver, warm)
            args = (x, inst["g_pert"], t, mu, lam) if warm else (x, g, t, mu)
            _, info = jax.block_until_ready(fn(*args))
            samples = _timing.time_samples(fn, *args, repeats=repeats, warmup=1,
                                           max_seconds=max_seconds, min_repeats=3)
            key = f"{solver}_{'warm' if warm else 'cold'}"
            out[key + "_ms"] = 1e3 * statistics.median(samples)
            out[key + "_steps"] = int(info.num_steps)
            out[key + "_converged"] = bool(info.converged)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    cases = [(784, r) for r in (10, 15, 20, 30, 40)] + [(2000, r) for r in (15, 30)]
    rows, results = [], []
    for d, r in cases:
        res = bench(d, r, args.repeats, args.max_seconds)
        results.append(res)
        rows.append([d, r, f"{res['dense_cold_ms']:.2f} / {res['dense_warm_ms']:.2f}",
                     f"{res['cg_cold_ms']:.2f} / {res['cg_warm_ms']:.2f}",
                     f"{res['cg_cold_ms'] / res['dense_cold_ms']:.2f} / "
                     f"{res['cg_warm_ms'] / res['dense_warm_ms']:.2f}",
                     f"{res['dense_cold_steps']}/{res['dense_warm_steps']} vs "
                     f"{res['cg_cold_steps']}/{res['cg_warm_steps']}"])
    headers = ["d", "r", "dense ms (cold / warm)", "CG ms (cold / warm)",
               "CG / dense (cold / warm)", "Newton steps dense vs CG (cold/warm)"]
    table = _timing.print_table(headers, rows)
    if not args.no_save:
        _timing.save_results("linear_solver", {"cases": results}, table)


if __name__ == "__main__":
    main()
