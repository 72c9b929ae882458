"""The paper's applications: online sparse PCA and robust low-rank matrix completion.

Online sparse PCA (the paper's eq. online-spca)::

    min_{X in St(d, r)}  E_z ||z - X X^T z||^2 + mu ||X||_1,

with per-sample loss f(X; z) = ||z||^2 - ||X^T z||^2 (gradient -2 z z^T X).

Robust low-rank matrix completion (eqs. rmc-huang to def-hat-f): observed
entries M_ij, (i, j) in Omega, of an m x n matrix; U on Gr(m, r), the sparse
outliers S on Omega (stored as one value per observed entry), and V = V_{U,S}
eliminated in closed form::

    min_{U, S}  f(U, S) + gamma ||P_Omega(S)||_1,
    f(U, S) = 1/2 ||P_Omega(U V - M + S)||^2 + lam/2 ||V||^2 - lam/2 ||P_Omega(U V)||^2.

Example:
    >>> import jax, jax.numpy as jnp, rproxjax
    >>> from rproxjax import problems
    >>> z = jax.random.normal(jax.random.key(0), (50, 6))
    >>> x = rproxjax.stiefel.random_point(jax.random.key(1), 6, 2)
    >>> bool(problems.spca_objective(x, z, 0.0) >= 0.0)
    True
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks, stiefel
from rproxjax._linalg import mm
from rproxjax._ssn.solve import SubproblemInfo, tangent_prox
from rproxjax._typing import Array, ArrayLike, PyTree, Regularizer

__all__ = [
    "RMCProblem",
    "explained_variance",
    "nonzeros",
    "rmc_background",
    "rmc_batch_loss",
    "rmc_objective",
    "rmc_problem",
    "rmc_v",
    "spca_grad",
    "spca_loss",
    "spca_objective",
    "stationarity",
]


# --------------------------------------------------------------------------- sparse PCA


def spca_loss(x: ArrayLike, z: ArrayLike) -> Array:
    """Per-sample loss ||z - X X^T z||^2 = ||z||^2 - ||X^T z||^2 (X orthonormal)."""
    xtz = mm(x.T, z)  # type: ignore[union-attr]
    return jnp.sum(z * z) - jnp.sum(xtz * xtz)


def spca_grad(x: ArrayLike, z: ArrayLike) -> Array:
    """Per-sample Euclidean gradient -2 z z^T X of :func:`spca_loss`."""
    return -2.0 * jnp.outer(z, mm(z, x))


def spca_objective(x: ArrayLike, data: ArrayLike, mu: ArrayLike,
                   chunk_size: int = 4096) -> Array:
    """F(X) = mean_i ||z_i - X X^T z_i||^2 + mu ||X||_1 over the rows z_i of ``data``.

    Computed in chunks of rows (no n x d temporaries beyond a chunk).
    """
    d, _ = _checks.check_point("x", x)
    _check_data(data, d)
    chunk = _checks.index_or_none(chunk_size)
    if chunk is None:
        raise TypeError(f"chunk_size must be a positive int, got {chunk_size!r}.")
    if chunk < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}.")
    chunk_size = chunk
    n = data.shape[0]  # type: ignore[union-attr]
    total = jnp.zeros((), jnp.result_type(x))
    for start in range(0, n, chunk_size):
        block = data[start:start + chunk_size]  # type: ignore[index]
        proj = mm(block, x)
        total = total + jnp.sum(block * block) - jnp.sum(proj * proj)
    return total / n + jnp.sum(mu * jnp.abs(x))


def _check_data(data, d: int) -> None:
    """An n x d array of real numbers (the rows of x are d)."""
    _checks.check_array("data", data)
    if jnp.ndim(data) != 2 or jnp.shape(data)[1] != d:
        raise ValueError(f"data must be an n x d array with d = {d} (the rows of x), got shape "
                         f"{jnp.shape(data)}.")
    if jnp.issubdtype(jnp.result_type(data), jnp.complexfloating):
        raise TypeError(f"data must hold real numbers, got dtype {jnp.result_type(data)}.")


def explained_variance(x: ArrayLike, data: ArrayLike, normalized: bool = False) -> Array:
    """The paper's explained variance tr(X^T A A^T X) / tr(X X^T), A = data^T (d x n).

    With ``normalized=True`` it is divided by tr(A A^T) = ||A||_F^2, the total
    variance, giving the fraction of the variance explained by span(X) (for
    orthonormal X; at most 1).

    Raises:
      TypeError, ValueError: for ``x`` not a real d x r matrix (r <= d) or ``data`` not a
        real n x d array.
    """
    d, _ = _checks.check_point("x", x)
    _check_data(data, d)
    proj = mm(data, x)
    value = jnp.sum(proj * proj) / jnp.sum(x * x)
    if normalized:
        value = value / jnp.sum(data * data)
    return value


def nonzeros(x: ArrayLike, threshold: float = 1e-3) -> Array:
    """Number of entries with |X_ij| > threshold (the paper's sparsity count)."""
    return jnp.sum(jnp.abs(x) > threshold)


def stationarity(x: ArrayLike, full_grad: ArrayLike, gamma: ArrayLike, reg: Regularizer | None,
                 *, retraction: stiefel.Retraction = "polar") -> tuple[Array, SubproblemInfo]:
    """The stationarity measure ||G(X, grad f(X), gamma)|| of the paper's Definition 3.

    G = (X - Retr_X(xi)) / gamma with xi the subproblem solution for the full
    gradient (design notes section 4). Returns (||G||_F, subproblem info).
    """
    if jnp.ndim(gamma) != 0:
        raise ValueError(f"gamma must be a scalar, got shape {jnp.shape(gamma)}.")
    _checks.check_positive("gamma", gamma)
    xi, info = tangent_prox(x, full_grad, gamma, reg)
    return jnp.linalg.norm(x - stiefel.retract(x, xi, retraction=retraction)) / gamma, info


# ------------------------------------------------------ robust low-rank matrix completion


@jax.tree_util.register_pytree_node_class
class RMCProblem:
    """Observed entries of an m x n matrix, as flat arrays over Omega.

    A pytree (the shape is static), so a problem can be passed into ``jax.jit``.

    Attributes:
      rows, cols: int32 indices (i, j) of the observed entries.
      values: M_ij at those entries.
      lam: the weight lambda of ||P_Omega-bar(U V)||^2 (small, in (0, 1)).
      m, n: the matrix shape (static).
    """

    rows: Array
    cols: Array
    values: Array
    lam: Array
    m: int
    n: int

    def __init__(self, rows: Array, cols: Array, values: Array, lam: Array, m: int,
                 n: int) -> None:
        self.rows, self.cols, self.values, self.lam = rows, cols, values, lam
        self.m, self.n = m, n

    def tree_flatten(self) -> tuple[tuple[Array, Array, Array, Array], tuple[int, int]]:
        return (self.rows, self.cols, self.values, self.lam), (self.m, self.n)

    @classmethod
    def tree_unflatten(cls, aux: tuple[int, int],
                       children: tuple[Any, Any, Any, Any]) -> RMCProblem:
        return cls(*children, *aux)


def rmc_problem(matrix: ArrayLike, mask: ArrayLike, lam: float = 1e-3) -> RMCProblem:
    """Builds an :class:`RMCProblem` from a matrix and a boolean mask of observed entries.

    Args:
      matrix: m x n array M (only the masked entries are used).
      mask: m x n boolean array, True on Omega.
      lam: lambda in (0, 1).
    """
    matrix = np.asarray(matrix)
    mask = np.asarray(mask, dtype=bool)
    if matrix.ndim != 2 or mask.shape != matrix.shape:
        raise ValueError(
            f"matrix and mask must be m x n arrays of one shape, got {matrix.shape} and "
            f"{mask.shape}."
        )
    if matrix.dtype not in (np.float32, np.float64):
        raise ValueError(f"matrix must be floating (float32 or float64), got {matrix.dtype}.")
    if not 0.0 < lam < 1.0:
        raise ValueError(f"lam must be in (0, 1), got {lam}.")
    if not mask.any():
        raise ValueError("mask observes no entry.")
    rows, cols = np.nonzero(mask)
    # Transfers, not jnp.asarray: that compiles a copy per shape and dtype.
    return RMCProblem(_checks.as_dtype(rows, np.int32), _checks.as_dtype(cols, np.int32),
                      _checks.to_device(matrix[rows, cols]),
                      _checks.as_dtype(lam, matrix.dtype),
                      int(matrix.shape[0]), int(matrix.shape[1]))


def rmc_v(u: ArrayLike, s: ArrayLike, problem: RMCProblem) -> Array:
    """V_{U,S} = argmin_V f-bar(U, V, S), column by column (r x n).

    Column j solves ((1 - lam) U_j^T U_j + lam I) v_j = U_j^T (M - S)_j, where
    U_j holds the rows of U observed in column j.
    """
    _checks.check_point("u", u)
    if u.shape[0] != problem.m:  # type: ignore[union-attr]
        raise ValueError(f"u must have m = {problem.m} rows (the matrix's), got shape "
                         f"{u.shape}.")  # type: ignore[union-attr]
    if jnp.shape(s) != problem.values.shape:
        raise ValueError(f"s must hold one value per observed entry, shape "
                         f"{problem.values.shape}, got {jnp.shape(s)}.")
    r = u.shape[-1]  # type: ignore[union-attr]
    ur = u[problem.rows]  # type: ignore[index]
    outer = (ur[:, :, None] * ur[:, None, :]).reshape(-1, r * r)
    gram = jax.ops.segment_sum(outer, problem.cols, num_segments=problem.n).reshape(-1, r, r)
    mats = (1.0 - problem.lam) * gram + problem.lam * jnp.eye(r, dtype=u.dtype)  # type: ignore[union-attr]
    rhs = jax.ops.segment_sum(ur * (problem.values - s)[:, None], problem.cols,
                              num_segments=problem.n)
    return jnp.linalg.solve(mats, rhs[..., None])[..., 0].T


def rmc_objective(params: PyTree, problem: RMCProblem, gamma: ArrayLike = 0.0) -> Array:
    """f(U, S) + gamma ||P_Omega(S)||_1 for ``params = {"U": U, "S": s}``."""
    u, s = params["U"], params["S"]
    v = rmc_v(u, s, problem)
    pred = jnp.sum(u[problem.rows] * v.T[problem.cols], axis=-1)
    resid = pred - problem.values + s
    f = 0.5 * jnp.sum(resid**2) + 0.5 * problem.lam * (jnp.sum(v * v) - jnp.sum(pred**2))
    return f + gamma * jnp.sum(jnp.abs(s))


def rmc_batch_loss(params: PyTree, batch: ArrayLike, problem: RMCProblem) -> Array:
    """|Omega| times the mean of f-hat_ij over a batch of observed entries, V held fixed.

    f-hat_ij = 1/2 (u_i^T v_j - M_ij + S_ij)^2 - lam/2 (u_i^T v_j)^2 with
    v_j = V_{U,S} (under ``stop_gradient``), so that ``jax.grad`` gives the
    paper's stochastic gradient nabla_1 f-hat_ij(U, V_{U,S}, S) in U and the
    residual in S. It is an unbiased estimate of f-hat = sum over Omega (the
    scale of the paper's objective, so gamma ||P_Omega(S)||_1 keeps its
    meaning); use with ``rproxjax.fit(..., batched_loss=True)`` and data
    ``jnp.arange(|Omega|)``.
    """
    u, s = params["U"], params["S"]
    v = jax.lax.stop_gradient(rmc_v(u, s, problem))
    i, j = problem.rows[batch], problem.cols[batch]
    pred = jnp.sum(u[i] * v.T[j], axis=-1)
    resid = pred - problem.values[batch] + s[batch]
    return problem.rows.shape[0] * jnp.mean(0.5 * resid**2 - 0.5 * problem.lam * pred**2)


def rmc_background(params: PyTree, problem: RMCProblem) -> Array:
    """The low-rank estimate L = U V_{U,S} (m x n): one background per column/frame."""
    u = params["U"]
    _checks.check_point("U", u)
    if u.shape[0] != problem.m:
        raise ValueError(f"U must have m = {problem.m} rows (the matrix's), got shape "
                         f"{u.shape}.")
    return mm(u, rmc_v(u, params["S"], problem))
