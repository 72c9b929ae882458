"""Sparse PCA on your own data in one call: :func:`sparse_pca`.

The task wraps the paper's online sparse PCA model,

    min_{X in St(d, r)}  (1/n) sum_i ||z_i - X X^T z_i||^2 + mu ||X||_1,

with defaults read off the data (its scale fixes every step size), a budget in passes
over the data, and a sparsity target (``nonzeros=``) met by a regularization path over mu
computed as one compiled ``vmap`` program.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks
from rproxjax import _jit as _compile
from rproxjax._linalg import mm
from rproxjax._manpg import manpg
from rproxjax._optimizers import inverse_sqrt_schedule, r_prox_sgd, r_prox_spb, r_subgrad
from rproxjax._regularizers import l1
from rproxjax._results import Status
from rproxjax._run import compile as _run_compile
from rproxjax._run.fit import FitResult, pure_fit
from rproxjax._run.monitor import RelayHub, Stages, check_progress, compile_notice
from rproxjax._run.options import Recording
from rproxjax._ssn.config import SSN
from rproxjax._tasks.refit import refit_best, refit_on_support
from rproxjax._typing import Array, ArrayLike, DTypeLike
from rproxjax.problems import spca_loss
from rproxjax.stiefel import _two_passes, feasibility

__all__ = ["SparsePCAPath", "SparsePCAResult", "sparse_pca"]


METHODS = ("r_prox_spb", "r_prox_sgd", "r_subgrad", "manpg")
NONZERO_THRESHOLD = 1e-3
"""An entry of the (orthonormal) components counts as a nonzero when |X_ij| > 1e-3."""
PATH_FRACTIONS = tuple(np.geomspace(2e-3, 4.0, 12).tolist())
"""The path's first grid where the screen has no estimate: these multiples of mu_max (the
data's own mu scale; a stochastic run of a few passes can stay denser than r at mu_max
itself)."""
SCREEN_SCALE = 0.65
"""The screen's estimate of the mu at which a run keeps k nonzeros: 0.65 times the k-th
largest entry of the gradient's at the principal directions (:func:`_screen`)."""
SCREEN_FRACTIONS = (1 / 8, *np.geomspace(0.55, 1.6, 10).tolist(), 4.0)
"""The path's first round: these multiples of the screen's estimate (10 between 0.55 and
1.6 times it, 12% apart; 2 farther off: a bracket for the refinements where the estimate
is far off, and a denser run to cut). As many as ``PATH_FRACTIONS``: one program serves
either."""
REFINE_POINTS = 8
"""Points of each refinement of the path between the two values of mu around the target."""
REFINE_ROUNDS = 3
"""Refinements at most."""
NONZERO_RTOL = 0.02
"""A path stops refining once a count is within 2% of the target."""
MISS_RTOL = 0.1
"""Without the refit, a ``nonzeros=`` result whose count misses the target by more than 10%
warns (a RuntimeWarning): no run of the path came nearer."""
PASSES = 10.0
"""The default budget in passes over the data, on more than about 2,000 rows at the default
minibatch (:func:`default_passes`)."""
MINIBATCHES = 450
"""The least default budget of a run: 450 minibatches' IFOs (450 b, b the minibatch), at most
``MAX_PASSES`` passes; and a ``nonzeros=`` path's runs' budget on larger data, at least 2
passes (one whole R-ProxSPB block): its runs choose a zero pattern that the refit then
optimizes, for which a number of steps suffices, not of passes."""
MAX_PASSES = 100.0
"""The most passes :data:`MINIBATCHES` raises a default budget to (small n, or a minibatch of
most of the data)."""
ETA_RETRIES = 3
"""Where eta is the default, a run (or a path's round) that fails is run again with eta / 4,
at most 3 times (:class:`_Eta`)."""
SPIDER_SLACK = 12.0
"""R-ProxSPB's default eta is min(1, 12 lambda_max / tr C) (:func:`default_eta`)."""
CUT_SLACK = 0.25
"""With the refit, a path also stops refining once a run has between k and 1.25 k nonzeros
(and another at most k): its cut to the k largest entries is then a candidate pattern as
good as a nearer run's."""


class SparsePCAPath(NamedTuple):
    """The regularization path of a ``nonzeros=`` target: one entry per mu tried.

    It is :func:`sparse_pca`'s ``result.path`` (None without a ``nonzeros=`` target).

    Attributes:
      mu: the l1 weights, increasing (empty where the principal directions already have
        at most the target's nonzeros: no run was needed).
      nonzeros: total nonzeros of the loadings at each mu.
      explained_variance: the paper's explained variance at each mu (see
        :class:`SparsePCAResult`).
      adjusted_variance: the adjusted variance at each mu.
    """

    mu: Array
    nonzeros: Array
    explained_variance: Array
    adjusted_variance: Array

    def __repr__(self) -> str:
        mu = np.asarray(self.mu)
        if mu.size == 0:
            return "SparsePCAPath(no values of mu: the principal directions met the target)"
        return (f"SparsePCAPath({mu.size} values of mu from {mu.min():.3g} to {mu.max():.3g}, "
                f"nonzeros from {int(np.min(self.nonzeros))} to {int(np.max(self.nonzeros))})")


