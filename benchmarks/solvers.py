"""Benchmark: one iteration of each solver on online sparse PCA at the paper's size.

Run from the repository root (about 6-8 minutes on a busy 2-core CPU)::

    python benchmarks/solvers.py                  # tables + profile, saved
    python benchmarks/solvers.py --no-profile --no-save
    python benchmarks/solvers.py --dtypes float64

Instance (d = 784, r = 10, minibatch b = 100, as in the paper's MNIST runs):

* data: n = 10,000 synthetic samples of dimension 784 (no download): 10
  strong directions, low-frequency 2-D cosine patterns under a centred
  Gaussian window on the 28 x 28 pixel grid (like MNIST's leading
  eigen-digits) with variances 30 exp(-k / 4), k = 0..9, plus a background
  with the power-law spectrum j^-1.2 in a random orthonormal basis. Columns
  are centred and the whole matrix is scaled so that the top eigenvalue of
  the sample covariance A = Z^T Z / n is 1 (so L = 2 lambda_max(A) = 2);
* per-sample loss f(X; z) = ||z||^2 - ||X^T z||^2, regularizer
  ``rproxjax.l1(MU)``; MU gives sparse but non-empty iterates (the nonzero
  count |X_ij| > 1e-3 is printed);
* solvers: R-ProxSGD (eta_t = ETA0 / sqrt(t + 1), gamma = 1 / L),
  R-ProxSPB (constant eta, gamma = 1 / L, q = 100 = sqrt(n), refresh on the
  full data set), R-Subgrad (eta_t = ETA0_SUBGRAD / sqrt(t + 1)) and ManPG
  (full gradient over n, t = 1 / L); polar retraction everywhere (the
  default), SSN with its default tolerance (1e-10 in float64, ~1.2e-5 in
  float32), X0 a random Stiefel point.

One iteration is what ``rproxjax.fit`` does per step: the minibatch gradient
(``jax.grad`` of the mean of the ``jax.vmap``-ed per-sample loss over b
samples gathered by index), the optimizer's ``update`` and
``optax.apply_updates``. For R-ProxSPB the SARAH step (two minibatch
gradients, at X_t and X_{t-1}, and the projection transport) and the refresh
step (full gradient, in chunks of 2048 samples as in ``fit``) are timed
separately; ManPG's iteration is the full gradient, the subproblem and the
Armijo search (f over all n samples per trial).

Timing: each solver first runs 2 T = 400 warm-up iterations from X0
(R-ProxSPB: a refresh, then 3 blocks of q - 1 SARAH steps and a refresh;
ManPG: 20 iterations), so that the timed iterations are in the steady state
(SSN warm-started from the previous multiplier). Then a compiled ``lax.scan``
over T = 200 steps (R-ProxSPB: the q - 1 = 99 SARAH steps of a block,
starting just after a refresh, and separately the refresh that ends that
block; ManPG: 5 steps) with pre-drawn batch indices is timed (median of 5
calls, ``jax.block_until_ready``, compilation excluded by a first untimed
call) and divided by its length. The same scan also returns the SSN info of
every step (Newton steps, evaluations of E), averaged over the timed steps.

FLOP model (2 FLOPs per multiply-add; ``m = r (r + 1) / 2``):

* minibatch gradient: 4 b d r (Z X and Z^T (Z X)); full gradient: 4 n d r;
* SSN: per evaluation of E(Lambda) 4 d r^2 (X Lambda and X^T Y; the library
  now forms X D once per Newton step instead of X Lambda per evaluation,
  which this model slightly over-counts); per dense Newton step
  2 d r^3 (the K tensor) + r^3 m + r^2 m^2 + (2/3) m^3 (Gram and LU solve);
* polar retraction by thin SVD: 6 d r^2 + 11 r^3 for U_1, Sigma, V by the
  R-SVD (Golub and Van Loan), plus 2 d r^2 for U V^T: 8 d r^2 + 11 r^3;
* tangent projection (R-Subgrad, SARAH transport): 4 d r^2;
* ManPG: full gradient + SSN + (2 + backtracks) objective evaluations of
  2 n d r (Z X) and as many retractions.

Element-wise work (soft-thresholding, masks, the ||z||^2 term, guards) is not
counted. The FLOP-bound time divides this count by the throughput of a
2000 x 2000 matmul of the same dtype measured in the same run (best of a
measurement before and after the dtype's rows, so the bound is a lower
bound). On CPU the skinny d x r products run far below the large-GEMM rate,
so ratios of a few are expected.

NumPy reference: a straightforward vectorized NumPy implementation of the
same iterations (minibatch gradient, the same semi-smooth Newton method:
dense Newton system in the r(r+1)/2 symmetric coordinates, regularization
0.2 max(min(||E||, 0.1), 1e-11), backtracking s = 1, halve while
||E_new||^2 >= ||E||^2 (1 - 0.001 s) and s > 1e-3, warm start; polar
retraction by ``numpy.linalg.svd``), started from the same state with the
same batches. Its agreement with the JAX iteration after 5 steps is printed
(about 1e-15 in float64; in float32 ~1e-7, and ~1e-4 for R-Subgrad, whose
sign(X) flips on entries that round to either side of zero). Its time is the
median over 60 iterations (the refresh: 5 calls from the same state; ManPG:
5 iterations), NumPy as installed (the BLAS it uses, its threads and the
OPENBLAS_* variables are printed; the environment is not changed).

Sweep: ``jax.vmap`` over 8 values of mu of a whole compiled scan of
T_SWEEP = 50 steps (the optimizer is built inside the vmapped function)
against a single run of the same 50 steps. The lanes start from the single
run's warmed-up state and adapt to their own mu for 50 steps first
(R-ProxSPB: 50 SARAH steps and a refresh). A vmapped SSN ``while_loop``
runs in lockstep until its slowest lane is done, so the per-lane Newton
counts (and the mean over steps of their maximum, "lockstep") are printed
next to the ratio, with 8 sequential single runs from the lanes' states for
comparison.

The profile section (``--no-profile`` skips it) times the pieces of one
float64 R-ProxSGD iteration inside a compiled ``fori_loop``
(``_timing.time_per_iteration``, fastest of the repeats: the least
load-disturbed sample) and a few measured alternatives. The library is not
modified.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

import rproxjax
from rproxjax import stiefel

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.solvers`
    from benchmarks import _timing

jax.config.update("jax_enable_x64", True)

D, R, N, B = 784, 10, 10_000, 100
SIDE = 28
T = 200
Q = 100
T_SARAH = Q - 1
T_MANPG = 5
WARMUP_SCANS = 2
T_SWEEP = 50
SWEEP_WARMUP_SCANS = 1
SPB_WARMUP_BLOCKS = 3
CHUNK = 2048
MU = 0.01
SWEEP_MUS = tuple(float(v) for v in np.geomspace(MU / 4, 2 * MU, 8))
LIPSCHITZ = 2.0
GAMMA = 1.0 / LIPSCHITZ
ETA0 = 1.0
ETA_SPB = 0.5
ETA0_SUBGRAD = 0.5
MANPG_TOL = 1e-14
CHECK_STEPS = 5
NP_ITERS = 60
PEAK_N = 2000
DTYPES = ("float64", "float32")
SOLVER_NAMES = {
    "sgd": "R-ProxSGD",
    "sarah": "R-ProxSPB SARAH step",
    "refresh": "R-ProxSPB refresh (full grad)",
    "spb_avg": "R-ProxSPB per step, amortized",
    "subgrad": "R-Subgrad",
    "manpg": "ManPG (full grad)",
}


# --------------------------------------------------------------------------
# Data and FLOP model


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The n x d data matrix (float64) and the top eigenvalues of its covariance."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE] / (SIDE - 1)
    window = np.exp(-((yy - 0.5) ** 2 + (xx - 0.5) ** 2) / (2 * 0.22**2))
    freqs = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (0, 2), (2, 1), (1, 2), (3, 0), (0, 3)]
    patterns = [
        (window * np.cos(np.pi * fy * yy) * np.cos(np.pi * fx * xx)).ravel() for fy, fx in freqs
    ]
    strong, _ = np.linalg.qr(np.array(patterns).T)
    variances = 30.0 * np.exp(-np.arange(len(freqs)) / 4.0)
    latent = rng.standard_normal((N, len(freqs))) * np.sqrt(variances)
    basis, _ = np.linalg.qr(rng.standard_normal((D, D)))
    spectrum = 1.0 / np.arange(1, D + 1) ** 1.2
    z = latent @ strong.T + (rng.standard_normal((N, D)) * np.sqrt(spectrum)) @ basis.T
    z -= z.mean(axis=0)
    eig = np.linalg.eigvalsh(z.T @ z / N)[::-1]
    z /= np.sqrt(eig[0])
    return z, eig / eig[0]


def _m(r):
    return r * (r + 1) // 2


def grad_flops(batch):
    return 4.0 * batch * D * R


def ssn_flops(steps, evals):
    m = _m(R)
    newton = 2.0 * D * R**3 + R**3 * m + R**2 * m**2 + (2.0 / 3.0) * m**3
    return evals * 4.0 * D * R**2 + steps * newton


RETRACTION_FLOPS = 8.0 * D * R**2 + 11.0 * R**3
PROJECTION_FLOPS = 4.0 * D * R**2


def iteration_flops(solver, steps, evals, backtracks=0.0):
    if solver == "sgd":
        return grad_flops(B) + ssn_flops(steps, evals) + RETRACTION_FLOPS
    if solver == "sarah":
        return 2 * grad_flops(B) + PROJECTION_FLOPS + ssn_flops(steps, evals) + RETRACTION_FLOPS
    if solver == "refresh":
        return grad_flops(N) + ssn_flops(steps, evals) + RETRACTION_FLOPS
    if solver == "subgrad":
        return grad_flops(B) + PROJECTION_FLOPS + RETRACTION_FLOPS
    if solver == "manpg":
        trials = 2.0 + backtracks
        return (grad_flops(N) + ssn_flops(steps, evals)
                + trials * (2.0 * N * D * R + RETRACTION_FLOPS))
    raise ValueError(solver)


# --------------------------------------------------------------------------
# The JAX iterations (what rproxjax.fit runs per step)


def per_sample_loss(x, z):
    return jnp.sum(z * z) - jnp.sum((x.T @ z) ** 2)


def batch_loss(x, batch):
    return jnp.mean(jax.vmap(per_sample_loss, in_axes=(None, 0))(x, batch))


batch_grad = jax.grad(batch_loss)


def full_grad(x, data):
    """Mean gradient over all samples, in chunks of CHUNK samples (as fit does)."""
    n = data.shape[0]
    full = n // CHUNK
    head = data[: full * CHUNK].reshape(full, CHUNK, data.shape[1])
    total, _ = lax.scan(lambda acc, c: (acc + CHUNK * batch_grad(x, c), None),
                        jnp.zeros_like(x), head)
    if n % CHUNK:
        total = total + (n % CHUNK) * batch_grad(x, data[full * CHUNK:])
    return total / n


def make_opt(solver, mu, **kwargs):
    reg = rproxjax.l1(mu)
    if solver == "sgd":
        return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(ETA0), GAMMA, reg, **kwargs)
    if solver in ("sarah", "refresh"):
        return rproxjax.r_prox_spb(ETA_SPB, GAMMA, reg, q=Q, **kwargs)
    if solver == "subgrad":
        return rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(ETA0_SUBGRAD), reg, **kwargs)
    if solver == "manpg":
        return rproxjax.manpg(GAMMA, reg, tol=MANPG_TOL, **kwargs)
    raise ValueError(solver)


def ssn_info(state):
    """The SubproblemInfo inside an optimizer state (None for R-Subgrad)."""
    leaves = jax.tree.leaves(getattr(state, "ssn", None),
                             is_leaf=lambda a: isinstance(a, rproxjax.SubproblemInfo))
    infos = [a for a in leaves if isinstance(a, rproxjax.SubproblemInfo)]
    return infos[0] if infos else None


def _counts(state):
    info = ssn_info(state)
    zero = jnp.zeros((), jnp.int32)
    steps = zero if info is None else info.num_steps
    evals = zero if info is None else info.num_evaluations
    backtracks = getattr(state, "num_backtracks", zero)
    return steps, evals, backtracks


def jax_step(solver, x, state, ib, data, mu, **opt_kwargs):
    """One iteration: (x_new, state_new, (newton steps, evaluations, backtracks))."""
    opt = make_opt(solver, mu, **opt_kwargs)
    if solver in ("sgd", "subgrad"):
        g = batch_grad(x, data[ib])
        updates, state = opt.update(g, state, x)
    elif solver == "sarah":
        batch = data[ib]
        g = batch_grad(x, batch)
        updates, state = opt.update(g, state, x, refresh=False,
                                    grad_fn=lambda p: batch_grad(p, batch))
    elif solver == "refresh":
        updates, state = opt.update(full_grad(x, data), state, x, refresh=True)
    else:  # manpg
        g = batch_grad(x, data)
        updates, state = opt.update(g, state, x, value_fn=lambda p: batch_loss(p, data))
    x = optax.apply_updates(x, updates)
    return x, state, _counts(state)


def scan_steps(solver, x, state, idx, data, mu, length=None, **opt_kwargs):
    """``length`` steps (or one per row of ``idx``) in one lax.scan."""

    def body(carry, ib):
        x_, st = carry
        x_, st, counts = jax_step(solver, x_, st, ib, data, mu, **opt_kwargs)
        return (x_, st), counts

    return lax.scan(body, (x, state), idx, length=length)


@functools.cache
def scan_fn(solver, vmapped=False, length=None, **opt_kwargs):
    fn = functools.partial(scan_steps, solver, length=length, **opt_kwargs)
    if vmapped:
        fn = jax.vmap(fn, in_axes=(0, 0, None, None, 0))
    return jax.jit(fn)


@functools.cache
def step_fn(solver):
    return jax.jit(functools.partial(jax_step, solver))


# --------------------------------------------------------------------------
# NumPy reference implementation


class NumpySolver:
    """The same iterations in plain vectorized NumPy."""

    def __init__(self, data: np.ndarray, mu: float):
        self.data = data
        self.dtype = data.dtype
        self.mu = self.dtype.type(mu)
        self.tol = rproxjax.default_tol(self.dtype)
        r = R
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
        self.gram_sel = [(lp == lq), (lp == jq), (jp == lq), (jp == jq)]
        self.gram_sel = [s.astype(self.dtype) for s in self.gram_sel]
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

    def tangent_prox(self, x, g, t, lam, tol=None):
        """Semi-smooth Newton on E(Lambda) = 0: (zeta, lam, steps, evaluations)."""
        tol = self.tol if tol is None else tol
        t = self.dtype.type(t)
        thr = t * self.mu
        rows, cols = self.rows, self.cols
        d, r = x.shape

        def residual(arg):
            mask = np.abs(arg) > thr
            y = np.where(mask, arg - np.sign(arg) * thr, 0.0).astype(self.dtype)
            xty = x.T @ y
            e = xty + xty.T - 2.0 * self.eye_r
            return y, mask.astype(self.dtype), e, np.sqrt(np.sum(e * e))

        x_outer = (x[:, :, None] * x[:, None, :]).reshape(d, r * r)
        arg = x - t * g + (2.0 * t) * (x @ lam)
        y, mask, e, norm_e = residual(arg)
        steps, evals = 0, 1
        while steps < 100 and norm_e > tol:
            reg = 0.2 * max(min(norm_e, 0.1), 1e-11)
            mat = (4.0 * t) * self.gram(x_outer, mask) + reg * self.eye_m
            coords = np.linalg.solve(mat, -self.scale * (e[rows, cols] + e[cols, rows]))
            direction = np.zeros((r, r), self.dtype)
            w = self.unvech_weight * coords
            direction[rows, cols] = w
            direction[cols, rows] = w
            arg_step = (2.0 * t) * (x @ direction)
            s = 1.0
            new = residual(arg + arg_step)
            evals += 1
            while not new[3] ** 2 < norm_e**2 * (1.0 - 1e-3 * s) and s > 1e-3:
                s *= 0.5
                new = residual(arg + s * arg_step)
                evals += 1
            lam = lam + s * direction
            arg = arg + s * arg_step
            y, mask, e, norm_e = new
            steps += 1
        return y - x, lam, steps, evals

    # -- iterations (each takes and returns a state dict) -----------------------

    def step(self, solver, st, ib):
        st = dict(st)
        x = st["x"]
        if solver == "sgd":
            g = self.grad(x, self.data[ib])
            eta = ETA0 / np.sqrt(st["count"] + 1.0)
            zeta, st["lam"], steps, evals = self.tangent_prox(x, g, GAMMA, st["lam"])
            st["x"] = self.polar(x + eta * zeta)
        elif solver in ("sarah", "refresh"):
            if solver == "sarah":
                batch = self.data[ib]
                v = self.grad(x, batch) - self.project(
                    x, self.grad(st["prev"], batch) - st["v"])
            else:
                v = self.grad(x, self.data)
            zeta, st["lam"], steps, evals = self.tangent_prox(x, v, GAMMA, st["lam"])
            st["x"] = self.polar(x + ETA_SPB * zeta)
            st["v"], st["prev"] = v, x
        elif solver == "subgrad":
            g = self.grad(x, self.data[ib])
            eta = ETA0_SUBGRAD / np.sqrt(st["count"] + 1.0)
            direction = -self.project(x, g + self.mu * np.sign(x))
            st["x"] = self.polar(x + eta * direction)
            steps = evals = 0
        else:  # manpg
            steps, evals = self._manpg(st)
        st["count"] += 1
        return st, steps, evals

    def _manpg(self, st):
        x, tk = st["x"], GAMMA
        tight = st["alpha"] < 1e-4 or st["num_inexact"] > 10
        if tight:
            inner = max(5e-16, min(1e-14, 1e-5 * MANPG_TOL * tk**2))
        else:
            inner = max(1e-13, min(1e-11, 1e-3 * MANPG_TOL * tk**2))
        g = self.grad(x, self.data)
        zeta, st["lam"], steps, evals = self.tangent_prox(x, g, tk, st["lam"], np.sqrt(inner))
        znorm2 = np.sum(zeta * zeta)
        converged = st["converged"] or znorm2 / tk**2 < MANPG_TOL

        def objective(p):
            return self.value(p, self.data) + self.mu * np.sum(np.abs(p))

        f_x = objective(x)
        alpha, k = 1.0, 0
        f_new = objective(self.polar(x + zeta))
        while f_new >= f_x - alpha / (2 * tk) * znorm2 and alpha >= 1e-4 and k < 14:
            alpha *= 0.5
            f_new = objective(self.polar(x + alpha * zeta))
            k += 1
        if not converged:
            st["x"] = self.polar(x + alpha * zeta)
            st["alpha"] = alpha
            st["num_inexact"] += int(alpha < 1e-4)
        st["converged"] = converged
        return steps, evals


def numpy_state(x, state):
    """The NumPy solver's state from a JAX (x, optimizer state)."""
    info = ssn_info(state)
    st = {"x": np.asarray(x), "count": int(state.count)}
    if info is not None:
        st["lam"] = np.asarray(info.lam)
    if hasattr(state, "v"):
        st["v"], st["prev"] = np.asarray(state.v), np.asarray(state.prev_params)
    if hasattr(state, "alpha"):
        st["alpha"] = float(state.alpha)
        st["num_inexact"] = int(state.num_inexact)
        st["converged"] = bool(state.converged)
    return st


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


