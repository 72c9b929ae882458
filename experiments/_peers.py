"""Peer methods for the online sparse PCA comparison: SPAMS and scikit-learn.

Both peers are run on a data matrix ``data`` of shape ``(n, d)`` (rows are samples; already
centred) for ``r`` components. Each ``run_*`` function returns ``(summary, x)``: a plain-JSON
summary dict and the ``(d, r)`` float64 loadings ``x``. The summary holds ``method``,
``penalty``, ``config`` (one line saying exactly how the peer was called), ``wall_time``
(``time.perf_counter`` around the fit call only; data preparation, e.g. the shuffle and the
Fortran copy for SPAMS, is excluded), ``ifo`` (samples consumed, as best known) and the
:func:`loadings_metrics` of ``x``.

**SPAMS** (``spams.trainDL``; Mairal, Bach, Ponce and Sapiro, JMLR 2010, "Online learning for
matrix factorization and sparse coding", the sparse PCA extension). It learns a dictionary
``D`` (``d x r``) by online block-coordinate descent on

    min_D  E_x [ min_alpha 1/2 ||x - D alpha||_2^2 + lambda2/2 ||alpha||_2^2 ]
    s.t.   ||d_j||_2^2 + gamma1 ||d_j||_1 <= 1  for every column j,

i.e. the *dictionary elements* are sparse (they are the loadings, ``x = D``) and the codes are
only ridge-regularised (no sparsity on alpha: that is what makes it sparse PCA rather than
sparse coding with a sparse dictionary). The call is::

    spams.trainDL(X, K=r, mode=2, lambda1=0.0, lambda2=lambda2, modeD=1, gamma1=penalty,
                  gamma2=0.0, posAlpha=False, posD=False, batchsize=batch_size,
                  iter=budget_ifo // batch_size, numThreads=1, clean=True, verbose=False)

with ``X = np.asfortranarray(data[perm].T)`` (float64, ``d x n``) and
``perm = np.random.default_rng(seed).permutation(n)``. Why each setting:

* ``mode=2`` (``PENALTY``) with ``lambda1=0`` and ``lambda2 > 0`` is the case SPAMS special-cases
  ("L2 solver is used"): each code is the ridge solution ``(D^T D + lambda2 I)^-1 D^T x``
  computed by conjugate gradient, dense in alpha. With ``lambda1 > 0`` the codes become Lasso
  solutions (sparse coding with a sparse dictionary, not sparse PCA). On centred MNIST,
  ``lambda1 = 0.1`` behaves much like the ridge codes but is about twice as slow,
  ``lambda1 = 1`` makes the columns nearly collinear, and ``lambda1 = 5`` zeroes all codes, so
  ``clean`` zeroes every column.
* ``lambda2`` fixes the scale: with ``lambda2 = 0`` the objective is invariant to shrinking a
  column, and any direction fits in the elastic-net ball once scaled down. Then ``gamma1`` only
  shrinks the columns (norm about 0.035 at ``gamma1 = 2``) and, once normalised, they stay dense
  (about 4,790 of 7,840 entries above 1e-3, as dense as PCA). With ``lambda2 > 0`` a smaller
  column costs ridge penalty, which gives the fit-versus-sparsity trade-off. ``lambda2`` does
  not depend on the data scale (scaling ``x`` scales the whole objective) but is measured
  against ``||d_j||^2 <= 1``. Default ``SPAMS_LAMBDA2 = 0.1``: on centred MNIST,
  ``lambda2`` = 0.01 and 0.1 give the same adjusted variance at equal sparsity;
  ``lambda2 >= 1`` collapses the dense end onto near-duplicate columns
  (``||X_n^T X_n - I||_F`` of 1.4 to 4.6), and 0.1 keeps the sparse end nearly orthogonal.
* ``modeD=1`` (``L1L2``) is the constraint above; ``gamma1`` is ``penalty``. The projection
  onto that ball soft-thresholds, so the loadings have exact zeros. Columns are NOT unit norm
  (they lie on the ball's boundary: ``||d||_2^2 + gamma1 ||d||_1 = 1``); use the normalised
  metrics.
* ``iter = budget_ifo // batch_size`` mini-batches of ``batchsize`` samples each, so SPAMS
  reads ``iter * batch_size`` samples (plus ``r`` samples to initialise ``D`` and a few more if
  ``clean`` replaces a degenerate column). A positive ``iter`` is a count (a negative one would
  be a time limit in seconds).
* Order and seed: SPAMS has no seed parameter; it calls ``srandom(0)`` and walks one fixed
  random permutation of the columns cyclically (``perm[(j + i * batchsize) % n]``), and
  initialises ``D`` with columns drawn by ``random() % n``. Shuffling the columns once with
  ``seed`` before the call makes the visiting order and the initial dictionary depend on
  ``seed`` (and only on it).
* ``numThreads=1``: deterministic, and fair against single-process peers on a shared machine.
* ``clean=True`` (the default): before each mini-batch, columns that are nearly collinear with
  another or have ``||d_j||^2 < 1e-4`` are replaced by a (projected) random sample.

**scikit-learn** (``sklearn.decomposition.MiniBatchSparsePCA``, 1.9 API). The call is::

    MiniBatchSparsePCA(n_components=r, alpha=penalty, batch_size=batch_size,
                       max_iter=max(1, (budget_ifo - overheads) // n), tol=0.0,
                       max_no_improvement=None, shuffle=True, method="lars",
                       random_state=seed).fit(data)

and ``x = components_.T`` (unit-norm columns, or zero columns). Caveats, read from the
installed source (``sklearn/decomposition/_sparse_pca.py`` and ``_dict_learning.py``):

* It is *not* online over samples: it fits ``MiniBatchDictionaryLearning`` to ``data.T``, so the
  mini-batches are ``batch_size`` *features* (pixels, each an n-vector), the dictionary atoms
  are ``r`` unit-norm score vectors in R^n and the sparse codes (Lasso with ``alpha``) are the
  loadings. ``max_iter`` counts passes over the ``d`` features, ``ceil(d / batch_size)``
  mini-batches each; one pass touches every entry of ``data`` once, i.e. costs ``n`` sample
  oracles.
* Early stopping is switched off (``tol=0.0``, ``max_no_improvement=None``) so that the whole
  budget is spent, as for SPAMS.
* Overheads besides ``max_iter``: the dictionary is initialised with a randomized SVD of the
  whole data (``n_iter='auto'`` gives 7 power iterations for ``r < 0.1 * min(n, d)``, i.e.
  ``2 * 7 + 2 = 16`` passes, 4 iterations and 10 passes otherwise), i.e. a PCA warm start, and
  after fitting the components are recomputed by one Lasso pass over all features. These
  ``overheads`` (17 n with 7 power iterations) count within the budget: ``max_iter`` is the
  number of whole passes left, so ``ifo`` (all of it) is at most ``budget_ifo`` whenever
  ``budget_ifo >= overheads + n``; below that one pass still runs and ``over_budget`` is
  true. ``ifo_fit`` counts only the mini-batch passes. (On MNIST, n = 20,000, at R-ProxSPB's
  budget of 19.9 n this leaves 2 passes; the warm start is kept, as the class does it.)
* ``alpha`` scales with the feature norms, i.e. like ``sqrt(n)`` for a fixed distribution: a
  grid tuned at one ``n`` must be rescaled by about ``sqrt(n_new / n)`` at another (checked:
  ``alpha = 10`` at n = 20,000 and ``alpha = 18.7`` at n = 70,000 both give about 650 nonzeros).
* Its ``alpha`` penalises all loadings jointly, so at the sparse end whole components die:
  on MNIST (n = 20,000, r = 10) ``alpha`` = 33, 35, 40 leave 2, 4, 7 zero columns.

**Threads.** Both fits run with every BLAS/OpenMP pool capped at one thread (``threadpoolctl``,
argument ``blas_threads=1``). On a 2-core machine shared with other work, OpenBLAS with 2
threads took about 0.6 s instead of 3 ms for scikit-learn's ``(r x n) @ (n x batch)`` products,
which made one ``MiniBatchSparsePCA`` fit take 70 s instead of 10 s, with identical results.

**Penalty grids** (centred MNIST, r = 10, batch 100, budget 10 n, seed 0; n = 20,000 data
points drawn with ``load_mnist(20000, seed=0)``). Even PCA has only about 4,900 of 7,840
loadings above 1e-3, since 88 pixels are constant in that subset. :data:`SPAMS_GAMMA1_GRID`
spans 4,796 to 49 nonzeros up to 3.0 (``gamma1`` does not depend on ``n``; 5.0 and 8.0 gave
21 and 10, one per column, at seed 100).
:data:`SKLEARN_ALPHA_GRID_N20000` spans 4,710 to 45 nonzeros, the last two points with dead
components; multiply it by ``sqrt(n / 20000)`` for another ``n``.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

__all__ = [
    "NONZERO_TOL",
    "SKLEARN_ALPHA_GRID_N20000",
    "SPAMS_GAMMA1_GRID",
    "SPAMS_LAMBDA2",
    "loadings_metrics",
    "run_sklearn",
    "run_spams",
]

NONZERO_TOL = 1e-3
"""Entries with ``|x_ij| > NONZERO_TOL`` count as nonzeros."""

SPAMS_LAMBDA2 = 0.1
"""Default ridge weight on the SPAMS codes (chosen on centred MNIST; see the module docstring)."""

SPAMS_GAMMA1_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0)
"""SPAMS ``gamma1`` values from dense to very sparse (with ``lambda2 = SPAMS_LAMBDA2``)."""

SKLEARN_ALPHA_GRID_N20000 = (0.1, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 25.0, 30.0, 33.0, 35.0)
"""``MiniBatchSparsePCA`` ``alpha`` values from dense to very sparse at n = 20,000 (scale by
``sqrt(n / 20000)`` for other ``n``)."""


def _as_data(data) -> np.ndarray:
    """``data`` as a 2-D float64 NumPy array (no copy when it already is one)."""
    a = np.asarray(data, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"data must be a 2-D (n, d) array, got shape {a.shape}")
    return a


def _check_common(data: np.ndarray, r: int, budget_ifo: int, batch_size: int) -> None:
    """Validate the arguments shared by the runners."""
    n, d = data.shape
    if not 1 <= int(r) <= min(n, d):
        raise ValueError(f"r must be in [1, min(n, d)] = [1, {min(n, d)}], got {r}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if int(budget_ifo) < 1:
        raise ValueError(f"budget_ifo must be >= 1, got {budget_ifo}")


def loadings_metrics(x, data) -> dict:
    """Quality and sparsity of loadings ``x`` (``d x r``) on ``data`` (``n x d``, centred).

    With ``A = data.T`` (``d x n``) and ``X_n`` the columns of ``x`` scaled to unit 2-norm,
    all-zero columns dropped:

    * ``explained_variance``: ``tr(X^T A A^T X) / tr(X^T X) / ||A||_F^2`` (the paper's metric
      divided by the total variance). For orthonormal ``X`` this is the explained fraction
      divided by ``r`` (a per-component average), and correlated columns can push it above
      the PCA value; ``adjusted_variance`` is the fair cumulative measure.
    * ``adjusted_variance``: Zou-Hastie-Tibshirani adjusted variance for correlated loadings,
      ``sum_j R_jj^2 / ||A||_F^2`` with ``Y = A^T X_n = Q R`` (thin QR).
    * ``nonzeros``: count of ``|x_ij| > NONZERO_TOL`` on ``x`` as given (scale dependent).
    * ``nonzeros_normalized``: the same count on the column-normalised loadings.
    * ``orthonormality``: ``||X_n^T X_n - I||_F``.
    * ``zero_columns``: number of columns of ``x`` that are exactly zero.

    Args:
        x: loadings, shape ``(d, r)``.
        data: data matrix, shape ``(n, d)``.

    Returns:
        A dict of plain Python floats and ints (the keys above, plus ``total_variance``,
        ``||A||_F^2``).
    """
    a = _as_data(data)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != a.shape[1]:
        raise ValueError(f"x must have shape (d, r) with d = {a.shape[1]}, got {x.shape}")
    total = float(np.sum(a * a))
    norms = np.linalg.norm(x, axis=0)
    keep = norms > 0
    xn = x[:, keep] / norms[keep]
    ax = a @ x  # A^T X, (n, r)
    fro2 = float(np.sum(x * x))
    explained = float(np.sum(ax * ax)) / fro2 / total if fro2 > 0 and total > 0 else 0.0
    if xn.shape[1] > 0 and total > 0:
        r_factor = np.linalg.qr(ax[:, keep] / norms[keep], mode="r")
        adjusted = float(np.sum(np.diag(r_factor) ** 2)) / total
    else:
        adjusted = 0.0
    gram = xn.T @ xn
    return {
        "explained_variance": explained,
        "adjusted_variance": adjusted,
        "nonzeros": int(np.count_nonzero(np.abs(x) > NONZERO_TOL)),
        "nonzeros_normalized": int(np.count_nonzero(np.abs(xn) > NONZERO_TOL)),
        "orthonormality": float(np.linalg.norm(gram - np.eye(gram.shape[0]))),
        "zero_columns": int(np.count_nonzero(~keep)),
        "total_variance": total,
    }


def _blas_limit(blas_threads: int | None):
    """Context manager capping the BLAS/OpenMP thread pools (all loaded libraries) at a count."""
    if blas_threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(blas_threads))


def run_spams(
    data,
    *,
    r: int,
    penalty: float,
    budget_ifo: int,
    batch_size: int = 100,
    seed: int = 0,
    lambda2: float = SPAMS_LAMBDA2,
    num_threads: int = 1,
    blas_threads: int | None = 1,
) -> tuple[dict, np.ndarray]:
    """SPAMS online dictionary learning in its sparse PCA mode (see the module docstring).

    Args:
        data: ``(n, d)`` data matrix (rows are samples, centred).
        r: number of components (dictionary size ``K``).
        penalty: ``gamma1``, the l1 weight in the column constraint
            ``||d_j||_2^2 + gamma1 ||d_j||_1 <= 1`` (0 gives dense loadings).
        budget_ifo: number of samples to consume; ``iter = budget_ifo // batch_size``.
        batch_size: samples per mini-batch (SPAMS ``batchsize``).
        seed: seeds the one-off column shuffle that fixes SPAMS's visiting order and
            initial dictionary (SPAMS itself always uses ``srandom(0)``).
        lambda2: ridge weight on the codes (``mode=2``, ``lambda1=0``).
        num_threads: SPAMS ``numThreads``.
        blas_threads: cap on the BLAS/OpenMP threads during the fit (``threadpoolctl``);
            None leaves them alone.

    Returns:
        ``(summary, x)``: the JSON-ready summary dict and the ``(d, r)`` loadings ``D``.
    """
    import spams

    a = _as_data(data)
    _check_common(a, r, budget_ifo, batch_size)
    n, _ = a.shape
    iters = max(1, int(budget_ifo) // int(batch_size))
    perm = np.random.default_rng(seed).permutation(n)
    xf = np.asfortranarray(a[perm].T)
    kwargs = {
        "K": int(r),
        "mode": 2,
        "lambda1": 0.0,
        "lambda2": float(lambda2),
        "modeD": 1,
        "gamma1": float(penalty),
        "gamma2": 0.0,
        "posAlpha": False,
        "posD": False,
        "batchsize": int(batch_size),
        "iter": iters,
        "numThreads": int(num_threads),
        "clean": True,
        "verbose": False,
    }
    with _blas_limit(blas_threads):
        start = time.perf_counter()
        d_mat = spams.trainDL(xf, **kwargs)
        wall = time.perf_counter() - start
    x = np.array(d_mat, dtype=np.float64, order="C")
    call = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    summary = {
        "method": "SPAMS",
        "penalty": float(penalty),
        "config": (
            f"spams.trainDL(X, {call}) on X = data[perm].T (Fortran float64, d x n), "
            f"perm = default_rng({seed}).permutation({n}); BLAS threads capped at {blas_threads}"
        ),
        "wall_time": wall,
        "ifo": iters * min(int(batch_size), n),
        **loadings_metrics(x, a),
    }
    return summary, x


def _sklearn_fit_ifo(est, n, d, batch_size, max_iter) -> int:
    """Sample-oracle accounting of a fitted ``MiniBatchSparsePCA``: one pass over all d
    features = n samples. The mini-batches cycle through ceil(d / bsz) slices of the
    shuffled features, the last one shorter."""
    bsz = min(int(batch_size), d)
    per_pass = -(-d // bsz)
    steps = int(getattr(est, "n_steps_", max_iter * per_pass))
    visits = (steps // per_pass) * d + min((steps % per_pass) * bsz, d)
    return int(round(visits / d * n))


def run_sklearn(
    data,
    *,
    r: int,
    penalty: float,
    budget_ifo: int,
    batch_size: int = 100,
    seed: int = 0,
    method: str = "lars",
    blas_threads: int | None = 1,
) -> tuple[dict, np.ndarray]:
    """scikit-learn ``MiniBatchSparsePCA`` (see the module docstring for the caveats).

    Args:
        data: ``(n, d)`` data matrix (rows are samples, centred).
        r: number of components.
        penalty: ``alpha``, the Lasso weight on the loadings (scales like ``sqrt(n)``).
        budget_ifo: sample budget, overheads included:
            ``max_iter = max(1, (budget_ifo - overheads) // n)`` passes.
        batch_size: features (not samples) per mini-batch, as scikit-learn defines it.
        seed: ``random_state`` (shuffling of the features and the randomized SVD init).
        method: ``"lars"`` or ``"cd"`` Lasso solver.
        blas_threads: cap on the BLAS/OpenMP threads during the fit (``threadpoolctl``);
            None leaves them alone.

    Returns:
        ``(summary, x)``: the JSON-ready summary dict and the ``(d, r)`` loadings
        ``components_.T``.
    """
    from sklearn.decomposition import MiniBatchSparsePCA

    a = _as_data(data)
    _check_common(a, r, budget_ifo, batch_size)
    n, d = a.shape
    power_iters = 7 if r < 0.1 * min(n, d) else 4
    overheads = (2 * power_iters + 2) * n + n  # randomized SVD init, final Lasso readout
    max_iter = max(1, (int(budget_ifo) - overheads) // n)
    kwargs = {
        "n_components": int(r),
        "alpha": float(penalty),
        "batch_size": int(batch_size),
        "max_iter": max_iter,
        "tol": 0.0,
        "max_no_improvement": None,
        "shuffle": True,
        "method": method,
        "random_state": int(seed),
    }
    est = MiniBatchSparsePCA(**kwargs)
    with _blas_limit(blas_threads):
        start = time.perf_counter()
        est.fit(a)
        wall = time.perf_counter() - start
    x = np.array(est.components_.T, dtype=np.float64, order="C")
    ifo_fit = _sklearn_fit_ifo(est, n, d, batch_size, max_iter)
    ifo = overheads + ifo_fit
    call = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    summary = {
        "method": "MiniBatchSparsePCA",
        "penalty": float(penalty),
        "config": (
            f"sklearn.decomposition.MiniBatchSparsePCA({call}).fit(data); x = components_.T; "
            f"batches are features; init = randomized SVD ({power_iters} power iterations); "
            f"BLAS threads capped at {blas_threads}"
        ),
        "wall_time": wall,
        "ifo": ifo,
        "ifo_fit": ifo_fit,
        "ifo_overheads": overheads,
        "over_budget": ifo > int(budget_ifo),
        "n_iter": int(est.n_iter_),
        **loadings_metrics(x, a),
    }
    return summary, x
