"""Capture real tangent-space proximal subproblems from R-ProxSGD and R-ProxSPB runs on MNIST.

Run from the repository root (a few minutes on a 2-core CPU)::

    python benchmarks/capture_subproblems.py    # writes experiments/data/subproblems_mnist.npz
    python benchmarks/capture_subproblems.py --steps 60 140 220 --out /tmp/x.npz

What it does (everything in float64):

* Data: ``rproxjax.datasets.load_mnist(20000, seed=0, dtype=np.float64)`` (pixels scaled to
  [0, 1], centred; n = 20,000, d = 784). Online sparse PCA: per-sample loss
  f(X; z) = ||z||^2 - ||X^T z||^2, minibatch gradient mean_{z in S}(-2 z z^T X).
* For each r in {10, 15}, mu in {0.05, 0.2, 0.4, 0.8} and method in {R-ProxSGD, R-ProxSPB}: start
  at X0 = ``rproxjax.stiefel.random_point(jax.random.key(seed), 784, r, jnp.float64)`` and run
  300 iterations with proximal step gamma = t = 0.1 and minibatches of b = 100 rows drawn by
  ``numpy.random.default_rng(seed).choice(n, 100, replace=False)`` (a fresh stream per
  configuration; one draw per minibatch step):

  - R-ProxSGD: ``rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(eta0), 0.1, rproxjax.l1(mu),
    ssn=ssn)`` fed the minibatch gradient at X_t, with rproxjax 0.1.0's subproblem settings,
    pinned since: ``ssn = rproxjax.SSN(tol=1e-10, rule="reference", linear_solver=...)``
    (rtol 0; CG Newton systems from r = 15, else dense);
  - R-ProxSPB: ``rproxjax.r_prox_spb(eta, 0.1, rproxjax.l1(mu), q=100, ssn=ssn)``: at
    every step with count % 100 == 0 (a refresh) it is fed the full gradient over all n rows
    (summed in chunks of 2,000 rows), and no minibatch is drawn; otherwise the minibatch
    gradient at X_t with ``grad_fn`` = the same minibatch's gradient as a function of the point.

  Each iteration is one jitted call (``opt.update`` + ``optax.apply_updates``) driven by a
  Python loop.
* Step sizes: the chosen eta (eta0 for R-ProxSGD) of each method and mu, read from
  ``summary.best_eta["<method>/mu=<mu>"].chosen`` of ``results/spca-mnist-r<r>.json``; for a mu
  not in the file, the choice at the nearest mu there (ties: the smaller mu); if the file or the
  method is absent, eta0 = 0.5 (R-ProxSGD) or eta = 0.05 (R-ProxSPB). The source of every eta
  is printed and stored in the provenance.
* At the captured steps (default 60, 140, 220, 299: counts of ``state.count`` before the update,
  none of them a refresh) it records, *before* the optimizer solves it, the subproblem it is
  about to solve: X = X_t, G = V_t (R-ProxSGD: the minibatch gradient; R-ProxSPB: the R-SARAH
  estimate V_t = grad_S2(X_t) - P_{X_t}(grad_S2(X_{t-1}) - V_{t-1}), P_X(U) = U - X sym(X^T U),
  recomputed here from ``state.v`` and ``state.prev_params``), lam_prev = ``state.ssn.lam`` (the
  warm start the optimizer uses) and lam_h_prev = lam_prev - sym(X_prev^T G_prev) / 2 with
  X_prev, G_prev the point and gradient estimate of the previous step's subproblem
  (sym(A) = (A + A^T) / 2), and lam_s = sym(X_t^T S_prev) / 2 with S_prev the previous
  solution's subgradient of h (``state.ssn.subgradient``): the optimizers' own warm start (the
  default rules start from sym(X_t^T G_t) / 2 + lam_s). The recomputation is verified: the
  update the optimizer then returns must equal Retr^polar_X(eta_t zeta) - X with
  zeta = ``rproxjax.tangent_prox(X, G, 0.1, l1(mu), lam=lam_prev, ssn=ssn)`` to ``--check-tol``
  (and, for R-ProxSPB, the optimizer's new ``state.v`` must equal G); the script stops otherwise.
* Output (``np.savez_compressed``): per rank r in {10, 15} the arrays

  ============== ===================== =========================================================
  name           shape / dtype         content
  ============== ===================== =========================================================
  ``x_r<r>``     (m, 784, r) float32   X_t, rounded from float64 (re-orthonormalize on load:
                                       ||X^T X - I||_max is up to 7e-8 after rounding)
  ``g_r<r>``     (m, 784, r) float32   G = V_t, rounded from float64
  ``lam_r<r>``   (m, r, r) float64     lam_prev
  ``lamh_r<r>``  (m, r, r) float64     lam_h_prev
  ``lams_r<r>``  (m, r, r) float64     lam_s = sym(X_t^T S_prev) / 2 with S_prev = the previous
                                       solution's subgradient of h (``state.ssn.subgradient``):
                                       the regularizer part of the optimizers' warm start at X_t
  ``mu_r<r>``    (m,) float64          l1 weight mu
  ``t_r<r>``     (m,) float64          proximal step t = gamma = 0.1
  ``method_r<r>`` (m,) int8            index into ``methods``
  ``step_r<r>``  (m,) int32            iteration t (``state.count``) of the capture
  ``eta_r<r>``   (m,) float64          the step eta_t used at that iteration (R-ProxSGD:
                                       eta0 / sqrt(t + 1); R-ProxSPB: eta)
  ``eta0_r<r>``  (m,) float64          the method's eta (eta0) from the results file
  ``ssn_steps_r<r>`` (m,) int32        Newton steps the optimizer took on it (tol 1e-10)
  ``ssn_res_r<r>`` (m,) float64        and its final residual ||E||_F
  ============== ===================== =========================================================

  plus ``methods`` (names) and ``provenance`` (lines of text: command, data, seeds, steps,
  etas, rproxjax commit, verification). Load with
  ``experiments.subproblems.load_subproblems(r, dtype)``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from optax.tree_utils import tree_get  # noqa: E402

import rproxjax  # noqa: E402


def _prox_count(state):
    """The proximal step's own step count (a chain holds several counts)."""
    steps = [n for n in jax.tree.leaves(state, is_leaf=lambda n: isinstance(
        n, rproxjax.ProximalStepState)) if isinstance(n, rproxjax.ProximalStepState)]
    return int(steps[0].count)