class SparsePCAResult(NamedTuple):
    """What :func:`sparse_pca` returns (its example shows one).

    Attributes:
      loadings: X, d x r with orthonormal columns (X^T X = I), one column per component;
        refitted on their support unless ``refit=False`` (see :func:`sparse_pca`). It is
        the transpose of :class:`rproxjax.SparsePCA`'s ``components_`` (r x d,
        scikit-learn's layout). Its former name ``components`` is deprecated (removed in
        0.5).
      mean: the mean subtracted from the rows (zeros when ``center=False``).
      scores: (data - mean) X, n x r: the data in the loadings' coordinates.
      explained_variance: the paper's measure tr(X^T A A^T X) / tr(X^T X), A = (data -
        mean)^T, divided by the total variance ||A||_F^2: the mean fraction of the variance
        that one component explains.
      adjusted_variance: the fraction of the total variance that the components explain
        together, counted once where they are correlated (Zou, Hastie and Tibshirani): the
        sum of R_jj^2 over ||A||_F^2, with A^T X = Q R a thin QR.
      component_variance: R_jj^2 / n, the variance each component adds (length r).
      nonzeros: entries of X with |X_ij| > 1e-3 (total).
      nonzeros_per_component: the same count per column (length r).
      mu: the l1 weight used (a scalar, or one per column); for a ``nonzeros=`` target,
        the weight of the run whose zero pattern the result has (0: the principal
        directions', cut).
      method: the optimizer's name.
      num_steps: optimizer steps taken.
      passes: stochastic gradients used, in passes over the data (IFO / n).
      history: the run's :class:`rproxjax.FitResult` (F after each epoch, IFOs, the
        per-step history), or None when the result came from a path.
      path: the :class:`SparsePCAPath` of a ``nonzeros=`` target, else None.
      settings: the run's settings as a dict (step sizes, batch size, q, the data's scales;
        ``"eta"`` is the step the call ended with: a default eta divided by 4 after each
        failed run or round; ``"support"``: where the zero pattern came from, "run", or
        for a ``nonzeros=`` target refitted from another pattern, "fill" (the run's
        filled from a denser run), "cut" (a denser run's) or "start" (the principal
        directions')).
    """

    loadings: Array
    mean: Array
    scores: Array
    explained_variance: Array
    adjusted_variance: Array
    component_variance: Array
    nonzeros: int
    nonzeros_per_component: Array
    mu: Array
    method: str
    num_steps: int
    passes: float
    history: FitResult | None
    path: SparsePCAPath | None
    settings: dict[str, Any]

    def __repr__(self) -> str:
        d, r = np.shape(self.loadings)
        mu = np.asarray(self.mu)
        mu_text = f"{float(mu):.4g}" if mu.ndim == 0 else "[" + ", ".join(
            f"{float(m):.3g}" for m in mu) + "]"
        return (f"SparsePCAResult({d} x {r}, method={self.method!r}, mu={mu_text}, "
                f"nonzeros={self.nonzeros}, adjusted_variance="
                f"{float(self.adjusted_variance):.4f}, explained_variance="
                f"{float(self.explained_variance):.4f}, passes={self.passes:.3g}"
                f"{'' if self.path is None else f', path of {np.size(self.path.mu)} mu'})")

    @property
    def components(self) -> Array:
        """The former name of :attr:`loadings` (the same d x r array; deprecated, removed
        in 0.5).

        Warns:
          DeprecationWarning: always; use ``.loadings``.
        """
        warnings.warn("SparsePCAResult.components is deprecated and will be removed in "
                      "rproxjax 0.5: use .loadings (the same d x r array; "
                      "SparsePCA().components_ is its transpose).", DeprecationWarning,
                      stacklevel=2)
        return self.loadings

    def transform(self, data: ArrayLike) -> Array:
        """(data - mean) X: new rows (m x d) in the loadings' coordinates (m x r).

        Raises:
          TypeError: for ``data`` that is not an array (or nested list) of real numbers.
          ValueError: for ``data`` that is not 2-D, has other than d columns, or has a
            floating dtype other than float32 and float64.
        """
        data = _as_matrix("data", data, None, stacklevel=4)
        if data.shape[1] != self.loadings.shape[0]:
            raise ValueError(f"data must have d = {self.loadings.shape[0]} columns, got "
                             f"shape {data.shape}.")
        return _scores(data, self.mean, self.loadings)


# ------------------------------------------------------------------------ input


def _as_matrix(name: str, data: Any, dtype: DTypeLike | None, stacklevel: int = 4) -> Array:
    """A 2-D floating JAX array from an array or a nested list of real numbers (integers
    and booleans become ``dtype`` or JAX's default float); complex values are an error, not
    cut to their real part. A float64 input computed in float32 (x64 off) warns, at the
    caller ``stacklevel`` frames up."""
    if isinstance(data, list | tuple):
        data = _from_list(name, data)
    if _checks.not_a_number(data) or not hasattr(data, "shape"):
        raise TypeError(f"{name} must be a 2-D array (NumPy or JAX), got "
                        f"{type(data).__name__}.")
    given = getattr(data, "dtype", None)
    data = _checks.array_tree(name, data)
    if dtype is None and given is not None and given.kind == "f":
        _checks.warn_if_single(name, given, data.dtype, stacklevel=stacklevel)
    if jnp.issubdtype(data.dtype, jnp.complexfloating):  # after any conversion to an array
        raise TypeError(f"{name} must hold real numbers (floating, integer or boolean), got "
                        f"dtype {data.dtype}.")
    if data.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n samples x d features), got shape "
                         f"{data.shape}.")
    if dtype is not None:
        data = data.astype(dtype)
    elif not jnp.issubdtype(data.dtype, jnp.floating):
        data = data.astype(jnp.result_type(float))
    _checks.check_float(name, data)
    return data


def _from_list(name, value):
    """A nested list or tuple of numbers as a NumPy array, or a TypeError naming ``name``
    (ragged nesting, or no numbers)."""
    try:
        return np.asarray(value)
    except ValueError as err:  # NumPy's "inhomogeneous shape"
        raise TypeError(f"{name} must be an array or a nested list of numbers of one "
                        f"shape, got a ragged {type(value).__name__}.") from err


def _positive_int(name, value, low=1, high=None):
    v = _checks.index_or_none(value)
    if v is None:
        raise TypeError(f"{name} must be an int, got {value!r}.")
    if v < low or (high is not None and v > high):
        raise ValueError(f"{name} must be in [{low}, {high}], got {v}." if high is not None
                         else f"{name} must be >= {low}, got {v}.")
    return v


def _positive_float(name, value):
    if _checks.not_a_number(value):
        raise TypeError(f"{name} must be a number, got {value!r}.")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return v


# ------------------------------------------------------------- the data's scales


@jax.jit
def _scales(data, key, x0_given, x0):
    """(X0, lambda_max of the covariance, mu_max, the variance of each feature, the
    gradient's entries at the principal directions) of centred ``data``, one program.

    X0: the top r principal directions V by subspace iteration (6 passes, 10 extra columns)
    unless ``x0_given``; mu_max: the mu at which X = [e_i1, ..., e_ir], the r features of
    largest variance, is stationary (the sparsest end of the path); the gradient of the
    smooth part at V, -2 C V = -2 V Lambda (Lambda the top r eigenvalues), in absolute
    value (d x r), from which a path screens mu (:func:`_screen`).
    """
    n, d = data.shape
    r = x0.shape[1]
    k = min(d, r + 10)
    q = jax.random.normal(key, (d, k), data.dtype)  # of full rank; the passes orthonormalize
    q = jax.lax.fori_loop(0, 6, lambda _, q: _basis(mm(data.T, mm(data, q))), q)
    b = mm(data, q)
    evals, evecs = jnp.linalg.eigh(mm(b.T, b) / n)
    pca = mm(q, evecs[:, ::-1][:, :r])
    x0 = jnp.where(x0_given, x0, pca)
    lam_max = evals[-1]
    gradient = 2.0 * jnp.abs(pca) * evals[::-1][:r]
    var = jnp.sum(data * data, axis=0) / n
    top = jnp.argsort(var)[-r:]
    cross = mm(data.T, data[:, top]) / n  # C[:, top]
    cross = jnp.where(jnp.isin(jnp.arange(d), top)[:, None], 0.0, cross)
    mu_max = 2.0 * jnp.max(jnp.abs(cross))
    return x0, lam_max, mu_max, var, gradient


# The task programs hand LAPACK only k x k matrices. On CPU a LAPACK call on a tall matrix
# (the QR of a d x k or n x r one) runs multi-threaded in OpenBLAS, whose threads then spin
# for a while and take cores from XLA's next products (half their speed on 2 cores).


