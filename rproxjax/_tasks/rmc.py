"""Robust low-rank matrix completion in one call: :func:`robust_matrix_completion`.

The paper's model (``rproxjax.problems``, eqs. rmc-huang to def-hat-f) on the user's own
matrix, solved by default by :mod:`rproxjax._tasks.rmc_alternating` (run to convergence, the
outlier weight read off the residuals), or by one of the paper's methods at a fixed budget
as in its video experiment: the blocks (U on the Grassmann manifold, the outliers S as a
Euclidean block with an l1 prox), the step sizes, the budget, the start (U from an SVD,
S = 0) and the closed-form V, which the repository's ``experiments/_rmc.py`` assembles by hand.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks, problems
from rproxjax import _jit as _compile
from rproxjax._blocks import Euclidean, Grassmann
from rproxjax._contract import block_cost
from rproxjax._linalg import mm
from rproxjax._optimizers import inverse_sqrt_schedule, r_prox_sgd, r_prox_spb, r_subgrad
from rproxjax._regularizers import l1
from rproxjax._run.fit import FitResult, pure_fit
from rproxjax._run.monitor import RelayHub, check_progress, compile_watch
from rproxjax._run.options import Recording, Sampling
from rproxjax._tasks import rmc_alternating as _alt
from rproxjax._typing import Array, ArrayLike, DTypeLike, PRNGKey

__all__ = ["DEFAULT_LAM", "DEFAULT_PASSES", "DEFAULT_STEPS", "DEFAULT_TOL", "REFERENCE_MAGNITUDE",
           "RMCResult", "robust_matrix_completion"]


#: (eta, step_scale) per method, for data whose median observed |M_ij| is
#: :data:`REFERENCE_MAGNITUDE`: points of the paper's video experiment's step grid
#: (``results/rmc-video.json``, etas 8, 4, 2, 1, 0.5, 0.1, 0.01 times S scales 0.03, 0.1, 0.3,
#: 1). R-Subgrad's is its tuned choice there. R-ProxSPB's and R-ProxSGD's tuned choices,
#: (2, 0.1) and (4, 0.1), raise F before they lower it: they recover within the budget on
#: the whole video, not on small matrices. Their defaults are the smaller grid points
#: (0.5, 0.3) and (1, 0.3), which lower F from the start on small matrices too, for a final
#: F on the video somewhat above the tuned choices' (``results/rmc-video.json``).
DEFAULT_STEPS = MappingProxyType({
    "r_prox_spb": (0.5, 0.3),
    "r_prox_sgd": (1.0, 0.3),
    "r_subgrad": (1.0, 0.3),
})

#: The median observed |M_ij| the default steps were tuned at: the shipped video's (pixels in
#: [0, 1]; its median observed entry is 114 / 255 = 0.447 on every seed of the experiment).
REFERENCE_MAGNITUDE = 0.45

_METHODS = ("alternating", *DEFAULT_STEPS)

#: lambda by method: small for the default solver (it only regularizes V where a column is
#: seen fewer than r times, and any larger value pulls U V towards 0 off Omega); the
#: paper's video experiment's 1e-3 for the paper's methods, whose steps were chosen with it.
DEFAULT_LAM = MappingProxyType({"alternating": 1e-6, **dict.fromkeys(DEFAULT_STEPS, 1e-3)})

#: The stopping rule's default tolerance and the default maximum passes per method.
DEFAULT_TOL = 1e-4
DEFAULT_PASSES = MappingProxyType({"alternating": 300, **dict.fromkeys(DEFAULT_STEPS, 4.0)})


class RMCResult(NamedTuple):
    """Outcome of :func:`robust_matrix_completion` (whose example shows one).

    Attributes:
      low_rank: the m x n low-rank estimate L = U V (the completed matrix without outliers).
      outliers: m x n, the outlier estimate S on the observed entries, 0 elsewhere.
      U: m x r, orthonormal columns (a point of Gr(m, r)).
      V: r x n, V_{U,S}, the closed-form minimizer for the final U and S.
      S: the outliers per observed entry (length |Omega|, in the row-major order of
        ``np.nonzero(mask)``; ``problem.rows`` / ``problem.cols`` hold their indices).
      objective: F(U, S) = f(U, S) + mu ||P_Omega(S)||_1 at the end, at the final mu
        (:func:`rproxjax.problems.rmc_objective`).
      initial_objective: F at the start, at the starting mu.
      converged: whether the stopping rule was met ("alternating": U V's relative change
        in a step at most ``tol`` with mu settled); the paper's methods run a fixed budget
        and report False.
      failed: whether the run failed: a non-finite value, or ("alternating") the safeguard
        cut the step :data:`rproxjax._tasks.rmc_alternating.MAX_CUTS` times; the paper's
        methods: the run halted or ended with F above its start.
      change: the stopping measure at the end (NaN for the paper's methods).
      steps: the steps taken ("alternating"; the optimizer's steps otherwise).
      history: the paper's methods' :class:`rproxjax.FitResult` (None for "alternating").
        ``epoch_loss`` against ``epoch_ifo`` is the curve, at the start and after each
        epoch (R-ProxSGD, R-Subgrad: one epoch per pass over Omega; R-ProxSPB: one epoch for
        the whole run; ``record_loss=True`` adds ``history.loss`` after every step). It is
        the runner's objective, F less lambda/2 ||V_{U,S}||_F^2 (the stochastic losses hold
        V fixed). ``epoch_time`` is NaN (the run is one compiled program).
      method: the method.
      eta, step_scale, u_step_scale, magnitude: the paper's methods' steps (the defaults
        resolved), U's factor (0.45 / magnitude)^2 and the data magnitude of that rule;
        for "alternating", which has no step size, ``eta`` is the safeguard's final step
        factor t (1 unless it cut the step) and the others are None.
      mu, lam, rank: the model's parameters (mu at the end).
      problem: the :class:`rproxjax.problems.RMCProblem` that was solved.
    """

    low_rank: Array
    outliers: Array
    U: Array
    V: Array
    S: Array
    objective: Array
    initial_objective: Array
    converged: bool
    failed: bool
    change: float
    steps: int
    history: FitResult | None
    method: str
    eta: float
    step_scale: float | None
    u_step_scale: float | None
    magnitude: float | None
    mu: float
    lam: float
    rank: int
    problem: problems.RMCProblem

    @property
    def gamma(self) -> float:
        """The former name of :attr:`mu` (deprecated)."""
        warnings.warn("RMCResult.gamma is deprecated and will be removed in rproxjax 0.5: "
                      "use .mu instead.", DeprecationWarning, stacklevel=2)
        return self.mu

    def __repr__(self) -> str:
        m, n = self.low_rank.shape
        return (f"RMCResult({m} x {n}, rank={self.rank}, method={self.method!r}, "
                f"objective={float(self.objective):.6g}, mu={self.mu:.3g}, "
                f"converged={self.converged}, steps={self.steps})")


def _number(name: str, value, *, low=None, high=None, low_open=False, high_open=False,
            what: str = "") -> float:
    """``value`` as a finite Python float within the bounds, else a named error."""
    if isinstance(value, bool | np.bool_) or np.ndim(value) != 0:
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}.") from None
    bad = (not np.isfinite(out)
           or (low is not None and (out <= low if low_open else out < low))
           or (high is not None and (out >= high if high_open else out > high)))
    if bad:
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return out


def _two_d(name, value):
    """``value`` (an array or a nested list) as a 2-D NumPy array, or a named error."""
    if not hasattr(value, "shape") and not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be an array (NumPy or JAX), got {type(value).__name__}.")
    _checks.refuse_masked(name, value)
    arr = np.asarray(value)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (m x n) array, got shape {arr.shape}.")
    return arr


def _matrix(M, dtype):
    """M as a NumPy array of the working dtype (float32 or float64 as JAX holds it)."""
    arr = _two_d("M", M)
    if dtype is None:
        if arr.dtype.kind in "iu":
            dtype = jnp.result_type(float)  # JAX's default float: float32, or float64 with x64
        elif arr.dtype.kind == "f":
            dtype = arr.dtype
        else:
            raise TypeError(f"M must hold real numbers (floating or integer), got dtype "
                            f"{arr.dtype}.")
    elif arr.dtype.kind not in "iuf":
        raise TypeError(f"M must hold real numbers (floating or integer), got dtype "
                        f"{arr.dtype}.")
    canonical = jax.dtypes.canonicalize_dtype(np.dtype(dtype))
    _checks.warn_if_single("M" if dtype is arr.dtype else "dtype", dtype, canonical,
                           stacklevel=3)
    dtype = canonical
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dtype} (float16 and bfloat16 "
                        "are too coarse for U^T U = I).")
    with np.errstate(over="ignore", under="ignore"):  # _observed names an overflow
        return arr.astype(dtype, copy=False), arr


def _observed(matrix, obs, given):
    """The observed entries of M (row-major), which must be finite, in the working dtype
    and as ``given`` (M before its cast to that dtype)."""
    values = matrix[obs]
    if not np.all(np.isfinite(values)):
        bad = tuple(np.argwhere(obs & ~np.isfinite(matrix))[0].tolist())
        if np.isfinite(given[bad]):
            raise ValueError(f"M's observed entry {given[bad]:.3g} (at {bad}) overflows "
                             f"{matrix.dtype}: {_hint(matrix.dtype)}.")
        raise ValueError(f"M has a NaN or infinite observed entry (at {bad}); "
                         "unobserved entries may be anything, observed ones must be finite.")
    return values, given[obs]


def _run_key(seed):
    """``seed`` as a JAX PRNG key: ``jax.random.key(seed)`` for an int, a key as it is."""
    seed_int = _checks.index_or_none(seed)
    if seed_int is not None:
        return jax.random.key(seed_int)
    if getattr(seed, "dtype", None) is None:
        raise TypeError(f"seed must be an int or a JAX PRNG key, got {seed!r}.")
    _checks.check_key("seed", seed)
    return seed


def _mask(mask, shape):
    arr = _two_d("mask", mask)
    if arr.shape != shape:
        raise ValueError(f"mask must have M's shape {shape}, got {arr.shape}.")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.all((arr == 0) | (arr == 1)):
            raise TypeError(f"mask must be boolean (or hold only 0 and 1), got dtype "
                            f"{arr.dtype}" + (" with other values." if arr.dtype.kind in "iuf"
                                              else "."))
        arr = arr != 0
    if not arr.any():
        raise ValueError("mask observes no entry: nothing to complete.")
    return arr


def _magnitude(values: np.ndarray) -> float:
    """The data's magnitude for the step rule: the median observed |M_ij| (robust to fewer
    than half of the entries being outliers); the RMS if that is 0; 1 if both are."""
    a = np.abs(values.astype(np.float64))
    median = float(np.median(a))
    if median > 0:
        return median
    top = float(np.max(a))  # the RMS, scaled so that its squares do not overflow
    rms = top * float(np.sqrt(np.mean((a / top) ** 2))) if top > 0 else 0.0
    return rms if rms > 0 else 1.0


def _hint(dtype, rescale: bool = True) -> str:
    """What to do about a value out of ``dtype``'s range: rescale M (where the value
    follows M's units), compute in float64 (from float32)."""
    hints = (["rescale M"] if rescale else ["choose another value"]) + (
        ["compute in float64"] if np.dtype(dtype) == np.float32 else [])
    return ", or ".join(hints)


