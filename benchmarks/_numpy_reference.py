"""A NumPy reference implementation of one iteration of each solver, and its check.

:class:`NumpySolver` is a straightforward vectorized NumPy implementation of the
iterations that ``solvers.py`` times with ``rproxjax.fit``, on the sparse PCA loss
f(X; z) = ||z||^2 - ||X^T z||^2 with h = mu ||X||_1:

* the minibatch gradient -2/b Z^T (Z X) (the full gradient for the R-ProxSPB refresh
  and ManPG);
* the subproblem by the semi-smooth Newton method of the reference ManPG code (the
  library's ``SSN(method="reference")``): dense Newton system in the r(r+1)/2
  symmetric coordinates, regularization 0.2 max(min(||E||, 0.1), 1e-11),
  backtracking s = 1, halve while ||E_new||^2 >= ||E||^2 (1 - 0.001 s) and
  s > 1e-3, warm start from the previous multiplier, stop at ||E||_F <= tol;
* R-ProxSGD (eta_t = eta0 / sqrt(t + 1)), the R-ProxSPB SARAH step and refresh
  (constant eta), R-Subgrad (eta_t = eta0_subgrad / sqrt(t + 1), subgradient
  mu sign(X)) and ManPG (Armijo search on F, tolerances as in the reference code);
  polar retraction by ``numpy.linalg.svd``.

:func:`check_against_fit` runs the library (``rproxjax.fit``, the reference Newton rule
solved to the same tolerance) and this implementation from the same point for the same
steps and returns the largest difference of the iterates. :func:`run_numpy` runs and
times this implementation as ``solvers.py`` runs ``fit``; :func:`numpy_blas_info` says
which BLAS NumPy runs on.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from typing import NamedTuple

import jax
import numpy as np

import rproxjax

__all__ = [
    "NumpySolver",
    "Settings",
    "check_against_fit",
    "cold_state",
    "numpy_blas_info",
    "reference_rule",
    "run_numpy",
]


class Settings(NamedTuple):
    """Hyperparameters shared by the library's optimizers and the NumPy reference."""

    gamma: float  # proximal step of R-ProxSGD and R-ProxSPB; ManPG's t
    eta0: float  # R-ProxSGD: eta_t = eta0 / sqrt(t + 1)
    eta_spb: float  # R-ProxSPB: constant eta
    eta0_subgrad: float  # R-Subgrad: eta_t = eta0_subgrad / sqrt(t + 1)
    manpg_tol: float  # ManPG's stopping tolerance on ||zeta||^2 / t^2
    tol: float  # the subproblem's tolerance on ||E||_F


def default_tol(dtype) -> float:
    """max(1e-10, 100 eps): the library's default subproblem tolerance (passed explicitly)."""
    return max(1e-10, 100.0 * float(np.finfo(dtype).eps))


def reference_rule(solver: str, tol: float) -> dict:
    """Factory keywords (``ssn=rproxjax.SSN(...)``) that make the library's subproblem solves
    this module's: the reference Newton rule on dense systems, to ``tol`` alone.

    ManPG sets its subproblem tolerances itself (as this module does); R-Subgrad has none.
    """
    if solver == "subgrad":
        return {}
    if solver == "manpg":
        return {"ssn": rproxjax.SSN(method="reference", linear_solver="dense")}
    return {"ssn": rproxjax.SSN(tol=tol, rtol=0.0, method="reference", linear_solver="dense")}


def cold_state(x, count: int = 0) -> dict:
    """A fresh state at X (what ``optimizer.init`` holds): zero multiplier, step count."""
    x = np.asarray(x)
    r = x.shape[1]
    return {"x": x, "count": count, "lam": np.zeros((r, r), x.dtype), "v": np.zeros_like(x),
            "prev": x, "alpha": 1.0, "num_inexact": 0, "converged": False, "backtracks": 0}