def _basis(y):
    """An orthonormal basis of the span of ``y`` (d x k, full rank): its polar factor by two
    k x k eigendecomposition passes and products (:func:`rproxjax.stiefel._two_passes`), or
    its QR factor where that is not orthonormal to rounding (``y`` too ill-conditioned for
    the passes: NaN, or columns orthonormal only to about sqrt(eps))."""
    u = _two_passes(y)
    return jax.lax.cond(_orthonormal(u), lambda: u, lambda: jnp.linalg.qr(y)[0])


def _orthonormal(u):
    """Whether the columns of ``u`` (d x k) are orthonormal to rounding: ||u^T u - I||_F
    (:func:`rproxjax.stiefel.feasibility`) at most 10 k eps (False for NaN; the passes
    leave 1.5-3 k eps on the shipped data)."""
    return feasibility(u) <= 10.0 * u.shape[1] * jnp.finfo(u.dtype).eps


def _r_diagonal(a):
    """|R_jj| of the thin QR a = Q R (n x r), from the r x r Gram matrix a^T a = R^T R =
    V W V^T: R is, up to the signs of its rows, the R factor of W^{1/2} V^T (as
    :func:`rproxjax._tasks.refit.adjusted_variance` takes it from the covariance). Each R_jj^2
    is exact to rounding of ||a||_2^2 (eps cond(a)^2 relative to R_jj^2 itself)."""
    w, v = jnp.linalg.eigh(mm(a.T, a))
    root = jnp.sqrt(jnp.maximum(w, 0.0))[:, None] * v.T
    return jnp.abs(jnp.diagonal(jnp.linalg.qr(root, mode="r")))


def _metrics(x, data):
    """(explained, adjusted, per-component variance, nonzeros per column) of X on data."""
    n = data.shape[0]
    total = jnp.sum(data * data)
    proj = mm(data, x)
    explained = jnp.sum(proj * proj) / jnp.sum(x * x) / total
    r_diag = _r_diagonal(proj)
    return (explained, jnp.sum(r_diag**2) / total, r_diag**2 / n,
            jnp.sum(jnp.abs(x) > NONZERO_THRESHOLD, axis=0))


# ------------------------------------------------------------------ the runs


