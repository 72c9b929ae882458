"""Benchmark: one iteration of each solver on online sparse PCA at the paper's size.

Run from the repository root (about 5 minutes on a busy 2-core CPU, 284 s measured;
``--dtypes float64 --repeats 2 --no-sweep --no-profile``: about 75 s, mostly
compiling)::

    python benchmarks/solvers.py                  # tables + sweep + profile, saved
    python benchmarks/solvers.py --no-profile --no-save
    python benchmarks/solvers.py --dtypes float64 --repeats 2 --no-sweep --no-profile

Instance (``_spca_instance.py``): synthetic image-like data, n = 10,000 samples of
dimension d = 784, r = 10, minibatch b = 100, per-sample loss ||z||^2 - ||X^T z||^2,
regularizer ``rproxjax.l1(MU)``, X0 a random Stiefel point; float64 and float32.

Solvers (library defaults otherwise: ``SSN.stochastic()``, the "adaptive" Newton rule with
``rtol = SSN_RTOL``, for the stochastic ones, ``SSN()`` for ManPG; polar retraction):
R-ProxSGD (eta_t = ETA0 / sqrt(t + 1), gamma = 1 / L), R-ProxSPB (constant eta, gamma = 1 / L,
q = 100 = sqrt(n), refresh on the full data set), R-Subgrad (eta_t = ETA0_SUBGRAD /
sqrt(t + 1)) and ManPG (full gradient, t = 1 / L).

Timing: the library's own runner. Each solver is one ``rproxjax.fit`` call of warm-up
epochs followed by ``--repeats`` timed epochs of T = 200 steps (ManPG: 5 iterations
with ``batch_size = n``, after 4 warm-up epochs; R-ProxSPB: T = 200 steps are two
blocks of a refresh and q - 1 = 99 SARAH steps, so its time is per step amortized
over blocks). A run of a + b epochs is the same as a run of a epochs resumed for b
(``fit`` resumes from its returned params, opt_state and key), and one call compiles
once. The time per iteration is the median over the timed epochs of ``fit``'s
``epoch_time`` (host wall time per compiled epoch, compilation and the end-of-epoch
F excluded) divided by the epoch's steps: it includes what ``fit`` does per step
beyond the optimizer (drawing the epoch's permutation, gathering the minibatch, the
per-step history). Newton steps per iteration are the mean of ``history.ssn_steps``
over the timed epochs (R-ProxSPB: refresh steps are the first of each block of q).

The same runs with the subproblem solved by the reference rule to the tolerance alone
(``ssn=SSN(method="reference", linear_solver="dense")``, rtol 0: what the NumPy reference
implements) give
the "reference rule" column, the one the NumPy time is compared with (same batches:
the same key).

NumPy reference (``_numpy_reference.py``): the same iterations in vectorized NumPy, with
the reference Newton rule. Its agreement with the library: from the end point of the
reference-rule run, both start fresh (``optimizer.init``: zero multiplier, step count
0) and take CHECK_STEPS = 5 iterations on the same samples; the largest
|X_fit - X_numpy| is printed (about 1e-15 in float64, 1e-7 in float32) and flagged if
it exceeds 100 times the subproblem tolerance (the solves stop at ||E||_F <= tol; the
primal error is a few times ||E|| on well-conditioned subproblems, but up to several
hundred times on degenerate ones, ``results/subproblem_real.md``, so the flag can also
fire on a correct run that started from another multiplier). Its time: it runs the same
protocol as the fit runs from the same X0 (warm-up and timed epochs of the same lengths,
its own random minibatches), each iteration timed on its own; the median over the timed
epochs of their time per step, so that its Newton steps come from the same phase of the
run. NumPy as installed
(its BLAS, threads and the OPENBLAS_* variables are printed; the environment is not
changed).

FLOP model (``_flops.py``): FLOPs per iteration from the Newton steps of the timed
epochs; ``fit`` does not report E evaluations or ManPG's Armijo backtracks, so the
model counts the least possible (one evaluation per Newton step plus one, no
backtrack), a lower bound. The FLOP-bound time divides by the throughput of a
2000 x 2000 matmul of the same dtype measured in the same run (best of a measurement
before and after the dtype's rows). On CPU the skinny d x r products run far below
the large-GEMM rate, so ratios of several are expected.

Sweep (``--no-sweep`` skips it): ``jax.jit(jax.vmap(run))`` over 8 values of mu, where
``run(mu, x, opt_state, data, key)`` builds the optimizer and calls ``rproxjax.pure_fit``
for one epoch of T_SWEEP = 50 steps (R-ProxSPB: one block of q = 100) and returns the
params, the state and ``history.ssn_steps``, against ``jax.jit(run)`` at MU and 8
sequential calls of it, and the same 8 runs through ``rproxjax.sweep`` with its default
lanes (``vmap``; before 2026-11-26 ``lax.map`` on CPU). Each is timed
as whole compiled calls (``_timing.time_fn``; under ``jit`` fit's ``epoch_time`` is
NaN). The lanes start from the single run's end point and adapt to their own mu in one
untimed call first. A batched Newton ``while_loop`` (accelerators) runs in lockstep
until its slowest lane is done; on CPU vmapped solves map their lanes. The per-lane
Newton counts (and the mean over steps of their maximum, "lockstep": what a batched
loop pays) are printed.

Profile (``--no-profile`` skips it): ``profile_step.py``, the pieces of one float64
R-ProxSGD iteration at the end point of the timed run. The library is not modified.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from rproxjax import stiefel

try:  # run as a script: benchmarks/ is on sys.path
    import _flops
    import _numpy_reference as npref
    import _timing
    import profile_step
    from _spca_instance import LIPSCHITZ, MU, B, D, N, R, make_data, nonzeros, per_sample_loss
except ImportError:  # run as `python -m benchmarks.solvers`
    from benchmarks import _flops, _timing, profile_step
    from benchmarks import _numpy_reference as npref
    from benchmarks._spca_instance import (
        LIPSCHITZ,
        MU,
        B,
        D,
        N,
        R,
        make_data,
        nonzeros,
        per_sample_loss,
    )

jax.config.update("jax_enable_x64", True)

T = 200
WARMUP_EPOCHS = 2
Q = 100
T_MANPG = 5
MANPG_WARMUP_EPOCHS = 4
T_SWEEP = 50
SWEEP_MUS = tuple(float(v) for v in np.geomspace(MU / 4, 2 * MU, 8))
GAMMA = 1.0 / LIPSCHITZ
ETA0 = 1.0
ETA_SPB = 0.5
ETA0_SUBGRAD = 0.5
MANPG_TOL = 1e-14
CHECK_STEPS = 5
PEAK_N = 2000
SEED = 1
DTYPES = ("float64", "float32")
SOLVERS = ("sgd", "spb", "subgrad", "manpg")
SOLVER_NAMES = {
    "sgd": "R-ProxSGD",
    "spb": "R-ProxSPB (per step, amortized)",
    "subgrad": "R-Subgrad",
    "manpg": "ManPG (full grad)",
}
SHAPE = {"d": D, "r": R, "b": B, "n": N}


# --------------------------------------------------------------------------
# Optimizers and the timed fit runs


def make_opt(solver, mu, **kwargs):
    """The optimizer of ``solver`` at regularization mu (factory keywords passed on)."""
    reg = rproxjax.l1(mu)
    if solver == "sgd":
        return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(ETA0), GAMMA, reg, **kwargs)
    if solver == "spb":
        q = kwargs.pop("q", Q)
        return rproxjax.r_prox_spb(ETA_SPB, GAMMA, reg, q=q, **kwargs)
    if solver == "subgrad":
        return rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(ETA0_SUBGRAD), reg, **kwargs)
    if solver == "manpg":
        return rproxjax.manpg(GAMMA, reg, tol=MANPG_TOL, **kwargs)
    raise ValueError(f"unknown solver {solver!r}")


def plan(solver):
    """(batch size, steps per epoch, warm-up epochs) of ``solver``'s fit run."""
    if solver == "manpg":
        return N, T_MANPG, MANPG_WARMUP_EPOCHS
    return B, T, WARMUP_EPOCHS


