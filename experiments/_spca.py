"""Online sparse PCA, the paper's Figures 1-3 and Table best_eta, over seeds.

Protocol (the paper's section "Online Sparse PCA Problem"; differences are stated):

* Loss F(X) = mean_i ||z_i - X X^T z_i||^2 + mu ||X||_1 over the data set (pixels in [0, 1],
  centred). The data subset is fixed (``cfg.seed``); each reported seed (``cfg.seeds``) draws
  X0 on St(d, r) and the sampling of every method.
* mu: panels at fractions of mu_deg (:func:`degenerate_mu`), the smallest mu at which the
  one-pixel-per-column point of the r largest-variance pixels is stationary, computed from
  the data; the paper's nominal values ``cfg.mus`` are extra panels, whose runs are marked
  when their solutions are degenerate (a column with at most one entry above 1e-3).
* R-ProxSGD and R-Subgrad: |S| = batch_size, eta_t = eta0 / sqrt(t + 1). R-ProxSPB: |S1| = n
  every q steps, |S2| = batch_size = q, constant eta. Proximal step gamma (a constant; the
  paper does not state its value; a panel varies it). ManPG: full gradients, t = 1/L with
  L = 2 sigma_max(A)^2 / n, Armijo backtracking.
* Step sizes: each stochastic method's eta (eta0), with gamma for the proximal methods, is
  tuned on ``cfg.tuning_seeds`` (disjoint from the reported ones): a screen of the grid at
  ``grid_budget`` IFO/n, extended wherever its best sits at an edge, then a local search at
  the reported budget (:mod:`experiments._spca_tuning`). Each stage's runs are one
  compiled program per method (``jax.jit(jax.vmap(...))`` of :func:`rproxjax.pure_fit`).
* R-Subgrad-1: R-Subgrad with the paper's single-sample update (|S| = 1), an extra row.
* Reported runs: ``budget`` IFO/n per seed with the chosen step; curves of F against IFO/n and
  against wall time (compiled runs; times exclude compilation and the evaluations of F at the
  curve points), with points every ``block_points`` steps inside the blocks of the block
  methods; the variance of the gradient estimate over the first ``variance_steps``
  iterations of R-ProxSPB and R-ProxSGD (separate runs, as it needs the full gradient at
  every step): the Riemannian one ||P_X(V_t - grad f(X_t))||^2, which the paper's Manopt
  code measures, and the Euclidean ||V_t - grad f(X_t)||^2 as a secondary column.
* IFO: one per sample gradient (b per minibatch step, n per refresh, 2 |S2| per R-SARAH step,
  n per ManPG iteration; ManPG's function evaluations in the line search are not counted).
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from experiments._configs import SPCAConfig
from experiments._spca_protocol import (
    BASELINE_REFINE,
    BLOCK_METHODS,
    GAMMA_METHODS,
    METHODS,
    SINGLE_SAMPLE,
    STOCHASTIC,
    VARIANCE_METHODS,
    choices,
    panel_mus,
    refined_key,
)
from experiments._spca_summary import summarize
from experiments._spca_tuning import refine, tune
from experiments._store import Store, check_dtype, say
from rproxjax import datasets, problems
from rproxjax._contract import block_cost
from rproxjax._linalg import mm

MANPG_TOL = 1e-12  # its stopping test ||zeta||^2 / t^2 < tol: never met within the budgets
NONZERO_TOL = 1e-3  # the paper's sparsity threshold


def load_data(dataset: str, n, seed: int, dtype) -> np.ndarray:
    loader = {"mnist": datasets.load_mnist, "fashion_mnist": datasets.load_fashion_mnist}
    if dataset not in loader:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {sorted(loader)}.")
    return loader[dataset](n, seed=seed, dtype=np.dtype(dtype))


def degenerate_mu(data: np.ndarray, r: int) -> dict:
    """mu_deg: the smallest mu at which X = [e_i1, ..., e_ir], the r pixels of largest
    variance, is a stationary point of F on St(d, r).

    With C = A^T A / n, grad f(X) = -2 C X; X is stationary iff -2 C X + mu S = X Lambda for
    a symmetric Lambda and a subgradient S of ||X||_1. The rows in I fix Lambda (symmetric,
    taking S = 0 off the support); a row k outside I needs |2 C_{k, i_j}| <= mu for every j.
    """
    a = np.asarray(data, dtype=np.float64)
    c = a.T @ a / a.shape[0]
    pixels = np.argsort(np.diag(c))[-r:]
    rest = np.setdiff1d(np.arange(c.shape[0]), pixels)
    return {"mu_degenerate": float(2.0 * np.max(np.abs(c[np.ix_(rest, pixels)]))),
            "pixels": pixels.tolist()}


def optimizer(method: str, eta, mu, cfg, *, lipschitz=None, gamma=None):
    """The optimizer of ``method`` with step ``eta`` and l1 weight ``mu`` (arrays allowed)."""
    reg = rproxjax.l1(mu)
    gamma = cfg.gamma if gamma is None else gamma
    solver = dict(ssn=rproxjax.SSN.stochastic(tol=cfg.ssn_tol, linear_solver=cfg.linear_solver))
    if method == "R-ProxSPB":
        return rproxjax.r_prox_spb(eta, gamma, reg, q=cfg.q, **solver)
    if method == "R-ProxSGD":
        return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(eta), gamma, reg, **solver)
    if method in ("R-Subgrad", SINGLE_SAMPLE):
        return rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(eta), reg)
    if method == "R-ProxSVRG":  # snapshot period m = q: the same blocks as R-ProxSPB
        return rproxjax.r_prox_svrg(eta, gamma, reg, m=cfg.q, **solver)
    if method == "R-ProxSARAH":  # ProxSARAH's rule: proximal step 2 gamma, averaging weight
        return rproxjax.r_prox_sarah(2 * gamma, jnp.minimum(eta, 1.0), reg, q=cfg.q, **solver)
    if method == "ManPG":
        return rproxjax.manpg(1.0 / lipschitz, reg, tol=MANPG_TOL,
                              ssn=rproxjax.SSN(linear_solver=cfg.linear_solver))
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}.")


def schedule(method: str, budget: float, n: int, cfg) -> dict:
    """Steps per curve point and number of points for ``budget`` IFO/n: ``fit``'s
    ``batch_size``, ``num_epochs`` and ``sampling`` (its ``steps_per_epoch``)."""
    b = 1 if method == SINGLE_SAMPLE else cfg.batch_size
    if method in BLOCK_METHODS:
        blocks = max(1, math.floor(budget * n / block_cost(cfg.q, b, n) + 1e-9))
        if cfg.q % cfg.block_points:
            raise ValueError(f"block_points = {cfg.block_points} must divide q = {cfg.q}.")
        return {"batch_size": b, "num_epochs": blocks * (cfg.q // cfg.block_points),
                "sampling": rproxjax.Sampling(steps_per_epoch=cfg.block_points)}
    if method == "ManPG":
        return {"batch_size": n, "num_epochs": max(1, round(budget)),
                "sampling": rproxjax.Sampling(steps_per_epoch=1)}
    steps = max(1, math.ceil(budget * n / b))
    per_point = max(1, round(n / b / cfg.points_per_ifo))
    return {"batch_size": b, "num_epochs": max(1, round(steps / per_point)),
            "sampling": rproxjax.Sampling(steps_per_epoch=per_point)}


def _seed_keys(seed: int):
    """(X0 key, sampling key) of a seed."""
    key = jax.random.key(seed)
    return key, jax.random.fold_in(key, 1)


def _tuning_keys(cfg) -> list:
    """One stacked (X0 key, sampling key) per tuning seed."""
    return [jnp.stack(_seed_keys(s)) for s in cfg.tuning_seeds]


def _tune(method, cfg, data, mus, gammas=None, checkpoint=None) -> dict:
    """The tuning of ``method`` on the tuning seeds (:func:`_spca_tuning.tune`)."""
    return tune(method, cfg, data, mus, optimizer=optimizer, schedule=schedule,
                seed_keys=_tuning_keys(cfg), gammas=gammas, checkpoint=checkpoint)


def _put_tuning(store, key, method, cfg, data, mus, gammas=None) -> None:
    """Tunes ``method`` and saves the tuning as the unit ``key``; its chunks of runs are
    checkpointed meanwhile (a tuning takes up to hours), and dropped once it is saved."""
    checkpoint = store.checkpoint(key)
    store.put(key, _tune(method, cfg, data, mus, gammas=gammas, checkpoint=checkpoint))
    checkpoint.close()


def _variance_run(method, eta, mu, cfg, data, seed, gamma):
    x0 = rproxjax.stiefel.random_point(_seed_keys(seed)[0], data.shape[1], cfg.r, data.dtype)
    opt = optimizer(method, eta, mu, cfg, gamma=gamma)
    res = rproxjax.fit(opt, problems.spca_loss, x0, data, key=_seed_keys(seed)[1],
                       batch_size=cfg.batch_size, num_epochs=1,
                       sampling=rproxjax.Sampling(steps_per_epoch=cfg.variance_steps),
                       recording=rproxjax.Recording(variance=True))
    return {"riemannian_variance": np.asarray(res.history.riemannian_variance),
            "variance": np.asarray(res.history.variance),
            "refresh": np.asarray(res.history.refresh)}


def _run(method, eta, mu, cfg, data, seed, lipschitz, gamma=None):
    """One reported run: its curves and the final iterate's numbers."""
    n, d = data.shape
    x0 = rproxjax.stiefel.random_point(_seed_keys(seed)[0], d, cfg.r, data.dtype)
    opt = optimizer(method, eta, mu, cfg, lipschitz=lipschitz, gamma=gamma)
    start = time.perf_counter()
    res = rproxjax.fit(opt, problems.spca_loss, x0, data, key=_seed_keys(seed)[1],
                       **schedule(method, cfg.budget, n, cfg))
    wall = time.perf_counter() - start
    x = res.params
    full_grad = -2.0 * mm(data.T, mm(data, x)) / n
    stat, _ = problems.stationarity(x, full_grad, cfg.gamma if gamma is None else gamma,
                                    rproxjax.l1(mu))
    per_column = np.sum(np.abs(np.asarray(x)) > NONZERO_TOL, axis=0)
    return {
        "eta": eta, "gamma": None if method in ("R-Subgrad", SINGLE_SAMPLE, "ManPG") else
        float(cfg.gamma if gamma is None else gamma), "seed": seed,
        "ifo_over_n": np.asarray(res.epoch_ifo) / n,
        "loss": np.asarray(res.epoch_loss),
        "time": np.asarray(res.epoch_time),
        "wall_time_with_compile": wall,
        "final_loss": float(res.epoch_loss[-1]),
        "nonzeros": int(problems.nonzeros(x)),
        "exact_zeros": int(jnp.sum(x == 0)),
        "degenerate_columns": int(np.sum(per_column <= 1)),
        "explained_variance": float(problems.explained_variance(x, data, normalized=True)),
        "feasibility": float(rproxjax.stiefel.feasibility(x)),
        "stationarity": float(stat),
        "mean_ssn_steps": float(jnp.mean(res.history.ssn_steps)),
        "max_ssn_steps": int(jnp.max(res.history.ssn_steps)),
        "halted": bool(res.history.halted[-1]),
        "steps": int(res.history.ifo.shape[0]),
    }