def _plan(method, n, passes, batch_size, q):
    """(fit keyword arguments, steps) spending at most ``passes`` * n IFOs."""
    budget = passes * n
    if method == "manpg":
        steps = max(1, int(passes))
        return dict(batch_size=n, num_steps=steps), steps
    if method == "r_prox_spb":  # whole blocks, then a refresh and minibatch steps; a
        # minibatch step costs 2 b (the minibatch's gradients at X_t and X_{t-1})
        whole, rest = divmod(budget, n + 2 * (q - 1) * batch_size)
        extra = 1 + int((rest - n) // (2 * batch_size)) if rest >= n else 0
        steps = max(1, int(whole) * q + extra)
        return dict(batch_size=batch_size, num_steps=steps), steps
    steps = max(1, int(budget // batch_size))
    return dict(batch_size=batch_size, num_steps=steps), steps


def default_passes(method: str, n: int, b: int, path: bool = False) -> float:
    """The default budget in passes of a run on ``n`` rows at minibatch ``b``: ``MINIBATCHES``
    (450) minibatches' IFOs, 450 b / n passes (about 450 R-ProxSGD steps, or 110 of
    R-ProxSPB at its default q, on any n), at most ``MAX_PASSES`` (100); a single run at
    least ``PASSES`` (10), a ``path``'s runs at least 2. ManPG: ``PASSES`` full-gradient
    steps. (At the default minibatch sqrt(n), 450 b / n exceeds 10 below about 2,000 rows,
    where 10 passes are too few steps for a run to converge: 35 of R-ProxSPB at n = 200.)"""
    if method == "manpg":
        return PASSES
    floor = min(MAX_PASSES, MINIBATCHES * b / n)
    return float(max(2.0, floor) if path else max(PASSES, floor))


def default_eta(method: str, lam_max: float, variance: float) -> float:
    """The default eta of ``method`` on data whose covariance C has largest eigenvalue
    ``lam_max`` and trace ``variance``: 1, and for R-ProxSPB min(1, ``SPIDER_SLACK``
    lambda_max / tr C).

    gamma = 1 / L takes L = 2 lambda_max, the smoothness of the mean's gradient; SpiderBoost's
    estimator accumulates the minibatch gradients' differences, whose smoothness is the
    samples' (2 ||z_i||^2, 2 tr C on average), so its analysis asks for a step about
    lambda_max / tr C times as large. That is conservative: eta = 1 is stable on MNIST and
    Fashion-MNIST (lambda_max / tr C = 0.09 and 0.29), but not on data whose variance is
    spread over many directions (a Gaussian with a slowly decaying spectrum: 0.017, where
    eta = 1 ends above its start and 0.5 does not); 12 times the analysis's step keeps
    eta = 1 where the top direction holds more than 1/12 of the variance."""
    if method != "r_prox_spb":
        return 1.0
    return float(min(1.0, SPIDER_SLACK * lam_max / variance))


class _Eta:
    """The step eta of a call: where it is the default (``retries`` > 0), a failed run or
    round takes it down 4 times, at most ``retries`` times; ``value`` is the one the call
    ended with (``settings["eta"]``)."""

    def __init__(self, value: float, retries: int):
        self.value, self.retries = float(value), retries

    def smaller(self, consts: tuple) -> tuple | None:
        """``consts`` with eta / 4 in front, or None where no retry is left."""
        if self.retries <= 0:
            return None
        self.value, self.retries = self.value / 4.0, self.retries - 1
        return (np.asarray(self.value, np.asarray(consts[0]).dtype), *consts[1:])


def _optimizer(method, mu, eta, gamma, q, ssn):
    reg = l1(mu)
    if method == "r_prox_spb":
        return r_prox_spb(eta, gamma, reg, q=q, ssn=ssn)
    if method == "r_prox_sgd":
        return r_prox_sgd(inverse_sqrt_schedule(eta), gamma, reg, ssn=ssn)
    if method == "r_subgrad":
        return r_subgrad(inverse_sqrt_schedule(eta * gamma), reg)
    return manpg(gamma, reg, tol=1e-12, ssn=ssn)


def _make_run(method, kw, q, ssn, progress=False):
    """run(mu (r,), eta, gamma, x0, data, key) -> (FitResult, metrics): one run, traceable;
    with ``progress``, each epoch is reported through ``relay`` (a
    :class:`rproxjax._run.monitor.Relay` of the program's hub)."""

    def run(mu, eta, gamma, x0, data, key, relay=None):
        opt = _optimizer(method, mu, eta, gamma, q, ssn)
        res = pure_fit(opt, spca_loss, x0, data, key=key, **kw,
                       recording=Recording(callback=relay if progress else None))
        return res, _metrics(res.params, data)

    return run


class _Program(NamedTuple):
    """A compiled run (or path) and the hub through which its epochs reach the bar of the
    call that runs it (the hub is static in the program: one per program)."""

    run: Any
    hub: RelayHub


def _program_entry(method, kw, q, ssn, lanes: bool, progress: bool, consts) -> _Program:
    """The compiled run (or its ``vmap`` over mu, for a path) of these settings and of
    arguments like ``consts`` (eta, gamma, X0, the data, the key), with its hub, from
    :func:`_cached_program`."""
    return _cached_program(method, tuple(sorted(kw.items())), q, ssn, lanes, progress,
                           _run_compile.arguments_key(consts), _run_compile.environment())


def _program(method, kw, q, ssn, lanes: bool, progress: bool = False, consts=()):
    """The compiled run of :func:`_program_entry` alone (a :class:`rproxjax._jit.jit`)."""
    return _program_entry(method, kw, q, ssn, lanes, progress, consts).run


@functools.lru_cache(maxsize=32)
def _cached_program(method, kw_items, q, ssn, lanes, progress, arguments, environment):
    """:func:`_program`'s entries: the 32 most recently used, keyed on everything the
    program depends on: the run's settings, the arguments' structure, shapes, dtypes and
    placements (``arguments``) and JAX's settings, backend and devices (``environment``,
    :func:`rproxjax._run.compile.environment`). Each entry compiles once, at its first
    call. ``functools.lru_cache`` is safe to share between threads: two threads that miss
    the same key at once each build an entry, and each call runs its own entry's program
    and hub."""
    del arguments, environment  # key only
    run = _make_run(method, dict(kw_items), q, ssn, progress)
    if lanes:
        run = jax.vmap(run, in_axes=(0, None, None, None, None, None))
    return _Program(_compile.jit(run, options=_compile.TASK_COMPILER_OPTIONS), RelayHub())


def _pick(counts, target):
    """The index whose count is nearest the target (ties: the larger mu, the sparser)."""
    err = np.abs(np.asarray(counts, dtype=float) - target)
    best = np.flatnonzero(err == err.min())
    return int(best[-1])


def sparse_pca(data: ArrayLike, n_components: int, *, mu: ArrayLike | None = None,
               nonzeros: int | None = None,
               method: str = "r_prox_spb", passes: float | None = None, center: bool = True,
               batch_size: int | None = None, q: int | None = None, eta: float | None = None,
               gamma: float | None = None, x0: ArrayLike | None = None, seed: int = 0,
               ssn: SSN | None = None, refit: bool = True,
               progress: bool = False) -> SparsePCAResult:
    r"""Sparse principal components of ``data`` (rows are samples), by the paper's model.

    Solves min over X in St(d, r) of (1/n) sum_i ||z_i - X X^T z_i||^2 + mu ||X||_1 with
    one of the library's optimizers. Every default is read off the data:

    * the rows are centred (``center=True``);
    * the start X0 is the top ``n_components`` principal directions (subspace iteration);
    * the proximal step is gamma = 1 / L, L = 2 lambda_max(C) the Lipschitz constant of
      the smooth part's gradient (C the covariance); for R-ProxSPB eta = min(1, 12
      lambda_max / tr C) (SpiderBoost's analysis takes the samples' smoothness, about
      2 tr C, where L takes the mean's: eta = 1 on data whose top direction holds more
      than 1/12 of the variance, smaller where the variance is spread over many
      directions; :func:`rproxjax._tasks.spca.default_eta`); R-ProxSGD and R-Subgrad
      use eta / sqrt(t), eta = 1;
    * R-ProxSPB's minibatch is b = sqrt(n) and its refresh period q = n / (2 b)
      (SpiderBoost's order sqrt(n) for both: a block of one full gradient and q - 1
      steps on two minibatch gradients each costs two passes); R-ProxSGD and R-Subgrad
      use b = sqrt(n);
    * the budget is ``passes`` passes of stochastic gradients (IFOs / n, refreshes
      included); ManPG takes ``passes`` full-gradient steps. By default 450 minibatches'
      worth (450 b / n passes: a constant number of steps, about 110 of R-ProxSPB, 450 of
      R-ProxSGD; at most 100 passes), at least 10 passes for a single run and at least 2
      for a ``nonzeros=`` path's runs, which choose a zero pattern that the refit then
      optimizes: a path's runs take 10 passes at about 2,000 rows, 4.5 at 10,000, 2 from
      about 50,000, and 31.5 at 200;
    * mu is a value on the data's own scale: mu_max = 2 max |C_ki| over the features k
      outside and i inside the r of largest variance, the mu at which one feature per
      component is already stationary. ``mu`` given as a number is used as it is.

    The l1 weight shrinks the entries it keeps as well as zeroing the others; with
    ``refit=True`` (the default) the run's components are then refitted on their zero
    pattern (entries with |X_ij| <= 1e-3 become exact zeros): orthonormal again, with the
    same support, re-optimized for the adjusted variance by block-coordinate ascent, each
    column an exact eigenproblem on its support (:mod:`rproxjax._tasks.refit`); the refit
    is kept only where it explains more variance. ``refit=False`` returns the optimizer's
    point of the paper's model as it is.

    With ``nonzeros=k`` instead of ``mu``, the regularization path runs over 12 values of
    mu as one compiled ``vmap`` program, around a screen's estimate of the mu that keeps k
    nonzeros (0.65 times the k-th largest entry of |2 C V|, the gradient at the principal
    directions V: 10 values from 0.55 to 1.6 times it, and 1/8 and 4 times it; where the
    estimate is 0, 0.002 to 4 times mu_max), then over 8
    values between the two that bracket k (the same compiled program), up to 3 times
    until a count is within 2% of k, or, with the refit, until the path holds a run with
    between k and 1.25 k nonzeros (and one with at most k). Without the refit, the
    result is the run whose total count of nonzeros (entries |X_ij| > 1e-3) is nearest
    k. With it, the zero pattern is the best of several with at most k nonzeros: the
    run nearest k among those with at most k, that run's pattern filled up to k with
    the largest other entries of the nearest denser run, and the path's denser runs and
    (without ``x0``) the principal directions (mu = 0) each cut to its k largest entries
    (cutting a denser solution keeps its large loadings where the l1 weight that would
    make it as sparse spreads its zeros evenly: the better pattern at dense targets).
    The cuts are ranked by the adjusted variance of their column-normalized entries,
    and the run, its filled pattern and the three best cuts are refitted; the result is
    the refit that explains the most variance, always at least the run's own. ``mu`` is
    then the l1 weight of the run whose pattern won (0 for the principal directions),
    and ``settings["support"]`` says which: "run", "fill", "cut" or "start". The whole path (every
    mu tried, sorted) is returned. (Where no run of the path has at most k nonzeros,
    the nearest one is cut to k as well: with the refit, the result never has more than
    k. Without it, a count more than 10% off k warns.) Where
    the principal directions themselves have at most k nonzeros (k near d r, on data
    with features of no variance), no pattern of k entries explains more: with the
    refit and without ``x0``, the result is their refit, with no path run (an empty
    ``path``, mu = 0, support "start", no step).

    Args:
      data: n x d array (NumPy or JAX, or a nested list) of real numbers; integers and
        booleans are converted to JAX's default float.
        The computation follows its dtype (float32, or float64 with x64 enabled).
      n_components: r, the number of components (1 <= r <= d).
      mu: the l1 weight (>= 0), or one per component (an array or list of length r).
        Default (neither ``mu`` nor ``nonzeros``): 0.1 mu_max.
      nonzeros: a target total count of nonzeros (r <= k <= d r), instead of ``mu``.
      method: "r_prox_spb" (R-ProxSPB, default), "r_prox_sgd", "r_subgrad" or "manpg".
      passes: the budget in passes over the data (default None: 450 b / n, at most 100,
        at least 10, or 2 for a ``nonzeros=`` path's runs; above).
      center: subtract the mean of the rows first.
      batch_size, q: minibatch size and refresh period (defaults above).
      eta, gamma: step sizes (defaults above; gamma in units of the data, 1/L).
      x0: a d x r starting point with orthonormal columns (default: PCA).
      seed: seeds the start's subspace iteration and the sampling.
      ssn: subproblem settings (default ``rproxjax.SSN.stochastic()``, or
        ``rproxjax.SSN()`` for ManPG).
      refit: refit the components on their support (above); the path's counts and
        variances are the runs' own, before the refit or any cut.
      progress: report on stderr (as in :func:`rproxjax.fit`: a bar on a terminal, whole
        lines elsewhere): a line while a first call compiles, then a single run's epochs
        (its compiled program then reports each epoch through ``jax.debug.callback``: one
        more compilation the first time), or a path's rounds. The path's rounds are also
        logged at INFO level to the logger ``"rproxjax"``.

    Returns:
      A :class:`SparsePCAResult`: the loadings (d x r), scores, explained variance (the paper's
      and the adjusted one), nonzeros, the mu and steps used, the run's history, the path.

    Raises:
      TypeError: ``data`` (or ``x0``) is not an array of real numbers (complex values are
        an error, not cut to their real part); an argument is not a number.
      ValueError: a shape, a value or a method out of range; data that are not finite,
        have no variance (all rows equal), or overflow or underflow their dtype; both
        ``mu`` and ``nonzeros`` given; or a failed run: one that halted (a non-finite
        step), ended with a larger objective than at its start (steps too large), or never
        left its start because every subproblem collapsed (mu too large). Where eta is
        the default (not ManPG), a run, or a path's round, that halted or rose is first
        run again with eta / 4, up to 3 times (``settings["eta"]`` is the step used). A
        path skips its failed runs and raises only if all failed.

    Warns:
      RuntimeWarning: ``nonzeros=k`` with ``refit=False``, where the nearest run of the
        path has a count more than 10% off k.

    Example:
        >>> import numpy as np, rproxjax
        >>> rng = np.random.default_rng(0)
        >>> data = rng.standard_normal((500, 20)) * np.linspace(3, 0.5, 20)
        >>> res = rproxjax.sparse_pca(data, 3, nonzeros=12, passes=4)
        >>> res.loadings.shape, abs(res.nonzeros - 12) <= 2
        ((20, 3), True)
        >>> bool(np.allclose(res.loadings.T @ res.loadings, np.eye(3), atol=1e-6))
        True
    """
    data, r, passes = _checked_arguments(data, n_components, mu, nonzeros, method, passes,
                                         refit, progress)
    n, d = data.shape
    dtype = data.dtype
    b, q = _sizes(method, n, batch_size, q)
    if passes is None:
        passes = default_passes(method, n, b, path=nonzeros is not None)
    seed = _positive_int("seed", seed, 0)
    x0_given, x0 = x0 is not None, _start(x0, d, r, dtype)
    # One compiled program for the data's side (centring, checks, scales, start, keys) and
    # one for the results' (metrics, scores); the rest is NumPy on the host: a first call
    # compiles few programs, and a second with new values compiles none.
    prep = _prepare(data, np.uint32(seed), x0_given, x0, center=bool(center))
    lam_max, mu_max = _checked_scales(prep, bool(center))
    gamma = 1.0 / (2.0 * lam_max) if gamma is None else _positive_float("gamma", gamma)
    variance = float(prep["variance"])
    step = _call_eta(method, eta, lam_max, variance)
    eta = step.value
    if ssn is None:
        ssn = SSN() if method == "manpg" else SSN.stochastic()
    kw, steps = _plan(method, n, passes, b, q)
    settings = dict(eta=eta, gamma=gamma, batch_size=b, q=q if method == "r_prox_spb" else None,
                    lambda_max=lam_max, mu_max=mu_max, center=center, seed=seed,
                    refit=bool(refit))
    centred = prep["centred"]
    np_dtype = np.dtype(dtype)
    consts = (np.asarray(eta, np_dtype), np.asarray(gamma, np_dtype), prep["x0"], centred,
              prep["key"])

    if nonzeros is None:
        mu = 0.1 * mu_max if mu is None else mu
        x, mu_out, history, ifo = _single_run(_program_entry(
            method, kw, q, ssn, False, progress, consts), method, consts, mu, n, variance, r,
            np_dtype, progress, bool(refit), step)
        path = None
        settings["support"] = "run"
    else:
        target = _positive_int("nonzeros", nonzeros, r, d * r)
        start = None if x0_given else np.asarray(prep["x0"])
        history = None
        if refit and start is not None and _count(start) <= target:
            # The principal directions keep at most k entries: no pattern explains more.
            x, mu_out, path, ifo = _start_only(start, centred, np_dtype)
            steps, settings["support"] = 0, "start"
        else:
            program = _path_program(method, kw, q, ssn, consts, progress)
            x, mu_out, path, ifo, settings["support"] = _target(
                program, consts, target, mu_max, variance, r, np_dtype, progress, bool(refit),
                start, _screen(prep["gradient"], target), step)
    settings["eta"] = step.value
    return _result(x, prep, mu_out, method, steps, ifo / n, history, path, settings)


def _result(x, prep, mu, method, steps, passes, history, path, settings) -> SparsePCAResult:
    """The :class:`SparsePCAResult` of loadings ``x``: their metrics and scores on the
    centred data of ``prep`` (one program, :func:`_finish`) and the call's values."""
    (explained, adjusted, per_comp, nnz_cols), scores = _finish(x, prep["centred"])
    return SparsePCAResult(
        loadings=x, mean=prep["mean"], scores=scores, explained_variance=explained,
        adjusted_variance=adjusted, component_variance=per_comp,
        nonzeros=int(np.sum(np.asarray(nnz_cols))), nonzeros_per_component=nnz_cols,
        mu=mu, method=method, num_steps=steps, passes=passes, history=history, path=path,
        settings=settings)


def _call_eta(method, eta, lam_max, variance) -> _Eta:
    """The call's step: a given ``eta`` (checked, never changed), else the default
    (:func:`default_eta`) with ``ETA_RETRIES`` retries (none for ManPG, which has no eta)."""
    if eta is not None:
        return _Eta(_positive_float("eta", eta), 0)
    return _Eta(default_eta(method, lam_max, variance), 0 if method == "manpg" else ETA_RETRIES)


def _path_program(method, kw, q, ssn, consts, progress):
    """The cached path program (:func:`_program` with lanes), with a compile notice before
    its first call where ``progress``."""
    program = _program(method, kw, q, ssn, True, False, consts)
    if progress and program._cache_size() == 0:
        compile_notice(progress, f"the {method} path")
    return program


def _single_run(program, method, consts, mu, n, variance, r, np_dtype, progress, refit,
                step=None):
    """(X, mu, history, IFOs) of one run at ``mu`` by the cached ``program`` (its bar fed
    through its hub; a compile notice on its first call), refitted on its support when
    ``refit``."""
    if progress and program.run._cache_size() == 0:
        compile_notice(progress, f"the {method} run")
    with program.hub.watch(n, progress) as relay:
        x, mu_out, history, ifo = _single(program.run, consts + ((relay,) if progress else ()),
                                          mu, variance, r, np_dtype, step)
    if refit:
        x = jax.device_put(refit_on_support(np.asarray(x), np.asarray(consts[3]),
                                         NONZERO_THRESHOLD)[0])
    return x, mu_out, history, ifo


def _checked_arguments(data, n_components, mu, nonzeros, method, passes, refit, progress):
    """(data as a floating JAX array, r, passes) after the argument checks of
    :func:`sparse_pca` (each a TypeError or ValueError naming the argument)."""
    data = _as_matrix("data", data, None)
    n, d = data.shape
    r = _positive_int("n_components", n_components, 1, d)
    if n < 2:
        raise ValueError(f"data must hold at least 2 samples, got {n}.")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if mu is not None and nonzeros is not None:
        raise ValueError("give mu or nonzeros, not both.")
    check_progress(progress)
    if not isinstance(refit, bool | np.bool_):
        raise TypeError(f"refit must be a bool, got {refit!r}.")
    return data, r, None if passes is None else _positive_float("passes", passes)


def _sizes(method, n, batch_size, q):
    """(minibatch size b, refresh period q): b = sqrt(n) and q = n / (2 b) by default;
    ManPG's batch is the data set."""
    b = min(n, max(1, round(math.sqrt(n)))) if batch_size is None else \
        _positive_int("batch_size", batch_size, 1, n)
    q = max(2, round(n / (2 * b))) if q is None else _positive_int("q", q, 2)
    return (n if method == "manpg" else b), q


def _start(x0, d, r, dtype):
    """A given start point checked (d x r, the data's dtype, finite, orthonormal columns)
    on the host, before anything compiles; else zeros (the PCA start)."""
    if x0 is None:
        return np.zeros((d, r), dtype)
    x0 = _as_matrix("x0", x0, dtype)
    if x0.shape != (d, r):
        raise ValueError(f"x0 must have shape (d, r) = {(d, r)}, got {x0.shape}.")
    host = np.asarray(x0)
    if not np.all(np.isfinite(host)):
        raise ValueError("x0 holds NaN or inf.")
    feas = _checks.host_feasibility(host)
    tol = 1e-6 if host.dtype == np.float64 else 1e-3
    if not feas <= tol:
        rank = int(np.linalg.matrix_rank(host))
        why = (f"x0 has rank {rank} < r = {r}: no orthonormal start spans it" if rank < r
               else "start from its orthonormal factor, e.g. np.linalg.qr(x0)[0]")
        raise ValueError(f"x0 must have orthonormal columns: ||x0^T x0 - I||_F = {feas:.3e} > "
                         f"{tol:g}; {why}.")
    return x0


def _checked_scales(prep, center):
    """(lambda_max, mu_max) of :func:`_prepare`'s output, or a ValueError for data that
    are not finite, overflow or underflow their dtype, or have no variance."""
    if not bool(prep["finite"]):
        raise ValueError("data holds NaN or inf.")
    lam_max, mu_max = float(prep["lam_max"]), float(prep["mu_max"])
    if not (math.isfinite(lam_max) and math.isfinite(mu_max)):
        raise ValueError("data are too large for their dtype: the covariance overflows; "
                         "rescale them.")
    if _no_variance(prep, center):
        raise ValueError("data has no variance: every row equals the mean (all rows are "
                         "equal, or zero with center=False).")
    if not lam_max > 0:
        raise ValueError("data are too small for their dtype: the covariance underflows to "
                         "zero; rescale them.")
    # mu_max is 0 where no feature outside the r of largest variance covaries with them
    # (r = d among others): every mu keeps those features stationary, and the path's scale
    # is then the covariance's own, lambda_max.
    return lam_max, (mu_max if mu_max > 0 else lam_max)


def _no_variance(prep, center: bool) -> bool:
    """Whether every row equals the mean: all rows equal (centred, they are then only the
    centring's rounding error, to which the components would be fitted), or, uncentred, all
    zero. Tested exactly, in NumPy (nothing to compile), where the variance per sample is
    at most that rounding's level, (n eps)^2 ||mean||^2 (a sum of n terms errs by at most
    (n - 1) eps/2 times their magnitudes; 0 uncentred)."""
    centred = prep["centred"]
    n = centred.shape[0]
    mean = np.asarray(prep["mean"], np.float64)
    level = (n * float(jnp.finfo(centred.dtype).eps)) ** 2 * float(np.sum(mean * mean))
    if not float(prep["variance"]) <= level:
        return False
    rows = np.asarray(centred)
    return not np.any(rows != rows[:1]) if center else not np.any(rows)


def _single(program, consts, mu, variance, r, dtype, step=None):
    """(X, mu as given, the run's FitResult, IFOs) of one run at ``mu``; a failed run is run
    again with a smaller eta where ``step`` (an :class:`_Eta`) allows, else an error."""
    mu_vec = _mu_vector(mu, r, dtype)
    while True:
        res, _ = program(mu_vec, *consts)
        _raise_if_stuck(res.history.ssn_status, mu)
        if not np.any(_failed(res.history.halted, res.epoch_loss, variance)) or step is None:
            break
        consts = step.smaller(consts)
        if consts is None:
            break
    _raise_if_failed(res.history.halted, res.epoch_loss, variance)
    mu_out = jax.device_put(mu_vec if np.ndim(mu) else mu_vec[0])
    return res.params, mu_out, res, float(np.asarray(res.epoch_ifo)[-1])


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS,
                   static_argnames=("center",))
def _prepare(data, seed, x0_given, x0, *, center):
    """The data's side in one program: the mean and centred data, finiteness, the variance
    per sample, the scales (:func:`_scales`) and the PRNG keys of the start and the run."""
    n, d = data.shape
    mean = jnp.mean(data, axis=0) if center else jnp.zeros((d,), data.dtype)
    centred = data - mean
    key_x0, key_run = jax.random.split(jax.random.key(seed))
    x0, lam_max, mu_max, var, gradient = _scales(centred, key_x0, x0_given, x0)
    # A non-finite entry makes its column's mean and variance non-finite: where both are
    # finite so is the data, and only otherwise (or where a sum overflowed) are the entries
    # read again (a pass over the data saved, as for the variance, a sum of the features').
    quick = jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(var))
    finite = jax.lax.cond(quick, lambda: jnp.bool_(True), lambda: jnp.all(jnp.isfinite(data)))
    return dict(mean=mean, centred=centred, finite=finite, variance=jnp.sum(var), x0=x0,
                lam_max=lam_max, mu_max=mu_max, gradient=gradient, key=key_run)


@_compile.jit
def _scores(data, mean, x):
    """(data - mean) X in X's dtype, one program (per shape of ``data``)."""
    return mm(data.astype(x.dtype) - mean, x)


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS)
def _finish(x, centred):
    """(metrics of :func:`_metrics`, scores) of the result, one program."""
    return _metrics(x, centred), mm(centred, x)