class NumpySolver:
    """The iterations in plain vectorized NumPy, on ``data`` (n x d) with h = mu ||X||_1."""

    def __init__(self, data: np.ndarray, mu: float, settings: Settings, r: int):
        self.data = data
        self.dtype = data.dtype
        self.mu = self.dtype.type(mu)
        self.s = settings
        rows, cols = np.triu_indices(r)
        self.rows, self.cols = rows, cols
        self.scale = np.where(rows == cols, 0.5, 1.0 / np.sqrt(2.0)).astype(self.dtype)
        self.unvech_weight = np.where(rows == cols, 2.0 * self.scale, self.scale)
        self.eye_r = np.eye(r, dtype=self.dtype)
        self.eye_m = np.eye(rows.size, dtype=self.dtype)
        # Gram read off K by indexing (the same formula as the library):
        # G_pq = s_p s_q ([l_p = l_q] K_{l_p}[j_p, j_q] + [l_p = j_q] K_{l_p}[j_p, l_q]
        #               + [j_p = l_q] K_{j_p}[l_p, j_q] + [j_p = j_q] K_{j_p}[l_p, l_q]).
        jp, lp, jq, lq = rows[:, None], cols[:, None], rows[None, :], cols[None, :]

        def flat(i, a, c):
            return (i * r + a) * r + c

        self.gram_idx = [flat(lp, jp, jq), flat(lp, jp, lq), flat(jp, lp, jq), flat(jp, lp, lq)]
        self.gram_sel = [s.astype(self.dtype) for s in
                         ((lp == lq), (lp == jq), (jp == lq), (jp == jq))]
        self.gram_scale = np.outer(self.scale, self.scale)

    # -- pieces ---------------------------------------------------------------

    def grad(self, x, batch):
        return (-2.0 / batch.shape[0]) * (batch.T @ (batch @ x))

    def value(self, x, batch):
        zx = batch @ x
        return (np.sum(batch * batch) - np.sum(zx * zx)) / batch.shape[0]

    @staticmethod
    def polar(a):
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ vt

    @staticmethod
    def project(x, u):
        xtu = x.T @ u
        return u - x @ (0.5 * (xtu + xtu.T))

    def gram(self, x_outer, mask):
        k = (mask.T @ x_outer).ravel()
        g = sum(s * k[i] for s, i in zip(self.gram_sel, self.gram_idx, strict=True))
        return self.gram_scale * g

    def residual(self, x, arg, thr):
        """(Y, mask, E, ||E||_F) at the prox argument ``arg``."""
        mask = np.abs(arg) > thr
        y = np.where(mask, arg - np.sign(arg) * thr, 0.0).astype(self.dtype)
        xty = x.T @ y
        e = xty + xty.T - 2.0 * self.eye_r
        return y, mask.astype(self.dtype), e, np.sqrt(np.sum(e * e))

    def newton_direction(self, x_outer, mask, e, t, norm_e):
        """Dense regularized Newton direction in the symmetric coordinates, as r x r."""
        rows, cols = self.rows, self.cols
        reg = 0.2 * max(min(norm_e, 0.1), 1e-11)
        mat = (4.0 * t) * self.gram(x_outer, mask) + reg * self.eye_m
        coords = np.linalg.solve(mat, -self.scale * (e[rows, cols] + e[cols, rows]))
        direction = np.zeros(e.shape, self.dtype)
        w = self.unvech_weight * coords
        direction[rows, cols] = w
        direction[cols, rows] = w
        return direction

    def tangent_prox(self, x, g, t, lam, tol=None):
        """Semi-smooth Newton on E(Lambda) = 0: (zeta, lam, steps, evaluations)."""
        tol = self.s.tol if tol is None else tol
        t = self.dtype.type(t)
        thr = t * self.mu
        d, r = x.shape
        x_outer = (x[:, :, None] * x[:, None, :]).reshape(d, r * r)
        arg = x - t * g + (2.0 * t) * (x @ lam)
        y, mask, e, norm_e = self.residual(x, arg, thr)
        steps, evals = 0, 1
        while steps < 100 and norm_e > tol:
            direction = self.newton_direction(x_outer, mask, e, t, norm_e)
            arg_step = (2.0 * t) * (x @ direction)
            s = 1.0
            new = self.residual(x, arg + arg_step, thr)
            evals += 1
            while not new[3] ** 2 < norm_e**2 * (1.0 - 1e-3 * s) and s > 1e-3:
                s *= 0.5
                new = self.residual(x, arg + s * arg_step, thr)
                evals += 1
            lam = lam + s * direction
            arg = arg + s * arg_step
            y, mask, e, norm_e = new
            steps += 1
        return y - x, lam, steps, evals

    # -- iterations (each takes a state dict and returns a new one) -------------

    def step(self, solver, st, batch=None):
        """One iteration of ``solver`` ("sgd", "sarah", "refresh", "subgrad", "manpg") on
        the minibatch ``batch`` (the refresh and ManPG use the whole data set):
        (new state, Newton steps, E evaluations)."""
        st = dict(st)
        x, s = st["x"], self.s
        steps = evals = 0
        if solver == "sgd":
            eta = s.eta0 / np.sqrt(st["count"] + 1.0)
            zeta, st["lam"], steps, evals = self.tangent_prox(
                x, self.grad(x, batch), s.gamma, st["lam"])
            st["x"] = self.polar(x + eta * zeta)
        elif solver in ("sarah", "refresh"):
            if solver == "sarah":
                v = self.grad(x, batch) - self.project(x, self.grad(st["prev"], batch) - st["v"])
            else:
                v = self.grad(x, self.data)
            zeta, st["lam"], steps, evals = self.tangent_prox(x, v, s.gamma, st["lam"])
            st["x"] = self.polar(x + s.eta_spb * zeta)
            st["v"], st["prev"] = v, x
        elif solver == "subgrad":
            eta = s.eta0_subgrad / np.sqrt(st["count"] + 1.0)
            direction = -self.project(x, self.grad(x, batch) + self.mu * np.sign(x))
            st["x"] = self.polar(x + eta * direction)
        elif solver == "manpg":
            steps, evals = self._manpg(st)
        else:
            raise ValueError(f"unknown solver {solver!r}")
        st["count"] += 1
        return st, steps, evals

    def objective(self, x):
        return self.value(x, self.data) + self.mu * np.sum(np.abs(x))

    def _manpg(self, st):
        """ManPG's iteration in place on ``st``: (Newton steps, E evaluations)."""
        x, tk, tol = st["x"], self.s.gamma, self.s.manpg_tol
        if st["alpha"] < 1e-4 or st["num_inexact"] > 10:
            inner = max(5e-16, min(1e-14, 1e-5 * tol * tk**2))
        else:
            inner = max(1e-13, min(1e-11, 1e-3 * tol * tk**2))
        g = self.grad(x, self.data)
        zeta, st["lam"], steps, evals = self.tangent_prox(x, g, tk, st["lam"], np.sqrt(inner))
        znorm2 = np.sum(zeta * zeta)
        converged = st["converged"] or znorm2 / tk**2 < tol
        f_x = self.objective(x)
        alpha, k = 1.0, 0
        f_new = self.objective(self.polar(x + zeta))
        while f_new >= f_x - alpha / (2 * tk) * znorm2 and alpha >= 1e-4 and k < 14:
            alpha *= 0.5
            f_new = self.objective(self.polar(x + alpha * zeta))
            k += 1
        if not converged:
            st["x"] = self.polar(x + alpha * zeta)
            st["alpha"] = alpha
            st["num_inexact"] += int(alpha < 1e-4)
            st["backtracks"] += k
        st["converged"] = converged
        return steps, evals


