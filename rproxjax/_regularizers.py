"""Nonsmooth regularizers h with cheap proximal maps.

A regularizer is a small pytree (a NamedTuple) whose leaves are its strengths,
so it can be traced, passed through ``jax.jit`` and mapped over with
``jax.vmap`` (e.g. one run per value of mu). Besides its value and proximal
map it provides what the semi-smooth Newton method of
:func:`rproxjax.tangent_prox` needs: an element of the generalized (Clarke)
Jacobian of the proximal map, applied to a direction (matrix-free path) and
as a Gram matrix in an orthonormal basis of symmetric r x r matrices (dense
path).

The protocol, for a regularizer ``reg`` acting on d x r matrices:

* ``reg.value(x)``: h(X).
* ``reg.prox(v, t)``: prox_{t h}(V) = argmin_Y h(Y) + ||Y - V||^2 / (2t).
* ``reg.subgradient(x)``: an element of the subdifferential of h at X.
* ``reg.prox_jacobian(v, t)``: ``(prox_{t h}(V), jac)``; ``jac`` is a pytree
  describing a generalized Jacobian D of the prox at V.
* ``reg.jacobian_apply(jac, w)``: D[W].
* ``reg.jacobian_gram(x, jac, basis)``: the m x m matrix of
  <X B_p, D[X B_q]> for the orthonormal basis of symmetric matrices
  B_p = s_p (E_jl + E_lj), given as ``basis = (rows, cols, scale)`` (index
  arrays j, l with j <= l and the weights s_p, each of length m = r(r+1)/2).
* ``reg.jacobian_gram_diagonal(x, jac)`` (optional): the diagonal of that matrix as an
  r x r symmetric matrix (entry (j, l) holds G_pp for (j, l) = (rows[p], cols[p])), for
  the Jacobi steps of loose solves (:func:`rproxjax._ssn.linear.jacobi_direction`); a
  regularizer without it gets full Newton steps.
* ``reg.secant_shift(w, x, e, t, passes)``: an r x r symmetric, non-negative
  matrix R raising the Newton matrix's diagonal in the symmetric basis where
  the generalized Jacobian underestimates the curvature of the dual along a
  basis direction (see :mod:`rproxjax._ssn.secant`); zeros where unknown.
* ``reg.thresholds(t, w)`` and ``reg.first_breakpoint(w, p, active, t)`` (optional,
  regularizers whose generalized Jacobian is an entrywise 0/1 mask ``jac``: l1): the
  thresholds t mu_c per column and the first tau > 0 at which an entry of W + tau P crosses
  one, for the path steps of tight solves (:mod:`rproxjax._ssn.path`).
* ``reg.check(shape)``: raises ``ValueError`` if the strengths do not fit
  d x r matrices of the given shape.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax._linalg import mm, sqrt0
from rproxjax._ssn.secant import l1_secant_shift
from rproxjax._typing import Array, ArrayLike

__all__ = ["L1", "L21", "l1", "l21"]

#: The orthonormal basis of symmetric r x r matrices, ``(rows, cols, scale)``
#: (:func:`rproxjax._ssn.linear.sym_basis`).
Basis = tuple[np.ndarray, np.ndarray, ArrayLike]


def _gram_blockdiag(k, basis):
    """sum_i (B_p)_{:,i}^T K_i (B_q)_{:,i} for all p, q, read off K by indexing.

    With B_p = s_p (E_jl + E_lj), (j, l) = (rows[p], cols[p]):
    G_pq = s_p s_q ([l_p = l_q] K_{l_p}[j_p, j_q] + [l_p = j_q] K_{l_p}[j_p, l_q]
                  + [j_p = l_q] K_{j_p}[l_p, j_q] + [j_p = j_q] K_{j_p}[l_p, l_q]).
    """
    rows, cols, scale = basis
    jp, lp = rows[:, None], cols[:, None]
    jq, lq = rows[None, :], cols[None, :]
    g = (
        jnp.where(lp == lq, k[lp, jp, jq], 0.0)
        + jnp.where(lp == jq, k[lp, jp, lq], 0.0)
        + jnp.where(jp == lq, k[jp, lp, jq], 0.0)
        + jnp.where(jp == jq, k[jp, lp, lq], 0.0)
    )
    return scale[:, None] * scale[None, :] * g


def _pair_products(a, b, basis):
    """a[:, rows] * b[:, cols] (d x m) for the basis pairs (j, l) = (rows[p], cols[p]).

    The pairs of :func:`rproxjax._ssn.linear.sym_basis` (np.triu_indices order) are formed from
    r static column slices: XLA's CPU gather with these constant indices is slower
    (``benchmarks/profile_step.py`` times the K tensor of a Newton step both ways). Other
    orders gather.
    """
    rows, cols, _ = basis
    r = a.shape[-1]
    if isinstance(rows, np.ndarray) and np.array_equal(np.stack([rows, cols]),
                                                       np.triu_indices(r)):
        return jnp.concatenate([a[:, j:j + 1] * b[:, j:] for j in range(r)], axis=1)
    return a[:, rows] * b[:, cols]


def _row_norms(v, keepdims=False):
    """||V_i||_2 per row with a zero (not NaN) derivative at a zero row (0 is a subgradient
    of the norm there; the prox is 0 near it when t mu > 0).

    Scaled by the row's largest magnitude m, so that squares neither overflow nor underflow
    (float32 rows of 3e19 had an infinite norm and were kept by a prox that zeroes them;
    rows of 1e-23 a zero one). m is held constant in derivatives: m ||V_i / m|| is ||V_i||
    for every m > 0, so every order is exact."""
    m = lax.stop_gradient(jnp.max(jnp.abs(v), axis=-1, keepdims=True, initial=0.0))
    # A power of two (exact divisions); a zero, NaN or infinite row is not scaled: its
    # norm stays 0, NaN or inf.
    m = jnp.ldexp(jnp.ones_like(m), jnp.frexp(m)[1] - 1)  # in (m / 2, m]
    m = jnp.where((m > 0) & jnp.isfinite(m), m, jnp.ones_like(m))
    norms = m * sqrt0(jnp.sum((v / m) ** 2, axis=-1, keepdims=True))
    return norms if keepdims else norms[..., 0]


def _strength(a, like):
    """mu (or t) in the floating dtype of the input: the methods follow their input's dtype
    (a float64 mu or t with x64 enabled must not promote float32 inputs); integer and bool
    inputs get the default float dtype (mu is never rounded to an integer)."""
    return jnp.asarray(a, jnp.result_type(like, 1.0))


def _threshold(t, mu, v):
    """The prox's threshold t mu in the floating dtype of ``v``."""
    return _strength(t, v) * _strength(mu, v)