def _path(program, consts, target, mu_max, variance, r, dtype, stages, cut=False,
          screen=None, step=None):
    """(X, mu, path, IFOs, denser) of the run whose nonzeros are nearest ``target``, and the
    other denser runs (see :func:`_best`).

    The first round (:func:`_first_round`: ``SCREEN_FRACTIONS`` of the ``screen``'s
    estimate, or the grid ``PATH_FRACTIONS`` of mu_max without one), then up to
    ``REFINE_ROUNDS`` rounds of ``REFINE_POINTS`` values between the two mus that bracket
    the target (counts fall as mu grows), until a count is within ``NONZERO_RTOL`` of it:
    every round is a call of the same compiled ``vmap`` program (mu is traced; a round of
    fewer values than the first is padded with its last value, so that the program
    compiles once); the bookkeeping is NumPy. With ``cut`` (the refit follows), a run with
    between k and (1 + ``CUT_SLACK``) k nonzeros also ends the refinements, and the run
    returned is the one nearest k with at most k nonzeros (where there is one): every
    denser run is cut to k instead. A round where a run failed is run again with a
    smaller eta where ``step`` (an :class:`_Eta`) allows; the later rounds keep it."""
    runs = []  # (mus, params, metrics, counts, failed, IFOs), NumPy

    lanes = len(PATH_FRACTIONS)  # every round one program: a shorter round is padded

    def run(mus):
        nonlocal consts
        k = len(mus)
        padded = np.concatenate([mus, np.repeat(mus[-1:], max(0, lanes - k))])
        while True:
            res, m = program(np.repeat(padded[:, None], r, 1).astype(dtype), *consts)
            failed = _failed(np.asarray(res.history.halted)[:k], np.asarray(res.epoch_loss)[:k],
                             variance)
            smaller = step.smaller(consts) if step is not None and failed.any() else None
            if smaller is None:
                break
            consts = smaller
        m = [np.asarray(a)[:k] for a in m]
        runs.append((mus, np.asarray(res.params)[:k], m, m[3].sum(axis=1),
                     failed | _stuck(np.asarray(res.history.ssn_status)[:k]),
                     np.asarray(res.epoch_ifo)[:k, -1]))
        near = runs[-1][3][_pick(runs[-1][3], target)]
        stages.update(f"{len(mus)} values of mu in [{mus.min():.3g}, {mus.max():.3g}], "
                      f"nonzeros nearest {target}: {near}")

    try:
        _rounds(run, runs, mu_max, target, cut, screen)
    except BaseException:
        stages.close(complete=False)
        raise
    stages.close()  # at its last round: the path's rounds, when fewer than planned
    return _best(runs, target, variance, dtype, cut)


