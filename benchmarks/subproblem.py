"""Benchmark: one call of ``rproxjax.tangent_prox`` with an l1 regularizer.

Run from the repository root (about 3 minutes on a 2-core CPU)::

    python benchmarks/subproblem.py            # table + profile, saved
    python benchmarks/subproblem.py --quick    # skip d = 10000
    python benchmarks/subproblem.py --no-profile --no-save

Instance (sparse-PCA-like, as inside ManPG / R-ProxSGD): X is a random point
of St(d, r); A = Z^T Z / n is a sample covariance of n = 300 standard normal
samples Z (n x d); f(X) = -tr(X^T A X), so G = -2 A X, computed as
-2 Z^T (Z X) / n (A, d x d, is never formed); t = 1 / L with
L = 2 lambda_max(A), taken from the n x n matrix Z Z^T / n. The l1 strength mu
puts the soft-threshold t mu at the 95% quantile of |X - t G|; the solution
Y = X + zeta then has roughly 40% nonzeros (printed).

Timings: median wall time of a compiled, ``jax.jit``-wrapped call after
warm-up (``benchmarks/_timing.py``), default ``tol`` and ``max_steps``:

* cold: ``lam=None`` (Lambda = 0);
* warm: ``lam`` = the multiplier of a previous solve at a slightly perturbed
  gradient G' = G + 1% * rms(G) * noise, as inside the optimizers.

FLOP model (2 FLOPs per multiply-add; counts from ``SubproblemInfo``):

* forming X - t G: 2 d r, once;
* each evaluation of E (``num_evaluations``, line-search trials included):
  4 d r^2 (X @ Lambda and X^T Y);
* dense path (r < 15), each Newton step (``num_steps``) additionally:
  2 d r^3 (the K tensor X^T diag(mask_i) X for all columns i)
  + r^3 m + r^2 m^2 (the Gram einsum with the dense symmetric basis,
  m = r (r + 1) / 2) + (2/3) m^3 (the LU solve);
* CG path (r >= 15), each CG iteration (``num_linear_steps``): 4 d r^2
  (X @ H and X^T (mask * .)).

Element-wise work (soft-thresholding, masks, CG vector updates) is not
counted. The FLOP-bound time is that count divided by the throughput of a
2000 x 2000 matmul of the same dtype measured in the same run; the ratio
measured / bound is therefore >= 1 and shows how far from the large-GEMM
rate the solver runs (skinny d x r matmuls run far below it on CPU).

The profile section (``--no-profile`` skips it) times the solver's pieces
inside a compiled ``fori_loop`` (no dispatch), reconstructs the call time from
the counts, measures the while-loop overhead, and times a few alternative
formulations. It re-implements small pieces of ``rproxjax._subproblem`` and,
for one experiment, temporarily replaces its private ``_cg`` (restored after);
the library files are not modified.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from rproxjax import _subproblem, stiefel
from rproxjax._regularizers import _gram_blockdiag

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.subproblem`
    from benchmarks import _timing

jax.config.update("jax_enable_x64", True)

SIZES = ((784, 10), (2000, 30), (10000, 50))
QUICK_SIZES = ((784, 10), (2000, 30))
PROFILE_SIZES = ((10000, 50), (784, 10))
DTYPES = ("float64", "float32")
N_SAMPLES = 300
ZERO_QUANTILE = 0.95
PERTURBATION = 0.01


# --------------------------------------------------------------------------
# Instance and FLOP model


def make_instance(d: int, r: int, dtype, seed: int = 0) -> dict:
    """X, G, t, mu (and the perturbed gradient for the warm start)."""
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
    return "cg" if r >= _subproblem.CG_THRESHOLD else "dense"


def dense_step_flops(d: int, r: int) -> float:
    """FLOPs of one dense-path Newton direction (K tensor, Gram, solve)."""
    m = r * (r + 1) // 2
    return 2.0 * d * r**3 + r**3 * m + r**2 * m**2 + (2.0 / 3.0) * m**3


def newton_flops(d: int, r: int, steps: int, cg_its: int, evals: int) -> float:
    """The FLOP model of the module docstring."""
    flops = 2.0 * d * r + evals * 4.0 * d * r**2
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
def _solve_no_steps(x, g, t, mu):
    """max_steps=0: dispatch, setup and the first evaluation of E only."""
    return rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu), max_steps=0)


def _counts(info) -> dict:
    return {
        "steps": int(info.num_steps),
        "cg_its": int(info.num_linear_steps),
        "evals": int(info.num_evaluations),
        "residual": float(info.residual),
        "converged": bool(info.converged),
        "status": rproxjax.describe(int(info.status)),
    }


def bench_case(d: int, r: int, dtype: str, peak: float, args) -> dict:
    inst = make_instance(d, r, dtype)
    x, g, t, mu = inst["x"], inst["g"], inst["t"], inst["mu"]
    timing = {"repeats": args.repeats, "max_seconds": args.max_seconds, "min_repeats": 3}

    tic = time.perf_counter()
    zeta, info = jax.block_until_ready(_solve_cold(x, g, t, mu))  # compiles; warm-up
    first_call = time.perf_counter() - tic
    cold = _counts(info)
    t_cold = _timing.time_fn(_solve_cold, x, g, t, mu, warmup=0, **timing)

    _, info_prev = _solve_cold(x, inst["g_pert"], t, mu)
    lam_prev = info_prev.lam
    zeta_w, info_w = jax.block_until_ready(_solve_warm(x, g, t, mu, lam_prev))  # warm-up
    warm = _counts(info_w)
    t_warm = _timing.time_fn(_solve_warm, x, g, t, mu, lam_prev, warmup=0, **timing)

    y = x + zeta
    bound_cold = newton_flops(d, r, cold["steps"], cold["cg_its"], cold["evals"]) / peak
    bound_warm = newton_flops(d, r, warm["steps"], warm["cg_its"], warm["evals"]) / peak
    return {
        "dtype": dtype, "d": d, "r": r, "path": solver_path(r),
        "t": float(t), "mu": float(mu),
        "nonzero_fraction": float(jnp.mean(y != 0)),
        "cold_vs_warm_max_abs_diff": float(jnp.max(jnp.abs(zeta - zeta_w))),
        "first_call_s": first_call,
        "cold": cold, "warm": warm,
        "time_cold_s": t_cold, "time_warm_s": t_warm,
        "bound_cold_s": bound_cold, "bound_warm_s": bound_warm,
        "ratio_cold": t_cold / bound_cold, "ratio_warm": t_warm / bound_warm,
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
    "converged cold / warm", "first call (s)",
)


def main_rows(cases):
    rows, rows_inst = [], []
    for c in cases:
        cw = (c["cold"], c["warm"])
        rows.append((
            c["dtype"], c["d"], c["r"], c["path"],
            _pair(cw[0]["steps"], cw[1]["steps"]),
            _pair(cw[0]["cg_its"], cw[1]["cg_its"]),
            _pair(cw[0]["evals"], cw[1]["evals"]),
            f"{1e3 * c['time_cold_s']:.2f}", f"{1e3 * c['time_warm_s']:.2f}",
            _pair(1e3 * c["bound_cold_s"], 1e3 * c["bound_warm_s"], "{:.2f}"),
            _pair(c["ratio_cold"], c["ratio_warm"], "{:.1f}"),
        ))
        rows_inst.append((
            c["dtype"], c["d"], c["r"], f"{c['t']:.4g}", f"{c['mu']:.4g}",
            f"{c['nonzero_fraction']:.3f}",
            _pair(cw[0]["residual"], cw[1]["residual"], "{:.1e}"),
            _pair(cw[0]["converged"], cw[1]["converged"]),
            f"{c['first_call_s']:.1f}",
        ))
    return rows, rows_inst


# --------------------------------------------------------------------------
# Profile: the solver's pieces, timed inside a compiled loop


def _residual(x, base, lam, t, reg):
    """E(Lambda) as in the library (returns Y, mask, E, ||E||)."""
    r = x.shape[1]
    y, jac = reg.prox_jacobian(base + (2.0 * t) * (x @ lam), t)
    xty = x.T @ y
    e = xty + xty.T - 2.0 * jnp.eye(r, dtype=x.dtype)
    return y, jac, e, jnp.sqrt(jnp.sum(e * e))


def _matvec(h, x, jac, t, reg):
    """One CG matvec of the library (regularization 1e-3)."""
    m = x.T @ reg.jacobian_apply(jac, x @ h)
    return (2.0 * t) * (m + m.T) + 1e-3 * h


def _k_tensor(jac, x):
    d, r = x.shape
    outer = (x[:, :, None] * x[:, None, :]).reshape(d, r * r)
    return (jac.T @ outer).reshape(r, r, r)


def _gram_gather(k, rows, cols, scale):
    """The dense-path Gram matrix read off the K tensor by indexing, O(m^2).

    With B_p = s_p (E_jl + E_lj), (j, l) = (rows[p], cols[p]):
    G_pq = s_p s_q ([l_p = l_q] K_{l_p}[j_p, j_q] + [l_p = j_q] K_{l_p}[j_p, l_q]
                  + [j_p = l_q] K_{j_p}[l_p, j_q] + [j_p = j_q] K_{j_p}[l_p, l_q]).
    """
    jp, lp = rows[:, None], cols[:, None]
    jq, lq = rows[None, :], cols[None, :]
    g = (
        jnp.where(lp == lq, k[lp, jp, jq], 0.0)
        + jnp.where(lp == jq, k[lp, jp, lq], 0.0)
        + jnp.where(jp == lq, k[jp, lp, jq], 0.0)
        + jnp.where(jp == jq, k[jp, lp, lq], 0.0)
    )
    return scale[:, None] * scale[None, :] * g


@contextlib.contextmanager
def _cg_floor_tied_to_tol():
    """Temporarily: CG atol = max(0.1 tol, min(1e-4, 1e-3 ||E||)) (no 1e-7 floor)."""
    original = _subproblem._cg

    def cg(matvec, b, atol, maxiter):
        norm_e = jnp.sqrt(jnp.sum(b * b))  # b = -E
        tol = _subproblem.default_tol(b.dtype)
        atol = jnp.maximum(0.1 * tol, jnp.minimum(1e-4, 1e-3 * norm_e)).astype(b.dtype)
        return original(matvec, b, atol, maxiter)

    _subproblem._cg = cg
    try:
        yield
    finally:
        _subproblem._cg = original


def _us(seconds):
    return f"{1e6 * seconds:,.0f} us" if seconds < 1e-2 else f"{1e3 * seconds:,.1f} ms"


def profile_case(case: dict, peak: float, args) -> dict:
    d, r, dtype = case["d"], case["r"], jnp.dtype(case["dtype"])
    inst = case["_instance"]
    x, g, t = inst["x"], inst["g"], inst["t"]
    reg = rproxjax.l1(inst["mu"])
    lam = case["_lam"]  # the solution's multiplier: realistic masks
    base = x - t * g
    y, jac, e, norm_e = _residual(x, base, lam, t, reg)
    n_loop = 50 if d * r <= 100_000 else 10
    tpi = lambda fn, *a: _timing.time_per_iteration(fn, *a, n=n_loop)  # noqa: E731
    out = {"dtype": case["dtype"], "d": d, "r": r, "path": case["path"]}
    lines = [f"\n### Profile {case['dtype']} d={d} r={r} ({case['path']} path)", ""]
    gemm = 2.0 * d * r * r

    # Dispatch and loop overhead.
    small = jnp.ones((r, r), dtype)
    out["dispatch_s"] = _timing.time_fn(jax.jit(lambda a: a + 1.0), small, repeats=20)
    out["loop_iteration_s"] = _timing.time_per_iteration(
        lambda a: a * 1.0000001, small, n=1000
    )

    # One evaluation of E, and its parts.
    ev = lambda lam_, x_, base_, t_, reg_: _residual(x_, base_, lam_, t_, reg_)[2]  # noqa: E731
    out["eval_s"] = tpi(ev, lam, x, base, t, reg)
    out["eval_call_s"] = _timing.time_fn(jax.jit(ev), lam, x, base, t, reg, repeats=10)
    out["x_lam_s"] = tpi(lambda lam_, x_: x_ @ lam_, lam, x)
    out["xt_y_s"] = tpi(lambda y_, x_: x_.T @ y_, y, x)
    xt = jnp.asarray(np.ascontiguousarray(np.asarray(x).T))
    out["xt_stored_y_s"] = tpi(lambda y_, xt_: xt_ @ y_, y, xt)
    out["prox_s"] = tpi(lambda v, t_, reg_: reg_.prox_jacobian(v, t_)[0][:r], base, t, reg)
    # Incremental trial: V = X - tG + 2t X Lambda and X D kept, a trial at
    # Lambda + s D costs prox(V + 2 t s X D) and X^T Y only.
    xd = x @ (lam / jnp.sqrt(jnp.sum(lam * lam)))
    v = base + 2.0 * t * (x @ lam)

    def ev_inc(s, x_, v_, xd_, t_, reg_):
        y_, _ = reg_.prox_jacobian(v_ + (2.0 * t_ * s) * xd_, t_)
        xty = x_.T @ y_
        return xty + xty.T

    out["eval_incremental_s"] = tpi(ev_inc, jnp.asarray(1e-3, dtype), x, v, xd, t, reg)
    lines += [
        f"- peak (2000^2 matmul): {peak / 1e9:.1f} GFLOP/s",
        f"- jit dispatch of a trivial call: {_us(out['dispatch_s'])}; while-loop "
        f"iteration with a trivial r x r body: {1e6 * out['loop_iteration_s']:.2f} us",
        f"- one E evaluation: {_us(out['eval_s'])} in a loop ({_us(out['eval_call_s'])} as a "
        f"separate call); FLOP bound {_us(2 * gemm / peak)} -> ratio "
        f"{out['eval_s'] * peak / (2 * gemm):.1f}",
        f"  - X @ Lambda: {_us(out['x_lam_s'])} ({gemm / out['x_lam_s'] / 1e9:.1f} GFLOP/s); "
        f"X^T Y: {_us(out['xt_y_s'])} ({gemm / out['xt_y_s'] / 1e9:.1f} GFLOP/s); "
        f"with X^T stored (r x d): {_us(out['xt_stored_y_s'])} "
        f"({gemm / out['xt_stored_y_s'] / 1e9:.1f} GFLOP/s)",
        f"  - soft-threshold + mask alone: {_us(out['prox_s'])}",
        f"  - incremental trial (X Lambda and X D reused): {_us(out['eval_incremental_s'])}",
    ]

    # Newton direction.
    if case["path"] == "cg":
        h = 0.5 * (lam + lam.T)
        out["matvec_s"] = tpi(_matvec, h, x, jac, t, reg)
        lines.append(
            f"- one CG matvec: {_us(out['matvec_s'])}; FLOP bound {_us(2 * gemm / peak)} "
            f"-> ratio {out['matvec_s'] * peak / (2 * gemm):.1f}"
        )
    else:
        basis_np, rows, cols, scale = _subproblem._sym_basis(r)
        basis = jnp.asarray(basis_np, dtype)
        scale = jnp.asarray(scale, dtype)
        m = rows.size
        k = _k_tensor(jac, x)
        gram = _gram_blockdiag
        mat = (4.0 * t) * gram(k, basis) + 1e-3 * jnp.eye(m, dtype=dtype)
        gathered = _gram_gather(k, rows, cols, scale)
        out["gram_gather_max_abs_diff"] = float(jnp.max(jnp.abs(gathered - gram(k, basis))))

        # The mask is carried (not E): otherwise XLA hoists the Gram matrix and
        # its factorization out of the loop.
        def direction(jac_, e_, x_, t_, reg_, norm_):
            gm = reg_.jacobian_gram(x_, jac_, basis)
            a = (4.0 * t_) * gm + _subproblem._newton_reg(norm_) * jnp.eye(m, dtype=dtype)
            c = jnp.linalg.solve(a, -_subproblem._vech(e_, rows, cols, scale))
            return _subproblem._unvech(c, basis)

        out["k_tensor_s"] = tpi(_k_tensor, jac, x)
        out["gram_einsum_s"] = tpi(gram, k, basis)
        out["gram_gather_s"] = tpi(lambda k_: _gram_gather(k_, rows, cols, scale), k)
        out["solve_s"] = tpi(lambda a: jnp.linalg.solve(a, a[:, 0]), mat)
        out["direction_s"] = tpi(direction, jac, e, x, t, reg, norm_e)
        f_k, f_g, f_s = 2.0 * d * r**3, r**3 * m + r**2 * m**2, (2.0 / 3.0) * m**3
        lines += [
            f"- one dense Newton direction: {_us(out['direction_s'])}; FLOP bound "
            f"{_us(dense_step_flops(d, r) / peak)} -> ratio "
            f"{out['direction_s'] * peak / dense_step_flops(d, r):.1f}",
            f"  - K tensor: {_us(out['k_tensor_s'])} (bound {_us(f_k / peak)}); Gram einsum: "
            f"{_us(out['gram_einsum_s'])} (bound {_us(f_g / peak)}); LU solve m={m}: "
            f"{_us(out['solve_s'])} (bound {_us(f_s / peak)})",
            f"  - Gram by index gather instead of the dense-basis einsum: "
            f"{_us(out['gram_gather_s'])} (max |diff| {out['gram_gather_max_abs_diff']:.1e})",
        ]

    # Fixed cost of a call (max_steps=0) and the measured cost per Newton step.
    out["no_steps_s"] = _timing.time_fn(_solve_no_steps, x, g, t, inst["mu"], repeats=10)
    steps = max(case["cold"]["steps"], 1)
    out["per_step_s"] = (case["time_cold_s"] - out["no_steps_s"]) / steps
    lines.append(
        f"- call with max_steps=0 (dispatch + setup + first E): {_us(out['no_steps_s'])}; "
        f"measured per Newton step (cold) {_us(out['per_step_s'])}"
    )

    # Reconstruct the call time from the counts.
    for which in ("cold", "warm"):
        cnt = case[which]
        est = cnt["evals"] * out["eval_s"]
        if case["path"] == "cg":
            est += cnt["cg_its"] * out["matvec_s"]
        else:
            est += cnt["steps"] * out["direction_s"]
        measured = case[f"time_{which}_s"]
        out[f"reconstructed_{which}_s"] = est
        lines.append(
            f"- {which} call: measured {_us(measured)}; sum of pieces "
            f"({cnt['evals']} evals, {cnt['steps']} steps, {cnt['cg_its']} CG its) "
            f"{_us(est)} -> unexplained {_us(max(measured - est, 0.0))} "
            f"({100 * max(measured - est, 0.0) / measured:.0f}%); FLOP bound "
            f"{_us(case[f'bound_{which}_s'])}"
        )

    # CG stopping floor experiment (float64 CG path only).
    if case["path"] == "cg" and dtype == jnp.float64:
        out.update(cg_floor_experiment(case, args))
        fl = out["cg_floor"]
        lines.append(
            f"- CG atol floor tied to tol (max(0.1 tol, min(1e-4, 1e-3 ||E||)) instead of "
            f">= 1e-7): cold {_us(fl['time_cold_s'])} (steps {fl['cold']['steps']}, CG its "
            f"{fl['cold']['cg_its']}, evals {fl['cold']['evals']}, residual "
            f"{fl['cold']['residual']:.1e}, converged {fl['cold']['converged']}) vs library "
            f"{_us(case['time_cold_s'])} (residual {case['cold']['residual']:.1e}); warm "
            f"{_us(fl['time_warm_s'])} (steps {fl['warm']['steps']}, CG its "
            f"{fl['warm']['cg_its']}) vs library {_us(case['time_warm_s'])}"
        )
    text = "\n".join(lines)
    print(text, flush=True)
    out["text"] = text
    return out


def cg_floor_experiment(case: dict, args) -> dict:
    inst = case["_instance"]
    x, g, t = inst["x"], inst["g"], inst["t"]
    reg = rproxjax.l1(inst["mu"])
    dtype = x.dtype
    tol = jnp.asarray(_subproblem.default_tol(dtype), dtype)
    with _cg_floor_tied_to_tol():
        # A fresh jit traces _solve now, with the patched _cg.
        solve = jax.jit(
            lambda x_, g_, t_, reg_, lam_, tol_: _subproblem._solve(
                x_, g_, t_, reg_, lam_, tol_, 100, True
            )
        )
        lam0 = jnp.zeros_like(case["_lam"])
        _, info = jax.block_until_ready(solve(x, g, t, reg, lam0, tol))
        t_cold = _timing.time_fn(solve, x, g, t, reg, lam0, tol, repeats=args.repeats, warmup=0)
        _, info_prev = solve(x, inst["g_pert"], t, reg, lam0, tol)
        lam_prev = info_prev.lam
        _, info_w = jax.block_until_ready(solve(x, g, t, reg, lam_prev, tol))
        t_warm = _timing.time_fn(solve, x, g, t, reg, lam_prev, tol, repeats=args.repeats,
                                 warmup=0)
    return {"cg_floor": {"cold": _counts(info), "warm": _counts(info_w),
                         "time_cold_s": t_cold, "time_warm_s": t_warm}}


# --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="skip d = 10000")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per entry")
    parser.add_argument("--max-seconds", type=float, default=15.0,
                        help="stop repeating an entry after this long (at least 3 calls)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile section")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)

    peaks = {}
    for dtype in DTYPES:
        peaks[dtype] = _timing.matmul_flops(dtype, n=2000, repeats=5)
        print(f"matmul 2000 x 2000 {dtype}: {peaks[dtype] / 1e9:.1f} GFLOP/s", flush=True)

    sizes = QUICK_SIZES if args.quick else SIZES
    cases = []
    for dtype in DTYPES:
        for d, r in sizes:
            case = bench_case(d, r, dtype, peaks[dtype], args)
            cases.append(case)
            print(
                f"{dtype} d={d} r={r}: cold {1e3 * case['time_cold_s']:.2f} ms, warm "
                f"{1e3 * case['time_warm_s']:.2f} ms, nonzeros {case['nonzero_fraction']:.3f}, "
                f"cold: {case['cold']}, warm: {case['warm']}",
                flush=True,
            )

    # Peaks again at the end: the spread shows how noisy the machine was.
    peaks_end = {dtype: _timing.matmul_flops(dtype, n=2000, repeats=5) for dtype in DTYPES}
    rows, rows_inst = main_rows(cases)
    print("\n## tangent_prox, l1, one call (cold / warm where two numbers)\n")
    table = _timing.print_table(MAIN_HEADERS, rows)
    print()
    table_inst = _timing.print_table(INSTANCE_HEADERS, rows_inst)
    peak_line = ", ".join(
        f"{dt}: {peaks[dt] / 1e9:.1f} (start) / {peaks_end[dt] / 1e9:.1f} (end) GFLOP/s"
        for dt in DTYPES
    )
    print(f"\nmatmul 2000^2 throughput {peak_line}", flush=True)

    profiles = []
    if not args.no_profile:
        print("\n## Profile", flush=True)
        for d, r in PROFILE_SIZES:
            for c in cases:
                if (c["d"], c["r"]) == (d, r):
                    profiles.append(profile_case(c, peaks[c["dtype"]], args))

    elapsed = time.perf_counter() - start
    print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if not args.no_save:
        markdown = "\n".join([
            "## tangent_prox, l1, one call (cold / warm where two numbers)", "",
            table, "", table_inst, "",
            f"matmul 2000^2 throughput {peak_line}", "",
            "## Profile", *[p["text"] for p in profiles],
        ])
        results = {
            "peak_flops_start": peaks, "peak_flops_end": peaks_end,
            "settings": {"n_samples": N_SAMPLES, "zero_quantile": ZERO_QUANTILE,
                         "perturbation": PERTURBATION, **vars(args)},
            "cases": [{k: v for k, v in c.items() if not k.startswith("_")} for c in cases],
            "profile": [{k: v for k, v in p.items() if k != "text"} for p in profiles],
            "elapsed_s": elapsed,
        }
        machine_end = _timing.machine_info()
        machine["loadavg_end"] = machine_end["loadavg_1_5_15min"]
        paths = _timing.save_results("subproblem", results, markdown, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