def _soft_threshold_parts(v, thr):
    """(thr, the active mask, v shrunk by thr): soft-thresholding's pieces."""
    # With thr = 0 (mu = 0) the prox is the identity: every entry is active, zeros too.
    active = (jnp.abs(v) > thr) | (thr <= 0)
    return thr, active, v - jnp.sign(v) * thr


class L1(NamedTuple):
    r"""Entrywise l1 norm, h(X) = sum_{i,j} mu_j |X_ij|.

    ``mu`` is a scalar or has one entry per column (shape ``(r,)``). The
    proximal map is soft-thresholding,

    .. math::
        \operatorname{prox}_{t h}(V)_{ij}
        = \operatorname*{argmin}_y \; \mu_j |y| + \frac{(y - V_{ij})^2}{2t}
        = \operatorname{sign}(V_{ij}) \max(|V_{ij}| - t \mu_j, 0),

    and its generalized Jacobian is the 0/1 mask of entries with
    |V_ij| > t mu_j. Build it with :func:`l1` (which checks ``mu``); its methods are the
    regularizer protocol of this module.

    Attributes:
      mu: the strength, >= 0: a scalar or one per column (shape ``(r,)``).

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> reg = rproxjax.l1(jnp.array([1.0, 0.25]))
        >>> v = jnp.array([[0.5, 0.5], [-2.0, -2.0]])
        >>> reg.prox(v, 1.0).tolist()
        [[0.0, 0.25], [-1.0, -1.75]]
        >>> float(reg.value(v))
        3.125
    """

    mu: Array

    def value(self, x: ArrayLike) -> Array:
        # Sums over the matrix (or vector) axes; leading batch axes are kept.
        mu = _strength(self.mu, x)
        return jnp.sum(mu * jnp.abs(x), axis=tuple(range(-min(jnp.ndim(x), 2), 0)))

    def prox(self, v: ArrayLike, t: ArrayLike) -> Array:
        # The same selection as the Jacobian's mask, so that its derivatives in t and mu
        # (taken by tangent_prox's implicit rule) count a tie |V_ij| = t mu_j as inactive
        # like every other term: jnp.maximum(|v| - thr, 0) splits them 0.5 / 0.5 there.
        # The inactive fill keeps a NaN entry or threshold NaN (and the sign of zero).
        thr, active, shrunk = _soft_threshold_parts(v, _threshold(t, self.mu, v))
        return jnp.where(active, shrunk, jnp.where(jnp.isnan(thr), thr, 0.0 * v))

    def prox_jacobian(self, v: Array, t: ArrayLike) -> tuple[Array, Array]:
        _, active, shrunk = _soft_threshold_parts(v, _threshold(t, self.mu, v))
        return jnp.where(active, shrunk, jnp.zeros_like(v)), active.astype(v.dtype)

    def subgradient(self, x: ArrayLike) -> Array:
        return _strength(self.mu, x) * jnp.sign(x)

    def jacobian_apply(self, jac: Array, w: Array) -> Array:
        return jac * w

    def jacobian_gram(self, x: Array, jac: Array, basis: Basis) -> Array:
        # K_i = X^T diag(mask_{:,i}) X for each column i, (r, r, r), from its
        # r (r + 1) / 2 distinct products (K_i is symmetric).
        rows, cols, _ = basis
        r = x.shape[-1]
        packed = mm(jac.T, _pair_products(x, x, basis))  # (r, m)
        index = np.zeros((r, r), dtype=np.int32)
        index[rows, cols] = np.arange(rows.size)
        index[cols, rows] = np.arange(rows.size)
        return _gram_blockdiag(packed[:, index], basis)

    def jacobian_gram_diagonal(self, x: Array, jac: Array) -> Array:
        # G_pp = s_p^2 (Q[j, l] + Q[l, j]) off the diagonal, Q[j, j] on it, with
        # Q = (X o X)^T mask: Q[j, l] = sum_i X_ij^2 mask_il. Both are sym(Q)[j, l].
        q = mm(lax.optimization_barrier((x * x).T), jac)
        return 0.5 * (q + q.T)

    def secant_shift(self, w: Array, x: Array, e: Array, t: ArrayLike, passes: int) -> Array:
        thr = jnp.broadcast_to(t * self.mu, (x.shape[-1],)).astype(x.dtype)
        return l1_secant_shift(w, x, e, t, thr, passes)

    def thresholds(self, t: ArrayLike, w: Array) -> Array:
        """The thresholds t mu_c, shape (r,), in the dtype of ``w``."""
        return jnp.broadcast_to(_threshold(t, self.mu, w), (w.shape[-1],))

    def first_breakpoint(self, w: Array, p: Array, active: Array,
                         t: ArrayLike) -> tuple[Array, Array]:
        """(tau, flat index): the first tau > 0 at which an entry of W + tau P crosses its
        threshold +-t mu_c, leaving the set ``active`` (a boolean d x r mask) or entering
        it; tau = inf where none does (columns with t mu_c = 0 never cross)."""
        thr = self.thresholds(t, w)
        inf = jnp.asarray(jnp.inf, w.dtype)
        safe = jnp.where(p != 0, p, 1.0)
        up = jnp.where(p != 0, (thr - w) / safe, inf)  # reaches +thr
        dn = jnp.where(p != 0, (-thr - w) / safe, inf)  # reaches -thr
        leave = jnp.where(w > 0, jnp.where(p < 0, up, inf), jnp.where(p > 0, dn, inf))
        enter = jnp.where(p > 0, up, jnp.where(p < 0, dn, inf))
        tau = jnp.where(active, leave, enter)
        tau = jnp.where((tau > 0) & (thr > 0), tau, inf).reshape(-1)
        # min, then the first index holding it: jnp.argmin (a variadic reduction) cost 4x
        # as much on CPU (d = 784, r = 15: 81 against 19 us).
        first = jnp.min(tau)
        index = jnp.min(jnp.where(tau == first, jnp.arange(tau.size, dtype=jnp.int32),
                                  tau.size - 1))
        return first, index

    def check(self, shape: tuple[int, ...]) -> None:
        mu_shape = jnp.shape(self.mu)
        r = shape[-1]
        if mu_shape not in ((), (r,)):
            raise ValueError(
                f"l1: mu must be a scalar or have one entry per column, shape "
                f"({r},), got shape {mu_shape}."
            )
        _checks.check_nonnegative("l1: mu", self.mu)