ROOT = Path(__file__).resolve().parents[1]
METHODS = ("R-ProxSGD", "R-ProxSPB")
FALLBACK_ETA = {"R-ProxSGD": 0.5, "R-ProxSPB": 0.05}


def _as_captured(args, r):
    """The subproblem settings the file was captured with (rproxjax 0.1.0's defaults, before
    the secant rule): the reference Newton rule warm-started from the previous multiplier,
    solves to tol alone, and CG Newton systems from r = 15 on."""
    return rproxjax.SSN(tol=args.ssn_tol, rtol=0.0, rule="reference",
                        linear_solver="cg" if r >= 15 else "dense")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="+", default=[10, 15])
    p.add_argument("--mus", type=float, nargs="+", default=[0.05, 0.2, 0.4, 0.8])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--n", type=int, default=20000, help="MNIST rows (load_mnist(n, ...))")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the MNIST subset")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of X0 (jax.random.key) and of the batches (numpy default_rng)")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--steps", type=int, nargs="+", default=[60, 140, 220, 299],
                   help="iterations (state.count before the update) whose subproblem is captured")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--q", type=int, default=100, help="R-ProxSPB refresh period")
    p.add_argument("--gamma", type=float, default=0.1, help="proximal step t = gamma")
    p.add_argument("--ssn-tol", type=float, default=1e-10,
                   help="the optimizers' subproblem tolerance (SSN.tol)")
    p.add_argument("--chunk", type=int, default=2000, help="rows per chunk of the full gradient")
    p.add_argument("--results-dir", type=Path, default=ROOT / "results",
                   help="where spca-mnist-r<r>.json (the chosen steps) are read")
    p.add_argument("--check-tol", type=float, default=1e-8,
                   help="max |update - (Retr(eta zeta) - X)| allowed in the verification")
    p.add_argument("--out", type=Path,
                   default=ROOT / "experiments" / "data" / "subproblems_mnist.npz")
    args = p.parse_args(argv)
    if any(s < 1 or s >= args.iterations for s in args.steps):
        p.error("--steps must lie in [1, iterations): lam_h_prev needs a previous step")
    if any(s % args.q == 0 for s in args.steps) and "R-ProxSPB" in args.methods:
        p.error("--steps must not be R-ProxSPB refresh steps (count % q == 0)")
    return args


# ----------------------------------------------------------------------------- step sizes


