"""Refitting sparse loadings on their support: :func:`refit_on_support`, and the best of
several zero patterns: :func:`refit_best`.

The l1 weight that makes the loadings sparse also shrinks the entries it keeps (the bias
of the lasso); at a given sparsity, the components then explain less variance than the
same zero pattern allows. The refit keeps the pattern and the orthonormality, and
re-optimizes the values for the adjusted variance (Zou, Hastie and Tibshirani): the sum
over the components, in order, of the variance each adds to the ones before it.

Block-coordinate ascent: column j, with the others fixed, becomes the unit vector a with
zeros off its support S_j and orthogonal to the other columns that maximizes
a^T C_j a, where C_j is the covariance C deflated by the scores of the columns before j
(the Schur complement C - C A_<j (A_<j^T C A_<j)^-1 A_<j^T C): the variance it adds. That is
an eigenproblem of size |S_j|, solved exactly. A sweep visits every column; the result is
the best of the start and the sweeps by adjusted variance, so the refit never explains
less variance than the point it starts from. NumPy on the host, in the data's dtype.
"""

from __future__ import annotations

import numpy as np

__all__ = ["adjusted_variance", "component_variances", "covariance", "leading_eigenvector",
           "refit_best", "refit_on_covariance", "refit_on_support"]


def adjusted_variance(x: np.ndarray, cov: np.ndarray) -> float:
    """sum_j R_jj^2 / n of the scores' QR, from the covariance: the diagonal of the
    Cholesky factor of X^T C X (with a jitter-free fallback to the QR of its square root
    for a singular Gram matrix)."""
    gram = x.T @ cov @ x
    gram = (gram + gram.T) / 2
    try:
        return float(np.sum(np.diag(np.linalg.cholesky(gram)) ** 2))
    except np.linalg.LinAlgError:
        w, v = np.linalg.eigh(gram)
        root = (v * np.sqrt(np.clip(w, 0.0, None))).T  # root^T root = gram
        return float(np.sum(np.diag(np.linalg.qr(root, mode="r")) ** 2))


def _column(cov, a, j, support, greedy=False):
    """The best column j on its support, orthogonal to the others (``greedy``: to the
    columns before j only); None where there is no freedom left."""
    s = support
    if s.size == 0:
        return None
    k = cov[np.ix_(s, s)]
    if j:  # deflate by the scores of the columns before j (Schur complement)
        prev = a[:, :j]
        b = cov[s] @ prev  # C[S, :] A_<j
        g = prev.T @ cov @ prev
        k = k - b @ np.linalg.pinv((g + g.T) / 2, hermitian=True) @ b.T
    others = (a[:, :j] if greedy else np.delete(a, j, axis=1))[s]
    q = None
    if others.shape[1]:
        u, sv, _ = np.linalg.svd(others, full_matrices=False)
        rank = int(np.sum(sv > max(s.size, 1) * np.finfo(a.dtype).eps * max(sv.max(), 1.0)))
        if rank >= s.size:
            return None
        q = u[:, :rank] if rank else None
    vec, value = leading_eigenvector((k + k.T) / 2, q, a[s, j])
    if not value > 0:
        return None
    col = np.zeros(a.shape[0], a.dtype)
    col[s] = vec
    if col @ a[:, j] < 0:
        col = -col
    return col


DENSE_SIZE = 128
"""Supports up to this size are solved by a dense eigh; larger ones by restarted Krylov."""


