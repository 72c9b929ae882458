"""The default solver of :func:`rproxjax.robust_matrix_completion`: alternating minimization
of the paper's model with a Newton-preconditioned Riemannian step on U.

The model, with W the 0/1 mask of Omega, M0 the zero-filled observations and S zero off
Omega (dense m x n arrays: every product below is a matrix product)::

    F(U, S) = min_V 1/2 ||W * (U V - M0 + S)||^2 + lam/2 ||(1 - W) * U V||^2 + mu ||S||_1

(for orthonormal U the paper's lam/2 ||V||^2 - lam/2 ||P_Omega(U V)||^2 is the middle term).
One step, from U:

1. V = V_{U,S} in closed form (an r x r solve per column);
2. S = W * soft(M0 - U V, mu): the proximal step on S at its exact curvature (1), which
   minimizes F over S for this V;
3. V = V_{U,S} again, and U's Euclidean gradient G at fixed V;
4. the Newton direction of each row of U at fixed V (the rows decouple: row i's Hessian is
   (1 - lam) sum_{j in Omega_i} v_j v_j^T + lam V V^T, damped by sqrt(eps) ||V||_F^2 / r
   where V is rank-deficient), projected on U's horizontal space, and U+ = Retr_U(-t D)
   with t = 1 unless the safeguard cut it.

Steps 1-3 are exact block minimizations and step 4 is the exact row-wise minimization over U
at fixed V projected on the Grassmann manifold (the preconditioned Riemannian gradient of
Mishra and Sepulchre, *Riemannian preconditioning*, SIAM J. Optim. 2016; at t = 1 the
alternating minimization of Jain, Netrapalli and Sanghavi, STOC 2013): no step size to tune,
and a rate that does not depend on L's condition number as a gradient step's does.

The outlier weight mu, unless given, follows the residuals: Huber's threshold 1.345 sigma
with sigma the residuals' MAD scale (1.4826 median |M - U V| over Omega), re-estimated after
every chunk of steps and never raised (a continuation from the start's residuals down to the
noise level, or to the floor ``max(100 lam, sqrt(eps)) a`` on exactly low-rank data, a the
median observed |M_ij|). Where one value holds at least a quarter of the observed entries
(zero pixels, zero counts, rows of zeros), the start's screen and sigma are read off the
other entries (:func:`scale_entries`). The host runs compiled chunks of
:data:`CHUNK` steps between its checks: the decrease of F at a fixed mu (else the chunk is
undone and t halved), the relative change of U V on Omega in the chunk's last step, and the
change of mu.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks, grassmann
from rproxjax import _jit as _compile
from rproxjax._linalg import HIGHEST, mm
from rproxjax._typing import Array

#: Steps per compiled chunk (between two host checks of the stopping and safeguard rules).
CHUNK = 10

#: Huber's threshold in units of the MAD scale: 1.345 x 1.4826 (Huber 1981: 95% efficiency
#: at the normal; Hampel's MAD consistency factor).
HUBER = 1.345 * 1.4826

#: Where one value holds at least this fraction of the observed entries, the scales are
#: read off the others (:func:`scale_entries`).
MASS = 0.25

#: The most mu falls in one chunk (a factor).
DECAY = 0.5

#: mu is lowered only after a chunk whose last step changed U V by at most this.
STAGE_TOL = 1e-2

#: The decrease test's tolerance, in units of the dtype's eps relative to F: F's sums over
#: Omega round at about that level in float32.
SLACK = 1e3

#: The largest rank whose r x r solves are unrolled (a loop over r beyond it).
UNROLL = 16

#: Halvings of the step t the safeguard may make before the run is declared failed.
MAX_CUTS = 10


class Observed(NamedTuple):
    """The data as dense m x n arrays: ``w`` (1 on Omega, 0 elsewhere), ``m0`` (M on Omega,
    0 elsewhere), lam, and ``scaled``: the entries the scales are read from (a boolean mask,
    :func:`scale_entries`), or None for all of Omega."""

    w: Array
    m0: Array
    lam: Array
    scaled: Array | None = None


def scale_entries(m0: np.ndarray, obs: np.ndarray) -> np.ndarray | None:
    """The entries the start's screen and the residuals' scale are read from (host NumPy):
    None (all of Omega), unless one value holds at least :data:`MASS` of the observed
    entries (a point mass: zero pixels, zero counts, rows of zeros); then Omega's other
    entries, as an m x n boolean mask. A point mass pulls the MAD of M, and of the
    residuals of any U V that fits it, towards 0 (to 0 where it holds more than half),
    which reads the other entries as outliers."""
    values = np.asarray(m0)[obs]
    if values.size == 0:
        return None
    unique, counts = np.unique(values, return_counts=True)
    top = int(np.argmax(counts))
    if counts[top] < MASS * values.size or counts[top] == values.size:
        return None
    mask = np.zeros(obs.shape, bool)
    mask[obs] = values != unique[top]
    return mask


class Chunk(NamedTuple):
    """What a chunk returns: the iterate, F's parts at its end, the residuals' scale, the
    relative change of U V on Omega in its last step, and whether every value is finite."""

    u: Array
    s: Array
    fit: Array
    l1: Array
    scale: Array
    change: Array
    finite: Array


def _outer(a: Array) -> Array:
    """The rows' outer products a_i a_i^T, flattened: (k, r*r)."""
    return (a[:, :, None] * a[:, None, :]).reshape(a.shape[0], -1)