def chosen_eta(results_dir: Path, r: int, method: str, mu: float):
    """(eta, source): the chosen step of ``method`` at the nearest mu in spca-mnist-r<r>.json."""
    path = results_dir / f"spca-mnist-r{r}.json"
    if not path.is_file():
        return FALLBACK_ETA[method], f"fallback {FALLBACK_ETA[method]} ({path.name} absent)"
    best = json.loads(path.read_text()).get("summary", {}).get("best_eta", {})
    found = {}
    for key, entry in best.items():
        name, _, mu_text = key.partition("/mu=")
        try:
            mu_key = float(mu_text)
        except ValueError:  # another experiment's entry (e.g. "mu=0.25mu_deg")
            continue
        if name == method and entry.get("chosen") is not None:
            found[mu_key] = float(entry["chosen"])
    if not found:
        return FALLBACK_ETA[method], (
            f"fallback {FALLBACK_ETA[method]} (no {method} in {path.name} summary.best_eta)")
    near = min(sorted(found), key=lambda m: abs(m - mu))
    where = "" if near == mu else f"; nearest mu to {mu:g}"
    return found[near], (
        f"{_rel(path)} summary.best_eta"
        f"['{method}/mu={near:g}'].chosen = {found[near]:g}{where}")


# ----------------------------------------------------------------------------- gradients


def minibatch_grad(x, zb):
    """mean over the rows z of zb of -2 z z^T X."""
    return -2.0 * zb.T @ (zb @ x) / zb.shape[0]


@jax.jit
def full_grad(x, chunks, n):
    """The full gradient -2 Z^T Z X / n, summed over zero-padded chunks of rows."""
    def body(acc, zc):
        return acc + zc.T @ (zc @ x), None
    total, _ = jax.lax.scan(body, jnp.zeros_like(x), chunks)
    return -2.0 * total / n


def sym(a):
    return 0.5 * (a + jnp.swapaxes(a, -1, -2))


def project(x, u):
    """P_X(U) = U - X sym(X^T U) (tangent projection; the optimizers' transport)."""
    return u - x @ sym(x.T @ u)


# ----------------------------------------------------------------------------- the runs


def make_optimizer(method, eta, mu, args, r):
    reg = rproxjax.l1(mu)
    ssn = _as_captured(args, r)
    if method == "R-ProxSGD":
        return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(eta), args.gamma, reg,
                                   ssn=ssn)
    return rproxjax.r_prox_spb(eta, args.gamma, reg, q=args.q, ssn=ssn)


def build_steps(args):
    """Jitted one-iteration functions; mu and eta are traced (one compilation per r, method)."""

    @partial(jax.jit, static_argnames="method")
    def minibatch_step(x, state, zb, mu, eta, method):
        opt = make_optimizer(method, eta, mu, args, x.shape[1])
        g = minibatch_grad(x, zb)
        if method == "R-ProxSGD":
            updates, state = opt.update(g, state, x)
        else:
            updates, state = opt.update(g, state, x, grad_fn=lambda p: minibatch_grad(p, zb),
                                        refresh=False)
        return optax.apply_updates(x, updates), state, updates

    @jax.jit
    def refresh_step(x, state, g, mu, eta):
        opt = make_optimizer("R-ProxSPB", eta, mu, args, x.shape[1])
        updates, state = opt.update(g, state, x, refresh=True)
        return optax.apply_updates(x, updates), state, updates

    @partial(jax.jit, static_argnames="method")
    def estimate(x, state, zb, method):
        """V_t the optimizer will pass to tangent_prox at this (non-refresh) step."""
        g = minibatch_grad(x, zb)
        if method == "R-ProxSGD":
            return g
        return g - project(x, minibatch_grad(tree_get(state, "prev_params"), zb)
                          - tree_get(state, "v"))

    @jax.jit
    def check(x, g, lam, mu, eta, updates):
        zeta, info = rproxjax.tangent_prox(x, g, args.gamma, rproxjax.l1(mu), lam=lam,
                                           ssn=_as_captured(args, x.shape[1]))
        x_new = rproxjax.stiefel.retract(x, eta * zeta, "polar")
        return jnp.max(jnp.abs((x_new - x) - updates)), info

    return minibatch_step, refresh_step, estimate, check