def _check_seeds(cfg):
    if not cfg.seeds or set(cfg.seeds) & set(cfg.tuning_seeds) or len(cfg.tuning_seeds) < 2:
        raise ValueError(f"the tuning seeds {cfg.tuning_seeds} must be at least two and "
                         f"disjoint from the reported seeds {cfg.seeds}.")


def run(name, cfg, out_dir, *, force=False, progress=True) -> dict:
    _check_seeds(cfg)
    config = dict(dataclasses.asdict(cfg), manpg_tol=MANPG_TOL)
    store = Store(out_dir, name, config, force=force)
    dtype = check_dtype(cfg.dtype)
    data_np = load_data(cfg.dataset, cfg.n, cfg.seed, dtype)
    n, d = data_np.shape
    data = jnp.asarray(data_np)
    lipschitz = 2.0 * float(np.linalg.norm(data_np, 2)) ** 2 / n
    if not store.has("setup"):
        store.put("setup", dict({"n": n, "d": d, "lipschitz": lipschitz},
                                **degenerate_mu(data_np, cfg.r)))
    panels = panel_mus(cfg.mu_fractions, cfg.mus, store.get("setup")["mu_degenerate"])
    mus = [p["mu"] for p in panels]
    for method in STOCHASTIC:
        if not store.has(f"tuning/{method}"):
            say(progress, f"{name}: tuning {method} ({len(mus)} mu x {len(cfg.etas)} eta"
                          + ("" if method.startswith("R-Subgrad") else
                             f" x {len(cfg.tuning_gammas)} gamma")
                          + f", {len(cfg.tuning_seeds)} tuning seeds)")
            _put_tuning(store, f"tuning/{method}", method, cfg, data, mus)
    _refine_baseline(name, cfg, store, data, panels, progress)
    for i, panel in enumerate(panels):
        for method in METHODS:
            choice = (choices(store.data["units"], method)[i]
                      if method in STOCHASTIC else {"eta": None, "gamma": None})
            eta, gamma = choice["eta"], choice["gamma"]
            for seed in cfg.seeds:
                key = f"run/{method}/mu={panel['key']}/seed={seed}"
                # a run saved with another step (its method's choice since refined) reruns
                if not store.has(key) or store.get(key)["eta"] != eta:
                    say(progress, f"{name}: {method}, {panel['label']}, eta = {eta}, "
                                   f"gamma = {gamma}, seed {seed}")
                    store.put(key, _run(method, eta, panel["mu"], cfg, data, seed, lipschitz,
                                        gamma=gamma))
                key = f"variance/{method}/mu={panel['key']}/seed={seed}"
                if method in VARIANCE_METHODS and not store.has(key):
                    store.put(key, _variance_run(method, eta, panel["mu"], cfg, data, seed,
                                                 gamma))
    _gamma_panel(name, cfg, store, data, lipschitz, progress)
    return store.finish(summarize(store.data))


