"""Input validation shared by the public functions.

Checks run at trace time on static information (shapes, dtypes) and on values
that are concrete (Python/NumPy numbers, concrete JAX arrays). Traced values are
never inspected, so the checks cost nothing inside compiled code.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np


def concrete_or_none(value):
    """Returns ``value`` as a NumPy array if it is concrete, else ``None``."""
    if isinstance(value, jax.core.Tracer):
        return None
    try:
        return np.asarray(value)
    except Exception:  # pragma: no cover - defensive: exotic array types
        return None


def index_or_none(value):
    """``value`` as a Python int if it is an integer (NumPy integers too, bools not)."""
    if isinstance(value, bool | np.bool_) or not hasattr(value, "__index__"):
        return None
    try:
        return int(value.__index__())
    except TypeError:
        return None


def check_key(name: str, key) -> None:
    """A JAX PRNG key: typed (jax.random.key) or raw uint32[2] (jax.random.PRNGKey)."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if jnp.shape(key) != ():
            raise ValueError(f"{name} must be a single PRNG key, got a key array of shape "
                             f"{jnp.shape(key)}.")
        return
    if dtype == jnp.uint32 and jnp.shape(key) == (2,):
        return
    raise TypeError(f"{name} must be a PRNG key (jax.random.key(seed)), got {key!r}.")


def check_array(name: str, array) -> None:
    if not hasattr(array, "dtype") or not hasattr(array, "shape"):
        raise TypeError(f"{name} must be a JAX or NumPy array, got {type(array).__name__}"
                        + ("; wrap it with jnp.asarray." if isinstance(array, list | tuple)
                           else "."))


def array_tree(name: str, tree):
    """``tree`` (an array or a pytree of arrays) with its NumPy leaves as JAX arrays.

    NumPy arrays and scalars are array-likes everywhere in rproxjax, and so are objects
    that convert themselves to one (``__array__``: a pandas DataFrame of numbers, say); a
    leaf that is not an array (a list, a string, a Python number, None) raises a TypeError
    naming ``name``.
    """
    leaves, treedef = jax.tree.flatten(tree)
    if not leaves:
        raise TypeError(f"{name} must be an array or a pytree of arrays, got "
                        f"{type(tree).__name__} holding none.")
    out = []
    for leaf in leaves:
        if _converts(leaf):
            leaf = np.asarray(leaf)
        if isinstance(leaf, np.ndarray | np.generic):
            if not (np.issubdtype(leaf.dtype, np.number) or leaf.dtype == np.bool_):
                raise TypeError(f"{name} must hold numbers, got a NumPy array of dtype "
                                f"{leaf.dtype}.")
            leaf = to_device(leaf, name)  # a transfer: jnp.asarray compiles a copy
        elif not isinstance(leaf, jax.Array):
            hint = ("; convert it with numpy.asarray." if isinstance(tree, list | tuple)
                    and not isinstance(leaf, jax.Array | np.ndarray) else ".")
            raise TypeError(f"{name} must be an array or a pytree of arrays (NumPy or JAX), "
                            f"got {type(tree).__name__}"
                            + (f" holding {type(leaf).__name__}" if leaf is not tree else "")
                            + hint)
        out.append(leaf)
    return jax.tree.unflatten(treedef, out)


def _converts(leaf) -> bool:
    """An array-like of another library that NumPy converts (``__array__``), not a JAX,
    NumPy, Python or container value."""
    return (hasattr(leaf, "__array__") and hasattr(leaf, "shape")
            and not isinstance(leaf, jax.Array | np.ndarray | np.generic | jax.core.Tracer))


#: Bytes: a CPU transfer shares a host buffer aligned to this instead of copying it.
_ALIGNMENT = 64