def timed_fit(solver, data, x0, repeats, **opt_kwargs):
    """One ``fit`` call of warm-up + ``repeats`` epochs: seconds per step (median over
    the timed epochs of ``epoch_time``), Newton steps per step, the run's result."""
    batch_size, steps, warmup = plan(solver)
    tic = time.perf_counter()
    res = rproxjax.fit(make_opt(solver, MU, **opt_kwargs), per_sample_loss, x0, data,
                       key=jax.random.key(SEED), batch_size=batch_size,
                       num_epochs=warmup + repeats, steps_per_epoch=steps)
    wall = time.perf_counter() - tic
    epoch_s = np.diff(np.asarray(res.epoch_time))
    newton = np.asarray(res.history.ssn_steps)[warmup * steps:].astype(float)
    out = {
        "time_s": statistics.median(epoch_s[warmup:]) / steps,
        "epoch_times_s": epoch_s[warmup:].tolist(), "steps_per_epoch": steps,
        "warmup_epochs": warmup, "steps_done": (warmup + repeats) * steps,
        "newton_steps": float(newton.mean()), "fit_wall_s": wall,
        "fit_other_s": wall - float(epoch_s.sum()), "_res": res,
    }
    if solver == "spb":  # the first step of each block of q is the refresh
        refresh = np.arange(newton.size) % Q == 0
        out["sarah_newton_steps"] = float(newton[~refresh].mean())
        out["refresh_newton_steps"] = float(newton[refresh].mean())
    if solver == "manpg":  # ManPG stops (zero updates) once ||zeta||^2 / t^2 < tol
        zeta = np.asarray(res.history.zeta_norm)[warmup * steps:]
        out["converged"] = bool(np.any((zeta / GAMMA) ** 2 < MANPG_TOL))
    return out