def _screen(gradient, target):
    """The screen's estimate of the mu at which a run keeps ``target`` nonzeros:
    ``SCREEN_SCALE`` (0.65) times the target-th largest entry of ``gradient`` (the smooth
    part's gradient at the principal directions, in absolute value: a proximal step from
    them keeps the entries whose gradient exceeds mu; the sparse stationary points
    concentrate their weight, so that fewer do). None where that entry is zero (more
    nonzeros than the directions have)."""
    g = np.sort(np.abs(np.asarray(gradient, np.float64)).ravel())[::-1]
    mu = SCREEN_SCALE * g[target - 1]
    return float(mu) if np.isfinite(mu) and mu > 0 else None


def _first_round(mu_max, screen):
    """The path's first values of mu: ``SCREEN_FRACTIONS`` of the ``screen``'s estimate
    where there is one, else the grid ``PATH_FRACTIONS`` of mu_max."""
    if screen is None:
        return mu_max * np.asarray(PATH_FRACTIONS)
    return screen * np.asarray(SCREEN_FRACTIONS)


def _rounds(run, runs, mu_max, target, cut=False, screen=None):
    """The path's first round (:func:`_first_round`), then the refinements until a count is
    near enough the target (with ``cut``: or a run is denser than it by at most
    ``CUT_SLACK``)."""
    run(_first_round(mu_max, screen))
    for _ in range(REFINE_ROUNDS):
        mus = np.concatenate([a[0] for a in runs])
        counts = np.concatenate([a[3] for a in runs]).astype(float)
        ok = ~np.concatenate([a[4] for a in runs])
        near = np.abs(counts - target) <= NONZERO_RTOL * target
        if cut and np.any(ok & (counts <= target)):  # a run to return uncut, and one to cut
            near |= (counts >= target) & (counts <= (1.0 + CUT_SLACK) * target)
        if np.any(ok & near):
            break
        above, below = mus[ok & (counts > target)], mus[ok & (counts < target)]
        lo = above.max() if above.size else mus.min() * 1e-2
        hi = below[below > lo].min() if np.any(below > lo) else mus.max() * 4.0
        run(np.geomspace(lo, hi, REFINE_POINTS + 2)[1:-1])


