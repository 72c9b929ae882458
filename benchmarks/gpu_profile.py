"""Benchmark: where one optimizer step's time goes on an accelerator, kernel by kernel, and
what the retraction and the Newton system cost in other forms.

Run from the repository root (about 1-2 minutes on a GPU; runs on CPU too, where the
kernel columns are empty)::

    python benchmarks/gpu_profile.py [--dtypes float64 float32] [--repeats 5] [--no-save]

Part (a), whole steps: the scans of ``step_cost.py`` (T = 50 iterations of minibatch
gather + gradient + ``opt.update`` + ``optax.apply_updates`` on MNIST, n = 20,000,
d = 784, r = 10, b = 100, mu = ``--mu``) for the gradient alone, R-Subgrad, R-ProxSGD,
R-ProxSGD with ``max_steps=0`` and R-ProxSPB's SARAH step, each from the state of a
200-step warm-up run. Timed round-robin (median over ``--repeats`` rounds, per step); then
each scan is called once under ``jax.profiler`` and the device's events (kernels,
copies) are summed by name: events per step, device-busy time per step (the union of
the events' intervals over T) and the costliest events. Wall time per step minus busy
time per step is the time the device waits (launches, host round trips of loop
predicates, library calls' host work). The custom calls in each scan's optimized HLO
(LAPACK / cuSOLVER / cuBLAS targets) are counted too.

Also in part (a): whole ``fit`` runs (``step_cost.run``: 200 steps, a key per run) of
R-Subgrad and R-ProxSGD, one at mu and ``jax.vmap`` of 8 over mu = geomspace(0.05, 0.8, 8),
per step of the run (the sweep's step is 8 lanes' steps): the GPU goal of a sweep is at most
2.5 times one run.

Part (b), pieces alone, per iteration of a T-step scan on the same sizes: the carry X
moves by a tangent step V of ||V||_F = 0.5 (the projection of a fixed direction, scaled)
and is retracted by each candidate form of the polar factor of A = X + V:

* ``library``: ``stiefel.retract``'s polar factor on this backend (on accelerators the
  Newton-Schulz products, with both eigendecomposition passes where they have not
  converged; on CPU one pass and the second where needed);
* ``eigh x2``: both passes always, ``eigh x1``: one pass;
* ``eigh jacobi``: one pass with ``EighImplementation.JACOBI`` (cuSOLVER syevj);
* ``ns rxr K``: the coupled Newton-Schulz iteration for (A^T A)^{-1/2} on the r x r Gram
  (3 r x r products an iteration, K unrolled), U = A Z;
* ``ns thin K``: Newton-Schulz on U itself, U <- U (3 I - U^T U) / 2 (2 thin products);
* ``qr``, ``cholesky qr`` (R = chol(A^T A), U = A R^{-1}: a QR retraction); and
* ``no retraction``: the step and a column scaling, the floor of the loop itself, and the
  same with a ``lax.cond`` on a computed predicate (what a branch on the device costs);

and the Newton system's dense solve: ``cho_factor`` + ``cho_solve`` of an r(r+1)/2 = 55
SPD system per iteration. Each form's orthonormality ||U^T U - I||_F after the T steps is
reported beside its time. The library is not modified.

``--name`` saves a run under XLA_FLAGS of its own apart (``gpu_checks.sh profile_flags``:
XLA's command buffers, CUDA graphs, with and without while loops and conditionals in
them, the steps alone, float64); the flags are recorded with the machine.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import rproxjax
from rproxjax import stiefel

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
    import step_cost
except ImportError:  # run as `python -m benchmarks.gpu_profile`
    from benchmarks import _timing, step_cost

HIGHEST = lax.Precision.HIGHEST
T = step_cost.T
D, R, B = step_cost.D, step_cost.R, step_cost.B
ROWS = ("grad", "subgrad", "sgd", "sgd_ms0", "sarah")
#: Extra rows: (method, retraction) with another retraction than polar.
RETRACTION_ROWS = (("subgrad", "qr"), ("sgd", "qr"), ("subgrad", "cayley"))
#: Lanes of the whole-run sweeps (mu = geomspace(0.05, 0.8, 8), a key each).
SWEEP_LANES = 8
STEP_NORM = 0.5
NS_ITERS = (4, 8)
TOP = 8
#: Lines of the device plane that summarize rather than record events.
DERIVED_LINES = ("XLA Modules", "XLA Ops", "Steps", "Source", "XLA TraceMe",
                 "Framework Name Scope", "Framework Ops", "Launch Stats", "TensorFlow Ops")


def mm(a, b):
    return jnp.matmul(a, b, precision=HIGHEST)


def _inf_norm(m):
    return jnp.max(jnp.sum(jnp.abs(m), axis=-1))


def polar_eigh(a, implementation=None):
    q, w = lax.linalg.eigh(mm(a.T, a), implementation=implementation)
    return mm(a, mm(q * lax.rsqrt(jnp.maximum(w, jnp.finfo(a.dtype).tiny)), q.T))


def polar_ns_rxr(a, iters):
    m = mm(a.T, a)
    c = _inf_norm(m)  # >= the largest eigenvalue: M / c has its spectrum in (0, 1]
    eye = jnp.eye(m.shape[-1], dtype=a.dtype)
    y, z = m / c, eye
    for _ in range(iters):
        t = 1.5 * eye - 0.5 * mm(z, y)
        y, z = mm(y, t), mm(t, z)
    return mm(a, z) * lax.rsqrt(c)


def polar_ns_thin(a, iters):
    u = a * lax.rsqrt(_inf_norm(mm(a.T, a)))
    for _ in range(iters):
        u = 1.5 * u - 0.5 * mm(u, mm(u.T, u))
    return u


def cholesky_qr(a):
    chol = jnp.linalg.cholesky(mm(a.T, a))
    return lax.linalg.triangular_solve(chol, a, left_side=False, lower=True,
                                       transpose_a=True)


def no_retraction(a):
    return a * lax.rsqrt(jnp.sum(a * a, axis=0))


def retractions():
    out = {
        "no retraction": no_retraction,
        "no retraction + lax.cond": lambda a: lax.cond(
            jnp.all(jnp.isfinite(a)), lambda: no_retraction(a), lambda: no_retraction(2 * a)),
        "library (this backend's default)": lambda a: stiefel._polar_factor(a),  # noqa: SLF001
        "eigh x2": lambda a: stiefel._polar_factor(a, passes="two"),  # noqa: SLF001
        "eigh x1": polar_eigh,
        "qr": lambda a: stiefel.retract(jnp.zeros_like(a), a, retraction="qr"),
        "cholesky qr": cholesky_qr,
    }
    if jax.default_backend() != "cpu":
        out["eigh jacobi"] = lambda a: polar_eigh(a, lax.linalg.EighImplementation.JACOBI)
    for k in NS_ITERS:
        out[f"ns rxr {k}"] = lambda a, k=k: polar_ns_rxr(a, k)
        out[f"ns thin {k}"] = lambda a, k=k: polar_ns_thin(a, k)
    return out


def retraction_scan(polar):
    def scan(x, g):
        def body(x, _):
            v = g - mm(x, 0.5 * (mm(x.T, g) + mm(g.T, x)))
            v = v * (STEP_NORM / jnp.sqrt(jnp.sum(v * v)))
            return polar(x + v), None

        return lax.scan(body, x, None, length=T)[0]

    return jax.jit(scan)


def solve_scan(x, mat):
    def body(b, _):
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(mat), b) + 1.0, None

    return lax.scan(body, x, None, length=T)[0]


# --------------------------------------------------------------------------
# The device's events


def _device_events(path):
    """{line name: [(name, start_ns, duration_ns)]} of the device planes in one trace."""
    data = jax.profiler.ProfileData.from_file(path)
    lines = collections.defaultdict(list)
    for plane in data.planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            if line.name in DERIVED_LINES:
                continue
            for ev in line.events:
                lines[f"{plane.name} {line.name}"].append(
                    (ev.name, ev.start_ns, ev.duration_ns))
    return lines


def _busy_ns(events):
    total, end = 0.0, -np.inf
    for _, start, dur in sorted(events, key=lambda e: e[1]):
        stop = start + dur
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def profile_call(fn, args):
    """Device events of one call of ``fn(*args)``: count, busy us and the costliest names."""
    jax.block_until_ready(fn(*args))
    directory = tempfile.mkdtemp(prefix="rproxjax_profile_")
    try:
        jax.profiler.start_trace(directory)
        try:
            jax.block_until_ready(fn(*args))
        finally:
            jax.profiler.stop_trace()
        files = glob.glob(f"{directory}/**/*.xplane.pb", recursive=True)
        lines = _device_events(files[0]) if files else {}
    except Exception as exc:  # noqa: BLE001 - reported in the table, the timings go on
        print(f"profile failed: {type(exc).__name__}: {exc}", flush=True)
        lines = {}
    if not lines:
        return {"events": 0, "busy_us": None, "top": [], "lines": {}}
    events = [e for evs in lines.values() for e in evs]
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for name, _, dur in events:
        by_name[_short(name)][0] += 1
        by_name[_short(name)][1] += dur
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return {"events": len(events), "busy_us": _busy_ns(events) / 1e3,
            "top": [(name, n, ns / 1e3) for name, (n, ns) in top],
            "lines": {k: len(v) for k, v in lines.items()}}


def _short(name):
    return re.sub(r"\s+", " ", name)[:70]


def custom_calls(fn, args):
    """{target: count} of the custom calls in the optimized HLO of ``fn(*args)``."""
    text = fn.lower(*args).compile().as_text()
    return dict(collections.Counter(re.findall(r'custom_call_target="([^"]+)"', text)))


# --------------------------------------------------------------------------


def bench_steps(dtype, mu_f, repeats):
    ssn = rproxjax.SSN.stochastic()
    data = jnp.asarray(rproxjax.datasets.load_mnist(step_cost.N, seed=0,
                                                    dtype=np.dtype(dtype)))
    x0 = stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype))
    mu = jnp.asarray(mu_f, dtype)
    key = jax.random.key(1)
    runs = {m: jax.jit(lambda mu, k, d, x, m=m: step_cost.run(m, ssn, mu, k, d, x))
            for m in ("sgd", "spb", "subgrad")}
    starts = {m: jax.block_until_ready(fn(mu, key, data, x0))[:2] for m, fn in runs.items()}
    after_refresh = step_cost.make_refresh(ssn)(*starts["spb"], data, mu)[0]
    variants = step_cost.step_variants(ssn)
    idx = jnp.asarray(np.random.default_rng(100).permutation(data.shape[0])[:T * B]
                      .reshape(T, B).astype(np.int32))
    calls = {}
    for row in ROWS:
        method, row_ssn = variants[row]
        start = {"sgd": starts["sgd"], "sarah": after_refresh}.get(method, starts["subgrad"])
        calls[row] = (step_cost.make_scan(method, row_ssn), (*start, idx, data, mu))
    for method, retraction in RETRACTION_ROWS:
        x_start = starts[method][0]
        state = step_cost.make_opt(method, mu, ssn, retraction).init(x_start)
        calls[f"{method}_{retraction}"] = (step_cost.make_scan(method, ssn, retraction),
                                           (x_start, state, idx, data, mu))
    steps = dict.fromkeys(calls, T)
    mus = jnp.geomspace(0.05, 0.8, SWEEP_LANES).astype(dtype)
    keys = jax.random.split(jax.random.key(2), SWEEP_LANES)
    for m in ("subgrad", "sgd"):  # whole runs: one lane, and vmapped over 8 mu
        calls[f"run_{m}"] = (runs[m], (mu, key, data, x0))
        calls[f"sweep_{m}"] = (jax.jit(jax.vmap(runs[m], in_axes=(0, 0, None, None))),
                               (mus, keys, data, x0))
        steps[f"run_{m}"] = steps[f"sweep_{m}"] = step_cost.WARMUP_STEPS
    samples = _timing.round_robin(calls, repeats)
    out = {}
    for row, (fn, args) in calls.items():
        prof = profile_call(fn, args)
        n = steps[row]
        out[row] = {"us_per_step": statistics.median(samples[row]) / n * 1e6,
                    "events_per_step": prof["events"] / n,
                    "busy_us_per_step": None if prof["busy_us"] is None
                    else prof["busy_us"] / n,
                    "top": [(nm, c / n, us / n) for nm, c, us in prof["top"][:TOP]],
                    "all": [(nm, c / n, us / n) for nm, c, us in prof["top"]],
                    "lines": prof["lines"],
                    "custom_calls": custom_calls(fn, args)}
        print(dtype, row, f"{out[row]['us_per_step']:.0f} us/step,",
              f"{out[row]['events_per_step']:.1f} events/step,",
              f"busy {_fmt(out[row]['busy_us_per_step'])} us/step;", out[row]["custom_calls"],
              out[row]["top"], prof["lines"], flush=True)
    return out


def bench_pieces(dtype, repeats):
    x = stiefel.random_point(jax.random.key(2), D, R, jnp.dtype(dtype))
    g = jax.random.normal(jax.random.key(3), (D, R), jnp.dtype(dtype))
    calls = {name: (retraction_scan(fn), (x, g)) for name, fn in retractions().items()}
    n = R * (R + 1) // 2
    w = jax.random.normal(jax.random.key(4), (n, n), jnp.dtype(dtype))
    mat = mm(w, w.T) / n + jnp.eye(n, dtype=dtype)
    calls["cho_factor + cho_solve (55)"] = (jax.jit(solve_scan),
                                           (jnp.ones((n,), dtype), mat))
    samples = _timing.round_robin(calls, repeats)
    out = {}
    for name, (fn, args) in calls.items():
        prof = profile_call(fn, args)
        res = fn(*args)
        feas = (float(jnp.linalg.norm(mm(res.T, res) - jnp.eye(R, dtype=res.dtype)))
                if res.ndim == 2 and not name.startswith("no retraction") else None)
        out[name] = {"us_per_iter": statistics.median(samples[name]) / T * 1e6,
                     "events_per_iter": prof["events"] / T,
                     "busy_us_per_iter": None if prof["busy_us"] is None
                     else prof["busy_us"] / T,
                     "top": [(nm, c / T, us / T) for nm, c, us in prof["top"][:TOP]],
                     "feasibility": feas}
        print(dtype, name, f"{out[name]['us_per_iter']:.1f} us/iter,",
              f"{out[name]['events_per_iter']:.1f} events/iter,",
              f"busy {_fmt(out[name]['busy_us_per_iter'])} us/iter;", out[name]["top"],
              flush=True)
    return out


def _name(row):
    if row in step_cost.NAMES:
        return step_cost.NAMES[row]
    if row.startswith(("run_", "sweep_")):
        kind, method = row.split("_", 1)
        what = ("one whole run" if kind == "run"
                else f"jax.vmap of {SWEEP_LANES} whole runs over mu")
        return f"{step_cost.NAMES[method]}, {what}"
    method, retraction = row.rsplit("_", 1)
    return f"{step_cost.NAMES[method]}, retraction={retraction}"


def _fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    parser.add_argument("--mu", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-steps", action="store_true", help="part (b) only")
    parser.add_argument("--no-pieces", action="store_true", help="part (a) only")
    parser.add_argument("--name", default=None,
                        help="results/<name>.md (default gpu_profile, or gpu_profile_cpu on "
                             "CPU); runs under other XLA_FLAGS save under their own name")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = {**_timing.machine_info(), "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    print("machine:", machine, flush=True)
    steps, pieces = {}, {}
    for dtype in args.dtypes:
        if not args.no_pieces:
            pieces[dtype] = bench_pieces(dtype, args.repeats)
        if not args.no_steps:
            steps[dtype] = bench_steps(dtype, args.mu, args.repeats)
    md = [f"## (a) Whole steps, MNIST, mu = {args.mu}, T = {T} (per step)", ""]
    rows = [[dt, _name(row), _fmt(r["us_per_step"], ".0f"),
             _fmt(r["events_per_step"]), _fmt(r["busy_us_per_step"]),
             ", ".join(f"{k} {v}" for k, v in sorted(r["custom_calls"].items())) or "-"]
            for dt, by_row in steps.items() for row, r in by_row.items()]
    md.append(_timing.markdown_table(
        ["dtype", "step", "wall us", "device events", "device busy us", "custom calls"],
        rows))
    md += ["", "Costliest device events per step (count, us):", ""]
    for dt, by_row in steps.items():
        for row, r in by_row.items():
            md.append(f"- {dt} {_name(row)}: " + "; ".join(
                f"`{n}` {c:.1f} x, {us:.1f}" for n, c, us in r["top"]))
    md += ["", f"## (b) Pieces alone, per iteration of a T = {T} scan", ""]
    rows = [[dt, name, _fmt(p["us_per_iter"]), _fmt(p["events_per_iter"]),
             _fmt(p["busy_us_per_iter"]), _fmt(p["feasibility"], ".1e")]
            for dt, by_name in pieces.items() for name, p in by_name.items()]
    md.append(_timing.markdown_table(
        ["dtype", "piece", "wall us", "device events", "device busy us",
         "||U^T U - I||_F after T"], rows))
    md += ["", "Costliest device events per iteration (count, us):", ""]
    for dt, by_name in pieces.items():
        for name, p in by_name.items():
            md.append(f"- {dt} {name}: " + "; ".join(
                f"`{n}` {c:.1f} x, {us:.1f}" for n, c, us in p["top"]))
    elapsed = time.perf_counter() - start
    md += ["", f"Total benchmark time {elapsed:.0f} s."]
    text = "\n".join(md)
    print(text, flush=True)
    if not args.no_save:
        stem = args.name or ("gpu_profile" if jax.default_backend() != "cpu"
                             else "gpu_profile_cpu")
        paths = _timing.save_results(stem, {"steps": steps, "pieces": pieces,
                                            "settings": vars(args)}, text, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