def _refine_baseline(name, cfg, store, data, panels, progress):
    """R-Subgrad-1 (the paper's baseline) tuned again at the budget on an eta axis of ratio
    :data:`BASELINE_REFINE` around its choices at the paper's nominal panels
    (:func:`experiments._spca_tuning.refine`), so that it is tuned as finely as the
    proximal methods; saved as its own unit."""
    key = refined_key(SINGLE_SAMPLE)
    nominal = [i for i, p in enumerate(panels) if p["nominal"]]
    if store.has(key) or not nominal:
        return
    say(progress, f"{name}: refining {SINGLE_SAMPLE}'s step (ratio {BASELINE_REFINE:g}) at "
                  f"{len(nominal)} panel(s)")
    store.put(key, refine(SINGLE_SAMPLE, cfg, data, [p["mu"] for p in panels],
                          store.get(f"tuning/{SINGLE_SAMPLE}"), nominal,
                          ratio=BASELINE_REFINE, optimizer=optimizer, schedule=schedule,
                          seed_keys=_tuning_keys(cfg)))


def _gamma_panel(name, cfg, store, data, lipschitz, progress):
    """R-ProxSPB and R-ProxSGD at mu = gamma_mu_fraction mu_deg for each gamma held fixed,
    the step re-tuned for each gamma on the tuning seeds."""
    mu = cfg.gamma_mu_fraction * store.get("setup")["mu_degenerate"]
    for gamma in cfg.gammas:
        for method in GAMMA_METHODS:
            gkey = f"gamma-tuning/{method}/gamma={gamma:g}"
            if not store.has(gkey):
                say(progress, f"{name}: gamma = {gamma:g}, tuning the step of {method}")
                _put_tuning(store, gkey, method, cfg, data, [mu], gammas=(gamma,))
            eta = store.get(gkey)["choices"][0]["eta"]
            for seed in cfg.seeds:
                key = f"gamma/{method}/gamma={gamma:g}/seed={seed}"
                if not store.has(key):
                    say(progress, f"{name}: gamma = {gamma:g}, {method}, eta = {eta}, "
                                   f"seed {seed}")
                    store.put(key, _run(method, eta, mu, cfg, data, seed, lipschitz,
                                        gamma=gamma))


