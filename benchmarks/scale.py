"""Benchmark: per-step cost and vmapped mu sweeps at accelerator scale, on any JAX backend.

Run from the repository root::

    python benchmarks/scale.py                          # every size, both dtypes
    python benchmarks/scale.py --sizes 0 1 --no-save    # the sizes a CPU can afford
    python benchmarks/scale.py --name scale_gpu         # results/scale_gpu.{md,json}

Saved as ``results/scale.{md,json}`` on CPU and ``results/scale_<backend>.{md,json}`` on
another backend (``gpu_checks.sh`` names it ``scale_gpu``).

Instance: synthetic online sparse PCA at (d, r, b) = (784, 10, 100), (4096, 32, 500),
(16384, 64, 2000), generated on the device from ``jax.random`` (no download): n = 8 b
samples z = U diag(sqrt(lambda)) s + 0.5 e with U orthonormal, each column supported on
d / (4 r) coordinates (disjoint supports), lambda_j = 1 + 4 (r - j) / r, s and e standard
normal; per-sample loss ``rproxjax.problems.spca_loss``; regularizer ``rproxjax.l1(mu)``;
X0 = ``stiefel.random_point(key(0), d, r)``; float32 and float64 (everything built in the
dtype).

Part (a), per-step cost at mu = 0.2: for R-Subgrad (``r_subgrad(inverse_sqrt_schedule(1),
l1(mu))``), R-ProxSGD (``r_prox_sgd(inverse_sqrt_schedule(1), 0.1, l1(mu))``) and R-ProxSPB
(``r_prox_spb(1.0, 0.1, l1(mu), q=S)``: one block of a full-gradient refresh over n and
S - 1 SARAH steps, so its time is amortized), ``jax.jit`` of ``rproxjax.pure_fit`` for S
steps (one epoch of ``Sampling(steps_per_epoch=S)``) from a given point and optimizer state. Each is
compiled, run once from X0 (warm-up: the subproblems are then warm-started, X is sparse),
then timed from the warmed-up point and state ``--repeats`` times in round-robin with the
other methods; time per step = median / S, ratio = method / R-Subgrad of the same rounds.

With ``--linear-solvers dense cg``, R-ProxSGD is also timed with each Newton linear solver
forced (the default ``"auto"`` picks one by r).

Part (b), the sweep: ``jax.jit(jax.vmap(run))`` over K = 8 and 64 values of mu in
``geomspace(0.05, 0.8, K)``, where ``run(mu)`` builds R-ProxSGD inside and calls ``pure_fit``
for S steps from X0 (same key for every lane, so the lanes share their minibatches), against
one ``jax.jit(run)`` at mu = 0.2; ratio = vmap / single. The Newton steps in lockstep (max over
lanes, averaged over steps) say what a batched ``while_loop`` pays (accelerators); on CPU
the vmapped solves map their lanes, each taking its own steps.

The programs of one (size, dtype) (3-8) are lowered and then compiled concurrently in a
thread pool (``_timing.precompile``; ``--serial-compile`` compiles each at its first call
instead), so a run on a many-core host waits for the slowest compile rather than their sum;
the sweep's "compile (s)" is that program's compile time in the pool, under contention ("-"
with ``--serial-compile``). Not all sizes at once: XLA's GPU autotuner times candidate
kernels on the device while it compiles, and on an H200 48 concurrent compiles (every size
and dtype) had not finished after 230 s, with "delay kernel timed out" warnings. Then the
(size, dtype) is timed (smallest size first, float32 then float64), every call
synchronized with ``jax.block_until_ready``; the results count the compilations during the
part of a size (``compiles_while_timing``: eager reductions of the checks compile small
programs, a recompiled run would show as seconds). The results record the device; nothing
here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from rproxjax import stiefel
from rproxjax.problems import spca_loss

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.scale`
    from benchmarks import _timing

jax.config.update("jax_enable_x64", True)

SIZES = ((784, 10, 100), (4096, 32, 500), (16384, 64, 2000))
DTYPES = ("float32", "float64")
MU = 0.2
GAMMA = 0.1
METHODS = ("subgrad", "sgd", "spb")
NAMES = {"subgrad": "R-Subgrad", "sgd": "R-ProxSGD", "spb": "R-ProxSPB (amortized)",
         "sgd_dense": "R-ProxSGD, linear_solver=dense", "sgd_cg": "R-ProxSGD, linear_solver=cg"}


def make_data(d, r, b, dtype, seed=0):
    """n = 8 b samples of a sparse spiked model, generated on the device."""
    n = 8 * b
    k_u, k_s, k_e = jax.random.split(jax.random.key(seed), 3)
    support = max(d // (4 * r), 2)
    rows = jnp.arange(d)[:, None]
    cols = jnp.arange(r)[None, :]
    mask = (rows >= cols * support) & (rows < (cols + 1) * support)
    u = jnp.where(mask, jax.random.normal(k_u, (d, r), dtype), 0)
    u = u / jnp.linalg.norm(u, axis=0)
    lam = 1.0 + 4.0 * (r - jnp.arange(r, dtype=dtype)) / r
    s = jax.random.normal(k_s, (n, r), dtype) * jnp.sqrt(lam)
    e = jax.random.normal(k_e, (n, d), dtype)
    return jax.block_until_ready(jnp.dot(s, u.T, precision="highest") + 0.5 * e)


def make_opt(method, mu, steps):
    reg = rproxjax.l1(mu)
    schedule = rproxjax.inverse_sqrt_schedule(1.0)
    if method == "subgrad":
        return rproxjax.r_subgrad(schedule, reg)
    if method.startswith("sgd"):
        solver = method[4:] or "auto"
        return rproxjax.r_prox_sgd(schedule, GAMMA, reg,
                                   ssn=rproxjax.SSN.stochastic(linear_solver=solver))
    return rproxjax.r_prox_spb(1.0, GAMMA, reg, q=steps)


def ssn_mean(history):
    return float(np.mean(np.asarray(history.ssn_steps)))


def bench_steps(method_fns, x0, states, key, data, repeats, steps):
    """Warm-up from X0, then round-robin timing from the warmed-up point and state."""
    warm, results = {}, {}
    for m, fn in method_fns.items():
        res = jax.block_until_ready(fn(x0, states[m], key, data))
        warm[m] = (res.params, res.opt_state)
        results[m] = {"newton_steps_warmup": ssn_mean(res.history)}
    samples = {m: [] for m in method_fns}
    last = {}
    for _ in range(repeats):
        for m, fn in method_fns.items():
            t0 = time.perf_counter()
            last[m] = jax.block_until_ready(fn(*warm[m], key, data))
            samples[m].append((time.perf_counter() - t0) / steps)
    for m in method_fns:
        x = last[m].params
        results[m].update(
            time_s=statistics.median(samples[m]), samples_s=samples[m],
            newton_steps=ssn_mean(last[m].history),
            nonzeros_fraction=float(jnp.mean(jnp.abs(x) > 1e-3)),
            feasibility=float(jnp.linalg.norm(
                jnp.dot(x.T, x, precision="highest") - jnp.eye(x.shape[1], dtype=x.dtype))))
    base = results["subgrad"]["time_s"]
    for m in method_fns:
        results[m]["ratio"] = results[m]["time_s"] / base
        results[m]["paired_ratio"] = statistics.median(
            a / s for a, s in zip(samples[m], samples["subgrad"], strict=True))
    return results


def bench_sweep(prep, repeats, compile_s):
    single, mu1 = prep["single"]
    data, x0, key = prep["data"], prep["x0"], prep["key"]
    out = {}
    one = jax.block_until_ready(single(mu1, data, x0, key))
    for k, (vfn, mus) in prep["vmaps"].items():
        v = jax.block_until_ready(vfn(mus, data, x0, key))
        v_s, one_s = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            v = jax.block_until_ready(vfn(mus, data, x0, key))
            v_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            one = jax.block_until_ready(single(mu1, data, x0, key))
            one_s.append(time.perf_counter() - t0)
        lane_steps = np.asarray(v.history.ssn_steps, np.float64)  # (lanes, steps)
        out[k] = {
            "vmap_s": statistics.median(v_s), "single_s": statistics.median(one_s),
            "ratio": statistics.median(v_s) / statistics.median(one_s),
            "samples": {"vmap_s": v_s, "single_s": one_s},
            "compile_s": compile_s.get((*prep["label"], k), float("nan")),
            "newton_single": ssn_mean(one.history),
            "newton_lanes_mean": float(lane_steps.mean()),
            "newton_lockstep": float(lane_steps.max(axis=0).mean()),
            "finite": bool(np.all(np.isfinite(np.asarray(v.params)))),
        }
    return out


def prepare_size(size, dtype, args):
    """The data, X0 and the jitted programs of one (size, dtype), and their compile jobs."""
    d, r, b = size
    dt = jnp.dtype(dtype)
    data = make_data(d, r, b, dt)
    x0 = stiefel.random_point(jax.random.key(0), d, r, dt)
    key = jax.random.key(1)
    steps = args.steps

    def method_fn(opt):
        def fn(x, state, k, data):  # the data an argument, not a compiled-in constant
            return rproxjax.pure_fit(opt, spca_loss, x, data, key=k, batch_size=b,
                                     num_epochs=1, opt_state=state,
                                     sampling=rproxjax.Sampling(steps_per_epoch=steps))
        return jax.jit(fn)

    label = (dtype, size)
    prep = {"label": label, "size": size, "dtype": dtype, "data": data, "x0": x0, "key": key,
            "fns": {}, "states": {}, "vmaps": {}, "jobs": []}
    for m in METHODS + tuple(f"sgd_{ls}" for ls in args.linear_solvers):
        opt = make_opt(m, MU, steps)
        prep["fns"][m], prep["states"][m] = method_fn(opt), opt.init(x0)
        prep["jobs"].append(((*label, m), prep["fns"][m], (x0, prep["states"][m], key, data)))
    if not args.no_sweep:
        def run(mu, data, x0, k):
            opt = make_opt("sgd", mu, steps)
            return rproxjax.pure_fit(opt, spca_loss, x0, data, key=k, batch_size=b,
                                     num_epochs=1,
                                     sampling=rproxjax.Sampling(steps_per_epoch=steps))
        prep["single"] = (jax.jit(run), jnp.asarray(MU, dt))
        prep["jobs"].append(((*label, "single"), prep["single"][0],
                             (prep["single"][1], data, x0, key)))
        for k in args.lanes:
            mus = jnp.geomspace(0.05, 0.8, k).astype(dt)
            vfn = jax.jit(jax.vmap(run, in_axes=(0, None, None, None)))
            prep["vmaps"][k] = (vfn, mus)
            prep["jobs"].append(((*label, k), vfn, (mus, data, x0, key)))
    return prep


def bench_size(prep, args, compile_s):
    size, dtype = prep["size"], prep["dtype"]
    d, r, b = size
    tic = time.perf_counter()
    before = _timing.compile_count()
    res = {"d": d, "r": r, "b": b, "n": int(prep["data"].shape[0]), "dtype": dtype,
           "steps": args.steps}
    res["steps_table"] = bench_steps(prep["fns"], prep["x0"], prep["states"], prep["key"],
                                     prep["data"], args.repeats, args.steps)
    if not args.no_sweep:
        res["sweep"] = bench_sweep(prep, args.sweep_repeats, compile_s)
    after = _timing.compile_count()
    res["compiles_while_timing"] = {"count": after[0] - before[0],
                                    "seconds": after[1] - before[1]}
    res["seconds"] = time.perf_counter() - tic
    st = res["steps_table"]
    line = ", ".join(f"{NAMES[m]} {1e3 * st[m]['time_s']:.3f} ms (x{st[m]['ratio']:.2f}, "
                     f"N={st[m]['newton_steps']:.2f})" for m in st)
    sw = "; ".join(f"vmap {k}: x{v['ratio']:.2f} (lockstep N {v['newton_lockstep']:.2f})"
                   for k, v in res.get("sweep", {}).items())
    print(f"{dtype} (d, r, b) = {size}: {line}; {sw} [{res['seconds']:.0f} s; "
          f"compiles meanwhile: {res['compiles_while_timing']['count']}, "
          f"{res['compiles_while_timing']['seconds']:.2f} s]", flush=True)
    return res


STEP_HEADERS = ["dtype", "d", "r", "b", "method", "time/step (ms)", "ratio to R-Subgrad",
                "paired ratio", "Newton steps mean", "nonzeros", "||X^T X - I||"]
SWEEP_HEADERS = ["dtype", "d", "r", "b", "lanes", "single (s)", "vmap (s)", "ratio",
                 "Newton single / lanes mean / lockstep", "compile (s)"]


def tables(results):
    step_rows, sweep_rows = [], []
    for res in results:
        head = (res["dtype"], res["d"], res["r"], res["b"])
        if "error" in res:
            step_rows.append((*head, "ERROR", res["error"][:60], "-", "-", "-", "-", "-"))
            continue
        for m in res["steps_table"]:
            s = res["steps_table"][m]
            step_rows.append((*head, NAMES[m], f"{1e3 * s['time_s']:.3f}", f"{s['ratio']:.2f}",
                              f"{s['paired_ratio']:.2f}",
                              "-" if m == "subgrad" else f"{s['newton_steps']:.2f}",
                              f"{s['nonzeros_fraction']:.3f}", f"{s['feasibility']:.1e}"))
        for k, v in res.get("sweep", {}).items():
            sweep_rows.append((*head, k, f"{v['single_s']:.3f}", f"{v['vmap_s']:.3f}",
                               f"{v['ratio']:.2f}",
                               f"{v['newton_single']:.2f} / {v['newton_lanes_mean']:.2f} / "
                               f"{v['newton_lockstep']:.2f}",
                               "-" if np.isnan(v["compile_s"]) else f"{v['compile_s']:.1f}"))
    return step_rows, sweep_rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(range(len(SIZES))),
                        help=f"indices into {SIZES}")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--steps", type=int, default=100, help="steps per timed run (S)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep-repeats", type=int, default=3)
    parser.add_argument("--lanes", nargs="+", type=int, default=[8, 64])
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--linear-solvers", nargs="*", default=[], choices=["dense", "cg"],
                        help="also time R-ProxSGD with these Newton linear solvers")
    parser.add_argument("--serial-compile", action="store_true",
                        help="compile each program at its first call instead of all of them "
                             "concurrently before timing")
    backend = jax.default_backend()
    parser.add_argument("--name", default="scale" if backend == "cpu" else f"scale_{backend}",
                        help="results file name (default scale on CPU, else scale_<backend>)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)
    results, compile_s = [], {}
    for i in args.sizes:  # by size, then dtype: a run cut off keeps its smaller sizes
        for dtype in args.dtypes:
            try:
                prep = prepare_size(SIZES[i], dtype, args)
                if not args.serial_compile:
                    compile_s.update(_timing.precompile_reported(
                        prep["jobs"], f"{dtype} {SIZES[i]}"))
                results.append(bench_size(prep, args, compile_s))
            except Exception as exc:  # noqa: BLE001 - reported in the table, not hidden
                results.append(failed(SIZES[i], dtype, exc))
            prep = None  # the data of one (size, dtype) at a time
            report(results, args, machine, start, final=False)  # a cut-off run keeps its rows
    report(results, args, machine, start, final=True)


def failed(size, dtype, exc):
    tb = traceback.format_exc(limit=8)
    print(f"{dtype} {size} FAILED:\n{tb}", flush=True)
    d, r, b = size
    return {"d": d, "r": r, "b": b, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}",
            "traceback": tb}


def report(results, args, machine, start, final):
    """Prints the tables (when ``final``) and saves what was measured so far."""
    step_rows, sweep_rows = tables(results)
    title = (f"## Per-step cost on {jax.default_backend()} ({machine['devices'][0]}), synthetic "
             f"sparse PCA, mu = {MU}, S = {args.steps} steps per timed run")
    table = _timing.print_table if final else _timing.markdown_table
    if final:
        print(f"\n{title}\n")
    md = [title, "", table(STEP_HEADERS, step_rows)]
    if sweep_rows:
        sweep_title = (f"## jit(vmap(pure_fit)) of R-ProxSGD over K mu in geomspace(0.05, 0.8, K) "
                       f"vs one run at mu = {MU}")
        if final:
            print(f"\n{sweep_title}\n")
        md += ["", sweep_title, "", table(SWEEP_HEADERS, sweep_rows)]
    elapsed = time.perf_counter() - start
    done = "" if final else " (run still going: partial results)"
    md += ["", f"Total benchmark time {elapsed:.0f} s{done}."]
    if final:
        print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if not args.no_save:
        settings = {**vars(args), "size_indices": args.sizes,
                    "sizes": [SIZES[i] for i in args.sizes], "mu": MU, "gamma": GAMMA}
        paths = _timing.save_results(args.name, {"settings": settings, "results": results,
                                                 "elapsed_s": elapsed}, "\n".join(md),
                                     machine=machine)
        if final:
            print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
