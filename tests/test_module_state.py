"""No module of :mod:`rproxjax` holds mutable state at module level after import.

Every module of the package is imported (its lab, ``rproxjax.experiments``, is skipped
while it moves out of the package) and each of its global names is checked. A global may
be:

* an immutable value: None, a bool, a number, a string, bytes, a range; a tuple or
  frozenset (NamedTuples included) of allowed values; a ``types.MappingProxyType`` whose
  values are allowed; a frozen dataclass whose fields are allowed; an ``enum`` member; a
  NumPy scalar or dtype; a NumPy array that is not writeable; a ``jax.Array``;
* a module, a class, a function, a typing construct or a ``__future__`` feature;
* a function wrapper whose state is the function's own compilations: ``jax.jit``'s,
  ``jax.custom_jvp``, ``jax.custom_vjp``, ``jax.custom_batching.custom_vmap``, the
  library's :class:`rproxjax._jit.jit`, or a ``functools.partial`` of allowed parts;
* a bounded cache: an object with functools' ``cache_parameters()`` whose ``maxsize`` is an
  int (``functools.lru_cache(maxsize=n)``, :class:`rproxjax._run.compile.ProgramCache`).
  ``functools.cache`` (``maxsize=None``) is unbounded and is refused: a cache keeps what
  it holds for the life of the process, so it must say how much;
* a ``logging.Logger``: the ``logging`` module owns it (``logging.getLogger`` returns the
  same object to everyone), and users configure it;
* ``__all__`` as a list of strings: the Python convention, read by ``import *`` and tools,
  never changed by the library. The other dunder names (``__builtins__``, ``__path__``,
  ``__annotations__``, ...) are the import system's and are not checked.

Anything else is reported: a dict, list, set, bytearray, ``collections.OrderedDict``,
``defaultdict``, ``deque``, ``Counter``, ``ChainMap``, ``array.array``, a
``SimpleNamespace``, a writeable NumPy array, an unbounded cache, a container holding one
of them, or an instance of a class not known to be immutable.

:data:`PENDING` lists the globals of modules whose owners are still changing them; an
entry that is no longer found is reported by :func:`test_pending_entries_are_still_there`
(a warning): delete it when its module is fixed.
"""

from __future__ import annotations

import array
import collections
import dataclasses
import enum
import functools
import importlib
import logging
import pkgutil
import types
import warnings
from typing import NamedTuple

import jax
import numpy as np
import pytest

import rproxjax

#: Packages not checked: the lab, which moves out of the library.
SKIPPED = ("rproxjax.experiments",)

#: Mutable globals of modules being reworked by their owners, each with what it is; delete
#: an entry once its module no longer holds it.
PENDING: dict[tuple[str, str], str] = {}

MUTABLE_CONTAINERS = (dict, list, set, bytearray, collections.OrderedDict,
                      collections.defaultdict, collections.deque, collections.Counter,
                      collections.ChainMap, array.array, types.SimpleNamespace)


def _function_wrappers() -> tuple[type, ...]:
    """The types of the function wrappers allowed as globals (read off instances, so that
    no private name of JAX is used)."""
    from rproxjax._jit import jit

    def f(x):
        return x

    return (type(jax.jit(f)), jax.custom_jvp, jax.custom_vjp, jax.custom_batching.custom_vmap,
            jit)


FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
             types.MethodWrapperType, types.WrapperDescriptorType, staticmethod, classmethod,
             property)
ATOMS = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis),
         type(NotImplemented), np.generic, np.dtype, types.ModuleType, type)


def why_mutable(value, depth: int = 0) -> str | None:
    """Why ``value`` is mutable state (a short reason), or None when it is allowed (see the
    module docstring)."""
    if depth > 4:
        return None  # nested deeper than any constant of the library: not followed
    if isinstance(value, MUTABLE_CONTAINERS):
        return f"a mutable {type(value).__name__}"
    if isinstance(value, ATOMS) or isinstance(value, FUNCTIONS):
        return None
    if callable(getattr(value, "cache_parameters", None)):
        maxsize = value.cache_parameters().get("maxsize")
        if not isinstance(maxsize, int):
            return f"an unbounded cache ({type(value).__name__}, maxsize={maxsize!r})"
        return None
    if isinstance(value, np.ndarray):
        return "a writeable NumPy array" if value.flags.writeable else None
    if isinstance(value, jax.Array | enum.Enum | logging.Logger):
        return None
    if isinstance(value, tuple | frozenset):
        return _first(value, depth, "holds")
    if isinstance(value, types.MappingProxyType):
        return _first(value.values(), depth, "maps to")
    if isinstance(value, functools.partial):
        return _first((value.func, *value.args, *value.keywords.values()), depth, "binds")
    if isinstance(value, _function_wrappers()):
        return None
    if _is_typing(value):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:
            return f"an instance of the dataclass {type(value).__qualname__}, not frozen"
        fields = [getattr(value, field.name) for field in dataclasses.fields(value)]
        return _first(fields, depth, "has a field that is")
    return (f"an instance of {type(value).__module__}.{type(value).__qualname__}, not known "
            "to be immutable")


def _first(values, depth, verb) -> str | None:
    for item in values:
        reason = why_mutable(item, depth + 1)
        if reason is not None:
            return f"{verb} {reason}"
    return None