def flops_of(solver, run):
    """FLOPs per iteration of a timed run (its Newton steps; least evaluations)."""
    if solver == "spb":
        return _flops.spb_flops(run["sarah_newton_steps"], run["refresh_newton_steps"], Q,
                                **SHAPE)
    return _flops.iteration_flops(solver, run["newton_steps"], **SHAPE)


# --------------------------------------------------------------------------
# The NumPy reference


def numpy_part(solver, x0, x_check, data, data_np, settings, repeats, seed):
    """The NumPy reference: its check against the library from ``x_check``, and its run
    from ``x0`` by the same protocol as the fit runs (own minibatches)."""
    rng = np.random.default_rng(seed)
    out = {"check_max_abs_diff": npref.check_against_fit(
        solver, x_check, data, MU, settings, make_opt, per_sample_loss, b=B,
        steps=CHECK_STEPS, rng=rng)}
    out["check_ok"] = out["check_max_abs_diff"] <= 100 * settings.tol
    ref = npref.NumpySolver(data_np, MU, settings, R)
    _, steps, warmup = plan(solver)
    out.update(npref.run_numpy(ref, solver, np.asarray(x0), rng, b=B, steps_per_epoch=steps,
                               warmup_epochs=warmup, epochs=repeats, q=Q))
    return out


