"""Geometry of the Stiefel manifold St(d, r) = {X in R^{d x r} : X^T X = I_r}.

The embedded (Euclidean) metric is used throughout (the ``"exp"`` retraction
follows the geodesics of the canonical metric: see :func:`retract`). Every function accepts
leading batch dimensions (arrays of shape ``[..., d, r]``), works under
``jax.jit``, ``jax.vmap`` and ``jax.grad``, and follows the dtype of its
inputs (float32 or float64). No function forms a d x d matrix: the cost of
each is O(d r^2) plus small r x r (or 2r x 2r) dense work.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from rproxjax import stiefel
    >>> x = stiefel.random_point(jax.random.key(0), 6, 2)
    >>> v = stiefel.project(x, jnp.ones((6, 2)))
    >>> y = stiefel.retract(x, 0.1 * v, retraction="polar")
    >>> bool(stiefel.feasibility(y) < 1e-5)
    True
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from rproxjax import _checks, _foreign
from rproxjax._linalg import mm, mT, sqrt0
from rproxjax._typing import Array, ArrayLike, DTypeLike, PRNGKey

__all__ = [
    "RETRACTIONS",
    "feasibility",
    "project",
    "random_point",
    "retract",
    "sym",
    "transport",
]

Retraction = Literal["qr", "polar", "exp", "cayley"]
RETRACTIONS: tuple[str, ...] = ("qr", "polar", "exp", "cayley")



def sym(a: ArrayLike) -> Array:
    """Symmetric part (A + A^T) / 2 of a (batch of) square float32/float64 matrices."""
    _checks.check_float("a", a)
    shape = jnp.shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"sym needs a (batch of) square matrices, got shape {shape}.")
    return 0.5 * (a + mT(a))


@jax.jit
def project(x: ArrayLike, u: ArrayLike) -> Array:
    """Orthogonal projection of ``u`` onto the tangent space at ``x``.

    P_X(U) = U - X sym(X^T U), the projection onto
    T_X = {Z : Z^T X + X^T Z = 0} for the embedded metric.

    Args:
      x: point of St(d, r), shape ``[..., d, r]``.
      u: ambient matrix of the same shape.

    Returns:
      The tangent vector P_X(U), same shape as ``u``.
    """
    _checks.check_point("x", x)
    _checks.check_same_shape("x", x, "u", u)
    _checks.check_same_dtype("x", x, "u", u)
    return u - mm(x, sym(mm(mT(x), u)))


@jax.jit
def transport(x: ArrayLike, y: ArrayLike, u: ArrayLike) -> Array:
    """Vector transport of ``u`` from T_x to T_y by projection: P_Y(U).

    Args:
      x: base point of ``u`` (used for shape checks only).
      y: target point, same shape as ``x``.
      u: tangent vector at ``x``.

    Returns:
      P_Y(U), a tangent vector at ``y``.
    """
    _checks.check_same_shape("x", x, "y", y)
    _checks.check_same_dtype("y", y, "x", x)
    return project(y, u)


def _sign_fix_qr(a):
    """Q factor of the thin QR of ``a`` with the signs fixed so that diag(R) >= 0."""
    return _qr_factors(a)[0]


@jax.custom_jvp
def _qr_factors(a):
    """Thin QR = a (a of shape [..., m, n], m >= n) with diag(R) >= 0.

    Differentiated by its own rule (:func:`_qr_factors_jvp`): JAX's QR rule multiplies at
    the default precision, TF32 on NVIDIA GPUs (the derivative of a float32 retraction was
    off by ~1e-3 relative there).
    """
    q, r = jnp.linalg.qr(a, mode="reduced")
    diag = jnp.diagonal(r, axis1=-2, axis2=-1)
    signs = jnp.where(diag < 0, -1.0, 1.0).astype(a.dtype)
    return q * signs[..., None, :], r * signs[..., :, None]


@_qr_factors.defjvp
def _qr_factors_jvp(primals, tangents):
    # With C = Q^T dA R^{-1} and L its strictly lower triangle, Q^T dQ = L - L^T is skew and
    # dR R^{-1} = C - (L - L^T) upper triangular; the part of dA R^{-1} outside range(Q)
    # stays in dQ: dQ = dA R^{-1} + Q (L - L^T - C). The sign fix is locally constant, and
    # the formula holds for the fixed factors. Every order goes through this rule (the
    # factors inside it are _qr_factors again; triangular_solve's own rule multiplies at
    # HIGHEST).
    (a,), (da,) = primals, tangents
    q, r = _qr_factors(a)
    da_rinv = jax.lax.linalg.triangular_solve(r, da, left_side=False, lower=False)
    c = mm(mT(q), da_rinv)
    low = jnp.tril(c, -1)
    dq = da_rinv + mm(q, low - mT(low) - c)
    dr = mm(jnp.triu(c) + mT(low), r)
    return (q, r), (dq, dr)


#: The polar factor's second pass runs where cond(a)^2 (the ratio of the largest to the
#: smallest eigenvalue of a^T a) exceeds this. One pass alone keeps U^T U = I to rounding up
#: to cond(a)^2 = 1e4 (checked in tests/test_stiefel.py): a margin of 100. Steps of an
#: optimizer (||zeta|| well below 1) have cond(a)^2 near 1.
_SECOND_PASS_COND2 = 100.0


def _inv_sqrt_factor(a):
    """(a (a^T a)^{-1/2}, the eigenvalues of a^T a) through an r x r eigendecomposition."""
    w, q = jnp.linalg.eigh(mm(mT(a), a))
    scaled = q * jax.lax.rsqrt(jnp.maximum(w, jnp.finfo(a.dtype).tiny))[..., None, :]
    return mm(a, mm(scaled, mT(q))), w


#: The second pass's input must be nearly orthonormal. Where the first pass failed (a of
#: numerical rank below r: eigenvalues of a^T a round to <= 0, e.g. cond(a) ~ 1e9 in
#: float64 or ~ 1e4 in float32) the eigenvalues of its Gram matrix spread by 1e20 and more,
#: and the result is NaN instead of a finite non-orthonormal matrix (entries up to 1e281 and
#: feasibility inf, or a zero column, were returned without any signal). The bound on their
#: spread, 1 / sqrt(eps), keeps every result the second pass can still make orthonormal to
#: about eps / sqrt(eps) or better (float32 steps of norm 2e3-4e3 spread them by ~2).
def _second_pass(u):
    u2, w2 = _inv_sqrt_factor(u)
    spread_ok = w2[..., 0] > jnp.sqrt(jnp.finfo(u.dtype).eps) * w2[..., -1]  # False for NaN
    failed = ~spread_ok[..., None, None]
    return jnp.where(failed, jnp.nan, u2)


def _two_passes(a):
    return _second_pass(_inv_sqrt_factor(a)[0])


def _polar_factor(a, passes=None):
    """Orthonormal polar factor U V^T of a d x r matrix (or a batch), O(d r^2).

    a (a^T a)^{-1/2} via an r x r eigendecomposition. One pass loses orthogonality like
    eps * cond(a)^2 at worst; a second pass (on the nearly orthonormal result) restores it
    to rounding error. ``passes="auto"`` runs the second pass only where some matrix of the
    batch has cond(a)^2 above ``_SECOND_PASS_COND2`` (:func:`_polar_passes`; under
    ``jax.vmap`` the lanes share the branch); ``passes="two"`` always runs both (no
    conditional on the device); ``passes="ns"`` computes (a^T a)^{-1/2} by matrix products
    alone (:func:`_newton_schulz`) and takes both eigendecomposition passes only where
    that has not converged. ``None`` (default): ``"auto"`` on CPU, where LAPACK's small
    eigendecompositions are cheap, ``"ns"`` elsewhere, where each is a chain of library
    calls with host round trips that costs several times the products
    (``benchmarks/gpu_profile.py``), read when the function is traced. Derivatives (any
    order) are in closed form (:func:`_polar_jvp`).
    """
    if passes is None:
        passes = "auto" if jax.default_backend() == "cpu" else "ns"
    return {"auto": _polar_auto, "two": _polar_two, "ns": _polar_ns}[passes](a)


#: Newton-Schulz iterations of the matrix-product polar factor: converged (the test of
#: :func:`_newton_schulz`) on tangent steps X + V of ||V||_2 <= 3 in float64 and <= 4.5 in
#: float32 (cond(a)^2 <= 10 and <= 21; r = 4-32, singular values of V spread evenly over
#: [0, ||V||_2]; rank-one steps up to ||V||_2 = 4 in float64). Longer steps take the
#: eigendecomposition passes.
_NS_ITERS = 8


def _newton_schulz(a):
    """(a (a^T a)^{-1/2}, converged) by the coupled Newton-Schulz iteration, products only.

    With M = a^T a scaled by c = max(tr(M) / r, ||M||_inf / 2), so that the spectrum of
    M / c lies in (0, 2] (||M||_inf bounds the largest eigenvalue) and near 1 where M is
    near a multiple of I (tr(M) / r is the mean eigenvalue), Y_0 = M / c and Z_0 = I, the
    iteration T_k = (3 I - Z_k Y_k) / 2, Y_{k+1} = Y_k T_k, Z_{k+1} = T_k Z_k takes Z_k to
    (M / c)^{-1/2} quadratically: R_k = I - Z_k Y_k (a polynomial in M) obeys
    R_{k+1} = 3/4 R_k^2 + 1/4 R_k^3. ``converged`` (per matrix of the batch) says that
    ||R||_F <= sqrt(eps) before the last iteration, so that the last one leaves R at the
    rounding level; it is False for NaN or inf and for a^T a of eigenvalues spread by more
    than the iterations can close (see ``_NS_ITERS``). Where it converged, the result
    is orthonormal to rounding: one eigendecomposition pass loses eps cond(a)^2 at worst.
    """
    m = mm(mT(a), a)
    inf_norm = jnp.max(jnp.sum(jnp.abs(m), axis=-1), axis=-1)  # >= the largest eigenvalue
    mean = jnp.trace(m, axis1=-2, axis2=-1) / m.shape[-1]  # <= the largest eigenvalue
    c = jnp.maximum(mean, 0.5 * inf_norm)[..., None, None]
    eye = jnp.eye(m.shape[-1], dtype=a.dtype)
    y = m / c
    t = 1.5 * eye - 0.5 * y  # the first iteration, Z_0 = I: Z_0 Y_0 = Y_0 and Z_1 = T_0
    y, z = mm(y, t), t
    for _ in range(_NS_ITERS - 1):
        t = 1.5 * eye - 0.5 * mm(z, y)
        y, z = mm(y, t), mm(t, z)
    resid = 2.0 * (t - eye)  # R before the last iteration: Z Y = 3 I - 2 T
    size = jnp.sqrt(jnp.sum(resid * resid, axis=(-2, -1)))
    converged = size <= jnp.sqrt(jnp.finfo(a.dtype).eps)  # False for NaN
    return mm(a, z) * jax.lax.rsqrt(c), converged


def _polar_ns_or_passes(a):
    """:func:`_newton_schulz`, and both eigendecomposition passes instead where some matrix
    of the batch (leading dimensions of a) has not converged: a ``lax.cond`` on the batch."""
    u, converged = _newton_schulz(a)
    return jax.lax.cond(jnp.all(converged), lambda: u, lambda: _two_passes(a))


def _sylvester(h, m):
    """The solution Z of H Z + Z H = M for symmetric positive definite H (r x r, or a batch).

    Solved as (V^T M V)_ij / (w_i + w_j) in the eigenbasis V of H (eigenvalues w), inside
    ``lax.custom_linear_solve``: derivatives (of any order, in H and M) go through the
    linear map Z -> H Z + Z H and further solves, never through the derivative of ``eigh``
    (which divides by differences of eigenvalues)."""

    def solve(_, b):
        w, q = jnp.linalg.eigh(h)
        z = mm(mm(mT(q), b), q) / (w[..., :, None] + w[..., None, :])
        return mm(mm(q, z), mT(q))

    return jax.lax.custom_linear_solve(lambda z: mm(h, z) + mm(z, h), m, solve,
                                       symmetric=True)


@jax.custom_jvp
def _gram_root(a):
    """H = (a^T a)^{1/2} (r x r, or a batch); dH solves H dH + dH H = da^T a + a^T da."""
    w, q = jnp.linalg.eigh(mm(mT(a), a))
    return mm(q * jnp.sqrt(jnp.maximum(w, 0.0))[..., None, :], mT(q))


@_gram_root.defjvp
def _gram_root_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    m = mm(mT(da), a)
    h = _gram_root(a)
    return h, _sylvester(h, m + mT(m))


def _polar_jvp(polar, primals, tangents):
    """The tangent of U = a H^{-1}, H = (a^T a)^{1/2}, in closed form: dU = (da - U dH)
    H^{-1}, with dH from the Sylvester equation H dH + dH H = da^T a + a^T da
    (:func:`_gram_root`, :func:`_sylvester`: divisions by sums s_i + s_j of singular values
    of a, which never vanish for a of full rank). Through the derivative of ``eigh``, which
    divides by differences of eigenvalues, a^T a = I + v^T v near I (a = X + v, v small) or
    with equal eigenvalues (a vertical v = X Omega) gave NaN or O(1)-wrong derivatives. Every
    piece of this rule has a rule of the same kind, so derivatives of any order are finite.
    Free of the primal's branch (under vmap a batched cond's select cannot be transposed,
    and custom_vmap has no reverse-mode rule)."""
    (a,), (da,) = primals, tangents
    u = polar(a)
    h = _gram_root(a)
    m = mm(mT(da), a)
    dh = _sylvester(h, m + mT(m))
    # (da - U dH) H^{-1} = (H^{-1} (da - U dH)^T)^T for symmetric H.
    return u, mT(jnp.linalg.solve(h, mT(da - mm(u, dh))))


def _polar_passes(a):
    """One pass, and the second where some matrix of the batch (leading dimensions of a)
    needs it: a ``lax.cond`` on the whole batch. A (nearly) singular a, whose smallest
    eigenvalue can come out <= 0, and NaN or inf take it too."""
    u, w = _inv_sqrt_factor(a)
    one_pass = jnp.all(w[..., -1] <= _SECOND_PASS_COND2 * w[..., 0])
    return jax.lax.cond(one_pass, lambda u: u, _second_pass, u)


def _lanes_as_batch(fn):
    """``fn`` (of a batch of matrices, with a branch on the whole batch) whose ``jax.vmap``
    takes the lanes as a leading batch dimension, so that the branch stays a real branch
    (taken by all lanes if one needs it) instead of a select that runs both sides for every
    lane."""
    batched = jax.custom_batching.custom_vmap(fn)

    @batched.def_vmap
    def _vmap(axis_size, in_batched, a):
        del axis_size
        return fn(a), in_batched[0]

    return batched


_polar_batched = _lanes_as_batch(_polar_passes)
_polar_ns_batched = _lanes_as_batch(_polar_ns_or_passes)


def _polar_with(passes):
    """The polar factor by ``passes`` as one function with the closed-form derivative."""
    polar = jax.custom_jvp(passes)
    polar.defjvp(lambda primals, tangents: _polar_jvp(polar, primals, tangents))
    return polar


#: Second pass where the batch needs it (CPU) / both passes always / products (accelerators).
_polar_auto = _polar_with(lambda a: _polar_batched(a))
_polar_two = _polar_with(lambda a: _two_passes(a))
_polar_ns = _polar_with(lambda a: _polar_ns_batched(a))


def _exp_parts(x, v):
    """(A, V_perp): the exact skew part of X^T V (it keeps the exponential orthogonal) and
    (I - X X^T) V."""
    xtv = mm(mT(x), v)
    return 0.5 * (xtv - mT(xtv)), v - mm(x, xtv)


@jax.custom_jvp
def _retract_exp(x, v):
    """Edelman-Arias-Smith: [X, Q] expm([[A, -R^T], [R, 0]]) [I; 0] with A = X^T V (skew
    for tangent V) and QR = V_perp = (I - X X^T) V. The block is skew: its exponential is
    orthogonal, the point orthonormal for steps of any length up to the squarings'
    rounding (eps ||V||: see :func:`retract`). Derivatives go
    through :func:`_exp_without_qr` (the same function), since the derivative of a QR is not
    finite where V_perp = 0 (gradients at V = 0 were NaN)."""
    r = x.shape[-1]
    a, vp = _exp_parts(x, v)
    q, rr = jnp.linalg.qr(vp, mode="reduced")
    zeros = jnp.zeros_like(a)
    block = jnp.concatenate(
        [
            jnp.concatenate([a, -mT(rr)], axis=-1),
            jnp.concatenate([rr, zeros], axis=-1),
        ],
        axis=-2,
    )
    m = _expm(block)
    return mm(x, m[..., :r, :r]) + mm(q, m[..., r:, :r])


@_retract_exp.defjvp
def _retract_exp_jvp(primals, tangents):
    _, dy = jax.jvp(_exp_without_qr, primals, tangents)
    return _retract_exp(*primals), dy


def _exp_without_qr(x, v):
    """:func:`_retract_exp` without the QR. With B the skew block, B^k [I; 0] = [P_k; R S_k]
    by induction, where [P_k; S_k] = C^k [I; 0], C = [[A, -N], [I, 0]], N = R^T R =
    V_perp^T V_perp: the point is X P + V_perp S with [P; S] = expm(C) [I; 0]. C is
    balanced by diag(I, c I), c = max(||V_perp||_F, 1): [[A, -N / c], [c I, 0]] has blocks
    of the size of B's (unbalanced, steps of norm 1e3-1e4 overflowed in expm's squarings).
    Not normal, so less orthonormal than the QR form on long steps whose V_perp has spread
    singular values (float64: 1e-11 against 5e-14 at ||V|| = 1e3): used for derivatives."""
    r = x.shape[-1]
    a, vp = _exp_parts(x, v)
    size = jnp.sqrt(jnp.sum(vp * vp, axis=(-2, -1), keepdims=True))
    c = jax.lax.stop_gradient(jnp.maximum(size, 1.0))  # the result is free of c
    eye = jnp.broadcast_to(jnp.eye(r, dtype=x.dtype), a.shape)
    block = jnp.concatenate(
        [
            jnp.concatenate([a, -mm(mT(vp), vp) / c], axis=-1),
            jnp.concatenate([c * eye, jnp.zeros_like(a)], axis=-1),
        ],
        axis=-2,
    )
    m = _expm(block)
    return mm(x, m[..., :r, :r]) + mm(vp, m[..., r:, :r] / c)


#: jax.scipy.linalg.expm returns NaN where it would need more squarings than this (its
#: default, 16, made the exp retraction NaN for ||V|| above ~3.5e5); 64 covers ||V||_1 up to
#: ~1e20. The unused squarings are skipped branches of a scan.
_EXPM_MAX_SQUARINGS = 64


def _expm(a):
    # jax.scipy.linalg.expm issues its own matrix products (Pade terms,
    # squarings, a solve); their precision is not ours to pass. The context
    # manager is scoped to this trace (no global config change) and makes any
    # product inside that requests no precision run at full precision on
    # GPU/TPU too (recent JAX versions already ask for HIGHEST there).
    with jax.default_matmul_precision("highest"):
        expm = functools.partial(jsl.expm, max_squarings=_EXPM_MAX_SQUARINGS)
        if a.ndim == 2:
            return expm(a)
        flat = a.reshape((-1,) + a.shape[-2:])
        return jax.vmap(expm)(flat).reshape(a.shape)


def _retract_cayley(x, v):
    # W = P V X^T - X V^T P with P = I - X X^T / 2, written W = U Z^T with
    # U = [P V, X], Z = [X, -P V] (d x 2r). Sherman-Morrison-Woodbury gives
    # (I - W/2)^{-1} (I + W/2) X = X + U (I - Z^T U / 2)^{-1} (Z^T X)
    # using (I - W/2)^{-1} (I + W/2) = I + (I - W/2)^{-1} W.
    r = x.shape[-1]
    pv = v - 0.5 * mm(x, mm(mT(x), v))
    u = jnp.concatenate([pv, x], axis=-1)
    z = jnp.concatenate([x, -pv], axis=-1)
    eye = jnp.eye(2 * r, dtype=x.dtype)
    small = eye - 0.5 * mm(mT(z), u)
    return x + mm(u, jnp.linalg.solve(small, mm(mT(z), x)))


def retract(x: ArrayLike, v: ArrayLike, retraction: Retraction = "polar",
            **deprecated: Any) -> Array:
    """Retraction Retr_X(V) of a tangent vector ``v`` at ``x``.

    Methods (design notes section 2):

    * ``"qr"``: qf(X + V), the Q factor with diag(R) > 0.
    * ``"polar"``: (X + V)(I + V^T V)^{-1/2}, computed as the orthonormal polar
      factor of X + V: on CPU through r x r eigendecompositions, on GPUs and TPUs by
      Newton-Schulz iterations of r x r matrix products (the eigendecompositions only
      where those have not converged: steps of ||V||_2 above about 3 in float64, 4.5 in
      float32).
    * ``"exp"``: the Riemannian exponential (geodesic) of the canonical metric,
      [X, Q] expm([[A, -R^T], [R, 0]]) [I; 0] with A = X^T V and QR = (I - X X^T) V
      (Edelman, Arias and Smith 1998, eq. 2.42); a retraction for the embedded
      metric too, but not its geodesic.
    * ``"cayley"``: (I - W/2)^{-1}(I + W/2) X with
      W = (I - X X^T/2) V X^T - X V^T (I - X X^T/2), through its low-rank
      (Sherman-Morrison-Woodbury) form: a 2r x 2r solve.

    ``"qr"`` and ``"polar"`` re-orthonormalize: their output satisfies
    X^T X = I to rounding error whatever the drift of ``x``, as long as X + V has
    full numerical rank for ``"polar"`` (its polar factor is not determined
    otherwise: where eigenvalues of (X + V)^T (X + V) round to <= 0, about
    cond(X + V) > 1e7 in float64 or > 3e3 in float32, the result is NaN; ``"qr"``
    returns an orthonormal basis of some completion). ``"exp"`` and ``"cayley"``
    map exactly orthonormal ``x`` to orthonormal points but do not correct an
    existing drift; ``"exp"`` loses orthonormality like eps ||V|| on very long
    steps (float64: 2e-12 at ||V|| = 1e5; float32: 7e-6 at 1e3, 3e-3 at 1e5).

    Args:
      x: point of St(d, r), shape ``[..., d, r]``.
      v: tangent vector at ``x``, same shape.
      retraction: one of ``"qr"``, ``"polar"``, ``"exp"``, ``"cayley"``.
      **deprecated: ``method``, the former name of ``retraction``
        (``DeprecationWarning``; removed in 0.5).

    Returns:
      A point of St(d, r), same shape and dtype as ``x``.
    """
    _checks.check_point("x", x)
    _checks.check_same_shape("x", x, "v", v)
    _checks.check_same_dtype("x", x, "v", v)
    method = _checks.renamed(deprecated, "stiefel.retract", "method", "retraction",
                             retraction)
    return _retract(x, v, method)


@functools.partial(jax.jit, static_argnames="method")
def _retract(x, v, method):
    if method == "qr":
        return _sign_fix_qr(x + v)
    if method == "polar":
        return _polar_factor(x + v)
    if method == "exp":
        return _retract_exp(x, v)
    if method == "cayley":
        return _retract_cayley(x, v)
    raise ValueError(
        f"unknown retraction method {method!r}; expected one of {RETRACTIONS}."
    )


def random_point(key: PRNGKey, d: int, r: int, dtype: DTypeLike | None = None, *,
                 shape: tuple[int, ...] = ()) -> Array:
    """A random point of St(d, r), uniform (Haar) distributed.

    Args:
      key: a JAX PRNG key.
      d, r: matrix size, ``1 <= r <= d``.
      dtype: floating dtype; defaults to JAX's default float dtype.
      shape: leading batch shape.

    Returns:
      Array of shape ``shape + (d, r)``. Called on its own (not inside ``jax.jit``,
      ``jax.vmap`` or a loop), the draw is a program compiled without LLVM's optimizations
      (it compiles in a tenth of the time); the same key inside a caller's program may give
      a point that differs in the last bit.
    """
    _checks.check_key("key", key)
    di, ri = _checks.index_or_none(d), _checks.index_or_none(r)
    if di is None or ri is None or not 1 <= ri <= di:
        raise ValueError(f"random_point needs integers 1 <= r <= d, got d={d!r}, r={r!r}.")
    d, r = di, ri
    if dtype is None:
        dtype = jnp.result_type(float)
    if jnp.dtype(dtype) not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}.")
    dims = [_checks.index_or_none(n) for n in shape] if isinstance(shape, tuple | list) else None
    if dims is None or any(n is None or n < 0 for n in dims):
        raise ValueError(f"shape must be a tuple of non-negative integers, got {shape!r}.")
    draw = _random_point_now if _top_level(key) else _random_point
    return draw(key, tuple(dims) + (d, r), jnp.dtype(dtype))


def _top_level(key) -> bool:
    """Whether a call with ``key`` runs on its own (no enclosing jit, vmap, scan, ...: a
    program compiled with its own options may run), not inside a caller's trace."""
    if isinstance(key, jax.core.Tracer):
        return False
    return _foreign.trace_state_clean()  # a JAX without it: the caller's program


def _draw(key, shape, dtype):
    return _sign_fix_qr(jax.random.normal(key, shape, dtype=dtype))


_random_point = jax.jit(_draw, static_argnums=(1, 2))  # inside a caller's trace
# A concrete key: the draw and its QR as one program compiled without LLVM's optimizations
# (options apply to a top-level program only). Those took 1.2-1.5 s of a 1.5 s compilation
# of the counter-based generator on 2 CPU cores; without them it compiles in 0.2 s, and it
# runs once. The random bits are the same; a normal may differ in its last bit (FMAs).
_random_point_now = jax.jit(_draw, static_argnums=(1, 2),
                            compiler_options={"xla_backend_optimization_level": 0})


@jax.jit
def feasibility(x: ArrayLike) -> Array:
    """Distance to the constraint, ||X^T X - I||_F (batched over leading dims)."""
    _checks.check_point("x", x)
    r = x.shape[-1]  # type: ignore[union-attr]
    gram = mm(mT(x), x) - jnp.eye(r, dtype=x.dtype)  # type: ignore[union-attr]
    # A zero (not NaN) derivative on the manifold, where the distance has its minimum.
    return sqrt0(jnp.sum(gram * gram, axis=(-2, -1)))