def _check_magnitude(dtype, magnitude: float) -> None:
    """A ValueError where M's magnitude (the median observed |M_ij|) is outside
    [sqrt(tiny / eps), sqrt(max eps)] of ``dtype``: there the objective's squares fall below
    its normal numbers (the fit loses its precision silently) or its sums near overflow
    (float32: [3e-16, 6e15]; float64: [1e-146, 2e146])."""
    info = np.finfo(dtype)
    low = math.sqrt(float(info.tiny) / float(info.eps))
    high = math.sqrt(float(info.max) * float(info.eps))
    if not low <= magnitude <= high:
        raise ValueError(f"M's magnitude (its median observed |M_ij|) is {magnitude:.3g}, "
                         f"outside [{low:.1g}, {high:.1g}], where {np.dtype(dtype).name} "
                         f"holds the squares of the fit: {_hint(dtype)}.")


def _check_range(dtype, values, in_m_units=()) -> None:
    """A ValueError for a step size, scale or weight that ``dtype`` cannot hold: one that
    overflows it, or a nonzero one that rounds to 0 there (``in_m_units``: the names of
    those that follow M's scale)."""
    for name, value in values.items():
        with np.errstate(over="ignore", under="ignore"):
            held = np.asarray(value, dtype)
        if not np.isfinite(held) or (value != 0 and held == 0):
            raise ValueError(f"{name} = {value:.3g} is out of {np.dtype(dtype).name}'s range: "
                             f"{_hint(dtype, name in in_m_units)}.")