# --------------------------------------------------------------------------
# Running and timing one solver


def _indices(rng, *shape):
    return jnp.asarray(rng.integers(0, N, size=shape), jnp.int32)


def _nonzeros(x):
    return int(np.count_nonzero(np.abs(np.asarray(x)) > 1e-3))


def warm_up(solver, x, state, data, mu, rng):
    """The warm-up protocol; returns the (x, state) the timed scan starts from."""
    if solver in ("sgd", "subgrad"):
        run = scan_fn(solver)
        for _ in range(WARMUP_SCANS):
            (x, state), _ = run(x, state, _indices(rng, T, B), data, mu)
    elif solver == "sarah":  # refresh, then blocks of (q - 1 SARAH steps, refresh)
        refresh = scan_fn("refresh", length=1)
        sarah = scan_fn("sarah")
        (x, state), _ = refresh(x, state, None, data, mu)
        for _ in range(SPB_WARMUP_BLOCKS):
            (x, state), _ = sarah(x, state, _indices(rng, T_SARAH, B), data, mu)
            (x, state), _ = refresh(x, state, None, data, mu)
    elif solver == "manpg":
        run = scan_fn("manpg", length=T_MANPG)
        for _ in range(4):
            (x, state), _ = run(x, state, None, data, mu)
    return jax.block_until_ready((x, state))


