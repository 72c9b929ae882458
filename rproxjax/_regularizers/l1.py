"""The entrywise l1 norm: :class:`L1`, its proximal map, its Newton hooks (the generalized
Jacobian, its Gram matrix and diagonal, the coordinate secant shift of
:mod:`rproxjax._regularizers.l1_secant`, the thresholds' breakpoints of path steps) and
:func:`l1`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax._linalg import mm
from rproxjax._regularizers._common import (
    Basis,
    _as_strength,
    _gram_blockdiag,
    _pair_products,
    _soft_threshold_parts,
    _strength,
    _threshold,
)
from rproxjax._regularizers.l1_secant import l1_secant_shift
from rproxjax._typing import Array, ArrayLike


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
        # min, then the first index holding it: two plain reductions, where jnp.argmin is
        # one variadic reduction, which XLA's CPU backend runs slower.
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
