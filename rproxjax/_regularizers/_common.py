"""What the regularizers share: the symmetric basis's Gram helpers, strengths in their
input's dtype, soft-thresholding's pieces and the checks of a strength."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rproxjax import _checks
from rproxjax._linalg import sqrt0
from rproxjax._typing import ArrayLike

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
    r static column slices, which XLA's CPU backend runs faster than a gather with these
    constant indices. Other orders gather.
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
