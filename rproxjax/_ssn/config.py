"""The subproblem solver's settings: :class:`SSN`, one immutable value composed of values.

``SSN`` holds the fields every solve has (tolerances, the step limit, how vmapped lanes
run, the warm start), the Newton rule as a value holding only its own knobs
(:class:`Secant` with its :class:`PathSteps`, :class:`Adaptive`, :class:`Reference`) and the
linear solver as a value (:class:`Dense`, :class:`CG`, :class:`AutoLinearSolver`). It is
passed whole to :func:`rproxjax.tangent_prox`, :func:`rproxjax.proximal_step`, every
optimizer and :func:`rproxjax.manpg` (``ssn=...``). ``tol`` and ``rtol`` are the pytree's leaves
(traced under ``jax.jit``/``jax.vmap``: new values never recompile, except that a
concrete ``rtol`` moving between 0 and a positive value selects the tight or the loose
branch of the Newton steps at trace time, one program each); every other field is static
(part of the tree structure: two values that differ in one compile two programs, and no
cache needs clearing). ``docs/subproblem.md`` gives each field's reason.
"""

from __future__ import annotations

import dataclasses
import warnings
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks
from rproxjax._typing import ArrayLike

__all__ = ("CG", "SSN", "SSN_RTOL", "Adaptive", "AutoLinearSolver", "Dense", "PathSteps",
           "Reference", "Secant")

#: The stochastic optimizers' relative tolerance (:meth:`SSN.stochastic`): the solve's
#: error is then a small fraction of the minibatch noise in zeta (``docs/subproblem.md``).
SSN_RTOL = 0.1

#: What a proximal step passes to its next solve.
WARM_STARTS = ("subgradient", "lam_h")


def _count(owner, name, value, low=0):
    out = _checks.index_or_none(value)
    if out is None or out < low:
        raise ValueError(f"{owner}.{name} must be an int >= {low}, got {value!r}.")
    return out


def _scale(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{owner}.{name} must be a number, got {value!r}.")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{owner}.{name} must be finite and >= 0, got {value!r}.")
    return float(value)