def _initial_u(matrix, mask, rank):
    """Top-``rank`` left singular vectors of the zero-filled observations (NumPy, as the
    experiment's ``video_problem``)."""
    return np.linalg.svd(np.where(mask, matrix, 0), full_matrices=False)[0][:, :rank]


def spb_blocks(nnz: int, budget: float, batch_fraction: float, q: int) -> tuple[int, int]:
    """(blocks, |S2|) of R-ProxSPB in a budget of ``budget`` |Omega| sample gradients: as many
    whole blocks (a refresh of |Omega| and q - 1 R-SARAH steps of 2 |S2|) as fit at
    |S2| = ``batch_fraction`` |Omega|, then |S2| raised so that they spend the budget exactly
    (to a sample's rounding). A refresh cannot be cut: at q = 5 and 10% minibatches two blocks
    would spend 3.6 |Omega| of 4, and |S2| = 12.5% makes them spend all of it."""
    batch = max(1, int(batch_fraction * nnz))
    blocks = max(1, int(budget * nnz // block_cost(q, batch, nnz)))
    if q > 1:
        batch = max(batch, int((budget * nnz / blocks - nnz) // (2 * (q - 1))))
    return blocks, batch


def _setup(method, nnz, *, budget, batch_fraction, q, gamma, eta, scale, u_scale):
    """(optimizer, fit keyword arguments, its ``sampling=`` among them): ``method_setup`` of
    ``experiments/_rmc.py`` with traced eta, S scale (times |Omega|), U scale and gamma."""
    blocks = {"U": Grassmann(step_scale=u_scale),
              "S": Euclidean(l1(gamma), step_scale=scale)}
    batch = max(1, int(batch_fraction * nnz))  # rounded down: never over the budget
    if method == "r_prox_spb":
        num_blocks, batch = spb_blocks(nnz, budget, batch_fraction, q)
        opt = r_prox_spb(eta, 1.0 / nnz, blocks=blocks, q=q)
        # every block in one epoch: one permutation, disjoint minibatches (the experiment's
        # choice; a block per epoch gave a much worse F)
        epochs, steps = 1, num_blocks * q
    else:
        steps = max(1, int(round(1.0 / batch_fraction)))  # one pass over Omega
        if method == "r_prox_sgd":
            opt = r_prox_sgd(inverse_sqrt_schedule(eta), 1.0 / nnz,
                                      blocks=blocks)
        else:
            opt = r_subgrad(inverse_sqrt_schedule(eta / nnz), blocks=blocks)
        epochs = max(1, int(round(budget)))
    return opt, dict(batch_size=batch, num_epochs=epochs, batched_loss=True,
                     sampling=Sampling(steps_per_epoch=steps, chunk_size=nnz))


@functools.lru_cache(maxsize=1)
def _progress_hub() -> RelayHub:
    """The hub that routes the epochs of :func:`_solve`'s compiled runs to the monitors of
    the calls running them (each call has its own token): made on first use, and one, since
    the relays it hands out are part of the compiled programs' key."""
    return RelayHub()


@functools.partial(_compile.jit, options=_compile.TASK_COMPILER_OPTIONS,
                   static_argnames=("method", "m", "n", "budget", "batch_fraction", "q",
                                    "record_loss", "progress"))
def _solve(eta, scale, u_scale, gamma, rows, cols, values, lam, u0, key, relay=None, *, method,
           m, n, budget, batch_fraction, q, record_loss, progress=False):
    """The whole run, V, L and F as one compiled program (cached per shape and settings)."""
    prob = problems.RMCProblem(rows, cols, values, lam, m, n)
    nnz = values.shape[0]
    opt, kw = _setup(method, nnz, budget=budget, batch_fraction=batch_fraction, q=q,
                     gamma=gamma, eta=eta, scale=scale, u_scale=u_scale)
    params = {"U": u0, "S": jnp.zeros(nnz, u0.dtype)}
    res = pure_fit(opt, lambda p, b: problems.rmc_batch_loss(p, b, prob), params,
                   jnp.arange(nnz), key=key, **kw,
                   recording=Recording(loss=record_loss, callback=relay if progress else None))
    u, s = res.params["U"], res.params["S"]
    v = problems.rmc_v(u, s, prob)
    low_rank = mm(u, v)
    outliers = jnp.zeros((m, n), u.dtype).at[rows, cols].set(s)
    return (res, v, low_rank, outliers, problems.rmc_objective(res.params, prob, gamma),
            problems.rmc_objective(params, prob, gamma))


def robust_matrix_completion(M: ArrayLike, mask: ArrayLike, rank: int, *,
                             mu: float | None = None, lam: float | None = None,
                             method: str = "alternating", passes: float | None = None,
                             tol: float = DEFAULT_TOL, batch_fraction: float = 0.1, q: int = 5,
                             eta: float | None = None, step_scale: float | None = None,
                             magnitude: float | None = None, seed: int | PRNGKey = 0,
                             dtype: DTypeLike | None = None, record_loss: bool = False,
                             throw: bool = True, progress: bool = False,
                             **deprecated: Any) -> RMCResult:
    r"""Robust low-rank matrix completion: a low-rank L = U V plus sparse outliers S fitting the
    observed entries of M (the paper's model).

    With Omega the observed entries (``mask``), U on the Grassmann manifold Gr(m, r) and S
    one value per observed entry, it minimizes

    .. math::
        F(U, S) = f(U, S) + \mu \|P_\Omega(S)\|_1,\qquad
        f(U, S) = \min_V \tfrac12 \|P_\Omega(U V - M + S)\|^2 + \tfrac\lambda2 \|V\|^2
                  - \tfrac\lambda2 \|P_\Omega(U V)\|^2,

    V = V_{U,S} (r x n) eliminated in closed form column by column
    (:func:`rproxjax.problems.rmc_v`): lambda weighs the unobserved entries of U V. For a
    fixed L, the best S is the soft-thresholding of the residual at mu: the fit is Huber's
    loss of M - L with threshold mu. Every product runs at full precision, in M's floating
    dtype (or ``dtype``); float64 needs ``jax_enable_x64``, which this function never sets.

    Default (``method="alternating"``): no step size. Each step sets S to its exact
    minimizer (the proximal step at S's curvature), V to its closed form, and moves U by the
    row-wise Newton step at fixed V projected on the Grassmann manifold (a preconditioned
    Riemannian gradient step: alternating minimization); compiled chunks of 10 steps run
    until U V's relative change on Omega in a step is at most ``tol`` with mu settled, or
    ``passes`` steps (rounded up to whole chunks) are spent. A safeguard undoes a chunk that
    raised F (at a fixed mu) and halves the step. Start: the entries far from the bulk
    (robust z-score above 3) set aside as outliers, U the top-``rank`` left singular vectors
    of the others, zero-filled. ``mu=None`` reads the outlier weight off the residuals:
    Huber's threshold 1.345 sigma, sigma = 1.4826 median |M - U V| over Omega (the MAD
    scale), re-estimated after each chunk, never raised and falling at most by half a chunk,
    down to the noise level (or to ``max(100 lam, sqrt(eps))`` times the median observed
    |M_ij| on exactly low-rank data). Where one value holds at least a quarter of the
    observed entries (zero pixels, zero counts, rows of zeros), the start's z-scores and
    sigma are read off the other observed entries: such a point mass pulls every MAD
    towards 0. Scaling M by c scales L,
    S and mu by c and changes nothing else.

    The paper's methods (``method="r_prox_spb"``, ``"r_prox_sgd"``, ``"r_subgrad"``) run a
    fixed budget of ``passes`` |Omega| stochastic gradients with minibatches of
    ``batch_fraction`` |Omega| entries, as in its video experiment (``experiments/``,
    "rmc-video"), in one compiled program. ``mu=None`` there is the rule above at the start,
    held fixed. ``eta`` is the step in units of 1 / |Omega| (the proximal step is
    1 / |Omega|; R-ProxSGD and R-Subgrad decay it as eta / sqrt(t + 1)) and ``step_scale``
    the S block's step relative to U's, in units of |Omega|. Default: the points the
    experiment chose on the shipped video (:data:`DEFAULT_STEPS`), with U's step multiplied
    by (0.45 / a)^2, a the data's magnitude (the median observed |M_ij|, or ``magnitude``).
    Each step of these methods computes V_{U,S} over all of Omega, so a stochastic step
    costs about as much as a full one here: the default solver reaches a far lower F in
    the same time.

    Args:
      M: m x n array-like (NumPy or JAX) of floats; integers are converted to JAX's default
        float dtype (float32, or float64 with x64). Only the observed entries are read (the
        others may be NaN).
      mask: m x n boolean array-like (or 0/1 numbers), True on the observed entries Omega.
      rank: r, an int with 1 <= r < min(m, n).
      mu: the l1 weight of the outliers (>= 0, in the units of M): the residual beyond which
        an entry counts as an outlier. ``None``: read off the residuals (above).
      lam: lambda in (0, 1), the weight of the unobserved entries' fit; ``None``: 1e-6 for
        "alternating", the experiment's 1e-3 for the paper's methods (:data:`DEFAULT_LAM`).
      method: "alternating" (the default), "r_prox_spb" (R-ProxSPB, the paper's Algorithm
        2, |S1| = |Omega| every ``q`` steps), "r_prox_sgd" (R-ProxSGD, Algorithm 1) or
        "r_subgrad" (the Riemannian subgradient baseline).
      passes: "alternating": the most steps (each reads Omega about three times; default
        300); the paper's methods: the budget in units of |Omega| stochastic gradients
        (default 4; R-ProxSGD and R-Subgrad run round(passes) passes, R-ProxSPB whole
        blocks whose |S2| is set to spend it exactly, :func:`spb_blocks`).
      tol: "alternating"'s stopping tolerance on U V's relative change in a step (> 0).
      batch_fraction: the paper's methods' minibatch size / |Omega|, in (0, 1].
      q: R-ProxSPB's refresh period (an int >= 2).
      eta, step_scale: the paper's methods' steps (> 0; see above); ``None``: defaults.
      magnitude: the data magnitude a of the paper's methods' step rule (> 0); ``None``:
        the median observed |M_ij| (their RMS if that is 0).
      seed: an int, or a JAX PRNG key: the start's random projection and the minibatches.
      dtype: float32 or float64 to compute in instead of M's dtype.
      record_loss: the paper's methods: also record F after every step
        (``history.history.loss``; one more pass over Omega per step).
      throw: raise a RuntimeError (the result as ``err.result``) when the run failed
        (non-finite values; "alternating": the safeguard cut the step 10 times; the paper's
        methods: the run halted or ended with F above its start), and warn
        (``RuntimeWarning``) when "alternating" did not converge within ``passes``.
        ``False``: neither; read ``converged`` and ``objective``.
      progress: report the run on stderr: a line before a first call compiles (new shapes
        or settings), then "alternating" a line per chunk, the paper's methods a progress
        bar over their epochs (as in :func:`rproxjax.fit`).
      **deprecated: ``gamma`` (now ``mu``), ``budget`` (now ``passes``) and ``key`` (now
        ``seed``), with a DeprecationWarning, until rproxjax 0.5.

    Returns:
      An :class:`RMCResult`: ``low_rank`` (U V), ``outliers`` (S on Omega, 0 elsewhere),
      ``U``, ``V``, ``S`` (per observed entry), ``objective``, ``converged``, ``change``,
      ``steps``, ``mu`` and the settings used.

    Raises:
      TypeError: M or mask is not an array of numbers (mask: not boolean or 0/1), a
        parameter is not a number, ``dtype`` is not float32/float64, ``seed`` is neither
        an int nor a key, an unknown keyword.
      ValueError: M or mask is not 2-D, their shapes differ, an observed entry is NaN or
        infinite, the mask is empty, ``rank`` is not an int in [1, min(m, n)), mu < 0,
        lam is not in (0, 1), the method is unknown, passes, tol, a batch fraction, q or
        a step is out of range, or M's magnitude (outside [3e-16, 6e15] in float32, [1e-146,
        2e146] in float64), an entry, a step size, scale, mu or lam is out of the dtype's
        range.
      RuntimeError: ``throw=True`` and the run failed (see ``throw``).

    Example:
        >>> import numpy as np
        >>> from rproxjax import robust_matrix_completion
        >>> rng = np.random.default_rng(0)
        >>> low = rng.standard_normal((60, 2)) @ rng.standard_normal((2, 40))  # rank 2
        >>> spikes = (rng.random((60, 40)) < 0.05) * 10.0                   # outliers
        >>> mask = rng.random((60, 40)) < 0.6                               # 60% observed
        >>> res = robust_matrix_completion(np.float32(low + spikes), mask, rank=2)
        >>> res.converged, res.low_rank.shape, res.low_rank.dtype
        (True, (60, 40), dtype('float32'))
        >>> bool(np.linalg.norm(res.low_rank - low) < 1e-3 * np.linalg.norm(low))
        True
        >>> bool(np.all(res.outliers[~mask] == 0))
        True
    """
    mu, passes, seed = _renamed(deprecated, mu, passes, seed)
    matrix, given = _matrix(M, dtype)
    obs = _mask(mask, matrix.shape)
    m, n = matrix.shape
    r = _rank(rank, matrix.shape)
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {_METHODS}.")
    mu = None if mu is None else _number("mu", mu, low=0.0, what="a finite number >= 0")
    lam = DEFAULT_LAM[method] if lam is None else _number(
        "lam", lam, low=0.0, high=1.0, low_open=True, high_open=True, what="in (0, 1)")
    passes = DEFAULT_PASSES[method] if passes is None else _number(
        "passes", passes, low=0.0, low_open=True, what="a number > 0")
    tol = _number("tol", tol, low=0.0, low_open=True, what="a number > 0")
    batch_fraction = _number("batch_fraction", batch_fraction, low=0.0, high=1.0,
                             low_open=True, what="in (0, 1]")
    q_int = _refresh_period(q)
    values, given_values = _observed(matrix, obs, given)
    key = _run_key(seed)
    check_progress(progress)
    a = _magnitude(given_values)
    _check_magnitude(matrix.dtype, a)  # before the cast's rounding
    if method == "alternating":
        _refuse_step_options(eta=eta, step_scale=step_scale, magnitude=magnitude,
                             record_loss=record_loss or None)
    with compile_watch(bool(progress), f"robust_matrix_completion ({method})"):
        if method == "alternating":
            result = _alternating(matrix, obs, r, mu=mu, lam=lam, passes=passes, tol=tol,
                                  key=key, magnitude=a, progress=bool(progress))
        else:
            result = _paper_method(matrix, obs, values, r, method=method, mu=mu, lam=lam,
                                   passes=passes, batch_fraction=batch_fraction, q=q_int,
                                   eta=eta, step_scale=step_scale, magnitude=magnitude,
                                   key=key, record_loss=record_loss, progress=bool(progress))
    if throw:
        _raise_if_failed(result)
    return result


def _refuse_step_options(**given) -> None:
    """A ValueError for an option of the paper's methods given to "alternating" (which has
    no step size and records no curve), where it would be ignored silently."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(f"{name}= applies to the paper's methods (method='r_prox_spb', "
                             f"'r_prox_sgd' or 'r_subgrad'); the default method "
                             "'alternating' takes no step size: drop it or choose a method.")


def _renamed(given: dict, mu, passes, seed):
    """(mu, passes, seed) with the former names ``gamma``, ``budget`` and ``key`` taken (a
    DeprecationWarning each); a TypeError for any other keyword."""
    unknown = sorted(set(given) - {"gamma", "budget", "key"})
    if unknown:
        raise TypeError(f"robust_matrix_completion() got an unexpected keyword argument "
                        f"{unknown[0]!r}.")
    out = {"mu": mu, "passes": passes, "seed": seed}
    for old, new in (("gamma", "mu"), ("budget", "passes"), ("key", "seed")):
        if old in given:
            warnings.warn(f"robust_matrix_completion({old}=) is deprecated and will be removed "
                          f"in rproxjax 0.5: use {new}= instead.", DeprecationWarning,
                          stacklevel=3)
            if given[old] is not None:
                out[new] = given[old]
    return out["mu"], out["passes"], out["seed"]


def _start_mu(matrix, obs, rank, lam, key, dtype) -> float:
    """The residuals' rule at the start (:mod:`rmc_alternating`), for the paper's methods."""
    d = _observed_dense(matrix, obs, lam, dtype)
    first = _alt.start(d, key, rank=rank, count=int(obs.sum()))
    return _alt.HUBER * float(first.scale)


def _observed_dense(matrix, obs, lam, dtype):
    host = functools.partial(_checks.as_dtype, dtype=dtype)
    scaled = _alt.scale_entries(matrix, obs)
    return _alt.Observed(host(obs), host(np.where(obs, matrix, 0)), host(lam),
                         None if scaled is None else jnp.asarray(scaled))


def _alternating(matrix, obs, r, *, mu, lam, passes, tol, key, magnitude, progress):
    """The default solver (:mod:`rproxjax._tasks.rmc_alternating`) and its result."""
    wdt = matrix.dtype
    eps = float(np.finfo(wdt).eps)
    floor = max(100 * lam, math.sqrt(eps)) * magnitude
    _check_range(wdt, {"mu": mu or 0.0, "lam": lam, "the floor of mu": floor},
                 in_m_units=("mu", "the floor of mu"))
    d = _observed_dense(matrix, obs, lam, wdt)
    report = _chunk_line if progress else None
    out = _alt.solve(d, key, rank=r, count=int(obs.sum()), mu=mu, floor=floor, tol=tol,
                     max_steps=max(1, math.ceil(passes)), report=report)
    prob = problems.rmc_problem(matrix, obs, lam=lam)
    v, low_rank, s = _alt.finish(out.u, out.s, d, prob.rows, prob.cols)
    objective, initial = (jnp.asarray(f, wdt) for f in (out.objective, out.initial_objective))
    return RMCResult(low_rank, out.s, out.u, v, s, objective, initial,
                     out.converged, out.failed or not np.isfinite(out.objective),
                     out.change, out.steps, None, "alternating",
                     out.step_factor, None, None, None, out.mu, lam, r, prob)


def _chunk_line(steps: int, change: float, mu: float, objective: float) -> None:
    print(f"robust_matrix_completion: step {steps}, F {objective:.6g}, mu {mu:.3g}, "
          f"change {change:.2e}", file=sys.stderr, flush=True)


def _paper_method(matrix, obs, values, r, *, method, mu, lam, passes, batch_fraction, q, eta,
                  step_scale, magnitude, key, record_loss, progress):
    """One of the paper's methods at a fixed budget, as in the video experiment."""
    wdt = matrix.dtype
    magnitude_given = magnitude is not None
    magnitude, u_scale, eta, step_scale = _step_rule(method, values, magnitude, eta,
                                                     step_scale)
    if mu is None:
        mu = _start_mu(matrix, obs, r, lam, key, wdt)
    prob = problems.rmc_problem(matrix, obs, lam=lam)
    nnz = int(values.size)
    u0 = _initial_u(matrix, obs, r)
    u_name = "U's step scale (0.45 / magnitude)^2"
    _check_range(wdt, {"eta": eta, "step_scale x |Omega|": step_scale * nnz, u_name: u_scale,
                       "mu": mu, "lam": lam},
                 in_m_units=("mu",) if magnitude_given else (u_name, "mu"))
    with _progress_hub().watch(nnz, progress) as relay:
        host = functools.partial(_checks.as_dtype, dtype=wdt)  # transfers: compile nothing
        res, v, low_rank, outliers, objective, objective0 = _solve(
            host(eta), host(step_scale * nnz), host(u_scale), host(mu),
            prob.rows, prob.cols, prob.values, prob.lam, host(u0), key,
            relay if progress else None, method=method, m=matrix.shape[0], n=matrix.shape[1],
            budget=passes,
            batch_fraction=batch_fraction, q=q, record_loss=bool(record_loss),
            progress=progress)
    failed = _paper_failure(res, objective, objective0) is not None
    return RMCResult(low_rank, outliers, res.params["U"], v, res.params["S"], objective,
                     objective0, False, failed, math.nan, len(res.history.halted), res, method,
                     float(eta),
                     float(step_scale), u_scale, magnitude, mu, lam, r, prob)


def _rank(rank, shape) -> int:
    """``rank`` as an int in [1, min(m, n)), or a named error (M below 2 x 2 has none)."""
    r = _checks.index_or_none(rank)
    if r is None:
        raise TypeError(f"rank must be an int, got {rank!r}.")
    if min(shape) < 2:
        raise ValueError(f"M must have at least 2 rows and 2 columns (a rank r needs "
                         f"1 <= r < min(m, n)), got shape {shape}.")
    if not 1 <= r < min(shape):
        raise ValueError(f"rank must be an int in [1, min(m, n)) = [1, {min(shape)}), got "
                         f"{rank!r}.")
    return r


def _step_rule(method, values, magnitude, eta, step_scale):
    """(magnitude, U's step scale (a_0 / magnitude)^2, eta, step_scale): the given values
    checked, the method's defaults (:data:`DEFAULT_STEPS`) and the data's magnitude
    (:func:`_magnitude` of the observed ``values``) for those not given. A scale that
    overflows is inf, refused with the others by :func:`_check_range`."""
    magnitude = (_magnitude(values) if magnitude is None else
                 _number("magnitude", magnitude, low=0.0, low_open=True, what="a number > 0"))
    try:
        u_scale = (REFERENCE_MAGNITUDE / magnitude) ** 2
    except OverflowError:
        u_scale = math.inf
    eta0, scale0 = DEFAULT_STEPS[method]
    eta = eta0 if eta is None else _number("eta", eta, low=0.0, low_open=True,
                                           what="a number > 0")
    step_scale = (scale0 if step_scale is None else
                  _number("step_scale", step_scale, low=0.0, low_open=True,
                          what="a number > 0"))
    return magnitude, u_scale, eta, step_scale


def _refresh_period(q) -> int:
    """R-ProxSPB's q as an int >= 2 (a TypeError for a non-integer)."""
    q_int = _checks.index_or_none(q)
    if q_int is None:
        raise TypeError(f"q must be an int, got {q!r}.")
    if q_int < 2:
        raise ValueError(f"q must be an int >= 2, got {q!r}.")
    return q_int


def _raise_if_failed(result: RMCResult) -> None:
    """``throw=True``: a failed run is an error (the result attached); "alternating"
    unconverged, a RuntimeWarning."""
    if result.method == "alternating":
        if result.failed:
            f_end = float(result.objective)
            why = (f"the final objective is {f_end}" if not np.isfinite(f_end) else
                   f"every step raised F (the step cut to {result.eta:g}), mu {result.mu:.3g}")
            _raise(result, f"robust_matrix_completion: {why}; M's observed entries may be "
                   "too far apart for its dtype: compute in float64 (dtype=np.float64), or "
                   "pass throw=False to get the result anyway.")
        if not result.converged:
            warnings.warn(f"robust_matrix_completion did not converge in {result.steps} steps "
                          f"(U V's last relative change {result.change:.2e} > tol, or mu "
                          f"{result.mu:.3g} still falling): pass a larger passes=, or "
                          "throw=False to silence this.", RuntimeWarning, stacklevel=3)
        return
    why = _paper_failure(result.history, result.objective, result.initial_objective)
    if why is None:
        return
    _raise(result,
           f"robust_matrix_completion ({result.method}, eta {result.eta:g}, step_scale "
           f"{result.step_scale:g}): {why}; the step is too large for this data: pass a "
           "smaller eta (or step_scale), use the default method (method='alternating', "
           "which needs no step size), or throw=False to get the result anyway.")


def _paper_failure(history: FitResult, objective, initial_objective) -> str | None:
    """Why a run of the paper's methods failed (it halted, or ended non-finite or above
    its start), or None."""
    halted = np.asarray(history.history.halted)
    f_end, f_start = float(objective), float(initial_objective)
    if halted.any():
        return (f"the run halted at step {int(np.argmax(halted))} (a non-finite gradient, "
                "subproblem or objective)")
    if not np.isfinite(f_end):
        return f"the final objective is {f_end}"
    if f_end > f_start:
        return f"the objective rose from {f_start:.6g} to {f_end:.6g}"
    return None


def _raise(result: RMCResult, message: str) -> None:
    err = RuntimeError(message)
    err.result = result
    raise err