class L21(NamedTuple):
    r"""Sum of row 2-norms, h(X) = mu sum_i ||X_{i,:}||_2 (row sparsity).

    The proximal map shrinks each row towards zero,

    .. math::
        \operatorname{prox}_{t h}(V)_{i,:}
        = \operatorname*{argmin}_y \; \mu \|y\|_2 + \frac{\|y - V_{i,:}\|^2}{2t}
        = \max\Big(1 - \frac{t\mu}{\|V_{i,:}\|_2}, 0\Big) V_{i,:},

    with generalized Jacobian, on rows with ||V_i|| > t mu,
    (1 - t mu / ||V_i||) I + t mu V_i^T V_i / ||V_i||^3, and 0 elsewhere; held as
    alpha_i I + gamma_i u_i^T u_i with u_i = V_i / ||V_i|| and gamma_i = t mu / ||V_i||
    (||V_i||^3 underflows for rows the prox keeps: float32 rows of 1e-13 and below).
    Build it with :func:`l21` (which checks ``mu``); its methods are the regularizer
    protocol of this module.

    Attributes:
      mu: the strength, a scalar >= 0.

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> reg = rproxjax.l21(2.5)
        >>> v = jnp.array([[3.0, 4.0], [0.0, 0.5]])
        >>> reg.prox(v, 1.0).tolist()  # the first row shrinks by 2.5, the second is zeroed
        [[1.5, 2.0], [0.0, 0.0]]
    """

    mu: Array

    def value(self, x: ArrayLike) -> Array:
        return _strength(self.mu, x) * jnp.sum(_row_norms(x), axis=-1)

    def prox(self, v: ArrayLike, t: ArrayLike) -> Array:
        return self.prox_jacobian(v, t)[0]

    def subgradient(self, x: ArrayLike) -> Array:
        norms = _row_norms(x, keepdims=True)
        mu = _strength(self.mu, x)
        return mu * jnp.where(norms > 0, x / jnp.where(norms > 0, norms, 1.0), 0.0)

    def prox_jacobian(self, v: ArrayLike,
                      t: ArrayLike) -> tuple[Array, tuple[Array, Array, Array]]:
        thr = _threshold(t, self.mu, v)
        norms = _row_norms(v)
        active = (norms > thr) | (thr <= 0)  # thr = 0: the identity, zero rows too
        safe = jnp.where(norms > 0, norms, jnp.ones_like(norms))
        alpha = jnp.where(active, 1.0 - thr / safe, 0.0)
        gamma = jnp.where(active, thr / safe, 0.0)
        y = alpha[..., None] * v
        # NumPy's stubs type ndarray / Array as an ndarray; it is an Array (its priority).
        return y, (alpha, gamma, v / safe[..., None])  # type: ignore[return-value]

    def jacobian_apply(self, jac: tuple[Array, Array, Array], w: Array) -> Array:
        alpha, gamma, u = jac
        return alpha[:, None] * w + (gamma * jnp.sum(u * w, axis=-1))[:, None] * u

    def jacobian_gram(self, x: Array, jac: tuple[Array, Array, Array], basis: Basis) -> Array:
        alpha, gamma, u = jac
        r = x.shape[-1]
        g = mm(x.T, alpha[:, None] * x)
        # First term: tr(B_p^T G B_q) = sum_i (B_p)_{:,i}^T G (B_q)_{:,i}.
        first = _gram_blockdiag(jnp.broadcast_to(g, (r, r, r)), basis)
        # Second term: sum_k gamma_k c_kp c_kq with c_kp = x_k B_p u_k^T
        # = s_p (x_kj u_kl + x_kl u_kj).
        scale = basis[2]
        c = scale * (_pair_products(x, u, basis) + _pair_products(u, x, basis))
        return first + mm(c.T, gamma[:, None] * c)

    def jacobian_gram_diagonal(self, x: Array, jac: tuple[Array, Array, Array]) -> Array:
        # G_pp = tr(B_p G B_p) + sum_k gamma_k c_kp^2 (see jacobian_gram). The first is
        # (G_jj + G_ll) / 2 (G_jj on the diagonal); the second, with
        # c_kp = s_p (x_kj u_kl + x_kl u_kj) expanded, s_p^2 (A + A^T + 2 C)[j, l] for
        # A = (X o X)^T diag(gamma) (U o U) and C = (X o U)^T diag(gamma) (X o U).
        alpha, gamma, u = jac
        g = jnp.sum(alpha[:, None] * x * x, axis=0)
        a = mm((x * x).T, gamma[:, None] * (u * u))
        xu = x * u
        c = mm(xu.T, gamma[:, None] * xu)
        r = x.shape[-1]
        s2 = jnp.where(jnp.eye(r, dtype=bool), 0.25, 0.5).astype(x.dtype)
        return 0.5 * (g[:, None] + g[None, :]) + s2 * (a + a.T + 2.0 * c)

    def secant_shift(self, w: Array, x: Array, e: Array, t: ArrayLike, passes: int) -> Array:
        # No coordinate secant for the group norm (its breakpoints are not
        # entrywise): the plain generalized Jacobian is used.
        del w, t, passes
        return jnp.zeros_like(e)

    def check(self, shape: tuple[int, ...]) -> None:
        if jnp.shape(self.mu) != ():
            raise ValueError(
                f"l21: mu must be a scalar, got shape {jnp.shape(self.mu)}."
            )
        _checks.check_nonnegative("l21: mu", self.mu)