def _flag(owner, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{owner}.{name} must be a bool, got {value!r}.")
    return bool(value)


def _normalize(obj, counts=(), scales=(), flags=()):
    """Checks and normalizes ``obj``'s fields in place (a frozen dataclass being built)."""
    owner = type(obj).__name__
    for kind, names in ((_count, counts), (_scale, scales), (_flag, flags)):
        for name in names:
            object.__setattr__(obj, name, kind(owner, name, getattr(obj, name)))


class _Value:
    """A frozen settings value: ``replace`` builds a checked copy."""

    def replace(self, **changes: Any):
        """A copy with ``changes`` (checked like the constructor)."""
        return dataclasses.replace(self, **changes)


# -- the linear solvers of the Newton systems --------------------------------------------

@dataclasses.dataclass(frozen=True)
class Dense(_Value):
    """Dense Newton systems: the r(r+1)/2 symmetric coordinates, one Cholesky factor a step.

    Attributes:
      (none: the dense solver has no knobs.)

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN(linear_solver=rproxjax.Dense()).linear_solver
        Dense()
    """


@dataclasses.dataclass(frozen=True)
class CG(_Value):
    """Matrix-free conjugate gradients on the Newton systems (no r^2 x r^2 matrix); CG
    stops at max(tol / 10, min(1e-4, 1e-3 ||E||)), the reference code's rule.

    Attributes:
      (none: the tolerance follows the Newton loop's.)

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN(linear_solver="cg").linear_solver
        CG()
    """


@dataclasses.dataclass(frozen=True)
class AutoLinearSolver(_Value):
    """:class:`Dense` below rank ``cg_threshold``, :class:`CG` at and above it.

    Attributes:
      cg_threshold: the rank r at and above which CG is taken.

    Example:
        >>> import rproxjax
        >>> rproxjax.AutoLinearSolver().select(32)
        CG()
    """

    cg_threshold: int = 16

    def __post_init__(self) -> None:
        _normalize(self, counts=("cg_threshold",))

    def select(self, r: int) -> Dense | CG:
        """The solver for rank ``r``."""
        return CG() if r >= self.cg_threshold else Dense()


_LINEAR_SOLVERS = MappingProxyType({"auto": AutoLinearSolver, "dense": Dense, "cg": CG})


# -- the Newton rules ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PathSteps(_Value):
    """Path-following steps of tight l1 solves (:mod:`rproxjax._ssn.path`).

    Attributes:
      float32: whether float32 solves take path steps too (float64 only by default).
      rho_scale: the regularization rho_scale min(||E||, 0.1) of the path's systems.
      max_breaks: most threshold crossings a path step follows.
      accept: the full Newton step is taken without a path where it cuts ||E|| by this
        factor.
      progress: the exact line search is tried where no path candidate cuts ||E|| by this
        factor.
    """

    float32: bool = False
    rho_scale: float = 1e-10
    max_breaks: int = 16
    accept: float = 0.1
    progress: float = 0.5

    def __post_init__(self) -> None:
        _normalize(self, counts=("max_breaks",), scales=("rho_scale", "accept", "progress"),
                   flags=("float32",))


@dataclasses.dataclass(frozen=True)
class Secant(_Value):
    """The secant rule: Newton steps on the dual whose diagonal is raised to the coordinate
    secant curvature, with an exact line search (the default rule).

    Attributes:
      passes: breakpoints the secant shift walks per coordinate.
      line_search_passes: most evaluations of the exact line search.
      rho_scale: regularization rho_scale min(||E||, 0.1) of tight steps.
      loose_rho_scale: the same for loose solves (``rtol > 0``).
      loose_shift: whether loose solves add the secant shift.
      unit_accept: a loose step takes s = 1 without a line search when that cuts ||E|| by
        this factor (or meets the stopping test); 0 turns it off.
      path: the path steps of tight float64 l1 solves on dense systems, or ``None`` for
        shifted steps only.

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN(rule=rproxjax.Secant(path=None)).rule.path is None
        True
    """

    name: ClassVar[str] = "secant"
    passes: int = 3
    line_search_passes: int = 6
    rho_scale: float = 1e-4
    loose_rho_scale: float = 1.0
    loose_shift: bool = False
    unit_accept: float = 0.1
    path: PathSteps | None = PathSteps()

    def __post_init__(self) -> None:
        _normalize(self, counts=("passes", "line_search_passes"),
                   scales=("rho_scale", "loose_rho_scale", "unit_accept"),
                   flags=("loose_shift",))
        if self.path is not None and not isinstance(self.path, PathSteps):
            raise ValueError(f"Secant.path must be a PathSteps or None, got {self.path!r}.")


@dataclasses.dataclass(frozen=True)
class Adaptive(_Value):
    """The adaptive rule: plain Newton steps (Jacobi steps first in loose solves) while each
    cuts ||E|| by ``escalate``, then the secant rule's steps for the rest of the call.

    Attributes:
      jacobi_first: whether loose solves start with Jacobi steps (the Newton system's
        diagonal), where the regularizer gives it.
      jacobi_rho_scale: the Jacobi steps' regularization scale.
      plain_rho_scale: the plain steps' regularization scale.
      escalate: a step that cuts ||E|| by less than this factor turns the secant steps on.
      secant: the secant steps taken once escalated (without path steps).

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN.stochastic().rule.escalate
        0.2
    """

    name: ClassVar[str] = "adaptive"
    jacobi_first: bool = True
    jacobi_rho_scale: float = 0.5
    plain_rho_scale: float = 0.2
    escalate: float = 0.2
    secant: Secant = Secant(path=None)

    def __post_init__(self) -> None:
        _normalize(self, scales=("jacobi_rho_scale", "plain_rho_scale", "escalate"),
                   flags=("jacobi_first",))
        if not isinstance(self.secant, Secant) or self.secant.path is not None:
            raise ValueError("Adaptive.secant must be a Secant without path steps "
                             f"(path=None), got {self.secant!r}.")


@dataclasses.dataclass(frozen=True)
class Reference(_Value):
    """The ManPG code's rule: regularization 0.2 min(||E||, 0.1) and backtracking on
    ||E||^2 (s halved down to 1e-3, the last trial accepted).

    Attributes:
      (none: the reference code's constants.)

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN(rule="reference").rule
        Reference()
    """

    name: ClassVar[str] = "reference"


_RULES = MappingProxyType({"secant": Secant, "adaptive": Adaptive, "reference": Reference})
#: Newton rules by name.
METHODS = tuple(_RULES)

#: The former flat fields of :class:`SSN` (deprecated): where each now lives.
_FLAT = MappingProxyType({
    "secant_passes": ("secant", "passes"),
    "line_search_passes": ("secant", "line_search_passes"),
    "rho_scale": ("secant", "rho_scale"),
    "loose_rho_scale": ("secant", "loose_rho_scale"),
    "loose_secant_shift": ("secant", "loose_shift"),
    "unit_accept": ("secant", "unit_accept"),
    "path_steps": ("secant", "path"),
    "path_float32": ("path", "float32"),
    "path_rho_scale": ("path", "rho_scale"),
    "max_breaks": ("path", "max_breaks"),
    "path_accept": ("path", "accept"),
    "path_progress": ("path", "progress"),
    "jacobi_first": ("adaptive", "jacobi_first"),
    "jacobi_rho_scale": ("adaptive", "jacobi_rho_scale"),
    "plain_rho_scale": ("adaptive", "plain_rho_scale"),
    "escalate": ("adaptive", "escalate"),
    "cg_threshold": ("auto", "cg_threshold"),
})


def _as_value(field: str, value, by_name, kinds: tuple[type, ...], example: str):
    """``value`` as one of ``kinds``: itself, or the default value its name selects."""
    if isinstance(value, str):
        if value not in by_name:
            raise ValueError(f"SSN.{field} must be one of {tuple(by_name)} or a value "
                             f"({example}, ...), got {value!r}.")
        return by_name[value]()
    if not isinstance(value, kinds):
        raise ValueError(f"SSN.{field} must be one of "
                         f"{', '.join(f'rproxjax.{k.__name__}(...)' for k in kinds)} or one "
                         f"of {tuple(by_name)}, got {value!r}.")
    return value


def _as_rule(rule):
    return _as_value("rule", rule, _RULES, (Secant, Adaptive, Reference), "rproxjax.Secant()")


def _as_linear_solver(solver):
    return _as_value("linear_solver", solver, _LINEAR_SOLVERS, (Dense, CG, AutoLinearSolver),
                     "rproxjax.Dense()")


def _apply_flat(rule, solver, flat: dict):
    """``rule`` and ``solver`` with the former flat fields ``flat`` applied."""
    parts = {"secant": {}, "path": {}, "adaptive": {}, "auto": {}}
    for name, value in flat.items():
        part, field = _FLAT[name]
        parts[part][field] = value
    secant = rule.secant if isinstance(rule, Adaptive) else rule
    if isinstance(secant, Secant):
        path = parts["secant"].pop("path", secant.path is not None)
        if not isinstance(path, (bool, np.bool_)):
            raise ValueError(f"SSN.path_steps must be a bool, got {path!r}.")
        base = secant.path or PathSteps()
        secant = secant.replace(**parts["secant"], path=(
            base.replace(**parts["path"]) if path and isinstance(rule, Secant) else None))
    if isinstance(rule, Adaptive):
        rule = rule.replace(**parts["adaptive"], secant=secant)
    elif isinstance(rule, Secant):
        rule = secant
    if parts["auto"] and isinstance(solver, AutoLinearSolver):
        solver = solver.replace(**parts["auto"])
    return rule, solver


def _warn_flat(names) -> None:
    rows = ", ".join(f"{n} -> {_FLAT[n][0]}.{_FLAT[n][1]}" if n in _FLAT else f"{n} -> rule"
                     for n in names)
    warnings.warn(f"rproxjax.SSN's flat fields ({rows}) are deprecated and will be removed "
                  "in rproxjax 0.5: pass the rule and the linear solver as values, e.g. "
                  "SSN(rule=rproxjax.Adaptive(escalate=0.3), linear_solver=rproxjax.CG()) "
                  "(see the CHANGELOG's migration table).", DeprecationWarning, stacklevel=4)


@dataclasses.dataclass(frozen=True, init=False)
class SSN:
    """Settings of the semi-smooth Newton solver of the tangent-space prox, composed like
    optimistix's solvers: the common fields, the Newton rule as a value and the linear
    solver as a value.

    A solve stops when ||E||_F <= tol + (rtol + eps) ||zeta||_F (eps of the dtype: the
    rounding level of E). ``tol`` and ``rtol`` are traced leaves of this pytree; every
    other field is static. Build variations with :meth:`replace`, or start from the
    presets :meth:`exact` (the default: tight solves, :func:`rproxjax.tangent_prox` and
    :func:`rproxjax.manpg`) and :meth:`stochastic` (the stochastic optimizers' loose
    solves, :func:`rproxjax.proximal_step`'s default).

    Attributes:
      tol: absolute bound on ||E||_F; ``None``: :func:`rproxjax.default_tol` of the dtype.
      rtol: relative bound (times ||zeta||_F), >= 0.
      max_steps: most Newton steps a call.
      rule: the Newton rule: :class:`rproxjax.Secant` (default), :class:`rproxjax.Adaptive`
        or :class:`rproxjax.Reference`, each holding its own knobs; or its name
        (``"secant"``, ``"adaptive"``, ``"reference"``) for its defaults.
      linear_solver: :class:`rproxjax.Dense`, :class:`rproxjax.CG` or
        :class:`rproxjax.AutoLinearSolver` (default: CG from r = 16); or its name
        (``"dense"``, ``"cg"``, ``"auto"``).
      sequential_lanes: how ``jax.vmap`` batches a solve: ``None`` runs the Newton loops
        of the lanes that take a step one after another on CPU and batches the lanes'
        loops elsewhere; ``True``/``False`` force either.
      warm_start: what a proximal step passes to its next solve: ``"subgradient"`` (the
        last solution's subgradient of h, carried to the new X) or ``"lam_h"`` (the last
        multiplier's regularizer part). The reference rule warm-starts from ``lam``.

    The former flat fields (``method=``, ``jacobi_first=``, ``path_steps=``, ...) are
    accepted until rproxjax 0.5 with a ``DeprecationWarning``; the CHANGELOG maps each to
    its place.

    Raises:
      ValueError: for a field out of its range or of the wrong type (concrete values;
        traced ``tol``/``rtol`` out of range give ``Status.INVALID`` instead).

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN.stochastic().rtol
        0.1
        >>> rproxjax.SSN(tol=1e-8, rule=rproxjax.Adaptive(escalate=0.3)).method
        'adaptive'
    """

    tol: ArrayLike | None
    rtol: ArrayLike
    max_steps: int
    rule: Secant | Adaptive | Reference
    linear_solver: Dense | CG | AutoLinearSolver
    sequential_lanes: bool | None
    warm_start: Literal["subgradient", "lam_h"]

    def __init__(self, tol: ArrayLike | None = None, rtol: ArrayLike = 0.0,
                 max_steps: int = 100, rule: Any = "secant", linear_solver: Any = "auto",
                 sequential_lanes: bool | None = None,
                 warm_start: Literal["subgradient", "lam_h"] = "subgradient",
                 **deprecated: Any) -> None:
        unknown = sorted(set(deprecated) - set(_FLAT) - {"method"})
        if unknown:
            raise TypeError(f"SSN() got an unexpected keyword argument {unknown[0]!r}.")
        if deprecated:
            _warn_flat(deprecated)
            if "method" in deprecated:
                rule = deprecated.pop("method")
        rule, linear_solver = _as_rule(rule), _as_linear_solver(linear_solver)
        if deprecated:
            rule, linear_solver = _apply_flat(rule, linear_solver, deprecated)
        for name, value in (("tol", tol), ("rtol", rtol), ("max_steps", max_steps),
                            ("rule", rule), ("linear_solver", linear_solver),
                            ("sequential_lanes", sequential_lanes), ("warm_start", warm_start)):
            object.__setattr__(self, name, value)
        _check(self)

    @property
    def method(self) -> str:
        """The Newton rule's name: ``"secant"``, ``"adaptive"`` or ``"reference"``."""
        return self.rule.name

    @classmethod
    def exact(cls, **changes: Any) -> SSN:
        """Tight solves (the default): the secant rule to ``tol`` alone (``rtol = 0``)."""
        return cls(**changes)

    @classmethod
    def stochastic(cls, **changes: Any) -> SSN:
        """The stochastic optimizers' loose solves: the adaptive rule, ``rtol = SSN_RTOL``."""
        if "method" not in changes:
            changes = {"rule": "adaptive", **changes}
        return cls(**{"rtol": SSN_RTOL, **changes})

    def replace(self, **changes: Any) -> SSN:
        """A copy with ``changes`` (checked like the constructor)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if "method" in changes:
            fields.pop("rule")
        return SSN(**{**fields, **changes})

    def static(self) -> dict[str, Any]:
        """The static fields (everything but ``tol`` and ``rtol``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in _LEAVES}


_LEAVES = ("tol", "rtol")


def _flatten(ssn):
    return (ssn.tol, ssn.rtol), tuple(ssn.static().items())


def _unflatten(static, leaves):
    # No checks here: JAX rebuilds trees with tracers and placeholders.
    ssn = object.__new__(SSN)
    for name, value in (*zip(_LEAVES, leaves, strict=True), *static):
        object.__setattr__(ssn, name, value)
    return ssn


jax.tree_util.register_pytree_node(SSN, _flatten, _unflatten)


def _check(ssn: SSN) -> None:
    if ssn.warm_start not in WARM_STARTS:
        raise ValueError(f"SSN.warm_start must be one of {WARM_STARTS}, got "
                         f"{ssn.warm_start!r}.")
    object.__setattr__(ssn, "max_steps", _count("SSN", "max_steps", ssn.max_steps))
    if ssn.sequential_lanes is not None and not isinstance(ssn.sequential_lanes, bool):
        raise ValueError(f"SSN.sequential_lanes must be None, True or False, got "
                         f"{ssn.sequential_lanes!r}.")
    for name, value in (("tol", ssn.tol), ("rtol", ssn.rtol)):
        if value is not None and jnp.ndim(value) != 0:
            raise ValueError(f"SSN.{name} must be a scalar (vmap over it for several), got "
                             f"shape {np.shape(value)}.")
    if ssn.tol is not None:
        _checks.check_positive("tol", ssn.tol)
    if ssn.rtol is None:
        raise ValueError("SSN.rtol must be a number >= 0, got None.")
    _checks.check_nonnegative("rtol", ssn.rtol)


def with_deprecated(ssn: SSN | None, where: str, given: dict, names: dict,
                    preset=SSN) -> SSN:
    """``ssn`` (or ``preset()``) with the former keyword arguments ``given`` of ``where``
    applied, each mapped to its field by ``names``; warns once per call.

    Raises:
      TypeError: for ``ssn`` not an :class:`SSN` or a keyword ``where`` never took.
    """
    if ssn is None:
        ssn = preset()
    if not isinstance(ssn, SSN):
        raise TypeError(f"{where}: ssn must be an rproxjax.SSN, got {type(ssn).__name__}.")
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}.")
    if not given:
        return ssn
    changes = {names[k]: v for k, v in given.items()}
    hint = ", ".join(f"{k}=..." for k in changes)
    warnings.warn(f"{where}({', '.join(f'{k}=' for k in given)}) is deprecated and will be "
                  f"removed in rproxjax 0.5: pass ssn=rproxjax.SSN(...) with {hint} instead "
                  "(see the CHANGELOG's migration table).", DeprecationWarning, stacklevel=3)
    return ssn.replace(**changes)