def leading_eigenvector(k: np.ndarray, q: np.ndarray | None, start: np.ndarray,
                        block: int = 10, max_restarts: int = 60) -> tuple[np.ndarray, float]:
    """The leading eigenpair of P K P on the range of P = I - q q^T (q orthonormal columns,
    or None for P = I): (unit vector in range(P), eigenvalue).

    A dense eigh up to :data:`DENSE_SIZE`; above, Rayleigh-Ritz on Krylov blocks of
    ``block`` vectors from ``start``, restarted from the Ritz vector until the residual
    ||P K P v - theta v|| is below 1e-2 sqrt(eps) |theta| (``max_restarts`` at most): a
    few products with K, where a dense eigh costs O(|S|^3).
    """
    def project(v):
        return v if q is None else v - q @ (q.T @ v)

    def unit(v):  # in range(P) to rounding: projected twice (Kahan's "twice is enough")
        v = project(project(v))
        return v / np.linalg.norm(v)

    size = k.shape[0]
    if size <= DENSE_SIZE:
        if q is not None:
            p = np.eye(size, dtype=k.dtype) - q @ q.T
            k = p @ k @ p
        w, v = np.linalg.eigh(k)
        return unit(v[:, -1]), float(w[-1])
    eps = np.finfo(k.dtype).eps
    v = project(np.asarray(start, k.dtype))
    if not np.linalg.norm(v) > np.sqrt(eps):
        v = project(np.random.default_rng(0).standard_normal(size).astype(k.dtype))
    v = v / np.linalg.norm(v)
    theta = 0.0
    for _ in range(max_restarts):
        basis, images = [v], []
        for i in range(block):
            w = project(k @ basis[-1])
            images.append(w)
            if i == block - 1:
                break
            mat = np.stack(basis, axis=1)
            for _ in range(2):  # Gram-Schmidt, twice
                w = w - mat @ (mat.T @ w)
            norm = np.linalg.norm(w)
            if not norm > np.sqrt(eps) * np.linalg.norm(images[-1]):
                break  # an invariant subspace: exact in this basis
            basis.append(w / norm)
        vm = np.stack(basis, axis=1)
        wm = np.stack(images[:vm.shape[1]], axis=1)
        h = vm.T @ wm
        vals, vecs = np.linalg.eigh((h + h.T) / 2)
        theta, y = float(vals[-1]), vecs[:, -1]
        v = vm @ y
        v = v / np.linalg.norm(v)
        residual = np.linalg.norm(wm @ y - theta * (vm @ y))
        if residual <= 1e-2 * np.sqrt(eps) * abs(theta):
            break
    return unit(v), theta


def refit_on_support(x: np.ndarray, centred: np.ndarray, threshold: float,
                     sweeps: int = 2) -> tuple[np.ndarray, float, float]:
    """Orthonormal loadings with the zero pattern of ``x`` and at least its adjusted variance.

    Works on the union U of the columns' supports: only the n x |U| data there and their
    covariance are formed.

    Args:
      x: d x r loadings with orthonormal columns (NumPy).
      centred: the n x d centred data (NumPy).
      threshold: entries with |x_ij| <= threshold are off the support (they become 0).
      sweeps: block-coordinate sweeps over the columns in each of the two chains (ascent
        from ``x``; a greedy pass, each column orthogonal to the ones before it, then
        ascent).

    Returns:
      (loadings, adjusted variance before, after), the variances as sums of R_jj^2 / n;
      the loadings are ``x`` itself, unchanged, when no sweep improves on it.
    """
    x = np.asarray(x)
    return _refit_pattern(x, _own_variance(x, centred), threshold, sweeps,
                          lambda union: covariance(centred, union, x.dtype))


def refit_on_covariance(x: np.ndarray, cov: np.ndarray, threshold: float,
                        sweeps: int = 2) -> tuple[np.ndarray, float, float]:
    """:func:`refit_on_support` from the d x d covariance ``cov`` instead of the data (an
    online fit keeps the covariance, not the rows): the same chains on C[U, U]."""
    x = np.asarray(x)
    return _refit_pattern(x, adjusted_variance(x, cov), threshold, sweeps,
                          lambda union: cov[np.ix_(union, union)])


def _refit_pattern(x, start, threshold, sweeps, cov_on):
    """The chains of :func:`refit_on_support` on the union U of the supports of ``x``
    (``start``: its adjusted variance), ``cov_on(U)`` the covariance there."""
    keep = np.abs(x) > threshold
    union = np.flatnonzero(keep.any(axis=1))
    if union.size == 0:
        return x, start, start
    best, value = _chains(np.where(keep, x, 0)[union], keep[union], cov_on(union), sweeps,
                          start)
    if best is None:
        return x, start, start
    return _embed(best, union, x), start, value


