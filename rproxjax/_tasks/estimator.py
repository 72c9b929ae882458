"""A scikit-learn estimator for sparse PCA: :class:`SparsePCA` (needs scikit-learn)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from rproxjax._ssn.config import SSN
from rproxjax._tasks import online
from rproxjax._tasks.spca import (
    METHODS,
    _as_matrix,
    _positive_float,
    _positive_int,
    sparse_pca,
)
from rproxjax._typing import ArrayLike

__all__ = ["SparsePCA"]


class SparsePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Sparse PCA by the paper's model, as a scikit-learn transformer.

    Fits :func:`rproxjax.sparse_pca` (orthonormal, sparse loadings: min over X in St(d, r)
    of the reconstruction error plus mu ||X||_1). Usable in ``Pipeline`` and
    ``GridSearchCV`` (``score`` is the held-out adjusted variance, see :meth:`score`).

    Args:
      n_components: r (default: all features, ``min(n_samples, n_features)``).
      mu: the l1 weight (default 0.1 of the data's mu_max, see :func:`sparse_pca`).
      nonzeros: a target total count of nonzeros instead of ``mu``.
      method, passes, center, batch_size, q, eta, gamma, refit: as in :func:`sparse_pca`.
      random_state: an int seed (None: 0, so that fits are reproducible).
      sparsity_weight: the price :meth:`score` charges for density: it subtracts
        ``sparsity_weight * nonzeros_ / components_.size`` (0, the default: no charge, the
        score is the held-out adjusted variance alone). Used by ``score`` only, not by ``fit``.
      verbose: report progress while fitting (passed as ``progress=verbose`` to
        :func:`sparse_pca`).

    Attributes:
      components_: r x n_features, orthonormal rows (scikit-learn's layout: the transpose
        of :func:`sparse_pca`'s d x r ``loadings``).
      mean_: the mean of the training rows (zeros when ``center=False``).
      n_components_: r.
      explained_variance_: the variance each component adds (R_jj^2 / n of the adjusted
        variance's QR), length r.
      explained_variance_ratio_: the same over the total variance.
      adjusted_variance_: the fraction of the variance the components explain together.
      nonzeros_: entries of ``components_`` with |value| > 1e-3.
      mu_: the l1 weight used (for a ``nonzeros`` target, that of the path's run whose
        zero pattern won; 0 for the principal directions cut, see :func:`sparse_pca`).
      path_: the :class:`rproxjax.SparsePCAPath` of a ``nonzeros`` target, else None.
      n_iter_: optimizer steps taken.
      n_features_in_, feature_names_in_: as scikit-learn sets them.

    Example:
        >>> import numpy as np
        >>> from rproxjax import SparsePCA
        >>> rng = np.random.default_rng(0)
        >>> data = rng.standard_normal((300, 12)) * np.linspace(3, 0.5, 12)
        >>> est = SparsePCA(n_components=2, nonzeros=6, passes=4).fit(data)
        >>> est.transform(data).shape, est.components_.shape
        ((300, 2), (2, 12))
    """

    def __init__(self, n_components: int | None = None, *, mu: ArrayLike | None = None,
                 nonzeros: int | None = None, method: str = "r_prox_spb",
                 passes: float | None = None, center: bool = True,
                 batch_size: int | None = None, q: int | None = None,
                 eta: float | None = None, gamma: float | None = None, refit: bool = True,
                 random_state: int | None = None, sparsity_weight: float = 0.0,
                 verbose: bool = False) -> None:
        self.n_components = n_components
        self.mu = mu
        self.nonzeros = nonzeros
        self.method = method
        self.passes = passes
        self.center = center
        self.batch_size = batch_size
        self.q = q
        self.eta = eta
        self.gamma = gamma
        self.refit = refit
        self.random_state = random_state
        self.sparsity_weight = sparsity_weight
        self.verbose = verbose

    def fit(self, X: npt.ArrayLike | Iterator[npt.ArrayLike], y: Any = None) -> Self:
        """Fits the components to X (n_samples x n_features); returns self.

        ``X`` may also be an iterator of chunks (each n_i x n_features, e.g. a generator
        reading a file piece by piece): the fit then starts afresh and calls
        :meth:`partial_fit` on each chunk, holding one chunk at a time.
        """
        if _is_stream(X):
            for attr in ("_stream", "n_features_in_", "feature_names_in_"):
                self.__dict__.pop(attr, None)
            fitted = False
            for chunk in X:  # type: ignore[union-attr]
                self.partial_fit(chunk)
                fitted = True
            if not fitted:
                raise ValueError("X is an empty iterator: no chunk to fit.")
            return self
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}.")
        r = min(X.shape) if self.n_components is None else self.n_components  # type: ignore[union-attr]
        seed = self._seed()
        self.__dict__.pop("_stream", None)
        res = sparse_pca(X, r, mu=self.mu, nonzeros=self.nonzeros, method=self.method,  # type: ignore[arg-type]
                         passes=self.passes, center=self.center, batch_size=self.batch_size,
                         q=self.q, eta=self.eta, gamma=self.gamma, refit=self.refit,
                         seed=seed, progress=self.verbose)
        dtype = X.dtype  # type: ignore[union-attr]
        mean = np.asarray(res.mean, dtype)
        self._set_attributes(
            dtype, loadings=res.loadings, mean=mean, component_variance=res.component_variance,
            total=float(np.sum((X - mean) ** 2)) / X.shape[0],  # type: ignore[union-attr]
            adjusted=float(res.adjusted_variance), nonzeros=res.nonzeros, mu=res.mu,
            path=res.path, steps=res.num_steps, seen=X.shape[0])  # type: ignore[union-attr]
        return self

    def partial_fit(self, X: npt.ArrayLike, y: Any = None) -> Self:
        """Updates the components with one chunk of rows X (n_i x n_features); returns self.

        Online sparse PCA: each call updates the running mean and covariance of the rows
        seen so far, centres the chunk by that mean and runs ``passes`` passes of the
        optimizer over it (default: 10, :func:`sparse_pca`'s single-fit budget),
        continuing from the point, the optimizer's state (step count, R-ProxSPB's
        estimator) and the sampling key the previous call left. The first call fixes the
        scales as :meth:`fit` reads them off the data (the start: the chunk's
        principal directions; gamma; the default mu, 0.1 of the chunk's mu_max; the
        minibatch size and R-ProxSPB's refresh period q). R-ProxSPB refreshes its estimate
        on the whole chunk at each block's start and runs whole blocks (at least one) per
        chunk. Memory does not grow with the stream: the point, the optimizer's state, the
        d x d covariance and the chunk. Each new chunk size compiles once.

        The attributes are those of :meth:`fit`, from the covariance of all the rows seen
        (``components_`` refitted on their support from it when ``refit``), plus
        ``n_samples_seen_``; ``path_`` is None.

        Raises:
          ValueError: as :meth:`fit`; for ``nonzeros=`` (a target needs a path over the
            whole data: set ``mu``), for ``method="manpg"`` (full gradients: not online),
            for a chunk of fewer than 2 rows or of another width than the first.
        """
        first = not hasattr(self, "_stream")
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2,
                          reset=first)
        if first:
            chunk = _as_matrix("X", X, None, stacklevel=3)
            stream = _start_stream(self, chunk)
        else:
            stream = self._stream
            chunk = _as_matrix("X", X, stream.settings["dtype"])
        self._stream = online.update(stream, chunk, self.passes)
        out, state = online.result(self._stream, self.refit), self._stream
        self._set_attributes(
            out["loadings"].dtype, loadings=out["loadings"], mean=state.mean,
            component_variance=out["component_variance"], total=out["total"],
            adjusted=float(np.sum(out["component_variance"]) / out["total"]),
            nonzeros=out["nonzeros"], mu=state.settings["mu"], path=None, steps=state.steps,
            seen=state.n_seen)
        return self

    def _seed(self) -> int:
        seed = 0 if self.random_state is None else self.random_state
        if not isinstance(seed, int | np.integer):
            raise ValueError("random_state must be an int or None (JAX keys are drawn from "
                             f"an int seed), got {type(seed).__name__}.")
        return int(seed)

    def _set_attributes(self, dtype, *, loadings, mean, component_variance, total, adjusted,
                        nonzeros, mu, path, steps, seen):
        """The fitted attributes (arrays in ``dtype``), from :meth:`fit` or :meth:`partial_fit`."""
        self.components_ = np.asarray(loadings, dtype).T.copy()
        self.mean_ = np.asarray(mean, dtype)
        self.n_components_ = int(self.components_.shape[0])
        self.explained_variance_ = np.asarray(component_variance, dtype)
        self.explained_variance_ratio_ = self.explained_variance_ / total
        self.adjusted_variance_ = adjusted
        self.nonzeros_ = int(nonzeros)
        self.mu_ = np.asarray(mu)
        self.path_ = path
        self.n_iter_ = int(steps)
        self.n_samples_seen_ = int(seen)
        self._n_features_out = self.n_components_

    def transform(self, X: npt.ArrayLike) -> np.ndarray:
        """``(X - mean_) components_^T``: the rows of X in the components' coordinates."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, X: npt.ArrayLike) -> np.ndarray:
        """``X components_ + mean_``: back to feature space (the projection onto the span of the
        components, for transformed data)."""
        check_is_fitted(self)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_components_:
            raise ValueError(f"X must have n_components_ = {self.n_components_} columns, got "
                             f"shape {X.shape}.")
        return X @ self.components_ + self.mean_

    def score(self, X: npt.ArrayLike, y: Any = None) -> float:
        """The fraction of X's variance the components explain, adjusted, minus the density's
        price (higher is better): ``GridSearchCV``'s criterion on held-out rows.

        The adjusted variance (Zou, Hastie and Tibshirani's, as in ``adjusted_variance_``) is
        sum_j R_jj^2 of the QR of the scores ``(X - mean_) components_^T``, over the total
        ``||X - mean_||^2``: it counts only what each component adds to those before it, so
        correlated scores are not counted twice. From that,
        ``sparsity_weight * nonzeros_ / components_.size`` is subtracted (nothing by default).

        Why it can prefer a sparse model: on rows the model was not fitted to, a loading's
        entry counts only where the variance it follows is there too. Where the data have a
        sparse structure (a few variables carrying each component, noise elsewhere), a denser
        model's extra entries fit the training rows' noise and explain less of the held-out
        rows than the loadings on the true support do, so a search over ``mu`` or ``nonzeros``
        peaks near that support (``examples/grid_search_mu.py``). Where no such structure
        exists, more entries explain more and the densest candidate scores best: no held-out
        variance prefers sparsity for its own sake. ``sparsity_weight`` then states the trade
        outright: an entry must add at least ``sparsity_weight / components_.size`` of the
        variance to be worth it (0.1: filling every entry must buy a tenth of the variance).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        weight = self.sparsity_weight
        if (isinstance(weight, bool) or not isinstance(weight, int | float | np.number)
                or not np.isfinite(weight) or weight < 0):
            raise ValueError("sparsity_weight must be a finite number >= 0, got "
                             f"{weight!r}.")
        centred = np.asarray(X, np.float64) - self.mean_
        total = float(np.sum(centred ** 2))
        r_diag = np.diag(np.linalg.qr(centred @ self.components_.T.astype(np.float64),
                                      mode="r"))
        explained = float(np.sum(r_diag ** 2)) / total if total > 0 else 0.0
        return explained - float(weight) * self.nonzeros_ / self.components_.size

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _is_stream(X) -> bool:
    """An iterator of chunks (a generator, ``iter(list_of_arrays)``): not an array, list or
    other re-iterable container, which are the rows of one matrix."""
    return hasattr(X, "__next__")


def _start_stream(est: SparsePCA, X) -> online.OnlineSPCA:
    """The online state of ``est``'s first chunk ``X`` (its settings checked here)."""
    if est.nonzeros is not None:
        raise ValueError("partial_fit needs mu, not nonzeros: a nonzeros target runs a path "
                         "over the whole data (use fit).")
    if est.method not in online.ONLINE_METHODS:
        raise ValueError(f"partial_fit's method must be one of {online.ONLINE_METHODS} (ManPG "
                         f"takes full gradients), got {est.method!r}.")
    d = X.shape[1]
    r = min(X.shape) if est.n_components is None else _positive_int(
        "n_components", est.n_components, 1, d)
    if est.passes is not None:
        _positive_float("passes", est.passes)
    b = None if est.batch_size is None else _positive_int("batch_size", est.batch_size, 1)
    q = None if est.q is None else _positive_int("q", est.q, 2)
    eta = None if est.eta is None else _positive_float("eta", est.eta)
    gamma = None if est.gamma is None else _positive_float("gamma", est.gamma)
    if not isinstance(est.refit, bool | np.bool_):
        raise TypeError(f"refit must be a bool, got {est.refit!r}.")
    ssn = SSN.stochastic()
    return online.start(X, r, mu=est.mu, method=est.method, batch_size=b, q=q,
                        eta=eta, gamma=gamma, center=bool(est.center), seed=est._seed(),
                        ssn=ssn)