def _solve_rows(gram: Array, rhs: Array) -> Array:
    """Row i of the result solves gram_i x = rhs_i for symmetric positive definite gram_i
    (gram: (k, r*r) flattened, rhs: (k, r)), by a Cholesky factorization written in JAX's
    own operations (loops over r with batched products). jaxlib's batched LAPACK kernels
    split a large batch over XLA's intra-op thread pool and wait for the parts; two such
    solves running at once in one program left every worker of a 2-thread pool waiting,
    and the program never finished (seen on 800 x 600 data at r = 10)."""
    r = rhs.shape[-1]
    a = gram.reshape(-1, r, r)
    idx = jnp.arange(r)
    tiny = jnp.finfo(a.dtype).tiny

    def factor(j, low):  # column j of the lower factor L, from its columns < j
        row = jnp.where(idx < j, low[:, j, :], 0)  # L[j, :j]
        col = a[:, :, j] - jnp.einsum("kir,kr->ki", low, row, precision=HIGHEST)
        pivot = jnp.sqrt(jnp.maximum(col[:, j], tiny))
        col = jnp.where(idx > j, col / pivot[:, None], jnp.where(idx == j, pivot[:, None], 0))
        return low.at[:, :, j].set(col)

    low = _loop(r, factor, jnp.zeros_like(a))
    diag = jnp.diagonal(low, axis1=1, axis2=2)

    def forward(j, y):  # L y = rhs
        dot = jnp.sum(jnp.where(idx < j, low[:, j, :] * y, 0), axis=-1)
        return y.at[:, j].set((rhs[:, j] - dot) / diag[:, j])

    def backward(i, x):  # L^T x = y, from the last row up
        j = r - 1 - i
        dot = jnp.sum(jnp.where(idx > j, low[:, :, j] * x, 0), axis=-1)
        return x.at[:, j].set((x[:, j] - dot) / diag[:, j])

    return _loop(r, backward, _loop(r, forward, jnp.zeros_like(rhs)))


def _loop(r: int, body, init):
    """``lax.fori_loop(0, r, body, init)``, unrolled where r <= :data:`UNROLL` (a loop's
    overhead would dominate steps this small)."""
    if r > UNROLL:
        return jax.lax.fori_loop(0, r, body, init)
    for j in range(r):
        init = body(j, init)
    return init


def v_columns(u: Array, s: Array, d: Observed) -> Array:
    """V_{U,S}^T (n x r): column j solves ((1 - lam) U_j^T U_j + lam I) v_j = U_j^T (M - S)_j,
    as :func:`rproxjax.problems.rmc_v` for dense data."""
    r = u.shape[1]
    gram = (1 - d.lam) * mm(d.w.T, _outer(u)) + d.lam * jnp.eye(r, dtype=u.dtype).reshape(-1)
    return _solve_rows(gram, mm((d.m0 - s).T, u))


def soft(x: Array, t: Array) -> Array:
    """The soft-thresholding sign(x) max(|x| - t, 0), the prox of t ||.||_1."""
    return jnp.sign(x) * jnp.maximum(jnp.abs(x) - t, 0)


