"""Table added_exp: R-ProxSPB against SPAMS and scikit-learn's MiniBatchSparsePCA.

The paper runs R-ProxSPB for 1000 iterations with batch size 100 and SPAMS with the same
batch size and the same number of gradient oracles, and compares explained variance and
sparsity (entries above 1e-3). Here every method sweeps its own sparsity parameter so that
the comparison holds at every sparsity level, not at one hand-picked point; the peers are
configured as described in :mod:`rproxjax.experiments._peers`. Reported per run: the
paper's explained variance tr(X^T A A^T X) / tr(X^T X) (as a fraction of ||A||_F^2), the
adjusted variance of Zou, Hastie and Tibshirani (which does not reward correlated
loadings), nonzeros (of X as returned and of X with unit columns), orthonormality, and wall
time (R-ProxSPB: the compiled run, and separately with its one-off compilation).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from rproxjax import problems
from rproxjax.experiments._spca import load_data
from rproxjax.experiments._store import Store, check_dtype, say


def _ours(cfg, mu, data, x0):
    from rproxjax.experiments._peers import loadings_metrics

    data.shape[0]
    opt = rproxjax.r_prox_spb(cfg.eta, cfg.gamma, rproxjax.l1(mu), q=cfg.q,
                              ssn_tol=cfg.ssn_tol)
    blocks = max(1, cfg.iterations // cfg.q)
    start = time.perf_counter()
    res = rproxjax.fit(opt, problems.spca_loss, x0, jnp.asarray(data),
                       key=jax.random.key(cfg.seed + 1), batch_size=cfg.batch_size,
                       num_epochs=blocks, steps_per_epoch=cfg.q)
    x = np.asarray(jax.block_until_ready(res.params))
    wall = time.perf_counter() - start
    out = {"method": "R-ProxSPB", "penalty": mu,
           "config": f"rproxjax.r_prox_spb(eta={cfg.eta}, gamma={cfg.gamma}, l1({mu}), "
                     f"q={cfg.q}, ssn_tol={cfg.ssn_tol}); {blocks * cfg.q} iterations, "
                     f"|S2| = {cfg.batch_size}, |S1| = n, X0 random on St(d, r)",
           "wall_time": float(res.epoch_time[-1]), "wall_time_with_compile": wall,
           "ifo": int(res.epoch_ifo[-1]), "loss": float(res.epoch_loss[-1])}
    out.update(loadings_metrics(x, data))
    return out


def run(name, cfg, out_dir, *, force=False, progress=True) -> dict:
    from rproxjax.experiments import _peers

    settings = {"spams_lambda2": _peers.SPAMS_LAMBDA2, "peer_blas_threads": 1,
                "nonzero_tol": _peers.NONZERO_TOL}
    store = Store(out_dir, name, dict(dataclasses.asdict(cfg), **settings), force=force)
    dtype = check_dtype(cfg.dtype)
    data = load_data(cfg.dataset, cfg.n, cfg.seed, dtype)
    n, d = data.shape
    x0 = rproxjax.stiefel.random_point(jax.random.key(cfg.seed), d, cfg.r, dtype)
    if not store.has("setup"):
        store.put("setup", {"n": n, "d": d})
    for mu in cfg.mus:
        key = f"R-ProxSPB/{mu}"
        if not store.has(key):
            say(progress, f"{name}: R-ProxSPB, mu = {mu}")
            store.put(key, _ours(cfg, mu, data, x0))
    budget = store.get(f"R-ProxSPB/{cfg.mus[0]}")["ifo"]  # the same for every mu
    peers = (("SPAMS", _peers.run_spams, cfg.spams_penalties),
             ("MiniBatchSparsePCA", _peers.run_sklearn, cfg.sklearn_penalties))
    for method, fn, penalties in peers:
        for penalty in penalties:
            key = f"{method}/{penalty}"
            if not store.has(key):
                say(progress, f"{name}: {method}, penalty = {penalty}, {budget} sample "
                               "gradients")
                summary, _ = fn(data, r=cfg.r, penalty=penalty, budget_ifo=budget,
                                batch_size=cfg.batch_size, seed=cfg.seed)
                store.put(key, summary)
    return store.finish(summarize(store.data))


def _pareto_wins(ours, peer, metric):
    """For each peer run, whether some R-ProxSPB run has no more nonzeros and more
    ``metric``: (wins, total, smallest margin among the comparable runs, peer runs sparser
    than every R-ProxSPB run)."""
    wins, gaps, uncovered = 0, [], 0
    for p in peer:
        better = [float(o[metric]) - float(p[metric]) for o in ours
                  if o["nonzeros_normalized"] <= p["nonzeros_normalized"]]
        if not better:
            uncovered += 1
            continue
        gaps.append(max(better))
        wins += max(better) > 0
    return wins, len(peer), min(gaps) if gaps else np.nan, uncovered


def summarize(data: dict) -> dict:
    units = data["units"]
    table = [dict(v) for k, v in units.items() if k != "setup"]
    ours = [row for row in table if row["method"] == "R-ProxSPB"]
    claims = []
    for method in ("SPAMS", "MiniBatchSparsePCA"):
        peer = [row for row in table if row["method"] == method]
        for metric in ("explained_variance", "adjusted_variance"):
            wins, total, gap, uncovered = _pareto_wins(ours, peer, metric)
            claims.append({
                "claim": f"R-ProxSPB has more {metric.replace('_', ' ')} than {method} at "
                         "every sparsity level (some R-ProxSPB run with no more nonzeros "
                         "explains more)",
                "pass": wins == total,
                "numbers": f"{wins}/{total} {method} runs dominated; smallest margin "
                           f"{gap:+.4f} among the comparable ones; {uncovered} {method} "
                           "runs sparser than every R-ProxSPB run"})
        # The paper's form: far fewer nonzeros at comparable explained variance.
        fewer = []
        for p in peer:
            close = [o for o in ours
                     if o["explained_variance"] >= 0.9 * p["explained_variance"]]
            if close:
                fewer.append(min(o["nonzeros_normalized"] for o in close)
                             / max(p["nonzeros_normalized"], 1))
        ratio = float(np.median(fewer)) if fewer else np.inf
        claims.append({
            "claim": f"R-ProxSPB gives far fewer nonzeros than {method} at comparable "
                     "(>= 90%) explained variance",
            "pass": bool(fewer) and ratio < 0.5,
            "numbers": f"median nonzeros ratio {ratio:.3f} over {len(fewer)} {method} runs"})
        peer_time = float(np.median([float(row["wall_time"]) for row in peer]))
        ours_time = float(np.median([float(row["wall_time"]) for row in ours]))
        claims.append({
            "claim": f"R-ProxSPB (compiled run) takes no more wall time than {method} "
                     "(median over each sweep; JAX on its default threads, the peer on one "
                     "BLAS thread)",
            "pass": ours_time <= peer_time,
            "numbers": f"{ours_time:.2f} s vs {peer_time:.2f} s (R-ProxSPB with its one-off "
                       "compilation: "
                       f"{np.median([row['wall_time_with_compile'] for row in ours]):.2f} s)"})
    claims.append({
        "claim": "R-ProxSPB's loadings are orthonormal",
        "pass": max(row["orthonormality"] for row in ours) < 1e-8,
        "numbers": f"max ||X^T X - I||_F = {max(row['orthonormality'] for row in ours):.1e}"})
    return {"table": table, "claims": claims}