def bench_solver(solver, dtype, data, data_np, x0, repeats, settings, seed):
    """Timed fit runs (defaults and the reference rule), FLOPs, NumPy check and time."""
    tic = time.perf_counter()
    res = timed_fit(solver, data, x0, repeats)
    rule = npref.reference_rule(solver, settings.tol)
    ref_run = timed_fit(solver, data, x0, repeats, **rule) if rule else res
    x = ref_run["_res"].params
    res.update({"reference_time_s": ref_run["time_s"],
                "reference_newton_steps": ref_run["newton_steps"],
                "reference_epoch_times_s": ref_run["epoch_times_s"]})
    res.update(numpy_part(solver, x0, x, data, data_np, settings, repeats, seed))
    res.update({
        "solver": solver, "dtype": dtype, "flops": flops_of(solver, res),
        "speedup": res["numpy_time_s"] / res["reference_time_s"],
        "nonzeros_end": nonzeros(res["_res"].params), "total_s": time.perf_counter() - tic,
    })
    print(
        f"{dtype} {SOLVER_NAMES[solver]}: {1e6 * res['time_s']:,.0f} us/iter, Newton steps "
        f"{res['newton_steps']:.2f}; reference rule {1e6 * res['reference_time_s']:,.0f} us "
        f"(Newton {res['reference_newton_steps']:.2f}); NumPy "
        f"{1e6 * res['numpy_time_s']:,.0f} us (Newton {res['numpy_newton_steps']:.2f}; "
        f"{res['speedup']:.1f}x the reference rule's time); check after {CHECK_STEPS} "
        f"steps: max |X_fit - X_numpy| = {res['check_max_abs_diff']:.1e}"
        f"{'' if res['check_ok'] else ' DISAGREE'}; nonzeros {res['nonzeros_end']} of "
        f"{D * R} [fit calls {res['fit_wall_s']:.0f} s of which compile and other "
        f"{res['fit_other_s']:.0f} s; all {res['total_s']:.0f} s]",
        flush=True,
    )
    return res


def add_bounds(results, peak):
    """FLOP-bound time and ratio of every row against the best measured throughput."""
    for res in results.values():
        res.update(peak_flops=peak, bound_s=res["flops"] / peak,
                   ratio=res["time_s"] * peak / res["flops"])


# --------------------------------------------------------------------------
# Sweep over mu


def sweep_fns(solver):
    """(steps, jit of one fit run, jit of its vmap over mu and the lanes' states, jit of
    the same through ``rproxjax.sweep`` with its default lanes)."""
    steps = Q if solver == "spb" else T_SWEEP

    def run(mu, x, state, data, key):
        res = rproxjax.pure_fit(make_opt(solver, mu), per_sample_loss, x, data, key=key,
                                batch_size=B, num_epochs=1, steps_per_epoch=steps,
                                opt_state=state)
        return res.params, res.opt_state, res.history.ssn_steps

    def swept(mus, xs, states, data, key):
        return rproxjax.sweep(lambda mu, x, st: run(mu, x, st, data, key), mus, xs, states)

    return (steps, jax.jit(run), jax.jit(jax.vmap(run, in_axes=(0, 0, 0, None, None))),
            jax.jit(swept))


