"""Type aliases of the public API's annotations (``rproxjax`` ships ``py.typed``).

The conventions are JAX's own:

* inputs that accept arrays are :data:`ArrayLike` (``jax.typing.ArrayLike``: JAX and NumPy
  arrays, NumPy scalars and Python numbers; NumPy inputs are accepted everywhere);
* outputs are :data:`Array` (``jax.Array``; a tracer under ``jit``/``vmap``/``grad`` is
  one too);
* pytrees of arrays (params, data sets, optimizer states, regularizers' strengths) are
  :data:`PyTree`, ``Any``: pytrees have no static type (as ``optax.Params`` and
  ``chex.ArrayTree`` are loose too);
* PRNG keys are :data:`PRNGKey`, a ``jax.Array``: typed keys (``jax.random.key``) and raw
  ``uint32[2]`` keys (``jax.random.PRNGKey``) alike;
* step sizes are :data:`ScalarOrSchedule`: a number, a scalar array or a schedule, a
  function of the step count (as optax's ``ScalarOrSchedule``).

Every alias is a runtime object, so ``typing.get_type_hints`` resolves every annotation of
the public API (``tests/test_typing.py`` checks it). Where a function reads an attribute of
an ``ArrayLike`` argument (``x.shape``) after checking that it is an array, the line carries
``# type: ignore[union-attr]``: ``ArrayLike`` includes Python numbers, which have none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

import jax
import jax.typing

__all__ = ("Array", "ArrayLike", "DTypeLike", "EntrywiseBreakpoints", "JacobiDiagonal",
           "PRNGKey", "ProxRegularizer", "PyTree", "Regularizer", "ScalarOrSchedule")

#: An output array (``jax.Array``; tracers included).
Array: TypeAlias = jax.Array

#: An input array: a JAX or NumPy array, a NumPy scalar or a Python number.
ArrayLike: TypeAlias = jax.typing.ArrayLike

#: A dtype: ``jnp.float32``, ``np.float64``, ``"float32"``, ...
DTypeLike: TypeAlias = jax.typing.DTypeLike

#: A PRNG key: ``jax.random.key(seed)`` (typed) or ``jax.random.PRNGKey(seed)`` (raw).
PRNGKey: TypeAlias = jax.Array

#: A pytree of arrays (a single array, or nested tuples, lists, dicts, NamedTuples, ...).
PyTree: TypeAlias = Any

#: A step size or other hyperparameter: a scalar, or a schedule of the step count.
ScalarOrSchedule: TypeAlias = float | ArrayLike | Callable[[ArrayLike], ArrayLike]


@runtime_checkable
class ProxRegularizer(Protocol):
    """A regularizer h with a proximal map: what every block needs (Euclidean blocks,
    :func:`rproxjax.r_subgrad`). A pytree whose leaves are its strengths, acting on d x r
    matrices."""

    def value(self, x: ArrayLike) -> Array:
        """h(X) (leading batch axes kept)."""

    def prox(self, v: ArrayLike, t: ArrayLike) -> Array:
        """prox_{t h}(V) = argmin_Y h(Y) + ||Y - V||^2 / (2t)."""

    def subgradient(self, x: ArrayLike) -> Array:
        """An element of the subdifferential of h at X."""

    def check(self, shape: tuple[int, ...]) -> None:
        """Raises ``ValueError`` if the strengths do not fit d x r matrices of ``shape``."""


@runtime_checkable
class Regularizer(ProxRegularizer, Protocol):
    """A regularizer the semi-smooth Newton kernel of :func:`rproxjax.tangent_prox` can
    use (:class:`rproxjax.L1`, :class:`rproxjax.L21`): a generalized (Clarke) Jacobian D of
    its prox, applied to a direction (CG systems) and as a Gram matrix in the orthonormal
    basis of symmetric matrices (dense systems), and the secant shift of the secant rule."""

    def prox_jacobian(self, v: Array, t: ArrayLike) -> tuple[Array, Any]:
        """``(prox_{t h}(V), jac)``: ``jac`` a pytree describing D at V."""

    def jacobian_apply(self, jac: Any, w: Array) -> Array:
        """D[W]."""

    def jacobian_gram(self, x: Array, jac: Any, basis: tuple[Any, Any, Any]) -> Array:
        """The m x m matrix of <X B_p, D[X B_q]>, B_p = s_p (E_jl + E_lj) for the basis
        ``(rows, cols, scale)`` (j = rows[p] <= l = cols[p], m = r(r+1)/2)."""

    def secant_shift(self, w: Array, x: Array, e: Array, t: ArrayLike, passes: int) -> Array:
        """An r x r symmetric, non-negative matrix R raising the Newton matrix's diagonal
        where D underestimates the dual's curvature along a basis direction; zeros where
        unknown."""


@runtime_checkable
class JacobiDiagonal(Protocol):
    """A regularizer whose Gram matrix's diagonal is cheap: it gets the Jacobi steps of
    loose adaptive solves (:func:`rproxjax._ssn.linear.jacobi_direction`); one without it
    gets full Newton steps."""

    def jacobian_gram_diagonal(self, x: Array, jac: Any) -> Array:
        """The Gram matrix's diagonal as an r x r symmetric matrix (entry (j, l) holds
        G_pp for (j, l) = (rows[p], cols[p]))."""


@runtime_checkable
class EntrywiseBreakpoints(Protocol):
    """A regularizer whose generalized Jacobian is an entrywise 0/1 mask with thresholds
    t mu_c per column (l1): it gets the path steps of tight solves
    (:mod:`rproxjax._ssn.path`)."""

    def thresholds(self, t: ArrayLike, w: Array) -> Array:
        """The thresholds t mu_c, shape (r,), in the dtype of ``w``."""

    def first_breakpoint(self, w: Array, p: Array, active: Array,
                         t: ArrayLike) -> tuple[Array, Array]:
        """(tau, flat index): the first tau > 0 at which an entry of W + tau P crosses its
        threshold, leaving the set ``active`` or entering it; inf where none does."""