# --------------------------------------------------------------------------
# The check against the library


def check_against_fit(solver, x, data, mu, settings, make_opt, loss_fn, *, b, steps, rng):
    """Max |X_fit - X_numpy| after ``steps`` iterations of ``solver`` from the point ``x``.

    Both start fresh: ``fit`` from ``optimizer.init(x)`` (``opt_state=None``), the
    reference from :func:`cold_state` (zero multiplier, step count 0), and the library
    solves its subproblems by the reference rule to the same tolerance
    (:func:`reference_rule`), so the two compute the same iterates up to rounding.
    Both must see the same samples, and ``fit`` draws its minibatches itself, so:

    * R-ProxSGD, R-Subgrad: ``fit`` on a data set of b samples with batch size b
      (a full batch: the same b samples at every step);
    * ManPG: ``fit`` with batch size n (full gradients, as it is run);
    * R-ProxSPB (solver "spb"): ``fit``'s online mode, which takes the minibatches
      from an iterator: one block of q = ``steps`` (a refresh over all n samples,
      then ``steps - 1`` SARAH steps on random minibatches of b).
    """
    data_np = np.asarray(data)
    n = data_np.shape[0]
    ref = NumpySolver(data_np, mu, settings, np.shape(x)[1])
    rule = reference_rule(solver, settings.tol)
    key = jax.random.key(0)
    st = cold_state(x)
    if solver in ("sgd", "subgrad"):
        batch = data_np[rng.permutation(n)[:b]]
        res = rproxjax.fit(make_opt(solver, mu, **rule), loss_fn, x, batch, key=key,
                           batch_size=b, num_epochs=1, steps_per_epoch=steps)
        for _ in range(steps):
            st = ref.step(solver, st, batch)[0]
    elif solver == "manpg":
        res = rproxjax.fit(make_opt(solver, mu, **rule), loss_fn, x, data, key=key,
                           batch_size=n, num_epochs=1, steps_per_epoch=steps)
        for _ in range(steps):
            st = ref.step(solver, st)[0]
    elif solver == "spb":
        batches = [data_np[rng.permutation(n)[:b]] for _ in range(steps - 1)]
        stream = iter([data_np[i:i + b] for i in range(0, n, b)] + batches)
        res = rproxjax.fit(make_opt(solver, mu, q=steps, **rule), loss_fn, x, stream, key=key,
                           batch_size=b, num_steps=steps, refresh_batch_size=n)
        st = ref.step("refresh", st)[0]
        for batch in batches:
            st = ref.step("sarah", st, batch)[0]
    else:
        raise ValueError(f"unknown solver {solver!r}")
    return float(np.max(np.abs(np.asarray(res.params) - st["x"])))