def config_of(result: dict) -> SPCAConfig:
    """The :class:`SPCAConfig` a results file records (its lists back to tuples)."""
    saved = result["config"]
    return SPCAConfig(**{f.name: tuple(saved[f.name]) if isinstance(saved[f.name], list)
                         else saved[f.name] for f in dataclasses.fields(SPCAConfig)})


def replay(result: dict, key: str) -> dict:
    """Recomputes the reported run ``key`` of a results file with the present library.

    Args:
      result: a sparse PCA results file (:func:`experiments.load`).
      key: a reported run's unit, ``"run/<method>/mu=<panel>/seed=<seed>"`` or
        ``"gamma/<method>/gamma=<gamma>/seed=<seed>"``.

    Returns:
      The unit as :func:`run` computes it now (its curves as arrays), for comparison with
      the saved one (``result["units"][key]``): the same losses where the library still
      computes what it computed then (the times differ).

    Raises:
      KeyError: ``key`` is not a reported run of the file.
      ValueError: the file is not a sparse PCA experiment, or float64 without x64.
    """
    if result.get("config", {}).get("kind") != "spca":
        raise ValueError(f"{result.get('name')!r} is not a sparse PCA results file.")
    parts = key.split("/")
    if len(parts) != 4 or parts[0] not in ("run", "gamma"):
        raise KeyError(f"{key!r} is not a reported run (run/... or gamma/...).")
    kind, method, where, _seed = parts
    saved = result["units"][key]
    cfg = config_of(result)
    data = jnp.asarray(load_data(cfg.dataset, cfg.n, cfg.seed, check_dtype(cfg.dtype)))
    setup = result["units"]["setup"]
    if kind == "run":
        panel = where.removeprefix("mu=")
        mu = {p["key"]: p["mu"] for p in panel_mus(cfg.mu_fractions, cfg.mus,
                                                   setup["mu_degenerate"])}[panel]
    else:
        mu = cfg.gamma_mu_fraction * setup["mu_degenerate"]
    gamma = None if method in ("R-Subgrad", SINGLE_SAMPLE, "ManPG") else saved["gamma"]
    return _run(method, saved["eta"], mu, cfg, data, saved["seed"], setup["lipschitz"],
                gamma=gamma)