def _as_strength(name, mu, max_ndim=1):
    if _checks.not_a_number(mu):
        raise TypeError(f"{name}: mu must be numeric (a number or an array), got {mu!r}.")
    concrete = _checks.concrete_or_none(mu)
    if concrete is not None:
        # jnp's test: ml_dtypes' bfloat16 is not a NumPy number.
        if concrete.dtype == object or not jnp.issubdtype(concrete.dtype, jnp.number):
            raise TypeError(f"{name}: mu must be numeric, got {mu!r}.")
    shape = concrete.shape if concrete is not None else jnp.shape(mu)
    if len(shape) > max_ndim:
        raise ValueError(
            f"{name}: mu must be a scalar{' or a vector' if max_ndim else ''}, got shape "
            f"{shape}."
        )
    _checks.check_nonnegative(f"{name}: mu", mu)
    return mu if isinstance(mu, jax.Array) else jax.device_put(mu)  # no compiled copy


def l1(mu: ArrayLike) -> L1:
    """The l1 regularizer h(X) = sum_ij mu_j |X_ij| (scalar ``mu``, or one per column).

    Args:
      mu: the strength, >= 0: a number or array, a scalar or one per column (shape
        ``(r,)``, checked against the parameters when an optimizer or
        :func:`rproxjax.tangent_prox` gets them). It may be traced (``jax.vmap`` over mu).

    Returns:
      An :class:`L1` regularizer.

    Raises:
      TypeError: for a ``mu`` that is not numeric.
      ValueError: for a ``mu`` of more than one dimension, or a concrete ``mu`` that is not
        finite and >= 0.

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> reg = rproxjax.l1(0.5)
        >>> float(reg.value(jnp.array([[1.0, -2.0]])))
        1.5
    """
    return L1(_as_strength("l1", mu))


def l21(mu: ArrayLike) -> L21:
    """The row-group regularizer h(X) = mu sum_i ||X_{i,:}||_2 (scalar ``mu``).

    Args:
      mu: the strength, a scalar >= 0 (number or array; it may be traced).

    Returns:
      An :class:`L21` regularizer.

    Raises:
      TypeError: for a ``mu`` that is not numeric.
      ValueError: for a ``mu`` that is not a scalar, or a concrete ``mu`` that is not
        finite and >= 0.

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> reg = rproxjax.l21(2.0)
        >>> float(reg.value(jnp.array([[3.0, 4.0], [0.0, 1.0]])))
        12.0
    """
    return L21(_as_strength("l21", mu, max_ndim=0))
