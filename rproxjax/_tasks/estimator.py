"""A scikit-learn estimator for sparse PCA: :class:`SparsePCA` (needs scikit-learn)."""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from rproxjax._tasks.spca import METHODS, sparse_pca
from rproxjax._typing import ArrayLike

__all__ = ["SparsePCA"]


class SparsePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Sparse PCA by the paper's model, as a scikit-learn transformer.

    Fits :func:`rproxjax.sparse_pca` (orthonormal, sparse loadings: min over X in St(d, r)
    of the reconstruction error plus mu ||X||_1). Usable in ``Pipeline`` and
    ``GridSearchCV`` (``score`` is minus the mean squared reconstruction error).

    Args:
      n_components: r (default: all features, ``min(n_samples, n_features)``).
      mu: the l1 weight (default 0.1 of the data's mu_max, see :func:`sparse_pca`).
      nonzeros: a target total count of nonzeros instead of ``mu``.
      method, passes, center, batch_size, q, eta, gamma, refit: as in :func:`sparse_pca`.
      random_state: an int seed (None: 0, so that fits are reproducible).

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
                 nonzeros: int | None = None, method: str = "r_prox_spb", passes: float = 10.0,
                 center: bool = True, batch_size: int | None = None, q: int | None = None,
                 eta: float | None = None, gamma: float | None = None, refit: bool = True,
                 random_state: int | None = None) -> None:
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

    def fit(self, X: npt.ArrayLike, y: Any = None) -> Self:
        """Fits the components to X (n_samples x n_features); returns self."""
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}.")
        r = min(X.shape) if self.n_components is None else self.n_components  # type: ignore[union-attr]
        seed = 0 if self.random_state is None else self.random_state
        if not isinstance(seed, int | np.integer):
            raise ValueError("random_state must be an int or None (JAX keys are drawn from "
                             f"an int seed), got {type(seed).__name__}.")
        res = sparse_pca(X, r, mu=self.mu, nonzeros=self.nonzeros, method=self.method,  # type: ignore[arg-type]
                         passes=self.passes, center=self.center, batch_size=self.batch_size,
                         q=self.q, eta=self.eta, gamma=self.gamma, refit=self.refit,
                         seed=int(seed))
        dtype = X.dtype  # type: ignore[union-attr]
        self.components_ = np.asarray(res.loadings, dtype).T.copy()
        self.mean_ = np.asarray(res.mean, dtype)
        self.n_components_ = int(r)
        total = float(np.sum((X - self.mean_) ** 2)) / X.shape[0]  # type: ignore[union-attr]
        self.explained_variance_ = np.asarray(res.component_variance, dtype)
        self.explained_variance_ratio_ = self.explained_variance_ / total
        self.adjusted_variance_ = float(res.adjusted_variance)
        self.nonzeros_ = int(res.nonzeros)
        self.mu_ = np.asarray(res.mu)
        self.path_ = res.path
        self.n_iter_ = int(res.num_steps)
        self._n_features_out = self.n_components_
        return self

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
        """Minus the mean squared reconstruction error of X (higher is better)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        recon = self.inverse_transform(self.transform(X))
        return -float(np.mean(np.sum((X - recon) ** 2, axis=1)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
