"""Type hints of the public API (the package ships ``py.typed``): every public callable
annotates all its parameters and its return value, and every annotation resolves at
runtime (``typing.get_type_hints``), so that the coverage cannot regress.

Public callables: the functions, factories and classes of ``rproxjax.__all__`` and of the
``__all__`` of :mod:`rproxjax.stiefel`, :mod:`rproxjax.grassmann`,
:mod:`rproxjax.problems` and :mod:`rproxjax.datasets`; of a class, its ``__init__`` (unless
it is generated: NamedTuples, dataclasses, enums) and the public methods it defines.
"""

import dataclasses
import enum
import inspect
import sys
import types
import typing

import jax
import optax
import pytest

import rproxjax
from rproxjax import _typing, datasets, grassmann, problems, stiefel

SUBMODULES = (stiefel, grassmann, problems, datasets)


def _public_objects():
    """(qualified name, object) of every public name that is not a module."""
    found = []
    for name in rproxjax.__all__:
        try:
            obj = getattr(rproxjax, name)
        except ImportError:  # rproxjax.SparsePCA without scikit-learn
            continue
        if not isinstance(obj, types.ModuleType):
            found.append((f"rproxjax.{name}", obj))
    for module in SUBMODULES:
        found += [(f"{module.__name__}.{name}", getattr(module, name))
                  for name in module.__all__]
    return found


def _is_record(cls):
    """A class whose ``__init__`` is generated from its annotated fields."""
    return ((issubclass(cls, tuple) and hasattr(cls, "_fields"))
            or dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum))


def _callables():
    """(name, function, whether its first parameter is self/cls) of every public callable."""
    out = []
    for label, obj in _public_objects():
        if not isinstance(obj, type):
            if callable(obj):
                out.append((label, obj, False))
            continue
        if not _is_record(obj):
            out.append((f"{label}.__init__", obj.__init__, True))
        for name, member in vars(obj).items():
            if name.startswith("_"):
                continue
            bound = not isinstance(member, staticmethod)
            fn = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            if inspect.isfunction(fn):
                out.append((f"{label}.{name}", fn, bound))
    return out


CALLABLES = _callables()
CLASSES = [(label, obj) for label, obj in _public_objects() if isinstance(obj, type)]


def test_the_public_surface_is_found():
    names = {label for label, _, _ in CALLABLES}
    assert {"rproxjax.fit", "rproxjax.tangent_prox", "rproxjax.r_prox_sgd",
            "rproxjax.stiefel.retract", "rproxjax.Stiefel.__init__", "rproxjax.L1.prox",
            "rproxjax.datasets.load_mnist", "rproxjax.problems.spca_loss"} <= names
    assert len(CALLABLES) > 80


@pytest.mark.parametrize(("label", "fn", "bound"), CALLABLES,
                         ids=[label for label, _, _ in CALLABLES])
def test_every_parameter_and_return_is_annotated(label, fn, bound):
    hints = typing.get_type_hints(fn)  # raises if an annotation does not resolve
    params = list(inspect.signature(fn).parameters)
    if bound:
        params = params[1:]  # self / cls
    missing = [p for p in params if p not in hints]
    assert not missing, f"{label}: parameters without annotations: {missing}"
    assert "return" in hints, f"{label}: no return annotation"


@pytest.mark.parametrize(("label", "cls"), CLASSES, ids=[label for label, _ in CLASSES])
def test_class_annotations_resolve(label, cls):
    """The fields of the results, states and settings (NamedTuples, dataclasses)."""
    hints = typing.get_type_hints(cls)
    if _is_record(cls) and not issubclass(cls, enum.Enum):
        fields = (cls._fields if issubclass(cls, tuple)
                  else [f.name for f in dataclasses.fields(cls)])
        assert set(fields) <= set(hints), label


def test_aliases_are_the_real_types():
    assert _typing.Array is jax.Array
    assert _typing.PRNGKey is jax.Array
    assert _typing.ArrayLike is jax.typing.ArrayLike
    assert typing.get_type_hints(stiefel.retract)["return"] is jax.Array
    assert typing.get_type_hints(rproxjax.L1)["mu"] is jax.Array
    assert typing.get_type_hints(rproxjax.FitResult)["epoch_loss"] is jax.Array
    for factory in (rproxjax.r_prox_sgd, rproxjax.r_prox_spb, rproxjax.r_prox_svrg,
                    rproxjax.r_prox_sarah, rproxjax.r_spider_boost, rproxjax.r_subgrad,
                    rproxjax.manpg, rproxjax.proximal_step, rproxjax.retract,
                    rproxjax.subgradient_direction, rproxjax.sarah_estimator,
                    rproxjax.svrg_estimator):
        assert (typing.get_type_hints(factory)["return"]
                is optax.GradientTransformationExtraArgs), factory.__name__


def test_no_module_aliases_array_to_any():
    """``Array = Any`` aliases are gone: annotations name ``jax.Array`` (``_typing.Array``)."""
    modules = [m for name, m in sys.modules.items()
               if name.startswith("rproxjax.") and ".experiments" not in name]
    assert len(modules) > 20  # the package's modules, imported by ``import rproxjax``
    for module in modules:
        if "Array" in vars(module):
            assert vars(module)["Array"] is jax.Array, module.__name__