def _best(runs, target, variance, dtype, cut=False):
    """(X, mu, path, IFOs, denser) of the run nearest the target (with ``cut``: of those with
    at most ``target`` nonzeros, where there is one), the whole path, and the other runs
    with more nonzeros than the target (and not failed), as (mu, X) pairs."""
    mus = np.concatenate([a[0] for a in runs])
    order = np.argsort(mus, kind="stable")

    def joined(i):
        return np.concatenate([a[i] for a in runs])[order]

    counts, failed = joined(3), joined(4)
    if failed.all():
        _raise_if_failed(failed)
    metrics = [np.concatenate([a[2][k] for a in runs])[order] for k in range(2)]
    eligible = ~failed
    if cut and np.any(eligible & (counts <= target)):
        eligible &= counts <= target
    best = _pick(np.where(eligible, counts, np.inf), target)
    path = SparsePCAPath(jax.device_put(mus[order].astype(dtype)), jax.device_put(counts),
                         jax.device_put(metrics[0]), jax.device_put(metrics[1]))
    params, sorted_mus = joined(1), mus[order].astype(dtype)
    denser = [(sorted_mus[i], params[i]) for i in np.flatnonzero(~failed & (counts > target))
              if i != best]
    return (jax.device_put(params[best]), jax.device_put(sorted_mus[best]), path,
            float(joined(5)[best]), denser)