def timed_run(solver, x, state, idx, data, mu, repeats, vmapped=False, **opt_kwargs):
    """Seconds per step of the compiled scan (median of ``repeats`` calls) and the
    mean counts per step. A first, untimed call compiles and returns the counts."""
    length = {"manpg": T_MANPG, "refresh": 1}.get(solver)
    run = scan_fn(solver, vmapped, length=length, **opt_kwargs)
    steps = length if idx is None else idx.shape[0]
    (x_end, state_end), (newton, evals, backtracks) = run(x, state, idx, data, mu)
    seconds = _timing.time_fn(run, x, state, idx, data, mu, repeats=repeats, warmup=0)
    out = {
        "time_s": seconds / steps,
        "steps_timed": steps,
        "newton_steps": float(np.mean(newton)),
        "evaluations": float(np.mean(evals)),
        "_x_end": x_end,
        "_state_end": state_end,
        "_newton": np.asarray(newton),
    }
    if solver == "manpg":
        before = int(state.num_backtracks)
        out["backtracks"] = (int(np.asarray(backtracks)[-1]) - before) / steps
        out["converged"] = bool(state_end.converged)
    return out


def check_and_time_numpy(solver, x, state, idx, data, data_np, mu):
    """Max |X_jax - X_numpy| after CHECK_STEPS steps, and the NumPy time per step."""
    ref = NumpySolver(data_np, mu)
    if solver in ("refresh", "manpg"):  # the timed scans themselves (no new compilation)
        run = scan_fn(solver, False, length={"refresh": 1, "manpg": T_MANPG}[solver])
        steps_per_call = {"refresh": 1, "manpg": T_MANPG}[solver]
        step = lambda x_, st_, ib_: run(x_, st_, None, data, mu)[0]  # noqa: E731
    else:
        run = step_fn(solver)
        steps_per_call = 1
        step = lambda x_, st_, ib_: run(x_, st_, ib_, data, mu)[:2]  # noqa: E731
    x_j, st_j = x, state
    st_np = numpy_state(x, state)
    for i in range(CHECK_STEPS):
        ib = None if idx is None else idx[i]
        if i % steps_per_call == 0:
            x_j, st_j = step(x_j, st_j, ib)
        st_np, _, _ = ref.step(solver, st_np, None if idx is None else np.asarray(ib))
    diff = float(np.max(np.abs(np.asarray(x_j) - st_np["x"])))

    iters = {"refresh": 5, "manpg": T_MANPG}.get(solver, NP_ITERS)
    st_np = numpy_state(x, state)
    times, newton = [], []
    for i in range(iters):
        ib = None if idx is None else np.asarray(idx[i])
        t0 = time.perf_counter()
        new, steps, _ = ref.step(solver, st_np, ib)
        times.append(time.perf_counter() - t0)
        newton.append(steps)
        if solver != "refresh":  # refresh: always from the same state
            st_np = new
    return {"check_max_abs_diff": diff, "numpy_time_s": statistics.median(times),
            "numpy_min_time_s": min(times),
            "numpy_newton_steps": float(np.mean(newton)), "numpy_iterations": iters}