def _is_typing(value) -> bool:
    """A typing construct (an alias, a union, a TypeVar, ``Literal[...]``) or a
    ``__future__`` feature."""
    module = type(value).__module__
    return (module in ("typing", "typing_extensions", "__future__")
            or isinstance(value, types.GenericAlias | types.UnionType))


def mutable_globals(module) -> dict[str, str]:
    """``{name: reason}`` of the mutable module-level globals of ``module``."""
    found = {}
    for name, value in vars(module).items():
        if name == "__all__":
            if not (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
                found[name] = "not a list or tuple of names"
            continue
        if name.startswith("__") and name.endswith("__"):
            continue
        reason = why_mutable(value)
        if reason is not None:
            found[name] = reason
    return found


def _module_names(package) -> list[str]:
    """Every module of ``package`` and its subpackages (outside :data:`SKIPPED`), the
    packages imported to find their modules."""
    names = []
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.startswith(SKIPPED):
            continue
        names.append(info.name)
        if info.ispkg:
            names.extend(_module_names(importlib.import_module(info.name)))
    return names


@functools.cache
def _findings() -> dict[tuple[str, str], str]:
    """``{(module, name): reason}`` over the whole package (imported once per session)."""
    found = {}
    for module_name in ["rproxjax", *_module_names(rproxjax)]:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:  # an optional extra that is not installed
            if err.name is not None and not err.name.startswith("rproxjax"):
                continue
            raise
        for name, reason in mutable_globals(module).items():
            found[(module_name, name)] = reason
    return found


def test_every_module_is_walked():
    names = _module_names(rproxjax)
    for expected in ("rproxjax._run.compile", "rproxjax._tasks.spca", "rproxjax._ssn.solve",
                     "rproxjax.stiefel"):
        assert expected in names
    assert not any(name.startswith(SKIPPED) for name in names)


def test_no_module_holds_a_mutable_global():
    found = {key: reason for key, reason in _findings().items() if key not in PENDING}
    assert not found, "mutable module-level state:\n" + "\n".join(
        f"  {module}.{name}: {reason}" for (module, name), reason in sorted(found.items()))


def test_pending_entries_are_still_there():
    """An entry of :data:`PENDING` that its owner fixed should leave the list: a warning in
    the test summary says which (not a failure, so that a module's fix never waits for an
    edit of this file)."""
    gone = sorted(set(PENDING) - set(_findings()))
    if gone:
        warnings.warn(f"no longer mutable, delete from PENDING: {gone}", UserWarning,
                      stacklevel=1)


class _Point(NamedTuple):
    x: float
    y: tuple


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: int


@dataclasses.dataclass
class _Open:
    a: int


class _Registry:
    def __init__(self):
        self.items = {}


def test_the_check_finds_planted_mutable_globals_and_passes_immutable_ones():
    fake = types.ModuleType("planted")
    ok = dict(
        __all__=["f"], CONSTANT=3, NAME="x", PAIR=(1, ("a", 2.0)), FROZEN=frozenset({1}),
        TABLE=types.MappingProxyType({"a": 1, "b": (2, 3)}), POINT=_Point(1.0, (2,)),
        SETTINGS=_Frozen(1), READ_ONLY=np.zeros(3), DEVICE=jax.numpy.ones(2),
        LOG=logging.getLogger("planted"), f=lambda x: x, JITTED=jax.jit(lambda x: x),
        BOUNDED=functools.lru_cache(maxsize=4)(lambda x: x), TYPE=int, MODULE=np,
        PARTIAL=functools.partial(max, 1), DTYPE=np.dtype("float32"), SCALAR=np.float32(1),
        ALIAS=list[int], UNION=int | None)
    ok["READ_ONLY"].setflags(write=False)
    bad = dict(
        D={}, L=[], S=set(), B=bytearray(b"x"), OD=collections.OrderedDict(),
        DD=collections.defaultdict(list), Q=collections.deque(), C=collections.Counter(),
        ARRAY=np.zeros(3), UNBOUNDED=functools.cache(lambda x: x), OBJECT=_Registry(),
        NESTED=(1, [2]), PROXIED=types.MappingProxyType({"a": []}), OPEN=_Open(1),
        FROZEN_HOLDING=_Frozen([]), NAMESPACE=types.SimpleNamespace(a=1),
        PARTIAL_OF_LIST=functools.partial(max, []))
    vars(fake).update(ok)
    vars(fake).update(bad)
    found = mutable_globals(fake)
    assert set(found) == set(bad), found
    assert "mutable dict" in found["D"] and "unbounded" in found["UNBOUNDED"]
    assert "holds a mutable list" in found["NESTED"]
    assert "not frozen" in found["OPEN"] and "not known to be immutable" in found["OBJECT"]
    fake.__all__ = ("f", 1)
    assert "__all__" in mutable_globals(fake)


@pytest.mark.parametrize("module, name", [("rproxjax._run.compile", "PROGRAMS"),
                                          ("rproxjax._tasks.spca", "_cached_program")])
def test_the_program_caches_pass_as_bounded_caches(module, name):
    """The program caches pass the check as bounded caches, not as exceptions."""
    cache = getattr(importlib.import_module(module), name)
    assert isinstance(cache.cache_parameters()["maxsize"], int)
    assert why_mutable(cache) is None
