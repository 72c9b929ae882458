"""Profile: where a vmapped sweep's time goes, by XLA operation, R-ProxSGD against R-Subgrad.

Run from the repository root (about 1-2 minutes on 2 CPU cores)::

    python benchmarks/sweep_profile.py [--dtype float32] [--data fashion] [--no-save]

``step_cost.py`` times ``jax.jit(jax.vmap(pure_fit))`` over 8 mu against the same sweep of
R-Subgrad; this script says where the difference goes. The instance is the sweep of
``step_cost.py`` (MNIST n = 20,000 or the 10,000 shipped Fashion-MNIST images, d = 784,
r = 10, b = 100, one epoch of 200 steps, mu = geomspace(0.05, 0.8, 8), a key per lane,
``SSN.stochastic()``). Each method's sweep is compiled ahead of time, called once, then
called once under ``jax.profiler.trace(create_perfetto_trace=True)``: on CPU the trace has
one event per executed XLA thunk, named by its HLO instruction. An instruction's self time
is its events' time less that of the events nested in them (a while loop's body), summed
over the call. Each instruction is put in a group by the JAX operation it comes from (the
``op_name`` metadata of the compiled HLO):

* "gradient": the minibatch gather and ``jax.grad`` of the loss;
* "sampling": the epoch's permutation (``_shuffle``);
* "retraction and feasibility": ``stiefel.retract`` and the runner's feasibility check;
* "subproblem: batched": ``tangent_prox``'s work outside the Newton loops (the start,
  the stopping test, zeta and the warm starts), batched over the lanes;
* "subproblem: Newton loops": the Newton steps of the lanes that take one, one lane after
  another (and the slicing of those lanes);
* "direction and checks": the rest of the optimizer update (R-Subgrad's subgradient
  direction, the finiteness checks and selections of the transformations, the runner's
  history).

Each profile runs in a process of its own (a second profiled program in the same process
was measured up to 1.7x slower), ``--repeats`` times per method (default 3), alternating
the methods; the table shows, for each method, the profile with the smallest total, the
least disturbed by load (one profile of a call was measured 2x slow on a shared machine).
Profiling adds time to every thunk, so the program with more thunks (the proximal sweep's
Newton loops run lane by lane) is slowed more: the table's ratio of totals is above
``step_cost.py``'s timed one (1.41 against 1.29 on MNIST float64, measured), and the
profile says where the time goes, not how much there is. Times are per sweep step
(8 lanes) in us.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import subprocess
import sys
import tempfile

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import rproxjax  # noqa: E402
from rproxjax import stiefel  # noqa: E402
from rproxjax.problems import spca_loss  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.sweep_profile`
    from benchmarks import _timing

STEPS, LANES, B, R = 200, 8, 100, 10
GROUPS = ("gradient", "sampling", "retraction and feasibility", "subproblem: batched",
          "subproblem: Newton loops", "direction and checks")


def _group(op_name: str) -> str:
    if "_shuffle" in op_name:
        return "sampling"
    if "_solve_jit" in op_name:
        # The Newton loops sit in a while loop (the lanes) around a while loop (the steps).
        return ("subproblem: Newton loops" if "_solve_jit)/while/body" in op_name
                else "subproblem: batched")
    if "_retract" in op_name or "feasibility" in op_name:
        return "retraction and feasibility"
    if "jvp(" in op_name or "transpose(" in op_name or "gather" in op_name:
        return "gradient"
    return "direction and checks"


def _sweep(method, data, dtype):
    x0 = stiefel.random_point(jax.random.key(0), data.shape[1], R, dtype)

    def run(mu, key, data):
        reg = rproxjax.l1(mu)
        if method == "R-ProxSGD":
            opt = rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 0.1, reg,
                                      ssn=rproxjax.SSN.stochastic())
        else:
            opt = rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(1.0), reg)
        return rproxjax.pure_fit(opt, spca_loss, x0, data, key=key, batch_size=B,
                                 num_epochs=1, steps_per_epoch=STEPS).params

    mus = jnp.geomspace(0.05, 0.8, LANES).astype(dtype)
    keys = jax.random.split(jax.random.key(1), LANES)
    compiled = jax.jit(jax.vmap(run, in_axes=(0, 0, None))).lower(mus, keys, data).compile()
    return compiled, (mus, keys, data)


def _self_times(trace_dir):
    """{instruction: (self time in us, events)} of the trace's thunk events."""
    path = sorted(glob.glob(f"{trace_dir}/**/perfetto_trace.json.gz", recursive=True))[-1]
    events = json.load(gzip.open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    events = [e for e in events if e.get("ph") == "X"]
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    child = collections.Counter()
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack = []
        for e in thread:
            while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) <= e["ts"]:
                stack.pop()
            if stack:
                child[id(stack[-1])] += e.get("dur", 0)
            stack.append(e)
    times, counts = collections.Counter(), collections.Counter()
    for e in events:
        name = e["name"]
        if name.startswith("$") or "ThunkExecutor" in name or "ThreadPool" in name:
            continue
        times[name] += e.get("dur", 0) - child[id(e)]
        counts[name] += 1
    return {name: (times[name], counts[name]) for name in times}


