"""Online sparse PCA: the paper's model fitted chunk by chunk (:class:`OnlineSPCA`).

Each chunk of rows updates the running mean and the running second moment of the stream
(Chan, Golub and LeVeque's pairwise update: exact, whatever the chunk sizes), is centred by
the mean so far, and gets ``passes`` passes of the optimizer, which continues from the point,
the optimizer state (step count, R-ProxSPB's estimator) and the PRNG key the previous chunk
left. The first chunk fixes the scales as :func:`rproxjax.sparse_pca` reads them off the
data: the start (its principal directions), gamma = 1 / (2 lambda_max), the default mu
(0.1 mu_max), the minibatch size and R-ProxSPB's refresh period. R-ProxSPB refreshes its
estimate on the whole chunk at the start of each block (the chunk is its large sample S1)
and runs whole blocks per chunk.

Memory is independent of the stream's length: the point, the optimizer state, the d x d
second moment (for the refit on the support and the reported variances) and one chunk.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from rproxjax import _jit as _compile
from rproxjax._run import compile as _run_compile
from rproxjax._run.fit import pure_fit
from rproxjax._tasks import refit as _refit
from rproxjax._tasks.spca import (
    NONZERO_THRESHOLD,
    PASSES,
    _checked_scales,
    _mu_vector,
    _optimizer,
    _prepare,
    _raise_if_failed,
    default_eta,
)
from rproxjax.problems import spca_loss

__all__ = ["OnlineSPCA", "start", "update"]

ONLINE_METHODS = ("r_prox_spb", "r_prox_sgd", "r_subgrad")


class OnlineSPCA(NamedTuple):
    """The state of an online fit after some chunks (host values and JAX arrays).

    Attributes:
      x: the optimizer's point, d x r (before any refit).
      opt_state: the optimizer's state.
      key: the sampling's PRNG key.
      mean: the mean of the rows seen (float64, d).
      scatter: the sum over the rows seen of (z - mean)(z - mean)^T (float64, d x d).
      n_seen: rows seen.
      steps: optimizer steps taken.
      ifo: stochastic gradients used.
      settings: the method, mu (one per column), eta, gamma, batch size, q, center, dtype.
    """

    x: Any
    opt_state: Any
    key: Any
    mean: np.ndarray
    scatter: np.ndarray
    n_seen: int
    steps: int
    ifo: float
    settings: dict


def start(chunk, r: int, *, mu, method: str, batch_size, q, eta, gamma, center: bool,
          seed: int, ssn) -> OnlineSPCA:
    """The state before the first chunk's steps: the first chunk's scales (see the module)
    and the optimizer's state at its principal directions. ``chunk`` is a checked n x d
    floating JAX array; the other arguments are checked by the caller."""
    m, d = chunk.shape
    prep = _prepare(chunk, np.uint32(seed), False, np.zeros((d, r), chunk.dtype),
                    center=bool(center))
    lam_max, mu_max = _checked_scales(prep, bool(center))
    dtype = np.dtype(chunk.dtype)
    b = min(m, max(1, round(math.sqrt(m)))) if batch_size is None else batch_size
    q = max(2, round(m / (2 * b))) if q is None else q
    settings = dict(method=method, mu=_mu_vector(0.1 * mu_max if mu is None else mu, r, dtype),
                    eta=dtype.type(default_eta(method, lam_max, float(prep["variance"]))
                                   if eta is None else eta),
                    gamma=dtype.type(1.0 / (2.0 * lam_max) if gamma is None else gamma),
                    batch_size=int(b), q=int(q), center=bool(center), dtype=dtype, ssn=ssn,
                    mu_max=mu_max, lambda_max=lam_max)
    x0 = prep["x0"]
    opt = _optimizer(method, settings["mu"], settings["eta"], settings["gamma"], q, ssn)
    return OnlineSPCA(x=x0, opt_state=opt.init(x0), key=prep["key"],
                      mean=np.zeros(d), scatter=np.zeros((d, d)), n_seen=0, steps=0, ifo=0.0,
                      settings=settings)


def update(state: OnlineSPCA, chunk, passes: float | None) -> OnlineSPCA:
    """``state`` after the rows of ``chunk`` (m x d, checked, the stream's dtype): the
    moments updated, then ``passes`` passes of the optimizer over the chunk centred by the
    mean so far (None: 10, :data:`rproxjax._tasks.spca.PASSES`).

    Raises:
      ValueError: the run failed (halted: a non-finite step), as :func:`sparse_pca` says.
    """
    s = state.settings
    host = np.asarray(chunk, np.float64)
    mean, scatter, n_seen = _moments(state, host)
    centred = chunk - (mean.astype(s["dtype"]) if s["center"] else 0)
    m = chunk.shape[0]
    b = min(s["batch_size"], m)
    passes = PASSES if passes is None else passes
    steps = _steps(s["method"], m, passes, b, s["q"])
    args = (s["mu"], s["eta"], s["gamma"], state.x, state.opt_state, centred, state.key)
    program = _chunk_program(s["method"], b, steps, s["q"], s["ssn"],
                             _run_compile.arguments_key(args), _run_compile.environment())
    x, opt_state, key, halted, ifo = program(*args)
    _raise_if_failed(np.asarray(halted))
    return OnlineSPCA(x=x, opt_state=opt_state, key=key, mean=mean, scatter=scatter,
                      n_seen=n_seen, steps=state.steps + steps, ifo=state.ifo + float(ifo),
                      settings=s)


def _moments(state, host):
    """(mean, scatter, rows) of the stream with ``host`` (m x d, float64) added."""
    m = host.shape[0]
    n = state.n_seen + m
    if not state.settings["center"]:  # the second moment about 0
        return state.mean, state.scatter + host.T @ host, n
    mean_b = host.mean(axis=0)
    dev = host - mean_b
    delta = mean_b - state.mean
    mean = state.mean + delta * (m / n)
    scatter = state.scatter + dev.T @ dev + np.outer(delta, delta) * (state.n_seen * m / n)
    return mean, scatter, n


def _steps(method, m, passes, b, q) -> int:
    """Steps spending about ``passes`` * m IFOs on a chunk of m rows; R-ProxSPB's in whole
    blocks (a refresh of m IFOs and q - 1 steps of 2 b), at least one."""
    if method == "r_prox_spb":
        return max(1, round(passes * m / (m + 2 * (q - 1) * b))) * q
    return max(1, int(passes * m // b))


@functools.lru_cache(maxsize=16)
def _chunk_program(method, b, steps, q, ssn, arguments, environment):
    """The compiled steps over one chunk (its shape and the settings in the key: one
    compilation per chunk size)."""
    del arguments, environment  # key only

    def run(mu, eta, gamma, x, opt_state, data, key):
        opt = _optimizer(method, mu, eta, gamma, q, ssn)
        res = pure_fit(opt, spca_loss, x, data, key=key, opt_state=opt_state,
                       batch_size=b, num_steps=steps)
        return res.params, res.opt_state, res.key, res.history.halted[-1], res.epoch_ifo[-1]

    return _compile.jit(run, options=_compile.TASK_COMPILER_OPTIONS)


def result(state: OnlineSPCA, refit: bool) -> dict:
    """The loadings (refitted on their support from the stream's covariance when
    ``refit``; kept only where that explains more) and their variances: ``loadings``
    (d x r NumPy), ``component_variance`` (R_jj^2, length r), ``total`` (the covariance's
    trace), ``nonzeros``."""
    dtype = state.settings["dtype"]
    cov = state.scatter / state.n_seen
    x = np.asarray(state.x, np.float64)
    if refit:
        x = _refit.refit_on_covariance(x, cov, NONZERO_THRESHOLD)[0]
    per = _refit.component_variances(x, cov)
    return {"loadings": x.astype(dtype), "component_variance": per,
            "total": float(np.trace(cov)),
            "nonzeros": int(np.sum(np.abs(x) > NONZERO_THRESHOLD))}
