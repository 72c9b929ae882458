"""Benchmark: cost of one proximal step against one R-Subgrad step, and of a vmapped mu sweep.

Run from the repository root (3-6 minutes on a quiet 2-core CPU; 197-330 s measured)::

    python benchmarks/step_cost.py                       # tables, saved
    python benchmarks/step_cost.py --dtypes float64 --no-save
    python benchmarks/step_cost.py --no-sweep
    python benchmarks/step_cost.py --data fashion        # results/step_cost_fashion.md

Instance: real MNIST at the paper's size, ``rproxjax.datasets.load_mnist(20000,
seed=0)`` (n = 20,000 centred and scaled images, d = 784; ``--data fashion``: the 10,000
shipped Fashion-MNIST images, ``load_fashion_mnist(10000, seed=0)``), r = 10, minibatch
b = 100, per-sample loss ``rproxjax.problems.spca_loss`` (||z||^2 - ||X^T z||^2),
regularizer ``rproxjax.l1(mu)``, X0 = ``stiefel.random_point(key(0), 784, 10)``.
float64 (x64 enabled here) and float32 (data, X0 and mu built in float32).

Optimizers (subproblem settings ``ssn = rproxjax.SSN.stochastic()``: the adaptive Newton
rule, ``rtol = SSN_RTOL`` = 0.1, ``max_steps`` = 100; polar retraction; ``main(ssn=...)`` sets
other settings):

* R-ProxSGD: ``r_prox_sgd(inverse_sqrt_schedule(1.0), 0.1, l1(mu), ssn=ssn)``;
* R-ProxSPB: ``r_prox_spb(1.0, 0.1, l1(mu), q=100, ssn=ssn)``;
* R-Subgrad: ``r_subgrad(inverse_sqrt_schedule(1.0), l1(mu))``;
* for comparison: R-ProxSGD with ``ssn.replace(rtol=0.0)`` (solves to ``tol`` alone),
  ``ssn.replace(max_steps=0)`` (no Newton step: the prox setup and the first evaluation of E
  only, to split the step's cost), ``method="secant"``, ``"adaptive"`` and ``"reference"``
  (the reference code's Newton rule), and a "gradient only" scan (gather + ``jax.grad``, no
  update). These variants are timed from R-ProxSGD's warmed-up state.

Part (a), per-step cost, for mu in {0.05, 0.2, 0.4, 0.8}: each method first
runs 200 iterations from X0 with ``rproxjax.fit`` (``num_epochs=1``,
``sampling=Sampling(steps_per_epoch=200)``; for R-ProxSPB two blocks of a refresh
and q - 1 = 99 SARAH steps), so that X is sparse and the subproblem is warm-started as in a run.
Then a compiled ``lax.scan`` of T = 50 iterations of [minibatch gather +
``jax.grad`` of the mean per-sample loss + ``opt.update`` +
``optax.apply_updates``], with the same pre-drawn indices (a permutation, no
repeats) for all methods, is timed; the same scan body serves every method
(R-ProxSPB SARAH steps pass ``refresh=False`` statically and, as ``fit`` does, the
gradient at the previous point X_{t-1} on the same minibatch as ``grad_fn_value``,
computed with the gradient at X_t in one ``jax.vmap`` over the two points; the row
"SARAH step, two gradient calls" passes ``grad_fn`` instead, which the estimator
calls at X_{t-1}, as a hand-written optax loop would). The R-ProxSPB SARAH
scan starts just after a refresh. The refresh step (full gradient over n in
chunks of 2048, as ``fit`` computes it, + update with ``refresh=True`` +
apply) is timed on its own, as one compiled call from the warmed-up state
(where the next refresh falls); amortized = ((q - 1) SARAH + refresh) / q.
Every function is compiled (a dtype's programs concurrently, ``_timing.precompile``,
unless ``--serial-compile``) and called once untimed; compilations during the timed
rounds are counted (``compiles_while_timing``, 0 expected); then the methods of one
(dtype, mu) are timed round-robin, one call each per round (so that all see
the same load), ``--repeats`` rounds (default 7); the time per step is the
median call time / T, and the ratio is to R-Subgrad's median in the same
rounds. Newton steps per call are ``step_info(state).ssn.num_steps`` collected in the
scan, averaged over the timed steps.

Part (b), the sweep: ``run(mu, key, data)`` builds the optimizer inside and
calls ``rproxjax.fit(opt, spca_loss, X0, data, key=key, batch_size=100,
num_epochs=1, sampling=rproxjax.Sampling(steps_per_epoch=200))`` (R-ProxSPB: q = 100, so two
blocks of a full-gradient refresh and 99 SARAH steps), returning the final
params, optimizer state and per-step Newton steps (``history.ssn_steps``).
The data set is an argument (``in_axes=None`` under vmap) rather than a
closed-over constant. Timed: ``jax.jit(jax.vmap(run, in_axes=(0, 0, None)))``
over the 8 mu of ``jnp.geomspace(0.05, 0.8, 8)`` (one key per lane), one
``jax.jit(run)`` at mu = 0.2, and the 8 single runs (same mu and keys as the
lanes) one after another. All are compiled ahead of time; then
one untimed round and ``--sweep-repeats`` rounds (default 3) of [vmap, single, 8
sequential] are timed, medians reported, with ``rproxjax.sweep(lanes="map")`` and, for
comparison on CPU, the same vmap with ``ssn.replace(sequential_lanes=False)`` (one
batched Newton ``while_loop`` for all lanes; by default a vmapped solve maps its lanes on
CPU; elsewhere the vmap is that loop, and its columns read "= vmap"). Newton
steps: the single run's mean, the mean over lanes and steps, and the lockstep count (max
over lanes per step, averaged over steps), which is what a batched ``while_loop`` pays.
The vmapped final points are checked against the sequential runs'. Also timed: the vmap
with one key for all lanes (``in_axes=(0, None, None)``, common random numbers: every lane
draws the same minibatches, so the gathers are shared and the lanes' gradients share their
operands), its final points checked against single runs with that key (untimed). And, in
the same rounds, the floor: the same two vmaps and one run of R-Subgrad, which solves no
subproblem (its step is the minibatch gradient, a subgradient of h and the retraction; a
proximal step does that work and more): what 8 lanes of the shared work cost against one
lane, and the R-Subgrad sweep's time over the proximal method's single run. The latter
bounds what any subproblem kernel can reach without slowing the single run: the proximal
sweep takes at least the R-Subgrad sweep's time.

Goals (targets measured, not assumed): (a) prox step / R-Subgrad step
<= 1.5; (b) vmap 8 / single <= 2.5, and the vmapped sweep no slower than the
8 sequential runs. The library is not modified.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import statistics
import subprocess
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

import rproxjax
from rproxjax import stiefel
from rproxjax._contract import block_cost

# Private, on purpose: the refresh row times the full gradient exactly as ``fit`` computes it
# (chunks read by dynamic_slice in a fori_loop); no public function exposes it alone.
from rproxjax._run.data import chunked_mean as _chunked_mean
from rproxjax.problems import spca_loss

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.step_cost`
    from benchmarks import _timing

jax.config.update("jax_enable_x64", True)

N, D, R, B = 20_000, 784, 10, 100
#: --data: (label, loader, n).
DATA = {"mnist": ("MNIST", rproxjax.datasets.load_mnist, N),
        "fashion": ("Fashion-MNIST", rproxjax.datasets.load_fashion_mnist, 10_000)}
GAMMA = 0.1
ETA0 = 1.0
Q = 100
T = 50
WARMUP_STEPS = 200
CHUNK = 2048
MUS = (0.05, 0.2, 0.4, 0.8)
SWEEP_MU = 0.2
SWEEP_K = 8
DTYPES = ("float64", "float32")
GOAL_STEP = 1.5
GOAL_VMAP = 2.5
GOAL_SWEEP = 1.3  # a proximal sweep against the same sweep of R-Subgrad (CPU)

NAMES = {
    "subgrad": "R-Subgrad",
    "grad": "gradient only (gather + grad)",
    "sgd": "R-ProxSGD",
    "sgd_rtol0": "R-ProxSGD, rtol=0",
    "sgd_secant": "R-ProxSGD, method=secant",
    "sgd_adaptive": "R-ProxSGD, method=adaptive",
    "sgd_ref": "R-ProxSGD, method=reference",
    "sgd_ms0": "R-ProxSGD, max_steps=0",
    "sarah": "R-ProxSPB SARAH step",
    "sarah2": "R-ProxSPB SARAH step, two gradient calls",
    "refresh": "R-ProxSPB refresh (full grad)",
    "spb_avg": "R-ProxSPB amortized (q = 100)",
    "spb_ifo": "R-ProxSPB amortized, per b IFOs",
    "spb": "R-ProxSPB",
}
#: rows of the main table whose ratio is held to the goal
GOAL_ROWS = ("sgd", "sarah", "spb_avg", "spb_ifo")


# --------------------------------------------------------------------------
# Optimizers and the compiled functions


def make_opt(method, mu, ssn, retraction="polar"):
    """The optimizer of ``method`` at mu; the proximal ones solve with settings ``ssn``."""
    reg = rproxjax.l1(mu)
    if method.startswith("sgd"):
        return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(ETA0), GAMMA, reg, ssn=ssn,
                                   retraction=retraction)
    if method in ("spb", "sarah", "sarah2", "refresh"):
        return rproxjax.r_prox_spb(ETA0, GAMMA, reg, q=Q, ssn=ssn, retraction=retraction)
    if method in ("subgrad", "grad"):
        return rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(ETA0), reg,
                                  retraction=retraction)
    raise ValueError(method)


def batch_loss(x, batch):
    return jnp.mean(jax.vmap(spca_loss, in_axes=(None, 0))(x, batch))


batch_grad = jax.grad(batch_loss)


def newton_steps(state):
    info = rproxjax.step_info(state)
    return jnp.int32(0) if info is None or info.ssn == () else info.ssn.num_steps


def run(method, ssn, mu, key, data, x0):
    """One whole ``fit`` run of WARMUP_STEPS steps (the sweep's unit and the warm-up)."""
    opt = make_opt(method, mu, ssn)
    res = rproxjax.pure_fit(opt, spca_loss, x0, data, key=key, batch_size=B, num_epochs=1,
                            sampling=rproxjax.Sampling(steps_per_epoch=WARMUP_STEPS))
    return res.params, res.opt_state, res.history.ssn_steps, res.epoch_ifo[-1]


def make_scan(method, ssn, retraction="polar"):
    """jit of (x, state, idx, data, mu) -> ((x, state), per-step outputs): T steps."""

    def scan(x, state, idx, data, mu):
        opt = make_opt(method, mu, ssn, retraction)

        def body(carry, ib):
            x, state = carry
            batch = data[ib]
            extra = {}
            if method == "sarah":  # as fit does: both gradients from one vmapped call
                prev = optax.tree_utils.tree_get(state, "prev_params")
                both = jax.vmap(batch_grad, in_axes=(0, None))(jnp.stack([x, prev]), batch)
                g, extra = both[0], {"grad_fn_value": both[1], "refresh": False}
            else:
                g = batch_grad(x, batch)
            if method == "grad":  # the gradient alone: x and state unchanged
                return (x, state), jnp.sum(g)
            if method == "sarah2":
                extra = {"grad_fn": lambda p: batch_grad(p, batch), "refresh": False}
            updates, state = opt.update(g, state, x, **extra)
            x = optax.apply_updates(x, updates)
            return (x, state), newton_steps(state)

        return lax.scan(body, (x, state), idx)

    return jax.jit(scan)


def _refresh(ssn, x, state, data, mu):
    opt = make_opt("refresh", mu, ssn)
    n = data.shape[0]
    g = _chunked_mean(lambda b: batch_grad(x, b), data, n, CHUNK)
    updates, state = opt.update(g, state, x, refresh=True)
    return (optax.apply_updates(x, updates), state), newton_steps(state)


def make_refresh(ssn):
    """jit of (x, state, data, mu) -> ((x, state), Newton steps): one R-ProxSPB refresh."""
    return jax.jit(functools.partial(_refresh, ssn))


def _nnz(x):
    return int(np.count_nonzero(np.abs(np.asarray(x)) > 1e-3))


def _sync(x):
    return jax.block_until_ready(x)


def compile_jobs(dtype, data, x0, runs, scans, programs, refresh_fn):
    """(label, jitted function, argument shapes) of every program of one dtype, for
    ``_timing.precompile``: the shapes of the warmed-up states come from ``jax.eval_shape``
    of the runs that produce them, so the later calls find the executables cached."""
    mu = jnp.asarray(MUS[0], dtype)
    key = jax.random.key(1)
    outs = {m: jax.eval_shape(fn, mu, key, data, x0) for m, fn in runs.items()}
    spb = outs["spb"][:2]
    after_refresh = jax.eval_shape(refresh_fn, *spb, data, mu)[0]
    idx = jax.ShapeDtypeStruct((T, B), jnp.int32)
    jobs = [((dtype, m), fn, (mu, key, data, x0)) for m, fn in runs.items()]
    jobs.append(((dtype, "refresh"), refresh_fn, (*spb, data, mu)))
    for row, (method, fn) in scans.items():
        start = {"sgd": outs["sgd"][:2], "sarah": after_refresh,
                 "sarah2": after_refresh}.get(method, outs["subgrad"][:2])
        jobs.append(((dtype, row), fn, (*start, idx, data, mu)))
    for m, prog in programs.items():
        mus, keys, d, x = prog["args"]
        jobs += [((dtype, m, "vmap"), prog["vmap"], prog["args"]),
                 ((dtype, m, "shared"), prog["shared"], (mus, keys[0], d, x))]
        for extra in ("map", "batched"):
            if extra in prog:
                jobs.append(((dtype, m, extra), prog[extra], prog["args"]))
    return jobs


# --------------------------------------------------------------------------
# Part (a): per-step cost


def step_variants(ssn):
    """{row: (method, subproblem settings)} of the scanned rows."""
    return {
        "subgrad": ("subgrad", ssn), "grad": ("grad", ssn), "sgd": ("sgd", ssn),
        "sgd_rtol0": ("sgd", ssn.replace(rtol=0.0)),
        "sgd_ms0": ("sgd", ssn.replace(max_steps=0)),
        "sgd_ref": ("sgd", ssn.replace(rule="reference")),
        "sgd_secant": ("sgd", ssn.replace(rule="secant")),
        "sgd_adaptive": ("sgd", ssn.replace(rule="adaptive")),
        "sarah": ("sarah", ssn), "sarah2": ("sarah2", ssn),
    }


def bench_steps(dtype, data, x0, runs, scans, refresh_fn, repeats, seed, mus=MUS):
    """All rows of one dtype: {mu: {row: result}}."""
    out = {}
    for i, mu_f in enumerate(mus):
        tic = time.perf_counter()
        mu = jnp.asarray(mu_f, dtype)
        key = jax.random.key(1)
        starts, warm = {}, {}
        for m in ("sgd", "spb", "subgrad"):
            x, st, hist, _ = _sync(runs[m](mu, key, data, x0))
            warm[m] = float(np.mean(np.asarray(hist)))
            starts[m] = (x, st)
        # SARAH steps are timed from just after a refresh; the refresh from where it falls.
        (x_r, st_r), _ = _sync(refresh_fn(*starts["spb"], data, mu))
        rng = np.random.default_rng(seed + i)
        idx = jnp.asarray(rng.permutation(data.shape[0])[: T * B].reshape(T, B), jnp.int32)

        calls = {}
        for row, (method, _) in scans.items():
            if method in ("sgd",):
                x, st = starts["sgd"]
            elif method in ("sarah", "sarah2"):
                x, st = x_r, st_r
            else:
                x, st = starts["subgrad"]
            calls[row] = (scans[row][1], (x, st, idx, data, mu), T)
        calls["refresh"] = (refresh_fn, (*starts["spb"], data, mu), 1)

        results, samples = {}, {row: [] for row in calls}
        for row, (fn, args, _) in calls.items():  # compile + one untimed call
            try:
                _, ys = _sync(fn(*args))
                results[row] = {"newton_steps": float(np.mean(np.asarray(ys)))
                                if row != "grad" else 0.0}
            except Exception as exc:  # noqa: BLE001 - reported, not hidden
                results[row] = {"error": f"{type(exc).__name__}: {exc}",
                                "traceback": traceback.format_exc(limit=6)}
                print(f"{dtype} mu={mu_f} {NAMES[row]} FAILED:\n{results[row]['traceback']}",
                      flush=True)
        live = [row for row in calls if "error" not in results[row]]
        before = _timing.compile_count()
        for _ in range(repeats):  # round-robin: every row sees the same load
            for row in live:
                fn, args, steps = calls[row]
                samples[row].append(_timing.time_samples(fn, *args, repeats=1, warmup=0)[0]
                                    / steps)
        compiles = _timing.compile_count()[0] - before[0]
        for row in live:
            results[row].update(time_s=statistics.median(samples[row]),
                                samples_s=samples[row])
        sub = results.get("subgrad", {}).get("time_s")
        if "sarah" in live and "refresh" in live:
            s, r = results["sarah"], results["refresh"]
            results["spb_avg"] = {
                "time_s": ((Q - 1) * s["time_s"] + r["time_s"]) / Q,
                "newton_steps": ((Q - 1) * s["newton_steps"] + r["newton_steps"]) / Q,
                "refresh_per_q_s": r["time_s"] / Q,
            }
            # per IFO: a block's time over its IFOs (block_cost: the refresh's n and the
            # SARAH steps' two gradients of b), times the b IFOs of an R-Subgrad step
            block_ifo = block_cost(Q, B, data.shape[0])
            results["spb_ifo"] = {
                "time_s": Q * results["spb_avg"]["time_s"] * B / block_ifo,
                "newton_steps": results["spb_avg"]["newton_steps"], "block_ifo": block_ifo,
            }
        for row, res in results.items():
            if "time_s" in res and sub:
                res["ratio"] = res["time_s"] / sub
                if row in GOAL_ROWS:
                    res["meets_goal"] = bool(res["ratio"] <= GOAL_STEP)
        # paired per-round ratios (same round, same load) as a check on the medians
        if sub:
            for row in live:
                if row != "subgrad" and row != "refresh":
                    res = results[row]
                    res["paired_ratio_median"] = statistics.median(
                        a / b for a, b in zip(samples[row], samples["subgrad"], strict=True))
        results["_meta"] = {
            "nonzeros_start": {m: _nnz(starts[m][0]) for m in starts},
            "warmup_newton_steps_mean": warm,
            "seconds": time.perf_counter() - tic,
            "compiles_while_timing": compiles,
        }
        out[mu_f] = results
        line = ", ".join(
            f"{row} {1e6 * res['time_s']:,.0f} us"
            + (f" (x{res['ratio']:.2f})" if "ratio" in res else "")
            + (f" N={res['newton_steps']:.2f}" if res.get("newton_steps") else "")
            for row, res in results.items() if not row.startswith("_") and "time_s" in res)
        print(f"{dtype} mu={mu_f}: {line}; nonzeros {results['_meta']['nonzeros_start']} "
              f"[{results['_meta']['seconds']:.0f} s; compiles while timing {compiles}]",
              flush=True)
    return out


# --------------------------------------------------------------------------
# Part (b): the vmapped sweep


def batched_is_default(ssn):
    """Whether a vmapped solve with settings ``ssn`` is one batched Newton loop: off CPU by
    default (``SSN.sequential_lanes`` None), or where ``sequential_lanes=False``."""
    if ssn.sequential_lanes is None:
        return jax.default_backend() != "cpu"
    return not ssn.sequential_lanes


def sweep_programs(method, ssn, dtype, data, x0, with_map=True):
    """The sweep's jitted vmap (one key per lane and one key for all), lanes="map" (if
    ``with_map``) programs, the vmap with one batched Newton loop (``"batched"``, where that
    is not the vmap itself) and their arguments."""
    mus = jnp.geomspace(0.05, 0.8, SWEEP_K).astype(dtype)
    keys = jax.random.split(jax.random.key(3), SWEEP_K)
    vfn = jax.jit(jax.vmap(lambda mu, k, d, x: run(method, ssn, mu, k, d, x),
                           in_axes=(0, 0, None, None)))
    # One key for all lanes (common random numbers): every lane draws the same minibatches,
    # so the gathers are shared and the lanes' gradients share their operands.
    sfn = jax.jit(jax.vmap(lambda mu, k, d, x: run(method, ssn, mu, k, d, x),
                           in_axes=(0, None, None, None)))
    programs = {"vmap": vfn, "shared": sfn, "args": (mus, keys, data, x0)}
    if with_map:
        programs["map"] = jax.jit(lambda m, k, d, x: rproxjax.sweep(
            lambda mu, key: run(method, ssn, mu, key, d, x), m, k, lanes="map"))
        if not batched_is_default(ssn):
            # The same vmap with one batched Newton loop for all lanes (lockstep): the
            # library's way before solves mapped their lanes on CPU, the default elsewhere.
            batched = ssn.replace(sequential_lanes=False)
            programs["batched"] = jax.jit(jax.vmap(
                lambda mu, k, d, x: run(method, batched, mu, k, d, x),
                in_axes=(0, 0, None, None)))
    return programs


def bench_sweep(method, dtype, data, x0, single_fn, programs, repeats, compile_s):
    mus, keys, _, _ = programs["args"]
    mu1 = jnp.asarray(SWEEP_MU, dtype)
    tic = time.perf_counter()
    vcompiled = programs["vmap"].lower(mus, keys, data, x0).compile()
    compile_s = compile_s.get((dtype, method, "vmap"), time.perf_counter() - tic)
    # The vmap with one batched Newton loop for all lanes (lockstep), built with
    # sequential_lanes=False; where that is the default, the vmap itself.
    is_vmap = "batched" not in programs
    bcompiled = None if is_vmap else programs["batched"].lower(mus, keys, data, x0).compile()
    mcompiled = programs["map"].lower(mus, keys, data, x0).compile()
    scompiled = programs["shared"].lower(mus, keys[0], data, x0).compile()
    # The floor: the same sweep of R-Subgrad, which solves no subproblem (its step is the
    # gradient, the subgradient of h and the retraction), timed in the same rounds.
    floor = programs["floor"]
    fvcompiled = floor["vmap"].lower(mus, keys, data, x0).compile()
    fscompiled = floor["shared"].lower(mus, keys[0], data, x0).compile()
    # The sequential runs' arguments indexed here: indexing inside the timed loop would
    # compile small programs there.
    lane_args = [(mus[i], keys[i]) for i in range(SWEEP_K)]
    key0 = keys[0]
    calls = {"floor_vmap": lambda: fvcompiled(mus, keys, data, x0),
             "floor_shared": lambda: fscompiled(mus, key0, data, x0),
             "floor_single": lambda: floor["single"](mu1, key0, data, x0),
             "map": lambda: mcompiled(mus, keys, data, x0),
             "vmap": lambda: vcompiled(mus, keys, data, x0),
             "shared": lambda: scompiled(mus, key0, data, x0),
             "single": lambda: single_fn(mu1, key0, data, x0),
             "sequential": lambda: [single_fn(m, k, data, x0) for m, k in lane_args]}
    if bcompiled is not None:
        calls = {"batched": lambda: bcompiled(mus, keys, data, x0), **calls}
    outs = {name: _sync(call()) for name, call in calls.items()}  # one untimed round
    samples = {name: [] for name in calls}
    before = _timing.compile_count()
    for _ in range(repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            outs[name] = _sync(call())
            samples[name].append(time.perf_counter() - t0)
    after = _timing.compile_count()
    b_out, m_out, v_out = outs.get("batched"), outs["map"], outs["vmap"]
    one_out, seq_out = outs["single"], outs["sequential"]
    b_s, m_s, v_s = samples.get("batched", []), samples["map"], samples["vmap"]
    one_s, seq_s = samples["single"], samples["sequential"]
    if bcompiled is None:  # the vmap is the batched loop: its samples are the row's
        b_out, b_s = v_out, list(v_s)
    v_t, one_t, seq_t, m_t, b_t, s_t = (statistics.median(s)
                                        for s in (v_s, one_s, seq_s, m_s, b_s,
                                                  samples["shared"]))
    fv_t, fs_t, f1_t = (statistics.median(samples[f"floor_{n}"])
                        for n in ("vmap", "shared", "single"))
    # The shared-key lanes against single runs with that key (untimed): the same iterates.
    shared_ref = np.stack([np.asarray(_sync(single_fn(m, key0, data, x0))[0])
                           for m, _ in lane_args])
    lane_steps = np.asarray(v_out[2], np.float64)  # (lanes, steps)
    seq_steps = np.stack([np.asarray(o[2], np.float64) for o in seq_out])
    x_seq = np.stack([np.asarray(o[0]) for o in seq_out])
    # IFOs of a lane (R-ProxSPB's refreshes cost n each) and of an R-Subgrad lane
    ifo, floor_ifo = (float(np.mean(np.asarray(o[3]))) for o in (v_out, outs["floor_vmap"]))
    res = {
        "method": method, "dtype": dtype, "mus": np.asarray(mus).tolist(),
        "single_mu": SWEEP_MU, "steps_per_run": WARMUP_STEPS,
        "vmap_compile_s": compile_s,
        "vmap_batched_newton_is_vmap": is_vmap,
        "compiles_while_timing": {"count": after[0] - before[0],
                                  "seconds": after[1] - before[1]},
        "single_s": one_t, "vmap_s": v_t, "sequential_s": seq_t, "map_s": m_t,
        "map_ratio": m_t / one_t,
        "shared_key_s": s_t, "shared_key_ratio": s_t / one_t,
        "max_abs_diff_shared_vs_single_runs_params": float(
            np.max(np.abs(np.asarray(outs["shared"][0]) - shared_ref))),
        "vmap_batched_newton_s": b_t, "vmap_batched_newton_ratio": b_t / one_t,
        "max_abs_diff_batched_vs_sequential_params": float(
            np.max(np.abs(np.asarray(b_out[0]) - np.stack([np.asarray(o[0]) for o in seq_out])))),
        "max_abs_diff_map_vs_sequential_params": float(
            np.max(np.abs(np.asarray(m_out[0]) - np.stack([np.asarray(o[0]) for o in seq_out])))),
        "single_mean_of_8_s": seq_t / SWEEP_K,
        "ratio": v_t / one_t, "ratio_vs_mean_single": v_t / (seq_t / SWEEP_K),
        "speedup_vs_sequential": seq_t / v_t,
        "subgrad_single_s": f1_t, "subgrad_vmap_s": fv_t, "subgrad_shared_key_s": fs_t,
        "subgrad_vmap_ratio": fv_t / f1_t, "subgrad_shared_key_ratio": fs_t / f1_t,
        "subgrad_vmap_over_single": fv_t / one_t, "subgrad_shared_key_over_single": fs_t / one_t,
        "vmap_over_subgrad_vmap": v_t / fv_t,
        "lane_ifo": ifo, "subgrad_lane_ifo": floor_ifo,
        "vmap_over_subgrad_vmap_per_ifo": (v_t / ifo) / (fv_t / floor_ifo),
        "meets_subgrad_sweep_goal": bool(v_t / fv_t <= GOAL_SWEEP),
        "meets_subgrad_sweep_goal_per_ifo": bool((v_t / ifo) / (fv_t / floor_ifo) <= GOAL_SWEEP),
        "meets_ratio_goal": bool(v_t / one_t <= GOAL_VMAP),
        "meets_sequential_goal": bool(v_t <= seq_t),
        "samples": {"vmap_s": v_s, "single_s": one_s, "sequential_s": seq_s, "map_s": m_s,
                    "vmap_batched_newton_s": b_s, "shared_key_s": samples["shared"],
                    **{f"subgrad_{n}_s": samples[f"floor_{n}"]
                       for n in ("vmap", "shared", "single")}},
        "newton_single": float(np.mean(np.asarray(one_out[2]))),
        "newton_lanes_mean": float(lane_steps.mean()),
        "newton_lanes": lane_steps.mean(axis=1).tolist(),
        "newton_lockstep": float(lane_steps.max(axis=0).mean()),
        "newton_sequential_lanes": seq_steps.mean(axis=1).tolist(),
        "max_abs_diff_vmap_vs_sequential_params": float(
            np.max(np.abs(np.asarray(v_out[0]) - x_seq))),
        "lane_nonzeros": [_nnz(x) for x in np.asarray(v_out[0])],
    }
    print(
        f"{dtype} sweep {NAMES[method]}: vmap 8 {v_t:.2f} s vs single {one_t:.2f} s "
        f"(ratio {res['ratio']:.2f}), 8 sequential {seq_t:.2f} s (vmap x"
        f"{res['speedup_vs_sequential']:.2f}); Newton single {res['newton_single']:.2f}, lanes "
        f"{res['newton_lanes_mean']:.2f} ({', '.join(f'{v:.2f}' for v in res['newton_lanes'])}),"
        f" lockstep {res['newton_lockstep']:.2f}; max |X_vmap - X_seq| "
        f"{res['max_abs_diff_vmap_vs_sequential_params']:.1e}; vmap compile {compile_s:.0f} s; "
        + ("the vmap is the batched Newton loop here" if is_vmap else
           f"vmap with a batched Newton loop {b_t:.2f} s (ratio {b_t / one_t:.2f})")
        + f"; one key for all lanes {s_t:.2f} s (ratio {s_t / one_t:.2f})"
        + f"; R-Subgrad (the floor) vmap 8 ratio {fv_t / f1_t:.2f}, one key {fs_t / f1_t:.2f}"
        + f" (over this method's single run {fv_t / one_t:.2f} / {fs_t / one_t:.2f})"
        + f"; compiles while timing {res['compiles_while_timing']['count']}",
        flush=True,
    )
    return res


def library_state():
    """HEAD commit and a hash of the uncommitted changes under rproxjax/ (provenance)."""
    def git(*a):
        try:
            return subprocess.run(["git", *a], capture_output=True, text=True, check=True,
                                  cwd=_timing.RESULTS_DIR.parent.parent).stdout
        except (OSError, subprocess.CalledProcessError):
            return ""
    diff = git("diff", "HEAD", "--", "rproxjax")
    return {"head": git("rev-parse", "HEAD").strip(),
            "rproxjax_uncommitted_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()
            if diff else None,
            "rproxjax_uncommitted_files": git("diff", "HEAD", "--name-only", "--",
                                              "rproxjax").split()}


# --------------------------------------------------------------------------


BATCHED_IS_VMAP = ("Off CPU a vmapped solve is one batched Newton loop by default: the "
                   "vmap is that loop, and its columns read '= vmap' (not timed twice).")
STEP_HEADERS = ["dtype", "mu", "method", "time/step (us)", "ratio to R-Subgrad",
                "paired ratio", "Newton steps mean", f"goal <= {GOAL_STEP}"]
SWEEP_HEADERS = ["dtype", "method", "single mu=0.2 (s)", "vmap 8 (s)", "ratio",
                 f"goal <= {GOAL_VMAP}", "8 sequential (s)", "mean single (s)",
                 "ratio vs mean single", "vmap speed-up vs sequential", "goal >= 1",
                 "Newton steps single / lanes mean / lockstep",
                 "sweep(lanes='map') 8 (s)", "map ratio", "vmap, batched Newton loop (s)",
                 "its ratio", "vmap, one key for all lanes (s)", "its ratio",
                 "max |X - single run|",
                 "R-Subgrad (no subproblem): vmap 8 ratio / one-key ratio",
                 "R-Subgrad vmap 8 / one-key over this method's single run",
                 f"vmap 8 over R-Subgrad's vmap 8 (goal <= {GOAL_SWEEP})",
                 "the same per IFO (IFOs per lane: this method / R-Subgrad)"]
ROW_ORDER = ("subgrad", "grad", "sgd", "sgd_ms0", "sgd_rtol0", "sgd_secant", "sgd_adaptive",
             "sgd_ref", "sarah", "sarah2", "refresh", "spb_avg", "spb_ifo")


def step_rows(dtype, res_by_mu):
    rows = []
    for mu, results in res_by_mu.items():
        for row in ROW_ORDER:
            if row not in results:
                continue
            res = results[row]
            if "error" in res:
                rows.append((dtype, mu, NAMES[row], "ERROR", "-", "-", "-",
                             res["error"].splitlines()[0][:60]))
                continue
            goal = ("yes" if res["meets_goal"] else "no") if "meets_goal" in res else ""
            rows.append((
                dtype, mu, NAMES[row], f"{1e6 * res['time_s']:,.0f}",
                f"{res['ratio']:.2f}" if "ratio" in res else "-",
                f"{res['paired_ratio_median']:.2f}" if "paired_ratio_median" in res else "-",
                f"{res['newton_steps']:.2f}" if row not in ("subgrad", "grad") else "-",
                goal,
            ))
    return rows


def sweep_row(s):
    return (
        s["dtype"], NAMES[s["method"]], f"{s['single_s']:.3f}", f"{s['vmap_s']:.3f}",
        f"{s['ratio']:.2f}", "yes" if s["meets_ratio_goal"] else "no",
        f"{s['sequential_s']:.3f}", f"{s['single_mean_of_8_s']:.3f}",
        f"{s['ratio_vs_mean_single']:.2f}", f"{s['speedup_vs_sequential']:.2f}x",
        "yes" if s["meets_sequential_goal"] else "no",
        f"{s['newton_single']:.2f} / {s['newton_lanes_mean']:.2f} / {s['newton_lockstep']:.2f}",
        f"{s['map_s']:.3f}", f"{s['map_ratio']:.2f}",
        *(("= vmap", "= vmap") if s.get("vmap_batched_newton_is_vmap") else
          (f"{s['vmap_batched_newton_s']:.3f}", f"{s['vmap_batched_newton_ratio']:.2f}")),
        f"{s['shared_key_s']:.3f}", f"{s['shared_key_ratio']:.2f}",
        f"{s['max_abs_diff_shared_vs_single_runs_params']:.1e}",
        f"{s['subgrad_vmap_ratio']:.2f} / {s['subgrad_shared_key_ratio']:.2f}",
        f"{s['subgrad_vmap_over_single']:.2f} / {s['subgrad_shared_key_over_single']:.2f}",
        f"{s['vmap_over_subgrad_vmap']:.2f} ({'yes' if s['meets_subgrad_sweep_goal'] else 'no'})",
        f"{s['vmap_over_subgrad_vmap_per_ifo']:.2f} "
        f"({'yes' if s['meets_subgrad_sweep_goal_per_ifo'] else 'no'}; "
        f"{s['lane_ifo']:,.0f} / {s['subgrad_lane_ifo']:,.0f})",
    )


def ssn_changes(ssn):
    """The fields of ``ssn`` that differ from ``SSN.stochastic()`` (the optimizers' default)."""
    base = rproxjax.SSN.stochastic()
    return {f.name: getattr(ssn, f.name) for f in dataclasses.fields(ssn)
            if getattr(ssn, f.name) != getattr(base, f.name)}


def main(argv=None, ssn=None):
    """The benchmark; ``ssn`` (default ``SSN.stochastic()``) are the proximal optimizers'
    subproblem settings, from which the comparison rows change one field."""
    ssn = rproxjax.SSN.stochastic() if ssn is None else ssn
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per (dtype, mu)")
    parser.add_argument("--sweep-repeats", type=int, default=3, help="timed sweep rounds")
    parser.add_argument("--mus", nargs="+", type=float, default=list(MUS),
                        help="mu values of the per-step table")
    parser.add_argument("--no-sweep", action="store_true", help="skip the vmapped sweep")
    parser.add_argument("--data", choices=tuple(DATA), default="mnist",
                        help="the shipped data set: MNIST (n = 20,000 of 70,000) or "
                             "Fashion-MNIST (all 10,000 shipped); results/step_cost_<data>.md "
                             "for data other than MNIST")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    parser.add_argument("--serial-compile", action="store_true",
                        help="compile each program at its first call instead of all of a "
                             "dtype's concurrently before timing")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)
    lib = library_state()
    print("library:", lib, flush=True)
    changes = ssn_changes(ssn)
    ssn_text = f"SSN.stochastic({', '.join(f'{k}={v!r}' for k, v in changes.items())})"
    print("subproblem settings:", ssn_text, flush=True)
    variants = step_variants(ssn)

    steps, sweeps, errors = {}, [], []
    for dtype in args.dtypes:
        tic = time.perf_counter()
        label, load, n = DATA[args.data]
        data = jnp.asarray(load(n, seed=0, dtype=np.dtype(dtype)))
        x0 = stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype))
        assert data.dtype == jnp.dtype(dtype) and x0.dtype == jnp.dtype(dtype)
        runs = {m: jax.jit(lambda mu, k, d, x, m=m: run(m, ssn, mu, k, d, x))
                for m in ("sgd", "spb", "subgrad")}
        scans = {row: (method, make_scan(method, row_ssn))
                 for row, (method, row_ssn) in variants.items()}
        refresh_fn = make_refresh(ssn)
        print(f"{dtype}: data {data.shape} loaded [{time.perf_counter() - tic:.1f} s]", flush=True)
        programs = {} if args.no_sweep else {
            m: sweep_programs(m, ssn, dtype, data, x0) for m in ("sgd", "spb")}
        if programs:
            programs["subgrad"] = sweep_programs("subgrad", ssn, dtype, data, x0,
                                                 with_map=False)
        compile_s = {}
        if not args.serial_compile:
            compile_s = _timing.precompile_reported(
                compile_jobs(dtype, data, x0, runs, scans, programs, refresh_fn), dtype)
        steps[dtype] = bench_steps(dtype, data, x0, runs, scans, refresh_fn, args.repeats,
                                   seed=100, mus=tuple(args.mus))
        if not args.no_sweep:
            for method in ("sgd", "spb"):
                try:
                    floor = {**programs["subgrad"], "single": runs["subgrad"]}
                    sweeps.append(bench_sweep(method, dtype, data, x0, runs[method],
                                              {**programs[method], "floor": floor},
                                              args.sweep_repeats, compile_s))
                except Exception as exc:  # noqa: BLE001 - reported, not hidden
                    tb = traceback.format_exc(limit=8)
                    print(f"{dtype} sweep {method} FAILED:\n{tb}", flush=True)
                    errors.append({"dtype": dtype, "method": method,
                                   "error": f"{type(exc).__name__}: {exc}", "traceback": tb})
        print(f"{dtype} done [{time.perf_counter() - tic:.0f} s]", flush=True)

    label, _, n = DATA[args.data]
    title = (f"## Per-step cost, {label} n={n}, d={D}, r={R}, b={B}, gamma={GAMMA}, "
             f"eta0={ETA0}, q={Q} (T={T}-step scans after {WARMUP_STEPS} warm-up steps)")
    print(f"\n{title}\n")
    rows = [r for dtype in steps for r in step_rows(dtype, steps[dtype])]
    table = _timing.print_table(STEP_HEADERS, rows)
    notes = [
        f"Goal (a): R-ProxSGD step, R-ProxSPB SARAH step and R-ProxSPB amortized step each "
        f"<= {GOAL_STEP}x one R-Subgrad step (the 'goal' column). 'ratio' is the median "
        "time over the median R-Subgrad time of the same rounds; 'paired ratio' the median of "
        "the per-round ratios. The refresh row is one call (full gradient over n); "
        "amortized = (99 SARAH + 1 refresh) / 100. 'per b IFOs': the amortized block's time "
        "over its IFOs (the library's block_cost: the refresh's n and the SARAH steps' two "
        "gradients of b each) times the b IFOs of one R-Subgrad step, so that its ratio is "
        "R-ProxSPB's cost per IFO over R-Subgrad's (the brief's goal for R-ProxSPB).",
        "max_steps=0: the prox setup and one evaluation of E, no Newton step (its "
        "iterate is not a solved subproblem; timed from the same state as R-ProxSGD). "
        "R-ProxSGD minus this row is the cost of the Newton steps.",
        f"Subproblem settings of R-ProxSGD and R-ProxSPB: {ssn_text}; the rows 'R-ProxSGD, "
        "<field>=<value>' change that one field.",
    ]
    print("\n" + "\n".join(notes), flush=True)
    sweep_md = ""
    if sweeps or errors:
        sweep_title = (f"## vmap of a whole fit run ({WARMUP_STEPS} steps) over 8 mu = "
                       f"geomspace(0.05, 0.8, 8) vs one run (mu = {SWEEP_MU}) vs 8 sequential "
                       f"runs (goals: ratio <= {GOAL_VMAP}; vmap no slower than sequential)")
        print(f"\n{sweep_title}\n")
        sweep_md = sweep_title + "\n\n" + _timing.print_table(
            SWEEP_HEADERS, [sweep_row(s) for s in sweeps])
        floor_note = ("The columns 'R-Subgrad ...', the floor: the same vmaps (one key per lane /"
                      " one key for all) of R-Subgrad, which solves no subproblem, timed in the "
                      "same rounds, over one R-Subgrad run (what 8 lanes of the gradients and "
                      "retractions every method shares cost against one lane) and over this "
                      "method's single run. A proximal sweep takes at least the R-Subgrad sweep's"
                      " time, so the second of them bounds its ratio from below as long as the "
                      "single run does not get slower. The last two columns: the sweep over the "
                      f"same sweep of R-Subgrad (the goal, <= {GOAL_SWEEP}x), for the same steps "
                      "and per IFO: R-ProxSPB's refreshes cost n IFOs each and its minibatch "
                      "steps 2 b, so its lanes do more work per step than R-Subgrad's; per IFO "
                      "compares the sweeps at equal budgets, as the paper's comparisons do.")
        sweep_md += "\n\n" + floor_note
        print("\n" + floor_note)
        if any(s.get("vmap_batched_newton_is_vmap") for s in sweeps):
            sweep_md += "\n\n" + BATCHED_IS_VMAP
            print("\n" + BATCHED_IS_VMAP)
        for e in errors:
            line = f"\nFAILED {e['dtype']} {e['method']}: {e['error']}"
            print(line)
            sweep_md += "\n" + line
    elapsed = time.perf_counter() - start
    print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if not args.no_save:
        markdown = "\n".join([title, "", table, "", *notes, "", sweep_md, "",
                              f"Total benchmark time {elapsed:.0f} s."])
        payload = {
            "settings": {"data": args.data, "n": n, "d": D, "r": R, "b": B, "gamma": GAMMA,
                         "eta0": ETA0, "q": Q,
                         "T": T, "warmup_steps": WARMUP_STEPS, "chunk": CHUNK,
                         "sweep_mu": SWEEP_MU, "goal_step_ratio": GOAL_STEP,
                         "goal_vmap_ratio": GOAL_VMAP, "ssn_changes": changes,
                         **vars(args)},
            "steps": {dt: {str(mu): res for mu, res in by_mu.items()}
                      for dt, by_mu in steps.items()},
            "sweeps": sweeps,
            "errors": errors,
            "library": lib,
            "elapsed_s": elapsed,
        }
        machine["loadavg_end"] = _timing.machine_info()["loadavg_1_5_15min"]
        stem = "step_cost" if args.data == "mnist" else f"step_cost_{args.data}"
        paths = _timing.save_results(stem, payload, markdown, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