def bench_solver(solver, dtype, data, data_np, x0, rng, repeats, peak, start=None):
    """Warm-up (unless ``start`` is given), timed scan, FLOP bound, NumPy check and time."""
    tic = time.perf_counter()
    if start is None:
        x, state = warm_up(solver, x0, make_opt(solver, MU).init(x0), data, MU, rng)
    else:
        x, state = start
    warm_s = time.perf_counter() - tic
    length = {"sgd": T, "subgrad": T, "sarah": T_SARAH}.get(solver)
    idx = None if length is None else _indices(rng, length, B)
    res = timed_run(solver, x, state, idx, data, MU, repeats)
    res.update(check_and_time_numpy(solver, x, state, idx, data, data_np, MU))
    res["newton_steps_numpy_window"] = float(np.mean(res["_newton"][:res["numpy_iterations"]]))
    flops = iteration_flops(solver, res["newton_steps"], res["evaluations"],
                            res.get("backtracks", 0.0))
    res.update({
        "solver": solver, "dtype": dtype, "flops": flops, "peak_flops": peak,
        "bound_s": flops / peak, "ratio": res["time_s"] * peak / flops,
        "speedup": res["numpy_time_s"] / res["time_s"],
        "nonzeros_start": _nonzeros(x), "nonzeros_end": _nonzeros(res["_x_end"]),
        "warmup_s": warm_s, "total_s": time.perf_counter() - tic,
        "_x": x, "_state": state, "_idx": idx,
    })
    extra = f", backtracks/iter {res['backtracks']:.2f}" if "backtracks" in res else ""
    print(
        f"{dtype} {SOLVER_NAMES[solver]}: {1e6 * res['time_s']:,.0f} us/iter (bound "
        f"{1e6 * res['bound_s']:,.0f} us, ratio {res['ratio']:.1f}); NumPy "
        f"{1e6 * res['numpy_time_s']:,.0f} us (x{res['speedup']:.1f}); Newton steps "
        f"{res['newton_steps']:.2f} (NumPy {res['numpy_newton_steps']:.2f}), evaluations "
        f"{res['evaluations']:.2f}{extra}; nonzeros {res['nonzeros_start']} -> "
        f"{res['nonzeros_end']} of {D * R}; check after {CHECK_STEPS} steps: max |X_jax - "
        f"X_numpy| = {res['check_max_abs_diff']:.1e} [warm-up + compile {warm_s:.0f} s, "
        f"all {res['total_s']:.0f} s]",
        flush=True,
    )
    return res