def run_config(r, mu, method, eta0, data, chunks, fns, args):
    """One run; returns the captured instances (a list of dicts) and the largest check error."""
    minibatch_step, refresh_step, estimate, check = fns
    n = data.shape[0]
    x = rproxjax.stiefel.random_point(jax.random.key(args.seed), data.shape[1], r, jnp.float64)
    opt = make_optimizer(method, eta0, mu, args, r)
    state = opt.init(x)
    rng = np.random.default_rng(args.seed)
    mu_a, eta_a = jnp.float64(mu), jnp.float64(eta0)
    steps = set(args.steps)
    prev = None  # (X, V) of the previous step's subproblem
    captured, worst = [], 0.0
    for k in range(args.iterations):
        assert _prox_count(state) == k
        refresh = method == "R-ProxSPB" and k % args.q == 0
        if refresh:
            g = full_grad(x, chunks, n)
            x_new, state_new, updates = refresh_step(x, state, g, mu_a, eta_a)
            v = g
        else:
            zb = jnp.asarray(data[np.sort(rng.choice(n, args.batch_size, replace=False))])
            v = estimate(x, state, zb, method)
            if k in steps:  # the subproblem, before the optimizer solves it
                ssn = rproxjax.step_info(state).ssn
                lam = ssn.lam
                x_prev, g_prev = prev
                inst = {
                    "x": np.asarray(x), "g": np.asarray(v), "lam": np.asarray(lam),
                    "lamh": np.asarray(lam - sym(x_prev.T @ g_prev) / 2),
                    "lams": np.asarray(sym(x.T @ ssn.subgradient) / 2),
                }
            x_new, state_new, updates = minibatch_step(x, state, zb, mu_a, eta_a, method)
            if method == "R-ProxSPB":  # the optimizer's own V_t
                v_err = float(jnp.max(jnp.abs(tree_get(state_new, "v") - v)))
                assert v_err < args.check_tol, (r, mu, method, k, "state.v", v_err)
                v = tree_get(state_new, "v")
        if bool(rproxjax.step_info(state_new).halted):
            raise RuntimeError(f"optimizer halted: r={r} mu={mu} {method} step {k}")
        if k in steps:
            eta_t = eta0 / np.sqrt(k + 1) if method == "R-ProxSGD" else eta0
            err, info = check(x, inst["g"], inst["lam"], mu_a, jnp.float64(eta_t), updates)
            err = float(err)
            worst = max(worst, err)
            if not err < args.check_tol:
                raise RuntimeError(
                    f"recomputed subproblem does not reproduce the optimizer's step: r={r} "
                    f"mu={mu} {method} step {k}: max |diff| = {err:.2e}")
            inst.update(mu=mu, method=METHODS.index(method), step=k, eta=eta_t, eta0=eta0,
                        t=args.gamma, ssn_steps=int(rproxjax.step_info(state_new).ssn.num_steps),
                        ssn_res=float(rproxjax.step_info(state_new).ssn.residual))
            captured.append(inst)
        prev = (x, v)
        x, state = x_new, state_new
    return captured, worst


def _rel(value):
    """Paths as text relative to the repository root (when inside it)."""
    if isinstance(value, Path):
        value = value.resolve()
        return str(value.relative_to(ROOT)) if value.is_relative_to(ROOT) else str(value)
    return value