def run_numpy(ref, solver, x0, rng, *, b, steps_per_epoch, warmup_epochs, epochs, q=None):
    """Runs the reference as ``solvers.py`` runs ``fit``; times the last ``epochs`` epochs.

    From :func:`cold_state` at ``x0`` (as ``optimizer.init``), ``warmup_epochs`` +
    ``epochs`` epochs of ``steps_per_epoch`` iterations of ``solver`` ("sgd", "spb",
    "subgrad", "manpg"; R-ProxSPB refreshes at every q-th step, counting from 0), each
    on b distinct samples drawn by ``rng`` (the refresh and ManPG: the whole data set).
    Each iteration is timed on its own (drawing the minibatch is not timed). Returns
    the median and the least over the timed epochs of epoch time / steps, the mean
    Newton steps, E evaluations and (ManPG) Armijo backtracks per timed iteration, and
    for R-ProxSPB the median time of a SARAH step and of a refresh.
    """
    n = ref.data.shape[0]
    st = cold_state(x0)
    epoch_s, kinds, times, newton, evals = [], [], [], [], []
    for epoch in range(warmup_epochs + epochs):
        timed = epoch >= warmup_epochs
        if epoch == warmup_epochs:
            backtracks_start = st["backtracks"]
        total = 0.0
        for _ in range(steps_per_epoch):
            kind = solver
            if solver == "spb":
                kind = "refresh" if st["count"] % q == 0 else "sarah"
            batch = None if kind in ("refresh", "manpg") else ref.data[
                rng.choice(n, b, replace=False)]
            t0 = time.perf_counter()
            st, steps, ev = ref.step(kind, st, batch)
            seconds = time.perf_counter() - t0
            total += seconds
            if timed:
                kinds.append(kind)
                times.append(seconds)
                newton.append(steps)
                evals.append(ev)
        if timed:
            epoch_s.append(total / steps_per_epoch)
    out = {"numpy_time_s": statistics.median(epoch_s), "numpy_min_time_s": min(epoch_s),
           "numpy_newton_steps": float(np.mean(newton)),
           "numpy_evaluations": float(np.mean(evals)),
           "numpy_backtracks": (st["backtracks"] - backtracks_start) / len(times)}
    for kind in ("sarah", "refresh"):
        chosen = [t for k, t in zip(kinds, times, strict=True) if k == kind]
        if chosen:
            out[f"numpy_{kind}_time_s"] = statistics.median(chosen)
    return out


# --------------------------------------------------------------------------
# Which BLAS


def numpy_blas_info() -> dict:
    """Which BLAS NumPy uses: build configuration, runtime core and threads, env."""
    info = {}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["build"] = {k: blas.get(k) for k in ("name", "version", "openblas configuration")}
    except Exception as exc:  # noqa: BLE001 - informative only
        info["build"] = f"unavailable ({exc})"
    try:
        import threadpoolctl

        info["runtime"] = threadpoolctl.threadpool_info()
    except ImportError:
        info["runtime"] = _openblas_runtime()
    names = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
    info["env"] = {k: os.environ.get(k) for k in names}
    return info


def _openblas_runtime() -> list:
    """Core type and threads of each OpenBLAS loaded in this process (via ctypes)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return []
    found = []
    for path in paths:
        lib = ctypes.CDLL(path)
        entry = {"filepath": path}
        for prefix in ("scipy_", ""):
            for suffix in ("64_", "_64", ""):
                core = getattr(lib, f"{prefix}openblas_get_corename{suffix}", None)
                threads = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                config = getattr(lib, f"{prefix}openblas_get_config{suffix}", None)
                if core is not None and "corename" not in entry:
                    core.restype = ctypes.c_char_p
                    entry["corename"] = core().decode()
                if threads is not None and "num_threads" not in entry:
                    entry["num_threads"] = int(threads())
                if config is not None and "config" not in entry:
                    config.restype = ctypes.c_char_p
                    entry["config"] = config().decode()
        found.append(entry)
    return found