def _checked(u: Array, s: Array, d: Observed, count: int, change: Array) -> Chunk:
    """The :class:`Chunk` of (U, S): F's parts f(U, S) and ||S||_1 (F = f + mu ||S||_1)
    and the residuals' median |M - U V| over Omega (``count`` entries), from one V."""
    pred = mm(u, v_columns(u, s, d).T)
    fit = (0.5 * jnp.sum((d.w * (pred - d.m0 + s)) ** 2)
           + 0.5 * d.lam * jnp.sum(((1 - d.w) * pred) ** 2))
    l1 = jnp.sum(jnp.abs(s))
    scale = _median_observed(jnp.abs(d.m0 - pred), d.w, count, d.scaled)
    finite = jnp.isfinite(fit) & jnp.isfinite(l1) & jnp.all(jnp.isfinite(u))
    return Chunk(u, s, fit, l1, scale, change, finite)


def step(u: Array, s: Array, mu: Array, t: Array, d: Observed) -> tuple[Array, Array, Array]:
    """One step of the module's scheme: (U+, S+, U V on Omega before U's update)."""
    vt = v_columns(u, s, d)
    s = d.w * soft(d.m0 - mm(u, vt.T), mu)
    vt = v_columns(u, s, d)
    pred = mm(u, vt.T)
    grad = mm(d.w * (pred - d.m0 + s) + d.lam * (1 - d.w) * pred, vt)
    kv = _outer(vt)
    r = u.shape[1]
    info = jnp.finfo(u.dtype)
    # Levenberg-Marquardt damping, sqrt(eps) of V's mean squared row norm: the rows'
    # Hessians are singular where V is rank-deficient (a rank above the data's, L = 0);
    # the damped step is 0 along directions the fit does not see
    damping = jnp.sqrt(info.eps) * jnp.sum(vt * vt) / r + info.tiny
    eye = jnp.eye(r, dtype=u.dtype).reshape(-1)
    hess = (1 - d.lam) * mm(d.w, kv) + d.lam * jnp.sum(kv, axis=0) + damping * eye
    direction = _solve_rows(hess, grad)
    direction = direction - mm(u, mm(u.T, direction))
    return grassmann.retract(u, -t * direction), s, d.w * pred


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS,
                   static_argnames=("steps", "count"))
def run_chunk(u: Array, s: Array, mu: Array, t: Array, d: Observed, *, steps: int,
              count: int) -> Chunk:
    """``steps`` steps from (U, S) as one program, and what the host checks after them."""
    def body(_, carry):
        u, s, _, pred = carry
        u, s, new = step(u, s, mu, t, d)
        change = jnp.sqrt(jnp.sum((new - pred) ** 2) / jnp.maximum(jnp.sum(new**2),
                                                                      jnp.finfo(u.dtype).tiny))
        return u, s, change, new

    zero = jnp.zeros((), u.dtype)
    u, s, change, _ = jax.lax.fori_loop(0, steps, body, (u, s, zero, jnp.zeros_like(s)))
    return _checked(u, s, d, count, change)


