"""Full-precision matrix products.

GPUs and TPUs run float32 matrix products at reduced precision by default
(TF32 on NVIDIA GPUs, bf16 passes on TPUs): relative errors near 1e-3 instead
of 1e-7, which is enough to break X^T X = I after a retraction and to stall the
semi-smooth Newton solves. The library never changes JAX's global
configuration (``jax_default_matmul_precision``), so every product it issues
asks for ``Precision.HIGHEST`` itself, through :func:`mm`. On CPU, and for
float64, this changes nothing.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST


def mm(a, b):
    """``a @ b`` (batched matmul semantics) at full precision."""
    return jnp.matmul(a, b, precision=HIGHEST)


def mT(a):  # noqa: N802
    """Swaps the last two axes (the batched transpose)."""
    return jnp.swapaxes(a, -1, -2)


def sqrt0(sq):
    """sqrt(sq) for sq >= 0 with a zero (not NaN) derivative at sq = 0: for norms whose
    minimum 0 is a kink (0 is a subgradient there)."""
    nonzero = sq > 0
    # 0 * sq where sq is not positive: 0 stays 0 with a zero derivative of every order, and
    # NaN stays NaN (a NaN norm read as 0 made stiefel.feasibility call a NaN point feasible).
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0 * sq)
