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
from typing import Any, TypeAlias

import jax
import jax.typing

__all__ = ["Array", "ArrayLike", "DTypeLike", "PRNGKey", "PyTree", "Regularizer",
           "ScalarOrSchedule"]

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

#: A regularizer h: :class:`rproxjax.L1`, :class:`rproxjax.L21` or an object with the
#: methods of the protocol described in :mod:`rproxjax._regularizers` (each consumer uses
#: a part of it: ``prox`` and ``value`` for Euclidean blocks, ``subgradient`` for
#: :func:`rproxjax.r_subgrad`, the Jacobian methods for :func:`rproxjax.tangent_prox`).
Regularizer: TypeAlias = Any