def bench_sweep(solver, data, single, repeats):
    """vmap over SWEEP_MUS of a fit run against one run at MU and 8 sequential runs."""
    steps, one, lanes, swept = sweep_fns(solver)
    fit_res = single["_res"]
    x, state, key = fit_res.params, fit_res.opt_state, fit_res.key
    mus = jnp.asarray(SWEEP_MUS, data.dtype)
    xs, states = jax.tree.map(lambda a: jnp.broadcast_to(a, (len(SWEEP_MUS),) + jnp.shape(a)),
                              (x, state))
    tic = time.perf_counter()
    xs, states, _ = jax.block_until_ready(lanes(mus, xs, states, data, key))  # lanes adapt
    compile_s = time.perf_counter() - tic
    sweep_s = _timing.time_fn(lanes, mus, xs, states, data, key, repeats=repeats, warmup=0)
    x_end, _, newton = lanes(mus, xs, states, data, key)
    library_s = _timing.time_fn(swept, mus, xs, states, data, key, repeats=repeats)
    mu = jnp.asarray(MU, data.dtype)
    single_s = _timing.time_fn(one, mu, x, state, data, key, repeats=repeats)
    single_newton = np.asarray(one(mu, x, state, data, key)[2], float)
    seq_s, seq_steps = 0.0, []
    for i in range(len(SWEEP_MUS)):
        xi, sti = jax.tree.map(lambda a, i=i: a[i], (xs, states))
        seq_s += _timing.time_fn(one, mus[i], xi, sti, data, key, repeats=2, warmup=0)
        seq_steps.append(float(np.mean(np.asarray(one(mus[i], xi, sti, data, key)[2]))))
    newton = np.asarray(newton, float)  # (lanes, steps)
    out = {
        "solver": solver, "dtype": str(data.dtype), "mus": SWEEP_MUS, "steps": steps,
        "single_time_s": single_s / steps, "sweep_time_s": sweep_s / steps,
        "ratio": sweep_s / single_s, "sequential_time_s": seq_s / steps,
        "speedup_vs_sequential": seq_s / sweep_s, "vmap_compile_s": compile_s,
        "library_sweep_time_s": library_s / steps, "library_sweep_lanes": (
            "map" if jax.default_backend() == "cpu" else "vmap"),
        "single_newton_steps": float(single_newton.mean()),
        "lane_newton_steps": newton.mean(axis=1).tolist(),
        "lockstep_newton_steps": float(newton.max(axis=0).mean()),
        "sequential_newton_steps": seq_steps,
        "lane_nonzeros": [nonzeros(a) for a in np.asarray(x_end)],
    }
    print(
        f"{out['dtype']} sweep {SOLVER_NAMES[solver]} ({steps} steps): 8 mu "
        f"{1e6 * out['sweep_time_s']:,.0f} us/iter vs single {1e6 * out['single_time_s']:,.0f}"
        f" us -> ratio {out['ratio']:.2f}; 8 sequential runs "
        f"{1e6 * out['sequential_time_s']:,.0f} us/iter (vmap x"
        f"{out['speedup_vs_sequential']:.2f}); rproxjax.sweep "
        f"{1e6 * out['library_sweep_time_s']:,.0f} us/iter; Newton steps per lane "
        f"{', '.join(f'{v:.1f}' for v in out['lane_newton_steps'])} (lockstep max "
        f"{out['lockstep_newton_steps']:.1f}, single {out['single_newton_steps']:.1f}); "
        f"nonzeros per lane {out['lane_nonzeros']}; vmap compile + adaptation {compile_s:.0f} s",
        flush=True,
    )
    return out


# --------------------------------------------------------------------------
# Tables and the command line


MAIN_HEADERS = ("dtype", "solver", "time/iter (us)", "Newton steps/iter", "FLOPs/iter",
                "FLOP-bound (us)", "ratio to bound", "reference rule (us/iter)", "NumPy (us)",
                "NumPy / reference rule")
DETAIL_HEADERS = ("dtype", "solver", "timed epochs (steps) x ms", "Newton steps ref. rule / "
                  "NumPy", "NumPy E evals/iter", "NumPy min (us)",
                  f"max |X_fit - X_np| ({CHECK_STEPS} steps)", "nonzeros of X",
                  "matmul GFLOP/s")
SWEEP_HEADERS = ("dtype", "solver", "single (us/iter)", "vmap 8 mu (us/iter)", "ratio",
                 "8 sequential (us/iter)", "vmap speed-up", "rproxjax.sweep 8 mu (us/iter)",
                 "Newton steps single / lanes mean / lockstep")