def _median_observed(x: Array, w: Array, count: int, among: Array | None = None) -> Array:
    """The median of x over the ``count`` entries where w > 0, or over those of them in the
    boolean mask ``among`` (0 if there are none)."""
    flat = jnp.where(w > 0 if among is None else among, x, jnp.inf).reshape(-1)
    low = -jax.lax.top_k(-flat, count // 2 + 1)[0]  # Omega's smallest half, in order
    if among is None:
        return low[-1] if count % 2 else 0.5 * (low[-1] + low[-2])
    k = jnp.sum(among)
    middle = 0.5 * (low[jnp.maximum(k - 1, 0) // 2] + low[k // 2])
    return jnp.where(k > 0, middle, jnp.zeros_like(middle))


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS,
                   static_argnames=("rank", "count"))
def start(d: Observed, key: Array, *, rank: int, count: int) -> Chunk:
    """The start (U0, S0) as a :class:`Chunk` (its change 0).

    The entries far from the bulk, |M_ij - med| > 3 x 1.4826 MAD (robust z-scores above 3;
    about 0.3% of Gaussian entries), are set aside as S0 = M_ij - med, so that gross
    outliers do not steer the start; U0 spans the top ``rank`` left singular vectors of the
    other observations, zero-filled, by a randomized subspace iteration (Halko, Martinsson
    and Tropp 2011: oversampling 10, 4 power steps)."""
    m, n = d.m0.shape
    centre = _median_observed(d.m0, d.w, count)
    spread = _median_observed(jnp.abs(d.m0 - centre), d.w, count, d.scaled)
    far = (d.w > 0) & (jnp.abs(d.m0 - centre) > 3 * 1.4826 * spread)
    kept = jnp.where(far, 0, d.m0)
    width = min(n, rank + 10)
    q = jax.random.normal(key, (n, width), d.m0.dtype)
    q = jnp.linalg.qr(mm(kept, q))[0]
    for _ in range(4):
        q = jnp.linalg.qr(mm(kept, jnp.linalg.qr(mm(kept.T, q))[0]))[0]
    left = jnp.linalg.svd(mm(q.T, kept), full_matrices=False)[0]
    u = mm(q, left[:, :rank])
    s = jnp.where(far, d.m0 - centre, 0)
    return _checked(u, s, d, count, jnp.zeros((), u.dtype))


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS)
def finish(u: Array, s: Array, d: Observed, rows: Array, cols: Array
           ) -> tuple[Array, Array, Array]:
    """(V, U V, S on Omega in the order of ``rows``/``cols``) of the final iterate."""
    v = v_columns(u, s, d).T
    return v, mm(u, v), s[rows, cols]


class Outcome(NamedTuple):
    """The driver's result: the iterate, mu at the end, the steps taken, the stopping
    measure (the relative change of U V on Omega in the last step), whether the run
    converged, whether it failed (non-finite or the safeguard exhausted), the step factor t
    at the end, and F at the start and at the end (at the final mu)."""

    u: Array
    s: Array
    mu: float
    steps: int
    change: float
    converged: bool
    failed: bool
    step_factor: float
    initial_objective: float
    objective: float


def solve(d: Observed, key: Array, *, rank: int, count: int, mu: float | None, floor: float,
          tol: float, max_steps: int, report=None, step_factor: float = 1.0) -> Outcome:
    """Runs chunks of :data:`CHUNK` steps until U V's relative change in a step is at most
    ``tol`` with mu settled (unchanged in the last chunk), or ``max_steps`` (rounded up to
    whole chunks) are spent. ``mu=None``: the residuals' rule (the module's docstring)
    bounded below by ``floor``. ``report(steps, change, mu, F)``, if given, is called after
    every accepted chunk. ``step_factor``: the first t (1, the Newton step)."""
    dtype = d.m0.dtype
    host = functools.partial(_checks.as_dtype, dtype=dtype)
    first = start(d, key, rank=rank, count=count)
    u, s = first.u, first.s
    fit, l1, scale = (float(v) for v in jax.device_get((first.fit, first.l1, first.scale)))
    adaptive = mu is None
    mu_now = max(HUBER * scale, floor) if adaptive else mu
    parts = (fit, l1)
    f_start = f_ref = parts[0] + mu_now * parts[1]
    slack_unit = SLACK * float(np.finfo(dtype).eps)
    t, cuts, steps, change, failed, converged = step_factor, 0, 0, math.inf, False, False
    while steps < max_steps:
        out = run_chunk(u, s, host(mu_now), host(t), d, steps=CHUNK, count=count)
        steps += CHUNK
        fit, l1, scale, new_change, finite = jax.device_get(  # one transfer
            (out.fit, out.l1, out.scale, out.change, out.finite))
        fit, l1, scale = float(fit), float(l1), float(scale)
        if not bool(finite) or fit + mu_now * l1 > f_ref + slack_unit * abs(f_ref):
            cuts += 1  # undo the chunk, halve the step
            t *= 0.5
            if cuts > MAX_CUTS:
                failed = True
                break
            continue
        u, s, change, parts = out.u, out.s, float(new_change), (fit, l1)
        if report is not None:
            report(steps, change, mu_now, fit + mu_now * l1)
        mu_next = mu_now
        if adaptive and change <= STAGE_TOL:  # the fit at this mu has settled: lower mu
            mu_next = max(min(mu_now, HUBER * scale), mu_now * DECAY, floor)
        if change <= tol and mu_next >= mu_now * (1 - 1e-2):  # converged, mu settled
            converged = True
            break
        mu_now = mu_next
        f_ref = fit + mu_now * l1
    return Outcome(u, s, float(mu_now), steps, change, converged, failed, t,
                   f_start, parts[0] + float(mu_now) * parts[1])
