"""The row-group norm: :class:`L21`, its proximal map, its Newton hooks (the generalized
Jacobian, its Gram matrix and diagonal; no secant shift, no path steps) and :func:`l21`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from rproxjax import _checks
from rproxjax._linalg import mm
from rproxjax._regularizers._common import (
    Basis,
    _as_strength,
    _gram_blockdiag,
    _pair_products,
    _row_norms,
    _strength,
    _threshold,
)
from rproxjax._typing import Array, ArrayLike


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