def table_rows(results):
    """The rows of the main and the detail table."""
    rows, details = [], []
    for res in results:
        name = SOLVER_NAMES[res["solver"]]
        rows.append((
            res["dtype"], name, f"{1e6 * res['time_s']:,.0f}", f"{res['newton_steps']:.2f}",
            f"{res['flops'] / 1e6:.2f} M", f"{1e6 * res['bound_s']:,.0f}",
            f"{res['ratio']:.1f}", f"{1e6 * res['reference_time_s']:,.0f}",
            f"{1e6 * res['numpy_time_s']:,.0f}", f"{res['speedup']:.1f}x",
        ))
        epochs = ", ".join(f"{1e3 * t:,.0f}" for t in res["epoch_times_s"])
        details.append((
            res["dtype"], name, f"({res['steps_per_epoch']}) x {epochs}",
            f"{res['reference_newton_steps']:.2f} / {res['numpy_newton_steps']:.2f}",
            f"{res['numpy_evaluations']:.2f}", f"{1e6 * res['numpy_min_time_s']:,.0f}",
            f"{res['check_max_abs_diff']:.1e}" + ("" if res["check_ok"] else " (DISAGREE)"),
            str(res["nonzeros_end"]), f"{res['peak_flops'] / 1e9:.1f}",
        ))
    return rows, details


def sweep_rows(sweeps):
    return [(
        s["dtype"], SOLVER_NAMES[s["solver"]], f"{1e6 * s['single_time_s']:,.0f}",
        f"{1e6 * s['sweep_time_s']:,.0f}", f"{s['ratio']:.2f}",
        f"{1e6 * s['sequential_time_s']:,.0f}", f"{s['speedup_vs_sequential']:.2f}x",
        f"{1e6 * s['library_sweep_time_s']:,.0f} ({s['library_sweep_lanes']})",
        f"{s['single_newton_steps']:.1f} / {np.mean(s['lane_newton_steps']):.1f} / "
        f"{s['lockstep_newton_steps']:.1f}",
    ) for s in sweeps]


def notes(results, peaks):
    spb = [r for r in results if r["solver"] == "spb"]
    return [
        f"Time/iter: rproxjax.fit's epoch_time of an epoch of {T} steps (ManPG {T_MANPG}), "
        "median over the timed epochs, per step, library defaults; 'reference rule': the "
        "same runs with SSN(method='reference', rtol=0) (the NumPy reference's algorithm)."
        f" R-ProxSPB: q = {Q}, per step amortized over blocks of a refresh and {Q - 1} SARAH "
        "steps; NumPy SARAH step / refresh: " + ", ".join(
            f"{r['dtype']} {1e6 * r['numpy_sarah_time_s']:,.0f} / "
            f"{1e6 * r['numpy_refresh_time_s']:,.0f} us" for r in spb) + ".",
        "FLOPs from the timed epochs' Newton steps with the least E evaluations (steps + 1) "
        "and no ManPG backtrack (fit reports neither): the bound is a lower bound.",
        "matmul 2000^2 throughput before / after each dtype's rows: " + ", ".join(
            f"{dt} {p['before'] / 1e9:.1f} / {p['after'] / 1e9:.1f} GFLOP/s"
            for dt, p in peaks.items()),
        "NumPy's OpenBLAS runs 2 threads: on a machine shared with other processes its "
        "per-iteration time varies a lot between runs (compare the median with the fastest).",
    ]