def amortized_spb(sarah, refresh):
    """(q - 1) SARAH steps + 1 refresh, per step."""
    per = lambda a, b: ((Q - 1) * a + b) / Q  # noqa: E731
    flops = per(sarah["flops"], refresh["flops"])
    time_s = per(sarah["time_s"], refresh["time_s"])
    numpy_s = per(sarah["numpy_time_s"], refresh["numpy_time_s"])
    peak = sarah["peak_flops"]
    return {
        "solver": "spb_avg", "dtype": sarah["dtype"], "time_s": time_s, "flops": flops,
        "bound_s": flops / peak, "ratio": time_s * peak / flops, "numpy_time_s": numpy_s,
        "speedup": numpy_s / time_s, "refresh_per_q_s": refresh["time_s"] / Q,
        "newton_steps": per(sarah["newton_steps"], refresh["newton_steps"]),
        "evaluations": per(sarah["evaluations"], refresh["evaluations"]),
    }


# --------------------------------------------------------------------------
# Sweep over mu


def bench_sweep(solver, data, rng_seed, repeats, single):
    """vmap over SWEEP_MUS of a T_SWEEP-step scan, against one run of the same length.

    The lanes start from the single run's warmed-up state and adapt to their
    own mu for SWEEP_WARMUP_SCANS scans of T_SWEEP steps (R-ProxSPB: each
    followed by a refresh).
    """
    mus = jnp.asarray(SWEEP_MUS, data.dtype)
    k = len(SWEEP_MUS)
    xs, states = jax.tree.map(lambda a: jnp.broadcast_to(a, (k,) + jnp.shape(a)),
                              (single["_x"], single["_state"]))
    rng = np.random.default_rng(rng_seed)
    vrun = scan_fn(solver, True)
    for _ in range(SWEEP_WARMUP_SCANS):
        (xs, states), _ = vrun(xs, states, _indices(rng, T_SWEEP, B), data, mus)
        if solver == "sarah":
            (xs, states), _ = scan_fn("refresh", True, length=1)(xs, states, None, data, mus)
    idx = single["_idx"][:T_SWEEP]
    res = timed_run(solver, xs, states, idx, data, mus, repeats, vmapped=True)
    # A single run of the same length, now, under the same load.
    single_now = timed_run(solver, single["_x"], single["_state"], idx, data, MU, repeats)
    # Eight sequential single runs, one per mu, each from its lane's state
    # (already compiled; two timed calls each).
    seq_s, seq_steps = 0.0, []
    for i, mu in enumerate(SWEEP_MUS):
        x, st = jax.tree.map(lambda a, i=i: a[i], (xs, states))
        one = timed_run(solver, x, st, idx, data, mu, 2)
        seq_s += one["time_s"]
        seq_steps.append(one["newton_steps"])
    newton = res["_newton"]  # (lanes, steps)
    out = {
        "solver": solver, "dtype": str(data.dtype), "mus": SWEEP_MUS,
        "single_time_s": single_now["time_s"], "sweep_time_s": res["time_s"],
        "ratio": res["time_s"] / single_now["time_s"],
        "sequential_time_s": seq_s, "speedup_vs_sequential": seq_s / res["time_s"],
        "single_newton_steps": single_now["newton_steps"],
        "lane_newton_steps": newton.mean(axis=1).tolist(),
        "lockstep_newton_steps": float(newton.max(axis=0).mean()),
        "sequential_newton_steps": seq_steps,
        "lane_nonzeros": [int(v) for v in np.count_nonzero(
            np.abs(np.asarray(res["_x_end"])) > 1e-3, axis=(1, 2))],
    }
    print(
        f"{out['dtype']} sweep {SOLVER_NAMES[solver]} (T={T_SWEEP}): 8 mu "
        f"{1e6 * out['sweep_time_s']:,.0f} "
        f"us/iter vs single {1e6 * out['single_time_s']:,.0f} us -> ratio {out['ratio']:.2f}; "
        f"8 sequential runs {1e6 * seq_s:,.0f} us/iter (vmap x{out['speedup_vs_sequential']:.2f}"
        f"); Newton steps per lane "
        f"{', '.join(f'{v:.1f}' for v in out['lane_newton_steps'])} (lockstep max "
        f"{out['lockstep_newton_steps']:.1f}, single {out['single_newton_steps']:.1f}); "
        f"nonzeros per lane {out['lane_nonzeros']}",
        flush=True,
    )
    return out


# --------------------------------------------------------------------------
# Profile of one float64 R-ProxSGD iteration


def _polar_eigh(y):
    """Polar factor Y (Y^T Y)^{-1/2} through an r x r eigendecomposition."""
    w, v = jnp.linalg.eigh(y.T @ y)
    return y @ ((v / jnp.sqrt(w)) @ v.T)


def full_grad_fori(x, data):
    """full_grad with the chunks read by dynamic_slice inside a fori_loop."""
    n = data.shape[0]
    full = n // CHUNK

    def body(i, acc):
        return acc + CHUNK * batch_grad(x, lax.dynamic_slice_in_dim(data, i * CHUNK, CHUNK))

    total = lax.fori_loop(0, full, body, jnp.zeros_like(x))
    if n % CHUNK:
        total = total + (n % CHUNK) * batch_grad(x, data[full * CHUNK:])
    return total / n


def _us(seconds):
    return f"{1e6 * seconds:,.0f} us"