def git_info(path: Path) -> str:
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--", "rproxjax"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + (" + uncommitted changes under rproxjax/" if dirty else " (clean)")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def main(argv=None):
    args = parse_args(argv)
    command = "python benchmarks/capture_subproblems.py" + (
        " " + " ".join(sys.argv[1:] if argv is None else argv)).rstrip()
    start = time.perf_counter()
    data = rproxjax.datasets.load_mnist(args.n, seed=args.data_seed, dtype=np.float64)
    n, d = data.shape
    pad = (-n) % args.chunk
    chunks = jnp.asarray(np.concatenate([data, np.zeros((pad, d))]).reshape(-1, args.chunk, d))
    fns = build_steps(args)
    rp_root = Path(rproxjax.__file__).resolve().parents[1]

    out, eta_lines, worst = {}, [], 0.0
    for r in args.ranks:
        insts = []
        for mu in args.mus:
            for method in args.methods:
                eta0, source = chosen_eta(args.results_dir, r, method, mu)
                name = "eta0" if method == "R-ProxSGD" else "eta"
                eta_lines.append(f"r={r} mu={mu:g} {method}: {name} = {eta0:g} from {source}")
                print(eta_lines[-1], flush=True)
                t0 = time.perf_counter()
                got, err = run_config(r, mu, method, eta0, data, chunks, fns, args)
                worst = max(worst, err)
                insts += got
                print(f"  {args.iterations} iterations in {time.perf_counter() - t0:.1f} s; "
                      f"captured {len(got)}; max check error {err:.1e}; optimizer SSN steps "
                      f"{[i['ssn_steps'] for i in got]}", flush=True)
        out[f"x_r{r}"] = np.stack([i["x"] for i in insts]).astype(np.float32)
        out[f"g_r{r}"] = np.stack([i["g"] for i in insts]).astype(np.float32)
        out[f"lam_r{r}"] = np.stack([i["lam"] for i in insts]).astype(np.float64)
        out[f"lamh_r{r}"] = np.stack([i["lamh"] for i in insts]).astype(np.float64)
        out[f"lams_r{r}"] = np.stack([i["lams"] for i in insts]).astype(np.float64)
        for key, dtype in (("mu", np.float64), ("t", np.float64), ("method", np.int8),
                           ("step", np.int32), ("eta", np.float64), ("eta0", np.float64),
                           ("ssn_steps", np.int32), ("ssn_res", np.float64)):
            out[f"{key}_r{r}"] = np.array([i[key] for i in insts], dtype)

    provenance = [
        f"file: {args.out.name}, written by benchmarks/capture_subproblems.py on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"command: {command}",
        f"arguments: { {k: _rel(v) for k, v in vars(args).items()} }",
        f"rproxjax: imported from {rp_root}, git commit {git_info(rp_root)}; "
        f"jax {jax.__version__}, numpy {np.__version__}, optax {optax.__version__}, "
        f"python {platform.python_version()}",
        f"data: rproxjax.datasets.load_mnist({n}, seed={args.data_seed}, dtype=np.float64) "
        f"(pixels / 255, centred per column), n = {n}, d = {d}",
        "loss: f(X; z) = ||z||^2 - ||X^T z||^2; minibatch gradient mean_z(-2 z z^T X); full "
        f"gradient -2 Z^T Z X / n summed over chunks of {args.chunk} rows",
        f"X0: rproxjax.stiefel.random_point(jax.random.key({args.seed}), {d}, r, jnp.float64)",
        f"batches: numpy default_rng({args.seed}) per configuration, "
        f"np.sort(rng.choice(n, {args.batch_size}, replace=False)) per minibatch step "
        "(none on R-ProxSPB refresh steps)",
        f"R-ProxSGD: rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(eta0), {args.gamma}, "
        f"rproxjax.l1(mu), ssn=SSN(tol={args.ssn_tol:g}, rule='reference', linear_solver="
        "'cg' from r = 15 else 'dense'; rtol 0, max_steps 100); polar retraction",
        f"R-ProxSPB: rproxjax.r_prox_spb(eta, {args.gamma}, rproxjax.l1(mu), q={args.q}, "
        f"ssn=the same); full gradient when count % {args.q} == 0, else the "
        "minibatch gradient with grad_fn = the same minibatch's gradient",
        f"loop: {args.iterations} iterations, one jitted call (opt.update + optax.apply_updates)"
        " each, per (r, mu, method)",
        f"ranks {args.ranks}; mus {args.mus}; methods {args.methods} (method index into "
        "'methods'); instance order: for mu, for method, for step",
        f"captured steps (state.count before the update): {sorted(args.steps)}",
        "X = X_t, G = V_t passed to tangent_prox (R-ProxSPB: R-SARAH estimate recomputed from "
        "state.v and state.prev_params), lam_prev = state.ssn.lam, lam_h_prev = lam_prev - "
        "sym(X_prev^T G_prev) / 2 (previous step's X and V), lam_s = sym(X^T S_prev) / 2 "
        "with S_prev = state.ssn.subgradient (the previous solution's subgradient of h); X and "
        "G rounded to float32, the rest float64",
        f"verification: tangent_prox(X, G, {args.gamma}, l1(mu), lam=lam_prev, "
        "ssn=the same) then polar Retr(eta_t zeta) - X reproduces the optimizer's "
        f"update to {worst:.1e} (max abs, all instances, float64, before rounding)",
        *[f"eta: {line}" for line in eta_lines],
    ]
    out["methods"] = np.array(METHODS)
    out["provenance"] = np.array(provenance)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **out)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes; "
          f"{sum(out[f'x_r{r}'].shape[0] for r in args.ranks)} instances) in "
          f"{time.perf_counter() - start:.0f} s; max check error {worst:.1e}")


if __name__ == "__main__":
    main()