def component_variances(x: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """R_jj^2 / n of the scores' QR, per component, from the covariance (the terms of
    :func:`adjusted_variance`)."""
    gram = x.T @ cov @ x
    gram = (gram + gram.T) / 2
    w, v = np.linalg.eigh(gram)
    root = (v * np.sqrt(np.clip(w, 0.0, None))).T  # root^T root = gram
    return np.diag(np.linalg.qr(root, mode="r")) ** 2


def refit_best(starts: list[np.ndarray], centred: np.ndarray, threshold: float,
               sweeps: int = 2, screen: int = 3, kept: int = 1) -> tuple[int, np.ndarray, float]:
    """The best orthonormal loadings over several zero patterns, by adjusted variance.

    ``starts[0]`` is refitted as by :func:`refit_on_support` (the result is at least as
    good as it). The other starts are zero patterns with values, not necessarily
    orthonormal (loadings cut to their largest entries, say): the first ``kept`` - 1 of
    them are refitted too, the rest ranked by the adjusted variance of their
    column-normalized values (from the scores, O(n d r) each), and the ``screen`` best
    are refitted, all by the same two chains; a chain counts only where
    it ends orthonormal (the greedy pass always does). One covariance serves the refits,
    on the union of the refitted starts' supports: O(n s^2) for s <= min(d, (kept + screen) k)
    features, k the largest support.

    Args:
      starts: d x r arrays (NumPy); entries with |x_ij| <= ``threshold`` are off the
        support.
      centred: the n x d centred data (NumPy).
      threshold: as in :func:`refit_on_support`.
      sweeps: sweeps per chain.
      screen: how many of ``starts[kept:]`` are refitted.
      kept: how many of the first starts are refitted without the screen (at least 1).

    Returns:
      (index of the start whose pattern won, d x r loadings, their adjusted variance as a
      sum of R_jj^2 / n): a refit, orthonormal with exact zeros off its pattern, or
      ``starts[0]`` itself where no refit improves on it.
    """
    x = np.asarray(starts[0])
    keeps = [np.abs(np.asarray(s)) > threshold for s in starts]
    best, best_value, index = x, _own_variance(x, centred), 0
    patterns = [np.where(k, s, 0).astype(x.dtype) for k, s in zip(keeps, starts, strict=True)]

    def screened(i):
        norms = np.linalg.norm(patterns[i], axis=0)
        return _own_variance(patterns[i] / norms, centred) if np.all(norms > 0) else -np.inf

    kept = max(1, min(kept, len(starts)))
    ranked = sorted(range(kept, len(starts)), key=lambda i: -screened(i))[:screen]
    chosen = list(range(kept)) + ranked
    union = np.flatnonzero(np.any([keeps[i].any(axis=1) for i in chosen], axis=0))
    if union.size == 0:
        return index, best, best_value
    cov = covariance(centred, union, x.dtype)
    for i in chosen:
        a, value = _chains(patterns[i][union], keeps[i][union], cov, sweeps, best_value)
        if a is not None:
            best, best_value, index = _embed(a, union, x), value, i
    return index, best, best_value


def covariance(centred: np.ndarray, union: np.ndarray, dtype) -> np.ndarray:
    """C[U, U] = (1/n) A_U^T A_U of the centred data's columns U (no copy when U is all)."""
    n, d = centred.shape
    part = centred if union.size == d else centred[:, union]
    part = np.asarray(part, dtype)
    return (part.T @ part) / n  # one operand twice: a symmetric rank-k update


def _own_variance(x, centred):
    """The adjusted variance (sum R_jj^2 / n) of ``x`` on the data, from the scores."""
    r_factor = np.linalg.qr(centred @ x, mode="r")
    return float(np.sum(np.diag(r_factor) ** 2)) / centred.shape[0]


def _embed(a, union, like):
    out = np.zeros_like(like)
    out[union] = a
    return out


def _chains(a0, keep, cov, sweeps, floor):
    """(best orthonormal loadings on the union, their value) over the chains (ascent from
    ``a0``; a greedy pass, then ascent), or (None, floor) when none beats ``floor``."""
    r = a0.shape[1]
    supports = [np.flatnonzero(keep[:, j]) for j in range(r)]
    best, best_value = None, floor
    for greedy in (False, True):
        a = a0.copy()
        for sweep in range(sweeps):
            for j in range(r):
                col = _column(cov, a, j, supports[j], greedy and sweep == 0)
                if col is not None:
                    a[:, j] = col
            value = adjusted_variance(a, cov)
            if value > best_value and _orthonormal(a):
                best, best_value = a.copy(), value
    return best, best_value


def _orthonormal(a):
    """Columns orthonormal to a few hundred ulps (a column left unchanged in an ascent from
    a start with small entries cut is only nearly so)."""
    err = np.max(np.abs(a.T @ a - np.eye(a.shape[1], dtype=a.dtype)))
    return bool(err <= 100 * a.shape[0] * np.finfo(a.dtype).eps)