def _op_names(hlo_text):
    """{instruction: op_name} from the compiled HLO's metadata."""
    out = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"([^\"]*)\"", hlo_text,
                         re.M):
        out[m.group(1)] = m.group(2)
    return out


def profile(method, data, dtype):
    compiled, args = _sweep(method, data, dtype)
    jax.block_until_ready(compiled(*args))
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            jax.block_until_ready(compiled(*args))
        times = _self_times(trace_dir)
    names = _op_names(compiled.as_text())
    groups = collections.Counter()
    ops = []
    for inst, (us, count) in times.items():
        op_name = names.get(inst, "")
        groups[_group(op_name)] += us / STEPS
        ops.append({"instruction": inst, "us per sweep step": us / STEPS, "calls": count,
                    "group": _group(op_name), "op_name": op_name})
    ops.sort(key=lambda o: -o["us per sweep step"])
    return {"groups": dict(groups), "total": sum(groups.values()), "ops": ops}


def _data(name, dtype):
    raw = (rproxjax.datasets.load_fashion_mnist(10000, seed=0) if name == "fashion"
           else rproxjax.datasets.load_mnist(20000, seed=0))
    return jnp.asarray(raw, dtype)


def _in_own_process(method, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, __file__, "--method", method, "--dtype", args.dtype,
                        "--data", args.data, "--out", out.name], check=True)
        return json.load(open(out.name))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--data", default="mnist", choices=("mnist", "fashion"))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--method", help=argparse.SUPPRESS)  # one profile, into --out
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dtype = jnp.dtype(args.dtype)
    data = _data(args.data, dtype)
    if args.method:
        json.dump(profile(args.method, data, dtype), open(args.out, "w"))
        return
    machine = _timing.machine_info()
    methods = ("R-Subgrad", "R-ProxSGD")
    runs = {m: [] for m in methods}
    for _ in range(args.repeats):
        for m in methods:
            runs[m].append(_in_own_process(m, args))
    res = {}
    for m in methods:
        fastest = min(runs[m], key=lambda r: r["total"])
        res[m] = dict(fastest, totals=[r["total"] for r in runs[m]])
    sub, prox = res["R-Subgrad"], res["R-ProxSGD"]
    title = (f"## A vmapped sweep by XLA operation: {args.data}, {args.dtype}, n={data.shape[0]}, "
             f"d={data.shape[1]}, r={R}, b={B}, {LANES} lanes (mu), {STEPS} steps")
    rows = [(g, f"{sub['groups'].get(g, 0.0):.0f}", f"{prox['groups'].get(g, 0.0):.0f}",
             f"{prox['groups'].get(g, 0.0) - sub['groups'].get(g, 0.0):+.0f}") for g in GROUPS]
    rows.append(("total", f"{sub['total']:.0f}", f"{prox['total']:.0f}",
                 f"{prox['total'] - sub['total']:+.0f} (ratio {prox['total'] / sub['total']:.2f})"))
    print(f"\n{title}\n")
    groups = _timing.print_table(["group", "R-Subgrad (us / sweep step)",
                                  "R-ProxSGD (us / sweep step)", "difference"], rows)
    top = [o for o in prox["ops"] if o["group"].startswith("subproblem")
           or o["group"] == "direction and checks"][:args.top]
    print(f"\n### R-ProxSGD: the {len(top)} costliest operations outside the shared gradient, "
          "sampling and retraction\n")
    ops = _timing.print_table(
        ["instruction", "us / sweep step", "calls", "group", "from (op_name, shortened)"],
        [(o["instruction"], f"{o['us per sweep step']:.1f}", o["calls"], o["group"],
          o["op_name"].replace("jit(run)/vmap()/while/body/closed_call/", "")[-70:])
         for o in top])
    totals = "; ".join(f"{m} " + ", ".join(f"{t:.0f}" for t in res[m]["totals"])
                       for m in methods)
    text = (f"{title}\n\n{groups}\n\nGroups by the JAX operation each XLA instruction comes "
            "from (the script's docstring); self time from the profiled call with the smallest "
            f"total of {args.repeats} per method (totals, us per sweep step: {totals}), per "
            f"sweep step of {LANES} lanes. 'calls': the instruction's executions in "
            f"the whole call ({STEPS} per step for batched work; per lane and Newton step in "
            "the Newton loops).\n\n### R-ProxSGD: the costliest operations outside the shared "
            f"gradient, sampling and retraction\n\n{ops}\n")
    if not args.no_save:
        name = "sweep_profile" + ("" if args.data == "mnist" else f"_{args.data}") + (
            "" if args.dtype == "float64" else "_float32")
        paths = _timing.save_results(name, {"args": vars(args), **res}, text, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