def host_copy(value, dtype=None, name: str = "an input") -> np.ndarray:
    """A private copy of a NumPy value, in ``dtype`` (default: JAX's canonical dtype for
    it, e.g. float32 for float64 without x64), C-contiguous and 64-byte aligned.

    On the CPU, ``jax.device_put`` shares an aligned buffer and copies any other one (and
    converts its dtype in a second pass): transferring this copy costs one pass over the
    data instead of two, and the JAX array never shares the caller's buffer (which the
    caller may change later). The cast is NumPy's (``casting="unsafe"``, as
    ``numpy.ndarray.astype``), silent on overflow as ``jax.device_put``'s own; a
    non-native byte order (big-endian data read from a file) becomes the native one. A
    masked array with masked entries is a ValueError naming ``name``."""
    refuse_masked(name, value)
    value = np.asarray(value)
    dtype = np.dtype(value.dtype if dtype is None else dtype)
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype.newbyteorder("=")))
    size = value.size * dtype.itemsize
    raw = np.empty(size + _ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _ALIGNMENT
    out = raw[start:start + size].view(dtype).reshape(value.shape)
    with np.errstate(all="ignore"):
        np.copyto(out, value, casting="unsafe")
    return out


def refuse_masked(name: str, value) -> None:
    """A NumPy masked array with masked entries is an error: its mask would be dropped and
    the values under it used (a masked array without masked entries is its data)."""
    if isinstance(value, np.ma.MaskedArray) and np.ma.getmaskarray(value).any():
        count = int(np.ma.getmaskarray(value).sum())
        raise ValueError(f"{name} is a masked array with masked entries ({count}); rproxjax "
                         "does not read masks (the values under them would be used): fill "
                         "them (numpy.ma.filled) or drop those samples first "
                         "(robust_matrix_completion takes missing entries as its mask).")


def to_device(value, name: str = "an input"):
    """A host value as a JAX array without compiling anything (``jnp.asarray`` compiles a
    copy per new shape and dtype): Python numbers keep their weak type; NumPy values go
    through :func:`host_copy` (one pass, and never the caller's buffer, which the caller
    may change later; ``name`` names it in errors); JAX arrays and traced values are
    returned as they are."""
    if isinstance(value, jax.Array):
        return value
    if isinstance(value, np.ndarray | np.generic):
        return jax.device_put(host_copy(value, name=name))
    return jax.device_put(value)


def as_dtype(value, dtype, eager: bool = True):
    """``value`` as a strongly typed JAX array of ``dtype`` (``jnp.asarray(value, dtype)``).

    ``eager`` (the caller is not being traced): host values, and JAX arrays of another
    dtype or weakly typed, by a copy through the host, which compiles nothing where
    ``jnp.asarray`` compiles a copy per new shape and dtype. One type for every input, so
    that a compiled program taking it is not compiled again for a weakly typed variant.
    Otherwise ``jnp.asarray``: a cast in the caller's program (a host value staged there
    through ``jax.device_put`` would be a literal of its jaxpr, whose text then changes
    with the value)."""
    if not eager or isinstance(value, jax.core.Tracer):
        return jnp.asarray(value, dtype)
    if isinstance(value, jax.Array) and value.dtype == dtype and not value.weak_type:
        return value
    return jax.device_put(host_copy(value, dtype))


def not_a_number(value) -> bool:
    """A string, list, tuple, dict, None or bool: a type error for a numeric argument."""
    return isinstance(value, str | bytes | list | tuple | dict | bool | np.bool_) or value is None


def host_feasibility(x) -> float:
    """||X^T X - I||_F of a concrete d x r matrix, computed on the host in float64 (a check
    before a run: NumPy, so that it compiles nothing)."""
    xn = np.asarray(x, np.float64)
    gram = xn.T @ xn - np.eye(xn.shape[-1])
    return float(np.sqrt(np.sum(gram * gram)))


def check_float(name: str, array) -> None:
    """float32 or float64: the dtypes the solvers are built and tested for (float16 and
    bfloat16 have no eigendecompositions or QR in JAX and too little precision for the
    constraint X^T X = I)."""
    check_array(name, array)
    dtype = jnp.result_type(array)
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(
            f"{name} must have dtype float32 or float64, got {dtype}"
            + ("; cast it with .astype(jnp.float32)." if jnp.issubdtype(dtype, jnp.floating)
               else ".")
        )


def check_point(name: str, x, *, min_ndim: int = 2) -> tuple[int, int]:
    """Checks a (batch of) d x r matrices with r <= d; returns (d, r)."""
    check_array(name, x)
    shape = jnp.shape(x)
    if len(shape) < min_ndim:
        raise ValueError(
            f"{name} must be a d x r matrix (with optional leading batch "
            f"dimensions), got shape {shape}."
        )
    check_float(name, x)
    d, r = shape[-2], shape[-1]
    if r > d:
        raise ValueError(
            f"{name} has shape {shape}: a point of St(d, r) needs r <= d, "
            f"got r = {r} > d = {d}."
        )
    if r < 1:
        raise ValueError(f"{name} has shape {shape}: r must be at least 1.")
    return d, r


def check_same_dtype(name_a: str, a, name_b: str, b) -> None:
    """The library follows its inputs' dtype, so two inputs must agree on it."""
    check_float(name_b, b)
    if jnp.result_type(a) != jnp.result_type(b):
        raise ValueError(
            f"{name_a} and {name_b} must have the same dtype, got {jnp.result_type(a)} and "
            f"{jnp.result_type(b)}."
        )


def check_same_shape(name_a: str, a, name_b: str, b) -> None:
    if jnp.shape(a) != jnp.shape(b):
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got "
            f"{jnp.shape(a)} and {jnp.shape(b)}."
        )


def check_positive(name: str, value) -> None:
    if not_a_number(value):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    concrete = concrete_or_none(value)
    if concrete is None:
        return
    if not jnp.issubdtype(concrete.dtype, jnp.number) or np.iscomplexobj(concrete):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    if not np.all(np.isfinite(concrete)) or np.any(concrete <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")


def check_nonnegative(name: str, value) -> None:
    if not_a_number(value):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    concrete = concrete_or_none(value)
    if concrete is None:
        return
    if not jnp.issubdtype(concrete.dtype, jnp.number) or np.iscomplexobj(concrete):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    if not np.all(np.isfinite(concrete)) or np.any(concrete < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}.")


def renamed(given: dict, where: str, old: str, new: str, value):
    """The value of keyword ``new`` of ``where``, or of its former name ``old`` if the
    caller's remaining keywords ``given`` hold it (a ``DeprecationWarning``).

    Raises:
      TypeError: for any other keyword in ``given``.
    """
    unknown = sorted(set(given) - {old})
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}.")
    if old not in given:
        return value
    warnings.warn(f"{where}({old}=) is deprecated and will be removed in rproxjax 0.5: use "
                  f"{new}= instead.", DeprecationWarning, stacklevel=3)
    return given[old]


def warn_if_single(name: str, given, used, stacklevel: int) -> None:
    """A ``UserWarning`` when a float64 input ``name`` is computed in float32 (JAX's x64
    is off): shown once per calling line, as Python shows warnings by default."""
    if np.dtype(given) == np.float64 and np.dtype(used) == np.float32:
        warnings.warn(f"{name} is float64 but is computed in float32: JAX's x64 mode is off. "
                      "Enable it (jax.config.update('jax_enable_x64', True)) to compute in "
                      "float64, or pass float32 to silence this.", UserWarning,
                      stacklevel=stacklevel + 1)
