"""Semi-smooth Newton on real subproblems: steps, evaluations and time per call, by rule.

The 64 subproblems of ``experiments/data/subproblems_mnist.npz`` (R-ProxSGD and R-ProxSPB on MNIST,
r = 10 and 15, mu in {0.05, 0.2, 0.4, 0.8}, t = 0.1) are solved by ``rproxjax.tangent_prox``
from the warm starts the file holds:

* "before": the reference rule (``rule="reference"``) from the previous multiplier
  ``lam_prev``, with the linear solver the library then chose (dense below r = 15, CG from
  15; "auto" is now dense up to r = 15): the
  library as it was;
* "secant": the default rule from the previous multiplier's regularizer part
  (``lam_h=lam_h_prev``), dense and CG Newton systems;
* "adaptive": plain dual Newton steps until one makes too little progress, then the
  secant rule (dense), from ``lam_h_prev``;
* "..., from the subgradient": the secant and adaptive rules (dense) from the optimizers' own
  warm start, Lambda_0 = sym(X^T G) / 2 + ``lam_s`` (the previous solution's subgradient of h
  at this X; ``tangent_prox(..., subgradient=)`` in the optimizers);
* "secant, dense, shifted steps, ...": the secant rule with its tight path steps turned off
  (``SSN(rule=Secant(path=None))``): the secant shift and exact line search in every step, the
  default rule's tight steps before path steps.

Every solve's settings are one ``rproxjax.SSN`` value (method, linear solver, tolerances,
path steps). The secant rule's dense tight solves (``rtol = 0``) take path steps; "breakpoints
mean" counts the threshold crossings they follow per call.

Tolerances: float64 at tol 1e-8 (goal: mean <= 3, max <= 10 steps, every call
converged), float32 at its default tolerance (goal: every call converged), and the
stochastic optimizers' default, ||E|| <= tol + SSN_RTOL ||zeta|| ("rtol 0.1", each dtype's
default tol); "before" is then the reference rule with the same stopping test. Time per
call: each call's median wall time (jitted, after warm-up), then the median, mean and
maximum over the instances. Accuracy: each call's zeta against the float64 instance's
solution to ||E|| <= 1e-13 (the secant rule from the optimizers' warm start; every reference
must converge), as the largest entry of the difference and the largest ratio of its
Frobenius norm to the call's residual ||E|| (float64 only, and over the calls whose
difference is at least 1e-10, 1e3 times the reference's tolerance: the reference's own error
can be a few hundred times its tolerance; float32 errors include the instance's rounding).
Run from the repository root: ``python benchmarks/subproblem_real.py [--quick] [--no-save]``
(about 2-4 minutes on 2 CPU cores; ``--quick``: r = 10 only, one timing repeat, about 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

# the repository root, for the lab's fixture (experiments/, which the wheel does not ship)
sys.path.append(str(Path(__file__).resolve().parents[1]))

import rproxjax  # noqa: E402
from experiments.subproblems import load_subproblems  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    from _timing import machine_info, print_table, save_results, time_fn
except ImportError:  # run as `python -m benchmarks.subproblem_real`
    from benchmarks._timing import machine_info, print_table, save_results, time_fn

CONFIGS = {  # name: (method, warm start, linear solver, path steps)
    "before (reference, auto)": ("reference", "lam", "before", True),
    "secant, dense": ("secant", "lam_h", "dense", True),
    "secant, cg": ("secant", "lam_h", "cg", True),
    "adaptive, dense": ("adaptive", "lam_h", "dense", True),
    "secant, dense, from the subgradient": ("secant", "lam_s", "dense", True),
    "adaptive, dense, from the subgradient": ("adaptive", "lam_s", "dense", True),
    "secant, dense, shifted steps, from the subgradient": ("secant", "lam_s", "dense", False),
}
STOCHASTIC_RTOL = rproxjax.SSN_RTOL
#: The accuracy columns' reference: each float64 instance solved to ||E|| <= REFERENCE_TOL.
REFERENCE_TOL = 1e-13
#: Calls whose ||zeta - tight||_F is below this are left out of the error / ||E|| ratio: the
#: reference's own error can be a few hundred times REFERENCE_TOL on these subproblems.
RATIO_FLOOR = 1e3 * REFERENCE_TOL
STOCHASTIC = f"rtol {STOCHASTIC_RTOL:g}"


def solver(ssn, warm):
    """jit of (x, g, t, mu, warm start) -> (zeta, info) with settings ``ssn``."""
    @jax.jit
    def solve(x, g, t, mu, start):
        return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), ssn=ssn,
                                     **{"lam" if warm == "lam_s" else warm: start})

    return solve


def tight_references(r):
    """Each float64 instance's solution to ||E|| <= 1e-13 (secant rule from the optimizers'
    warm start, at most 500 steps; every one must converge): the reference of the accuracy
    columns."""
    ssn = rproxjax.SSN(tol=REFERENCE_TOL, rule="secant", linear_solver="dense", max_steps=500)
    solve = solver(ssn, "lam_s")
    refs = []
    for inst in load_subproblems(r, np.float64):
        zeta, info = solve(inst["x"], inst["g"], inst["t"], inst["mu"], _start(inst, "lam_s"))
        if not bool(info.converged):
            raise RuntimeError(f"the tight reference did not converge (r = {r}, mu = "
                               f"{inst['mu']}, step {inst['step']})")
        refs.append(np.asarray(zeta))
    return refs


def _start(inst, warm):
    # "lam_s": the optimizers' Lambda_0, given as the multiplier itself
    return {"lam": inst["lam_prev"], "lam_h": inst["lam_h_prev"], "lam_s": inst["lam0"]}[warm]


def _error_over_residual(diff, info, dtype):
    """||zeta - tight||_F / ||E||, or None where it says nothing: in float32 (the error
    includes the instance's rounding) and where the difference is within the reference's
    own error band (below RATIO_FLOOR)."""
    err, res = float(np.linalg.norm(diff)), float(info.residual)
    if dtype != "float64" or err < RATIO_FLOOR or res <= 0.0:
        return None
    return err / res


def measure(instances, name, dtype, stopping, repeats, refs):
    method, warm, linear_solver, path_steps = CONFIGS[name]
    if stopping == STOCHASTIC:
        tol, rtol = None, STOCHASTIC_RTOL
    else:
        tol, rtol = (1e-8 if dtype == "float64" else None), 0.0
    if linear_solver == "before":  # the library's former "auto": CG from r = 15
        linear_solver = "cg" if instances[0]["x"].shape[1] >= 15 else "dense"
    rule = rproxjax.Secant(path=None if not path_steps else rproxjax.PathSteps()) if (
        method == "secant") else method
    ssn = rproxjax.SSN(tol=tol, rtol=rtol, rule=rule, linear_solver=linear_solver)
    return _measure(solver(ssn, warm), instances, warm, dtype, repeats, refs)


def _measure(solve, instances, warm, dtype, repeats, refs):
    rows = []
    for inst, ref in zip(instances, refs, strict=True):
        args = (inst["x"], inst["g"], inst["t"], inst["mu"], _start(inst, warm))
        zeta, info = solve(*args)
        seconds = time_fn(lambda *a: solve(*a)[0], *args, repeats=repeats) if repeats else 0.0
        diff = np.asarray(zeta, np.float64) - ref
        rows.append(dict(mu=inst["mu"], steps=int(info.num_steps),
                         evals=int(info.num_evaluations), cg=int(info.num_linear_steps),
                         breakpoints=int(info.num_breakpoints),
                         converged=bool(info.converged), seconds=seconds,
                         residual=float(info.residual), error=float(np.max(np.abs(diff))),
                         error_over_residual=_error_over_residual(diff, info, dtype)))
    return rows


def summarize(rows):
    steps = np.array([row["steps"] for row in rows])
    return dict(
        n=len(rows), mean=float(steps.mean()), p90=float(np.percentile(steps, 90)),
        max=int(steps.max()), unconverged=sum(not row["converged"] for row in rows),
        evals=float(np.mean([row["evals"] for row in rows])),
        breakpoints=float(np.mean([row["breakpoints"] for row in rows])),
        ms=1e3 * statistics.median(row["seconds"] for row in rows),
        ms_mean=1e3 * statistics.fmean(row["seconds"] for row in rows),
        ms_max=1e3 * max(row["seconds"] for row in rows),
        error=max(row["error"] for row in rows),
        error_over_residual=max((row["error_over_residual"] for row in rows
                                 if row["error_over_residual"] is not None), default=None),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="r = 10 only, one timing repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats per call")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    ranks = (10,) if args.quick else (10, 15)
    repeats = 1 if args.quick else args.repeats
    headers = ["stopping", "dtype", "r", "rule", "mu", "steps mean", "p90", "max",
               "unconverged", "E evals mean", "breakpoints mean", "ms/call median / mean / max",
               "max |zeta - tight|", "max error / ||E||"]
    table, results, refs = [], [], {}
    for stopping in ("tol", STOCHASTIC):
        for dtype in ("float64", "float32"):
            for r in ranks:
                instances = load_subproblems(r, np.dtype(dtype))
                if r not in refs:
                    refs[r] = tight_references(r)
                for name in CONFIGS:
                    rows = measure(instances, name, dtype, stopping, repeats, refs[r])
                    groups = {"all": rows} | {
                        f"{mu:g}": [row for row in rows if row["mu"] == mu]
                        for mu in sorted({row["mu"] for row in rows})}
                    label = stopping if stopping != "tol" else (
                        "tol 1e-8" if dtype == "float64" else "default tol")
                    for mu, group in groups.items():
                        s = summarize(group)
                        results.append(dict(stopping=label, dtype=dtype, r=r, rule=name, mu=mu,
                                            **s, calls=group))
                        table.append([label, dtype, r, name, mu, f"{s['mean']:.2f}",
                                      f"{s['p90']:.1f}", s["max"], s["unconverged"],
                                      f"{s['evals']:.1f}", f"{s['breakpoints']:.1f}",
                                      f"{s['ms']:.2f} / {s['ms_mean']:.2f} / {s['ms_max']:.2f}",
                                      f"{s['error']:.1e}",
                                      "-" if s["error_over_residual"] is None
                                      else f"{s['error_over_residual']:.1f}"])
                    s = summarize(rows)  # printed as it goes: a run cut off keeps these
                    print(f"done: {label} {dtype} r={r} {name}: steps mean {s['mean']:.2f} "
                          f"max {s['max']}, {s['unconverged']} unconverged, "
                          f"{s['ms']:.2f} ms/call median", flush=True)
    markdown = print_table(headers, table)
    goal = ("\nGoal (float64, tol 1e-8): mean <= 3 and max <= 10 Newton steps, every call "
            "converged; float32 at its default tolerance: every call converged. 8 instances "
            "per (r, mu): R-ProxSGD and R-ProxSPB, iterations 60, 140, 220, 299.\n"
            "Accuracy: 'max |zeta - tight|' is the largest entry of zeta minus the float64 "
            "instance's solution to ||E|| <= 1e-13 (secant rule, the optimizers' warm start); "
            "'max error / ||E||' the largest ||zeta - tight||_F / ||E(Lambda)||_F over the "
            "float64 instances whose error is at least 1e-10 (1e3 times the reference's "
            "tolerance: below, within the reference's own error, the ratio says nothing; "
            "float32 errors include the instance's rounding, so no ratio): ||E|| bounds the "
            "tangency defect, not the distance to the solution, which grows with the "
            "subproblem's degeneracy.\n")
    print(goal)
    if not args.no_save:
        save_results("subproblem_real", {"rows": results}, markdown + "\n" + goal,
                     machine=machine_info())


if __name__ == "__main__":
    main()
