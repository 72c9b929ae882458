"""Benchmark: one call of ``rproxjax.tangent_prox`` with an l1 regularizer.

Run from the repository root (about 2-3 minutes on a 2-core CPU)::

    python benchmarks/subproblem.py            # table, saved
    python benchmarks/subproblem.py --quick    # skip d = 10000
    python benchmarks/subproblem.py --no-save

Instance (sparse-PCA-like, as inside ManPG / R-ProxSGD): X is a random point
of St(d, r); A = Z^T Z / n is the sample covariance of n = 300 standard normal
samples Z (n x d); f(X) = -tr(X^T A X), so G = -2 A X, computed as
-2 Z^T (Z X) / n (A, d x d, is never formed); t = 1 / L with
L = 2 lambda_max(A), taken from the n x n matrix Z Z^T / n. The l1 strength mu
puts the soft-threshold t mu at the 95% quantile of |X - t G|; the solution
Y = X + zeta then has about 40% nonzeros (printed).

Timings: median wall time of a compiled, ``jax.jit``-wrapped call after
warm-up (``benchmarks/_timing.py``), default ``tol`` and ``max_steps``:

* cold: ``lam=None`` (Lambda = 0);
* warm: ``lam`` = the multiplier of a previous solve at a slightly perturbed
  gradient G' = G + 1% * rms(G) * noise, as inside the optimizers.

FLOP model (2 FLOPs per multiply-add; counts from ``SubproblemInfo``):

* forming X - t G: 2 d r, and the first prox argument X Lambda: 2 d r^2, once;
* each evaluation of E (``num_evaluations``, line-search trials included):
  2 d r^2 (X^T Y; the prox argument is affine in Lambda, so trial points reuse
  X D);
* each Newton step (``num_steps``): 2 d r^2 (X D, D the Newton direction);
* dense path (r < ``SSN().cg_threshold``), each Newton step additionally 2 d r^3 (the K tensor
  X^T diag(mask_i) X for all columns i) + (2/3) m^3 (the LU solve,
  m = r (r + 1) / 2; the Gram matrix is read off K by indexing);
* CG path (r >= ``SSN().cg_threshold``), each CG iteration (``num_linear_steps``): 4 d r^2
  (X @ H and X^T (mask * .)).

Element-wise work (soft-thresholding, masks, CG vector updates, finiteness
checks) is not counted. The FLOP-bound time is that count divided by the
throughput of a 2000 x 2000 matmul of the same dtype, measured in the same run
just before each row (the machine may be shared, so the reference is taken
under the same load as the row). The ratio measured / bound shows how far
from the large-GEMM rate the solver runs: skinny d x r products run well below
it on CPU, and small problems are dominated by fixed per-call costs.

"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

import rproxjax
from rproxjax import stiefel

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.subproblem`
    from benchmarks import _timing

jax.config.update("jax_enable_x64", True)

SIZES = ((784, 10), (2000, 30), (10000, 50))
QUICK_SIZES = ((784, 10), (2000, 30))
DTYPES = ("float64", "float32")
N_SAMPLES = 300
ZERO_QUANTILE = 0.95
PERTURBATION = 0.01
PEAK_N = 2000


# --------------------------------------------------------------------------
# Instance and FLOP model


def make_instance(d: int, r: int, dtype, seed: int = 0) -> dict:
    """X, G, t, mu and the perturbed gradient used for the warm start."""
    dtype = jnp.dtype(dtype)
    kz, kx, kp = jax.random.split(jax.random.key(seed), 3)
    z = jax.random.normal(kz, (N_SAMPLES, d), dtype)
    # lambda_max(Z^T Z / n) = lambda_max(Z Z^T / n): an n x n problem.
    lmax = jnp.linalg.eigvalsh(z @ z.T / N_SAMPLES)[-1]
    t = 1.0 / (2.0 * lmax)
    x = stiefel.random_point(kx, d, r, dtype)
    g = -2.0 * (z.T @ (z @ x)) / N_SAMPLES
    mu = jnp.quantile(jnp.abs(x - t * g), ZERO_QUANTILE) / t
    rms = jnp.sqrt(jnp.mean(g * g))
    g_pert = g + PERTURBATION * rms * jax.random.normal(kp, g.shape, dtype)
    return {"x": x, "g": g, "g_pert": g_pert, "t": t.astype(dtype), "mu": mu.astype(dtype)}


def solver_path(r: int) -> str:
    return "cg" if r >= rproxjax.SSN().cg_threshold else "dense"


def dense_step_flops(d: int, r: int) -> float:
    """FLOPs of one dense-path Newton direction (K tensor, solve)."""
    m = r * (r + 1) // 2
    return 2.0 * d * r**3 + (2.0 / 3.0) * m**3


def newton_flops(d: int, r: int, steps: int, cg_its: int, evals: int) -> float:
    """The FLOP model of the module docstring."""
    flops = 2.0 * d * r + 2.0 * d * r**2 + evals * 2.0 * d * r**2 + steps * 2.0 * d * r**2
    if solver_path(r) == "dense":
        flops += steps * dense_step_flops(d, r)
    else:
        flops += cg_its * 4.0 * d * r**2
    return flops


@jax.jit
def _solve_cold(x, g, t, mu):
    return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu))


@jax.jit
def _solve_warm(x, g, t, mu, lam):
    return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), lam=lam)


@jax.jit
def _solve_cold_cg(x, g, t, mu):
    return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), ssn=rproxjax.SSN(linear_solver="cg"))


@jax.jit
def _solve_no_steps(x, g, t, mu):
    """max_steps=0: dispatch, setup and the first evaluation of E only."""
    return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), ssn=rproxjax.SSN(max_steps=0))


def _counts(info) -> dict:
    return {
        "steps": int(info.num_steps),
        "cg_its": int(info.num_linear_steps),
        "evals": int(info.num_evaluations),
        "residual": float(info.residual),
        "converged": bool(info.converged),
        "status": rproxjax.describe(int(info.status)),
    }


def _timed(fn, *fn_args, args) -> dict:
    samples = _timing.time_samples(
        fn, *fn_args, repeats=args.repeats, warmup=0,
        max_seconds=args.max_seconds, min_repeats=3,
    )
    return {"median_s": statistics.median(samples), "min_s": min(samples),
            "samples": len(samples)}


def bench_case(d: int, r: int, dtype: str, args) -> dict:
    peak = _timing.matmul_flops(dtype, n=PEAK_N, repeats=3)
    inst = make_instance(d, r, dtype)
    x, g, t, mu = inst["x"], inst["g"], inst["t"], inst["mu"]

    tic = time.perf_counter()
    zeta, info = jax.block_until_ready(_solve_cold(x, g, t, mu))  # compiles: warm-up
    first_call = time.perf_counter() - tic
    cold = _counts(info)
    t_cold = _timed(_solve_cold, x, g, t, mu, args=args)

    _, info_prev = _solve_cold(x, inst["g_pert"], t, mu)
    lam_prev = info_prev.lam
    zeta_w, info_w = jax.block_until_ready(_solve_warm(x, g, t, mu, lam_prev))  # warm-up
    warm = _counts(info_w)
    t_warm = _timed(_solve_warm, x, g, t, mu, lam_prev, args=args)

    y = x + zeta
    bound_cold = newton_flops(d, r, cold["steps"], cold["cg_its"], cold["evals"]) / peak
    bound_warm = newton_flops(d, r, warm["steps"], warm["cg_its"], warm["evals"]) / peak
    return {
        "dtype": dtype, "d": d, "r": r, "path": solver_path(r), "peak_flops": peak,
        "t": float(t), "mu": float(mu),
        "nonzero_fraction": float(jnp.mean(y != 0)),
        "cold_vs_warm_max_abs_diff": float(jnp.max(jnp.abs(zeta - zeta_w))),
        "first_call_s": first_call,
        "cold": cold, "warm": warm,
        "timing_cold": t_cold, "timing_warm": t_warm,
        "time_cold_s": t_cold["median_s"], "time_warm_s": t_warm["median_s"],
        "bound_cold_s": bound_cold, "bound_warm_s": bound_warm,
        "ratio_cold": t_cold["median_s"] / bound_cold,
        "ratio_warm": t_warm["median_s"] / bound_warm,
        "_instance": inst, "_lam": info.lam,
    }


def _pair(a, b, fmt="{}"):
    return f"{fmt.format(a)} / {fmt.format(b)}"


MAIN_HEADERS = (
    "dtype", "d", "r", "solver path", "Newton steps", "CG its", "evaluations",
    "time cold (ms)", "time warm (ms)", "FLOP bound (ms)", "ratio",
)
INSTANCE_HEADERS = (
    "dtype", "d", "r", "t", "mu", "nonzeros", "residual cold / warm",
    "converged cold / warm", "matmul GFLOP/s", "min time cold / warm (ms)", "first call (s)",
)


def main_rows(cases):
    rows, rows_inst = [], []
    for c in cases:
        cold, warm = c["cold"], c["warm"]
        rows.append((
            c["dtype"], c["d"], c["r"], c["path"],
            _pair(cold["steps"], warm["steps"]),
            _pair(cold["cg_its"], warm["cg_its"]),
            _pair(cold["evals"], warm["evals"]),
            f"{1e3 * c['time_cold_s']:.2f}", f"{1e3 * c['time_warm_s']:.2f}",
            _pair(1e3 * c["bound_cold_s"], 1e3 * c["bound_warm_s"], "{:.2f}"),
            _pair(c["ratio_cold"], c["ratio_warm"], "{:.1f}"),
        ))
        rows_inst.append((
            c["dtype"], c["d"], c["r"], f"{c['t']:.4g}", f"{c['mu']:.4g}",
            f"{c['nonzero_fraction']:.3f}",
            _pair(cold["residual"], warm["residual"], "{:.1e}"),
            _pair(cold["converged"], warm["converged"]),
            f"{c['peak_flops'] / 1e9:.1f}",
            _pair(1e3 * c["timing_cold"]["min_s"], 1e3 * c["timing_warm"]["min_s"], "{:.2f}"),
            f"{c['first_call_s']:.1f}",
        ))
    return rows, rows_inst


# --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="skip d = 10000")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per entry")
    parser.add_argument("--max-seconds", type=float, default=10.0,
                        help="stop repeating an entry after this long (at least 3 calls)")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)

    peaks_start = {dt: _timing.matmul_flops(dt, n=PEAK_N, repeats=5) for dt in DTYPES}
    sizes = QUICK_SIZES if args.quick else SIZES
    cases = []
    for dtype in DTYPES:
        for d, r in sizes:
            case = bench_case(d, r, dtype, args)
            cases.append(case)
            print(
                f"{dtype} d={d} r={r}: cold {1e3 * case['time_cold_s']:.2f} ms, warm "
                f"{1e3 * case['time_warm_s']:.2f} ms, nonzeros {case['nonzero_fraction']:.3f}, "
                f"matmul {case['peak_flops'] / 1e9:.1f} GFLOP/s; cold: {case['cold']}; "
                f"warm: {case['warm']}",
                flush=True,
            )
    peaks_end = {dt: _timing.matmul_flops(dt, n=PEAK_N, repeats=5) for dt in DTYPES}

    title = "## tangent_prox, l1, one call (cold / warm where two numbers)"
    rows, rows_inst = main_rows(cases)
    print(f"\n{title}\n")
    table = _timing.print_table(MAIN_HEADERS, rows)
    print()
    table_inst = _timing.print_table(INSTANCE_HEADERS, rows_inst)
    peak_line = f"matmul {PEAK_N}^2 throughput, start / end of the run: " + ", ".join(
        f"{dt} {peaks_start[dt] / 1e9:.1f} / {peaks_end[dt] / 1e9:.1f} GFLOP/s" for dt in DTYPES
    )
    print(f"\n{peak_line}", flush=True)


    elapsed = time.perf_counter() - start
    print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if not args.no_save:
        markdown = "\n".join([
            title, "", table, "", table_inst, "", peak_line, "",
        ])
        results = {
            "peak_flops_start": peaks_start, "peak_flops_end": peaks_end,
            "settings": {"n_samples": N_SAMPLES, "zero_quantile": ZERO_QUANTILE,
                         "perturbation": PERTURBATION, "peak_n": PEAK_N, **vars(args)},
            "cases": [{k: v for k, v in c.items() if not k.startswith("_")} for c in cases],
            "elapsed_s": elapsed,
        }
        machine["loadavg_end"] = _timing.machine_info()["loadavg_1_5_15min"]
        paths = _timing.save_results("subproblem", results, markdown, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