def run_dtype(dtype, z64, args):
    """All solvers (and the sweep) in one dtype: (results, sweeps, peaks, data)."""
    data_np = z64.astype(dtype)
    data = jnp.asarray(data_np)
    x0 = stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype))
    settings = npref.Settings(GAMMA, ETA0, ETA_SPB, ETA0_SUBGRAD, MANPG_TOL,
                              npref.default_tol(dtype))
    peak_before = _timing.matmul_flops(dtype, n=PEAK_N, repeats=3)
    results = {s: bench_solver(s, dtype, data, data_np, x0, args.repeats, settings, 100 + i)
               for i, s in enumerate(SOLVERS)}
    peak_after = _timing.matmul_flops(dtype, n=PEAK_N, repeats=3)
    peaks = {"before": peak_before, "after": peak_after,
             "used": max(peak_before, peak_after)}
    add_bounds(results, peaks["used"])
    sweeps = [] if args.no_sweep else [
        bench_sweep(s, data, results[s], max(2, args.repeats // 2)) for s in ("sgd", "spb")]
    return results, sweeps, peaks, data


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--repeats", type=int, default=5, help="timed epochs per run")
    parser.add_argument("--no-sweep", action="store_true", help="skip the mu sweep")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile section")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    return parser.parse_args(argv)


def report(results, sweeps, peaks, blas, profile):
    """Prints the tables; returns the Markdown of the results file."""
    title = (f"## Solvers, online sparse PCA, d={D}, r={R}, b={B}, n={N}, l1 mu={MU}, "
             f"per iteration (steady state, timed by rproxjax.fit)")
    print(f"\n{title}\n")
    rows, details = table_rows(results)
    table = _timing.print_table(MAIN_HEADERS, rows)
    print()
    table_detail = _timing.print_table(DETAIL_HEADERS, details)
    text_notes = notes(results, peaks)
    print("\n" + "\n".join(text_notes), flush=True)
    table_sweep = ""
    if sweeps:
        sweep_title = (f"## vmap over 8 values of mu ({', '.join(f'{m:.4g}' for m in SWEEP_MUS)}"
                       f") of a fit run of {T_SWEEP} steps (R-ProxSPB: one block of {Q})")
        print(f"\n{sweep_title}\n")
        table_sweep = sweep_title + "\n\n" + _timing.print_table(SWEEP_HEADERS,
                                                                  sweep_rows(sweeps))
    return "\n".join([title, "", table, "", table_detail, "", *text_notes, "", table_sweep,
                      "", f"NumPy BLAS: {blas}", "", profile["text"] if profile else ""])


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)
    blas = npref.numpy_blas_info()
    print("NumPy BLAS:", blas, flush=True)
    z64, eig = make_data()
    print(f"data: n={N}, d={D}; top covariance eigenvalues {np.round(eig[:12], 3).tolist()}; "
          f"top {R} carry {eig[:R].sum() / eig.sum():.1%} of the variance; mu = {MU}", flush=True)
    results, sweeps, peaks, profile = [], [], {}, None
    for dtype in args.dtypes:
        by_solver, dtype_sweeps, peaks[dtype], data = run_dtype(dtype, z64, args)
        results.extend(by_solver.values())
        sweeps.extend(dtype_sweeps)
        if dtype == "float64" and not args.no_profile:
            sgd = by_solver["sgd"]
            profile = profile_step.profile_sgd(
                sgd["_res"].params, sgd["_res"].opt_state, sgd["steps_done"], data,
                peaks[dtype]["used"], args.repeats, mu=MU, eta0=ETA0, gamma=GAMMA)
    markdown = report(results, sweeps, peaks, blas, profile)
    elapsed = time.perf_counter() - start
    print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if args.no_save:
        return
    clean = lambda d: {k: v for k, v in d.items() if not k.startswith("_")}  # noqa: E731
    payload = {
        "settings": {
            "d": D, "r": R, "n": N, "b": B, "T": T, "q": Q, "t_manpg": T_MANPG, "mu": MU,
            "sweep_mus": SWEEP_MUS, "t_sweep": T_SWEEP, "gamma": GAMMA, "eta0": ETA0,
            "eta_spb": ETA_SPB, "eta0_subgrad": ETA0_SUBGRAD, "manpg_tol": MANPG_TOL,
            "warmup_epochs": WARMUP_EPOCHS, "manpg_warmup_epochs": MANPG_WARMUP_EPOCHS,
            "check_steps": CHECK_STEPS, "peak_n": PEAK_N,
            **vars(args),
        },
        "data_top_eigenvalues": eig[:20],
        "numpy_blas": blas,
        "peak_flops": peaks,
        "rows": [clean(r) for r in results],
        "sweeps": sweeps,
        "profile": clean({k: v for k, v in (profile or {}).items() if k != "text"}),
        "elapsed_s": elapsed,
    }
    machine["loadavg_end"] = _timing.machine_info()["loadavg_1_5_15min"]
    paths = _timing.save_results("solvers", payload, markdown + f"\n\nTotal benchmark time "
                                 f"{elapsed:.0f} s.", machine=machine)
    print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