def profile_sgd(sgd: dict, data, peak, repeats) -> dict:
    x, state, idx = sgd["_x"], sgd["_state"], sgd["_idx"]
    ib = idx[0]
    mu = jnp.asarray(MU, x.dtype)
    g = batch_grad(x, data[ib])
    lam = ssn_info(state).lam
    eta = jnp.asarray(ETA0 / np.sqrt(int(state.count) + 1.0), x.dtype)
    gamma = jnp.asarray(GAMMA, x.dtype)
    zeta, info = rproxjax.tangent_prox(x, g, gamma, rproxjax.l1(mu), lam=lam)
    steps, evals = int(info.num_steps), int(info.num_evaluations)
    n_loop = 50

    def tpi(fn, *args):  # the least load-disturbed sample, as in subproblem.py's profile
        return _timing.time_per_iteration(fn, *args, n=n_loop, repeats=repeats, reduce=min)

    def iteration(x_, st_, ib_, data_, mu_):
        return jax_step("sgd", x_, st_, ib_, data_, mu_)[0]

    def update_only(g_, x_, st_, mu_):
        updates, _ = make_opt("sgd", mu_).update(g_, st_, x_)
        return optax.apply_updates(x_, updates)

    def ssn(lam_, x_, g_, mu_, max_steps=100):
        return rproxjax.tangent_prox(x_, g_, gamma, rproxjax.l1(mu_), lam=lam_,
                                     max_steps=max_steps)

    out = {"instance_newton_steps": steps, "instance_evaluations": evals}
    out["iteration_s"] = tpi(iteration, x, state, ib, data, mu)
    out["gradient_s"] = tpi(lambda x_, d_, i_: batch_grad(x_, d_[i_]), x, data, ib)
    out["update_s"] = tpi(update_only, g, x, state, mu)
    out["ssn_s"] = tpi(ssn, lam, x, g, mu)
    out["ssn_fixed_s"] = tpi(functools.partial(ssn, max_steps=0), lam, x, g, mu)
    out["retraction_s"] = tpi(lambda z, x_, e: stiefel.retract(x_, e * z), zeta, x, eta)
    out["rest_s"] = out["update_s"] - out["ssn_s"] - out["retraction_s"]
    out["per_newton_step_s"] = (out["ssn_s"] - out["ssn_fixed_s"]) / max(steps, 1)
    # Alternatives (measured here; the library is not changed).
    out["retraction_eigh_s"] = tpi(lambda z, x_, e: _polar_eigh(x_ + e * z), zeta, x, eta)
    out["retraction_eigh_max_diff"] = float(jnp.max(jnp.abs(
        _polar_eigh(x + eta * zeta) - stiefel.retract(x, eta * zeta))))
    out["retraction_qr_s"] = tpi(lambda z, x_, e: stiefel.retract(x_, e * z, "qr"), zeta, x, eta)
    out["gradient_slice_s"] = tpi(
        lambda x_, d_, s: batch_grad(x_, lax.dynamic_slice_in_dim(d_, s, B)), x, data,
        jnp.int32(1234))
    out["gradient_explicit_s"] = tpi(
        lambda x_, d_, i_: (-2.0 / B) * (d_[i_].T @ (d_[i_] @ x_)), x, data, ib)
    out["gather_s"] = tpi(lambda i_, d_: d_[i_], ib, data)
    zeta_cg, info_cg = rproxjax.tangent_prox(x, g, gamma, rproxjax.l1(mu), lam=lam,
                                             linear_solver="cg")
    out["ssn_cg_s"] = tpi(
        lambda lam_, x_, g_, mu_: rproxjax.tangent_prox(
            x_, g_, gamma, rproxjax.l1(mu_), lam=lam_, linear_solver="cg"), lam, x, g, mu)
    out["ssn_cg_counts"] = (int(info_cg.num_steps), int(info_cg.num_linear_steps),
                            int(info_cg.num_evaluations))

    # The T-step scan with a looser SSN tolerance and with the QR retraction.
    variants = {}
    for name, kwargs in (("ssn_tol=1e-8", {"ssn_tol": 1e-8}), ("retraction='qr'",
                                                               {"retraction": "qr"})):
        v = timed_run("sgd", x, state, idx, data, mu, repeats, **kwargs)
        variants[name] = {
            "time_s": v["time_s"], "newton_steps": v["newton_steps"],
            "evaluations": v["evaluations"],
            "x_diff_after_T": float(jnp.max(jnp.abs(v["_x_end"] - sgd["_x_end"]))),
        }
    out["variants"] = variants

    # The pieces vmapped over 8 lanes with the same mu (the same work in each lane):
    # how the cost of a sweep scales with its width when no lane waits for another.
    lanes = 8
    bcast = lambda a: jnp.broadcast_to(a, (lanes,) + jnp.shape(a))  # noqa: E731

    def tpi_v(fn, *args):
        return _timing.time_per_iteration(fn, *args, n=10, repeats=repeats, reduce=min)

    out["vmap8_ssn_s"] = tpi_v(jax.vmap(ssn), bcast(lam), bcast(x), bcast(g), bcast(mu))
    out["vmap8_gradient_s"] = tpi_v(
        jax.vmap(lambda x_, d_, i_: batch_grad(x_, d_[i_]), in_axes=(0, None, None)),
        bcast(x), data, ib)
    out["vmap8_retraction_s"] = tpi_v(
        jax.vmap(lambda z, x_, e: stiefel.retract(x_, e * z), in_axes=(0, 0, None)),
        bcast(zeta), bcast(x), eta)
    # The K tensor of a dense Newton step (K_i = X^T diag(mask_i) X), as the library
    # forms it (all r^2 products) and over the r(r+1)/2 symmetric pairs only.
    arg = x - gamma * g + (2.0 * gamma) * (x @ lam)
    mask = (jnp.abs(arg) > gamma * mu).astype(x.dtype)
    rows, cols = np.triu_indices(R)

    def k_full(m, x_):
        return m.T @ (x_[:, :, None] * x_[:, None, :]).reshape(D, R * R)

    out["k_tensor_s"] = tpi(k_full, mask, x)
    out["k_tensor_sym_s"] = tpi(lambda m, x_: m.T @ (x_[:, rows] * x_[:, cols]), mask, x)
    out["vmap8_k_tensor_s"] = tpi_v(jax.vmap(k_full), bcast(mask), bcast(x))

    # The full gradient of a refresh step (R-ProxSPB), three ways, and for this
    # quadratic loss through the precomputed covariance (-2 A X, A = Z^T Z / n).
    for name, fn in (("full_grad_scan_s", full_grad), ("full_grad_fori_s", full_grad_fori),
                     ("full_grad_unchunked_s", batch_grad)):
        out[name] = _timing.time_fn(jax.jit(fn), x, data, repeats=3, reduce=min)
    cov = data.T @ data / N
    out["full_grad_covariance_s"] = tpi(lambda x_, a: -2.0 * (a @ x_), x, cov)

    grad_gflops = grad_flops(B) / out["gradient_s"] / 1e9
    lines = [
        "\n## Profile: one float64 R-ProxSGD iteration",
        "",
        f"Pieces timed inside a compiled fori_loop ({n_loop} calls, fastest of {repeats}) at "
        f"the first timed step (Newton steps {steps}, evaluations {evals} on this instance; "
        f"the scan's average is {sgd['newton_steps']:.2f} / {sgd['evaluations']:.2f}). "
        f"matmul peak {peak / 1e9:.1f} GFLOP/s.",
        "",
        f"- whole iteration (gradient + update + apply_updates): {_us(out['iteration_s'])} "
        f"(the T-step scan averaged {_us(sgd['time_s'])})",
        f"- minibatch gradient (gather + jax.grad): {_us(out['gradient_s'])} "
        f"({100 * out['gradient_s'] / out['iteration_s']:.0f}%, {grad_gflops:.1f} GFLOP/s; "
        f"bound {_us(grad_flops(B) / peak)}); gather of the {B} x {D} batch alone "
        f"{_us(out['gather_s'])}",
        f"- optimizer update + apply_updates: {_us(out['update_s'])}",
        f"  - tangent_prox (SSN): {_us(out['ssn_s'])} "
        f"({100 * out['ssn_s'] / out['iteration_s']:.0f}%; bound "
        f"{_us(ssn_flops(steps, evals) / peak)}); with max_steps=0 (setup + first E): "
        f"{_us(out['ssn_fixed_s'])}; so per Newton step (direction + line search) "
        f"{_us(out['per_newton_step_s'])} (bound "
        f"{_us(ssn_flops(1, evals / max(steps, 1)) / peak)})",
        f"  - polar retraction (thin SVD): {_us(out['retraction_s'])} "
        f"({100 * out['retraction_s'] / out['iteration_s']:.0f}%; bound "
        f"{_us(RETRACTION_FLOPS / peak)})",
        f"  - the rest (schedule, guards, finiteness checks, norms, apply_updates): "
        f"{_us(out['rest_s'])} (pieces timed separately on a shared machine need not add up)",
        "",
        "Measured alternatives:",
        "",
        f"- polar factor through eigh of the r x r Gram Y^T Y instead of a thin SVD: "
        f"{_us(out['retraction_eigh_s'])} vs {_us(out['retraction_s'])} (max |diff| "
        f"{out['retraction_eigh_max_diff']:.1e}); QR retraction: {_us(out['retraction_qr_s'])}",
        f"- gradient on a contiguous slice (pre-shuffled data, dynamic_slice) instead of a "
        f"gather: {_us(out['gradient_slice_s'])}; written as -2/b Z^T (Z X) by hand: "
        f"{_us(out['gradient_explicit_s'])}",
        f"- SSN with linear_solver='cg' at r = 10: {_us(out['ssn_cg_s'])} (Newton steps, CG "
        f"iterations, evaluations = {out['ssn_cg_counts']})",
    ]
    lines.append(
        f"- the same pieces vmapped over 8 lanes with the same mu (equal work per lane): SSN "
        f"{_us(out['vmap8_ssn_s'])} ({out['vmap8_ssn_s'] / out['ssn_s']:.1f}x one lane), "
        f"gradient {_us(out['vmap8_gradient_s'])} "
        f"({out['vmap8_gradient_s'] / out['gradient_s']:.1f}x), retraction "
        f"{_us(out['vmap8_retraction_s'])} ({out['vmap8_retraction_s'] / out['retraction_s']:.1f}"
        f"x), the K tensor of a Newton step {_us(out['vmap8_k_tensor_s'])} "
        f"({out['vmap8_k_tensor_s'] / out['k_tensor_s']:.1f}x)")
    lines.append(
        f"- K tensor of a Newton step: {_us(out['k_tensor_s'])} over all r^2 = {R * R} column "
        f"products (bound {_us(2.0 * D * R**3 / peak)}), {_us(out['k_tensor_sym_s'])} over "
        f"the r(r+1)/2 = {R * (R + 1) // 2} symmetric pairs")
    lines.append(
        f"- R-ProxSPB refresh: the full gradient over n = {N} as fit computes it (lax.scan over "
        f"chunks of {CHUNK} of the reshaped data): {_us(out['full_grad_scan_s'])}; the same "
        f"chunks read by dynamic_slice in a fori_loop: {_us(out['full_grad_fori_s'])}; "
        f"unchunked: {_us(out['full_grad_unchunked_s'])} (bound {_us(grad_flops(N) / peak)}); "
        f"for this quadratic loss, -2 A X with A = Z^T Z / n precomputed once: "
        f"{_us(out['full_grad_covariance_s'])}")
    for name, v in variants.items():
        lines.append(
            f"- the T-step scan with {name}: {_us(v['time_s'])} per iteration (Newton steps "
            f"{v['newton_steps']:.2f}, evaluations {v['evaluations']:.2f}); max |X - X_default| "
            f"after {T} steps {v['x_diff_after_T']:.1e}")
    text = "\n".join(lines)
    print(text, flush=True)
    out["text"] = text
    return out


