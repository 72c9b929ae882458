"""The public API's docstrings follow the project's Google style.

Every name in ``rproxjax.__all__``:

* a function has ``Args:`` (when it takes parameters), ``Returns:`` and an ``Example:``
  section holding a doctest (``>>>``; the doctests themselves run with
  ``--doctest-modules``);
* a class documents its fields or constructor in ``Attributes:`` or ``Args:``; an enum
  names each of its members;
* a module has an ``Example:`` section with a doctest;
* a constant is documented by a ``#:`` comment above its assignment in the package source.

Only the object's own docstring counts (``__doc__``, not one inherited from a base class).
"""

import enum
import inspect
import pathlib
import re
import types

import pytest

import rproxjax

PACKAGE = pathlib.Path(rproxjax.__file__).resolve().parent


def _public():
    """(name, object) for every name of ``rproxjax.__all__`` that imports here."""
    out = []
    for name in rproxjax.__all__:
        try:
            out.append((name, getattr(rproxjax, name)))
        except ImportError:  # SparsePCA without scikit-learn (an optional dependency)
            continue
    return out


def _kind(obj) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def _doc(obj) -> str:
    return inspect.cleandoc(obj.__doc__ or "")


def _has_section(doc: str, *headers: str) -> bool:
    """A line holding only one of the ``headers`` (e.g. ``Args:``)."""
    return any(re.search(rf"^\s*{re.escape(h)}\s*$", doc, re.MULTILINE) for h in headers)


def _has_example(doc: str) -> bool:
    """An ``Example:`` (or ``Examples:``) header followed by a doctest line."""
    match = re.search(r"^\s*Examples?:\s*$", doc, re.MULTILINE)
    return match is not None and ">>>" in doc[match.end():]


def _of_kind(kind):
    return [(name, obj) for name, obj in _public() if _kind(obj) == kind]


def test_every_public_function_has_args_returns_and_an_example():
    offenders = []
    for name, fn in _of_kind("function"):
        doc = _doc(fn)
        missing = []
        if inspect.signature(fn).parameters and not _has_section(doc, "Args:"):
            missing.append("Args:")
        if not _has_section(doc, "Returns:"):
            missing.append("Returns:")
        if not _has_example(doc):
            missing.append("Example: with a doctest")
        if missing:
            offenders.append(f"{name} (missing {', '.join(missing)})")
    assert not offenders, f"public functions with incomplete docstrings: {offenders}"


def test_every_public_class_documents_its_fields_or_members():
    offenders = []
    for name, cls in _of_kind("class"):
        doc = _doc(cls)
        if issubclass(cls, enum.Enum):
            unnamed = [m.name for m in cls if not re.search(rf"\b{m.name}\b", doc)]
            if unnamed:
                offenders.append(f"{name} (members not listed: {unnamed})")
        elif not _has_section(doc, "Attributes:", "Args:"):
            offenders.append(f"{name} (no Attributes: or Args: section)")
    assert not offenders, f"public classes with incomplete docstrings: {offenders}"


def test_every_public_module_has_an_example():
    offenders = [name for name, module in _of_kind("module") if not _has_example(_doc(module))]
    assert not offenders, f"public modules without an Example: section and doctest: {offenders}"


def test_every_public_constant_is_documented_where_it_is_assigned():
    sources = "\n".join(p.read_text() for p in sorted(PACKAGE.rglob("*.py")))
    offenders = [name for name, _ in _of_kind("constant")
                 if not re.search(rf"^#:.*\n(?:#:.*\n)*{re.escape(name)}\b[^\n]*=", sources,
                                  re.MULTILINE)]
    assert not offenders, f"public constants without a '#:' comment: {offenders}"


@pytest.mark.parametrize("doc, ok", [
    ("Sums.\n\nArgs:\n  x: a.\n\nReturns:\n  b.\n\nExample:\n    >>> 1\n    1", True),
    ("Sums.\n\nArgs:\n  x: a.\n\nReturns:\n  b.\n\nExample: see f.", False),
    ("Sums; Returns: nothing.\n\nArgs:\n  x: a.\n\nExample:\n    >>> 1\n    1", False),
])
def test_the_section_checks(doc, ok):
    """The checks read section headers (a line of their own), not words in the text."""
    assert (_has_section(doc, "Args:") and _has_section(doc, "Returns:")
            and _has_example(doc)) is ok