def _target(program, consts, target, mu_max, variance, r, dtype, progress, refit, start,
            screen=None, step=None):
    """(X, mu, path, IFOs, support) of a ``nonzeros=`` target: the path (:func:`_path`,
    first round around the ``screen``'s estimate), then with ``refit`` the best of its
    patterns (:func:`_refit_target`; ``start``, the principal directions, is a candidate
    at mu = 0 unless None)."""
    x, mu, path, ifo, denser = _path(program, consts, target, mu_max, variance, r, dtype,
                                     Stages(1 + REFINE_ROUNDS, progress, "path round"),
                                     cut=refit, screen=screen, step=step)
    if not refit:
        count = _count(x)
        if abs(count - target) > MISS_RTOL * target:
            warnings.warn(f"nonzeros={target}: the path's nearest run has {count} nonzeros; "
                          "refit=True cuts a denser run to the target, or pass a larger "
                          "passes=", RuntimeWarning, stacklevel=3)
        return x, mu, path, ifo, "run"
    if start is not None:
        denser.append((dtype.type(0), start))
    x, mu, support = _refit_target(x, mu, denser, consts[3], target)  # consts[3]: the data
    return x, mu, path, ifo, support


def _start_only(start, centred, dtype):
    """(X, mu, path, IFOs) of a target the principal directions ``start`` meet (at most k
    entries above the threshold): their refit on that support, mu = 0, an empty path (no
    run), no IFO."""
    x = refit_on_support(start, np.asarray(centred), NONZERO_THRESHOLD)[0]
    empty = jax.device_put(np.zeros(0, dtype))
    path = SparsePCAPath(empty, jax.device_put(np.zeros(0, np.int32)), empty, empty)
    return jax.device_put(x), jax.device_put(dtype.type(0)), path, 0.0


def _refit_target(x, mu, denser, centred, target):
    """(X, mu, support) of a ``nonzeros=`` target refitted: the best of the nearest run's
    pattern, that pattern filled up to ``target`` from the nearest denser run, and the
    ``denser`` (mu, X) points cut to ``target`` entries (:func:`refit_best`); support "run",
    "fill", "cut" or "start" (mu = 0, the principal directions)."""
    x = np.asarray(x)
    over = _count(x) > target  # no run of the path had at most k: cut the nearest too
    candidates = [(mu, _cut(x, target), "cut") if over else (mu, x, "run")]
    if denser:
        filled = _fill(x, min((p for _, p in denser), key=_count), target)
        if filled is not None:
            candidates.append((mu, filled, "fill"))
    kept = len(candidates)  # the run and its filled pattern: refitted without the screen
    candidates += [(m, _cut(params, target), "cut" if m else "start") for m, params in denser]
    i, x, _ = refit_best([c[1] for c in candidates], np.asarray(centred), NONZERO_THRESHOLD,
                         kept=kept)
    mu_out, _, support = candidates[i]
    return jax.device_put(x), jax.device_put(mu_out), support


def _count(x):
    """Entries of ``x`` above the nonzero threshold (NumPy)."""
    return int(np.sum(np.abs(np.asarray(x)) > NONZERO_THRESHOLD))


def _fill(x, denser, k):
    """``x``'s pattern with its values, and the largest entries of ``denser`` off it (with
    their values) up to ``k`` nonzeros in all; None when ``x`` has k already or ``denser``
    adds nothing (NumPy)."""
    keep = np.abs(x) > NONZERO_THRESHOLD
    room = k - int(keep.sum())
    extra = np.where(keep, 0, np.asarray(denser))
    if room <= 0 or not np.any(np.abs(extra) > NONZERO_THRESHOLD):
        return None
    added = _cut(extra, room)
    return np.where(keep, x, np.where(np.abs(added) > NONZERO_THRESHOLD, added, 0)).astype(
        x.dtype)


def _cut(x, k):
    """``x`` with all but its ``k`` largest entries in magnitude set to 0 (NumPy)."""
    flat = np.abs(x).ravel()
    keep = np.zeros(flat.shape, bool)
    keep[np.argsort(flat, kind="stable")[flat.size - k:]] = True
    return np.where(keep.reshape(x.shape), x, 0)


def _mu_vector(mu, r, dtype):
    """mu as one value per component, a NumPy array of ``dtype``, from a number or an array
    or list of r numbers."""
    given = mu
    if isinstance(mu, list | tuple):
        mu = _from_list("mu", mu)  # its dtype is checked below with every array's
    if _checks.not_a_number(mu):
        raise TypeError(f"mu must be a number or one per component, got {given!r}.")
    mu = np.asarray(mu)
    if mu.dtype.kind not in "iuf":
        raise TypeError(f"mu must hold real numbers, got dtype {mu.dtype}.")
    mu = mu.astype(dtype)
    if mu.ndim == 0:
        mu = np.full((r,), mu, dtype)
    if mu.shape != (r,):
        raise ValueError(f"mu must be a scalar or have one value per component ({r}), got "
                         f"shape {mu.shape}.")
    if not np.all(np.isfinite(mu) & (mu >= 0)):
        raise ValueError(f"mu must be finite and >= 0, got {given!r}.")
    return mu


def _failed(halted, epoch_loss, scale):
    """Per run (the last axis is the steps/epochs): halted (a non-finite step), or F at the
    end above F at the start by more than 1e-2 (|F_0| + ``scale``), ``scale`` the data's
    total variance per sample (the size of f): the steps are too large, and the point is
    worse than the start. (Round-off and a stochastic method's last-iterate noise stay below
    it, also from a start that is already near optimal: R-Subgrad from the PCA start at a
    small mu rose 0.2% in tests; a step 100 times too large rose 10-20%.) NumPy."""
    loss = np.asarray(epoch_loss)
    start, end = loss[..., 0], loss[..., -1]
    return np.any(np.asarray(halted), axis=-1) | ~(end - start <= 1e-2 * (np.abs(start) + scale))


def _stuck(ssn_status):
    """Per run (the last axis is the steps): every step's subproblem collapsed (the prox
    zeroed a whole column, so the step was refused): the run never left its start, which
    is no solution at its mu. NumPy."""
    status = np.asarray(ssn_status)
    return np.all(status == int(Status.COLLAPSED), axis=-1) & (status.shape[-1] > 0)


def _raise_if_stuck(ssn_status, mu):
    if bool(np.any(_stuck(ssn_status))):
        raise ValueError(f"mu = {mu!r} is too large for the proximal steps: every "
                         "subproblem's prox zeroed a whole column (Status.COLLAPSED), so "
                         "every step was refused and the run never left its start. Pass a "
                         "smaller mu (settings['mu_max'] of a run at the default is the "
                         "data's scale), a smaller gamma, or nonzeros=.")


def _raise_if_failed(halted, epoch_loss=None, scale=None):
    if epoch_loss is not None:
        halted = _failed(halted, epoch_loss, scale)
    if bool(np.any(np.asarray(halted))):
        raise ValueError("the run failed: it halted (a non-finite gradient or subproblem) or "
                         "ended with a larger objective than it started from. The step "
                         "sizes are too large for these data: pass a smaller eta or gamma.")
