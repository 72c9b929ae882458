"""Geometry of the Grassmann manifold Gr(m, r) with orthonormal-basis representatives.

A point is an m x r matrix U with U^T U = I representing its column span.
Tangent (horizontal) vectors satisfy U^T Z = 0. Shapes ``[..., m, r]`` are
accepted, as in :mod:`rproxjax.stiefel`.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from rproxjax import grassmann
    >>> u = grassmann.random_point(jax.random.key(0), 5, 2)
    >>> z = grassmann.project(u, jnp.ones((5, 2)))
    >>> bool(jnp.allclose(u.T @ z, 0.0, atol=1e-5))
    True
"""

from __future__ import annotations

from typing import Any, Literal

import jax
import jax.numpy as jnp

from rproxjax import _checks
from rproxjax import stiefel as _stiefel
from rproxjax._linalg import mm, mT
from rproxjax._typing import Array, ArrayLike, DTypeLike, PRNGKey

__all__ = [
    "RETRACTIONS",
    "principal_angles",
    "project",
    "random_point",
    "retract",
    "transport",
]

RETRACTIONS: tuple[str, ...] = ("qr", "polar")


def project(u: ArrayLike, z: ArrayLike) -> Array:
    """Horizontal projection P_U(Z) = Z - U (U^T Z)."""
    _checks.check_point("u", u)
    _checks.check_same_shape("u", u, "z", z)
    _checks.check_same_dtype("u", u, "z", z)
    return z - mm(u, mm(mT(u), z))


def transport(u: ArrayLike, w: ArrayLike, z: ArrayLike) -> Array:
    """Vector transport of ``z`` from the span of ``u`` to that of ``w``: P_W(Z)."""
    _checks.check_same_shape("u", u, "w", w)
    return project(w, z)


def retract(u: ArrayLike, v: ArrayLike, retraction: Literal["qr", "polar"] = "polar",
            **deprecated: Any) -> Array:
    """Retraction: an orthonormal basis of span(U + V) by ``"qr"`` or ``"polar"``
    (``retraction``; its former name ``method`` is deprecated)."""
    method = _checks.renamed(deprecated, "grassmann.retract", "method", "retraction",
                             retraction)
    if method not in RETRACTIONS:
        raise ValueError(
            f"unknown Grassmann retraction {method!r}; expected one of {RETRACTIONS}."
        )
    _checks.check_point("u", u)
    _checks.check_same_shape("u", u, "v", v)
    _checks.check_same_dtype("u", u, "v", v)
    return _stiefel.retract(u, v, retraction=method)


def random_point(key: PRNGKey, m: int, r: int, dtype: DTypeLike | None = None, *,
                 shape: tuple[int, ...] = ()) -> Array:
    """A random (Haar-distributed) orthonormal basis of an r-dim subspace of R^m."""
    return _stiefel.random_point(key, m, r, dtype, shape=shape)


def principal_angles(u: ArrayLike, w: ArrayLike) -> Array:
    """Principal angles (radians, ascending) between span(U) and span(W).

    Both bases must be orthonormal and of the same shape and dtype. Each angle is the
    arcsin of a singular value of W - U (U^T W) where that sine is small, the arccos of a
    singular value of U^T W where it is large, and a blend of both in between (sin^2 from
    0.3 to 0.7; after Knyazev and Argentati 2002). Arccos alone loses small angles to
    rounding (identical float32 subspaces gave 3e-4, an angle of 1e-8 in float64 gave 0),
    and its derivative is infinite at angle 0 (the gradient of the sum of squared angles
    was NaN at identical subspaces; now 0).
    """
    _checks.check_point("u", u)
    _checks.check_point("w", w)
    _checks.check_same_shape("u", u, "w", w)
    _checks.check_same_dtype("u", u, "w", w)
    utw = mm(mT(u), w)
    cosines = jnp.linalg.svd(utw, compute_uv=False)  # descending: their arccos ascend
    sines = jnp.linalg.svd(w - mm(u, utw), compute_uv=False)[..., ::-1]  # ascending
    # Blended over sin^2 in [0.3, 0.7], where both forms are accurate, with weights that
    # depend on the value alone: equal angles get equal weights, so derivatives of functions
    # of a cluster of repeated angles stay those of one form (a hard switch at pi/4 mixed the
    # two singular value decompositions inside such a cluster: wrong gradients). A form whose
    # weight is 0 sees a dummy argument (no infinite derivative at sine or cosine 1).
    weight = jax.lax.stop_gradient(jnp.clip((0.7 - sines * sines) / 0.4, 0.0, 1.0))
    by_sine = jnp.arcsin(jnp.clip(jnp.where(weight > 0, sines, 0.5), 0.0, 1.0))
    by_cosine = jnp.arccos(jnp.clip(jnp.where(weight < 1, cosines, 0.5), 0.0, 1.0))
    return weight * by_sine + (1.0 - weight) * by_cosine