# --------------------------------------------------------------------------


MAIN_HEADERS = ("dtype", "solver", "time/iter (us)", "FLOPs/iter", "FLOP-bound (us)",
                "ratio to bound", "NumPy (us)", "speed-up")
DETAIL_HEADERS = ("dtype", "solver", "Newton steps/iter", "E evals/iter",
                  "Newton steps JAX / NumPy (NumPy's iterations)", "NumPy min (us)",
                  "max |X_jax - X_np| (5 steps)", "nonzeros of X", "matmul GFLOP/s")
SWEEP_HEADERS = ("dtype", "solver", "single (us/iter)", "vmap 8 mu (us/iter)", "ratio",
                 "8 sequential (us/iter)", "vmap speed-up", "Newton steps single / lanes mean "
                 "/ lockstep")


def _fmt_flops(f):
    return f"{f / 1e6:.2f} M"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per entry")
    parser.add_argument("--no-sweep", action="store_true", help="skip the mu sweep")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile section")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    print("machine:", machine, flush=True)
    blas = numpy_blas_info()
    print("NumPy BLAS:", blas, flush=True)

    z64, eig = make_data()
    print(f"data: n={N}, d={D}; top covariance eigenvalues {np.round(eig[:12], 3).tolist()}; "
          f"top {R} carry {eig[:R].sum() / eig.sum():.1%} of the variance; mu = {MU}", flush=True)

    rows, details, sweeps, results, peaks = [], [], [], [], {}
    sgd64 = None
    for dtype in args.dtypes:
        data_np = z64.astype(dtype)
        data = jnp.asarray(data_np)
        x0 = stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype))
        peak_before = _timing.matmul_flops(dtype, n=PEAK_N, repeats=3)
        dtype_res = {}
        for i, solver in enumerate(("sgd", "sarah", "refresh", "subgrad", "manpg")):
            rng = np.random.default_rng(100 + i)
            # The refresh step is timed where it happens: after the q - 1 SARAH steps.
            start_at = None
            if solver == "refresh":
                start_at = (dtype_res["sarah"]["_x_end"], dtype_res["sarah"]["_state_end"])
            dtype_res[solver] = bench_solver(solver, dtype, data, data_np, x0, rng,
                                             args.repeats, peak_before, start=start_at)
        peak_after = _timing.matmul_flops(dtype, n=PEAK_N, repeats=3)
        peak = max(peak_before, peak_after)
        peaks[dtype] = {"before": peak_before, "after": peak_after, "used": peak}
        for res in dtype_res.values():  # bounds against the best measured throughput
            res.update(peak_flops=peak, bound_s=res["flops"] / peak,
                       ratio=res["time_s"] * peak / res["flops"])
        dtype_res["spb_avg"] = amortized_spb(dtype_res["sarah"], dtype_res["refresh"])
        for solver in ("sgd", "sarah", "refresh", "spb_avg", "subgrad", "manpg"):
            res = dtype_res[solver]
            rows.append((
                dtype, SOLVER_NAMES[solver], f"{1e6 * res['time_s']:,.0f}",
                _fmt_flops(res["flops"]), f"{1e6 * res['bound_s']:,.0f}",
                f"{res['ratio']:.1f}", f"{1e6 * res['numpy_time_s']:,.0f}",
                f"{res['speedup']:.1f}x",
            ))
            if solver != "spb_avg":
                details.append((
                    dtype, SOLVER_NAMES[solver], f"{res['newton_steps']:.2f}",
                    f"{res['evaluations']:.2f}",
                    f"{res['newton_steps_numpy_window']:.2f} / {res['numpy_newton_steps']:.2f}",
                    f"{1e6 * res['numpy_min_time_s']:,.0f}",
                    f"{res['check_max_abs_diff']:.1e}", str(res["nonzeros_end"]),
                    f"{peak / 1e9:.1f}",
                ))
        if not args.no_sweep:
            for i, solver in enumerate(("sgd", "sarah")):
                sw = bench_sweep(solver, data, 200 + i, max(2, args.repeats // 2),
                                 dtype_res[solver])
                sweeps.append(sw)
        results.extend(dtype_res.values())
        if dtype == "float64":
            sgd64 = dtype_res["sgd"]
            data64, peak64 = data, peak

    title = (f"## Solvers, online sparse PCA, d={D}, r={R}, b={B}, n={N}, l1 mu={MU}, "
             f"per iteration (steady state)")
    print(f"\n{title}\n")
    table = _timing.print_table(MAIN_HEADERS, rows)
    print()
    table_detail = _timing.print_table(DETAIL_HEADERS, details)
    notes = [
        f"R-ProxSPB: q = {Q}; the refresh step costs "
        + ", ".join(f"{r['dtype']} {1e6 * r['refresh_per_q_s']:,.0f} us per q"
                    for r in results if r["solver"] == "spb_avg")
        + "; the amortized row is ((q - 1) SARAH + 1 refresh) / q.",
        "matmul 2000^2 throughput before / after each dtype's rows: " + ", ".join(
            f"{dt} {p['before'] / 1e9:.1f} / {p['after'] / 1e9:.1f} GFLOP/s"
            for dt, p in peaks.items()),
        "targets: time within 2x of the FLOP bound; >= 20x faster than NumPy. NumPy's "
        "OpenBLAS runs 2 threads: on a machine shared with other processes its per-iteration "
        "time varies a lot between runs (compare the median with the fastest iteration).",
    ]
    print("\n" + "\n".join(notes), flush=True)
    table_sweep = ""
    if sweeps:
        srows = [(
            s["dtype"], SOLVER_NAMES[s["solver"]], f"{1e6 * s['single_time_s']:,.0f}",
            f"{1e6 * s['sweep_time_s']:,.0f}", f"{s['ratio']:.2f}",
            f"{1e6 * s['sequential_time_s']:,.0f}", f"{s['speedup_vs_sequential']:.2f}x",
            f"{s['single_newton_steps']:.1f} / {np.mean(s['lane_newton_steps']):.1f} / "
            f"{s['lockstep_newton_steps']:.1f}",
        ) for s in sweeps]
        sweep_title = (f"## vmap over 8 values of mu ({', '.join(f'{m:.4g}' for m in SWEEP_MUS)}"
                       f"), same T (target ratio <= 2.5)")
        print(f"\n{sweep_title}\n")
        table_sweep = sweep_title + "\n\n" + _timing.print_table(SWEEP_HEADERS, srows)

    profile = None
    if not args.no_profile and sgd64 is not None:
        profile = profile_sgd(sgd64, data64, peak64, args.repeats)

    elapsed = time.perf_counter() - start
    print(f"\ntotal benchmark time {elapsed:.0f} s", flush=True)
    if not args.no_save:
        markdown = "\n".join([
            title, "", table, "", table_detail, "", *notes, "", table_sweep, "",
            f"NumPy BLAS: {blas}", "", profile["text"] if profile else "",
        ])
        clean = lambda d: {k: v for k, v in d.items() if not k.startswith("_")}  # noqa: E731
        payload = {
            "settings": {
                "d": D, "r": R, "n": N, "b": B, "T": T, "q": Q, "t_manpg": T_MANPG,
                "mu": MU, "sweep_mus": SWEEP_MUS, "gamma": GAMMA, "eta0": ETA0,
                "eta_spb": ETA_SPB, "eta0_subgrad": ETA0_SUBGRAD, "manpg_tol": MANPG_TOL,
                "warmup_iterations": WARMUP_SCANS * T, "spb_warmup_blocks": SPB_WARMUP_BLOCKS,
                "numpy_iterations": NP_ITERS, "peak_n": PEAK_N, **vars(args),
            },
            "data_top_eigenvalues": eig[:20],
            "numpy_blas": blas,
            "peak_flops": peaks,
            "rows": [clean(r) for r in results],
            "sweeps": sweeps,
            "profile": clean({k: v for k, v in (profile or {}).items() if k != "text"}),
            "elapsed_s": elapsed,
        }
        machine["loadavg_end"] = _timing.machine_info()["loadavg_1_5_15min"]
        paths = _timing.save_results("solvers", payload, markdown, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
