"""The subproblem solver's settings: :class:`SSN`, one immutable value.

Every knob of the semi-smooth Newton kernel is a field here, passed whole to
:func:`rproxjax.tangent_prox`, :func:`rproxjax.proximal_step`, every optimizer and
:func:`rproxjax.manpg` (``ssn=...``). ``tol`` and ``rtol`` are the pytree's leaves
(traced under ``jax.jit``/``jax.vmap``: new values never recompile, except that a
concrete ``rtol`` moving between 0 and a positive value selects the tight or the loose
branch of the Newton steps at trace time, one program each); every other field is static
(part of the tree structure: two values that differ in one compile two programs, and no
cache needs clearing). ``docs/subproblem.md`` gives each
field's reason.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from rproxjax import _checks
from rproxjax._typing import ArrayLike

__all__ = ["METHODS", "SSN", "SSN_RTOL"]

#: Newton rules: ``"secant"``, ``"adaptive"`` and ``"reference"``.
METHODS = ("secant", "adaptive", "reference")
#: Linear solvers of the Newton systems.
LINEAR_SOLVERS = ("auto", "dense", "cg")
#: Warm starts a proximal step passes to its next solve.
WARM_STARTS = ("subgradient", "lam_h")
#: The stochastic optimizers' relative tolerance (:meth:`SSN.stochastic`): the largest
#: value whose solve error stays a small fraction of the minibatch noise in zeta
#: (``benchmarks/results/inexact_loose.md``, ``inexact_noise.md``).
SSN_RTOL = 0.1

_LEAVES = ("tol", "rtol")


@dataclasses.dataclass(frozen=True)
class SSN:
    """Settings of the semi-smooth Newton solver of the tangent-space prox.

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
      linear_solver: ``"dense"`` (r(r+1)/2 symmetric coordinates), ``"cg"`` (matrix-free
        conjugate gradients) or ``"auto"`` (CG for r >= ``cg_threshold``).
      method: the Newton rule: ``"secant"`` (shifted steps with an exact line search, path
        steps for tight float64 l1 solves), ``"adaptive"`` (plain or Jacobi steps first,
        the secant rule on demand) or ``"reference"`` (the ManPG code's rule).
      cg_threshold: r at and above which ``linear_solver="auto"`` takes CG.
      secant_passes: breakpoints the secant shift walks per coordinate.
      line_search_passes: most evaluations of the exact line search.
      rho_scale: regularization rho_scale min(||E||, 0.1) of tight secant steps.
      loose_rho_scale: the same for loose solves (``rtol > 0``).
      loose_secant_shift: whether loose solves add the secant shift.
      unit_accept: a loose step takes s = 1 without a line search when that cuts ||E|| by
        this factor (or meets the stopping test); 0 turns it off.
      path_steps: whether tight l1 solves on the dense path take path steps.
      path_float32: whether float32 solves take path steps too (float64 only by default).
      path_rho_scale: the path steps' regularization scale.
      max_breaks: most threshold crossings a path step follows.
      path_accept: a path step takes s = 1 where that cuts ||E|| by this factor.
      path_progress: the exact line search is tried where no path candidate cuts ||E||
        by this factor.
      jacobi_first: whether the adaptive rule's loose solves start with Jacobi steps.
      jacobi_rho_scale: the Jacobi steps' regularization scale.
      plain_rho_scale: the adaptive rule's plain steps' regularization scale.
      escalate: the adaptive rule adds the secant shift once a step cuts ||E|| by less
        than this factor.
      sequential_lanes: how ``jax.vmap`` batches a solve: ``None`` runs the Newton loops
        of the lanes that take a step one after another on CPU and batches the lanes'
        loops elsewhere; ``True``/``False`` force either.
      warm_start: what a proximal step passes to its next solve: ``"subgradient"`` (the
        last solution's subgradient of h, carried to the new X) or ``"lam_h"`` (the last
        multiplier's regularizer part). The reference rule warm-starts from ``lam``.

    Raises:
      ValueError: for a field out of its range or of the wrong type (concrete values;
        traced ``tol``/``rtol`` out of range give ``Status.INVALID`` instead).

    Example:
        >>> import rproxjax
        >>> rproxjax.SSN.stochastic().rtol
        0.1
        >>> rproxjax.SSN(tol=1e-8).replace(method="reference").method
        'reference'
    """

    tol: ArrayLike | None = None
    rtol: ArrayLike = 0.0
    max_steps: int = 100
    linear_solver: Literal["auto", "dense", "cg"] = "auto"
    method: Literal["secant", "adaptive", "reference"] = "secant"
    cg_threshold: int = 16
    secant_passes: int = 3
    line_search_passes: int = 6
    rho_scale: float = 1e-4
    loose_rho_scale: float = 1.0
    loose_secant_shift: bool = False
    unit_accept: float = 0.1
    path_steps: bool = True
    path_float32: bool = False
    path_rho_scale: float = 1e-10
    max_breaks: int = 16
    path_accept: float = 0.1
    path_progress: float = 0.5
    jacobi_first: bool = True
    jacobi_rho_scale: float = 0.5
    plain_rho_scale: float = 0.2
    escalate: float = 0.2
    sequential_lanes: bool | None = None
    warm_start: Literal["subgradient", "lam_h"] = "subgradient"

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def exact(cls, **changes: Any) -> SSN:
        """Tight solves (the default): the secant rule to ``tol`` alone (``rtol = 0``)."""
        return cls(**changes)

    @classmethod
    def stochastic(cls, **changes: Any) -> SSN:
        """The stochastic optimizers' loose solves: the adaptive rule, ``rtol = SSN_RTOL``."""
        return cls(**{"method": "adaptive", "rtol": SSN_RTOL, **changes})

    def replace(self, **changes: Any) -> SSN:
        """A copy with ``changes`` (checked like the constructor)."""
        return dataclasses.replace(self, **changes)

    def static(self) -> dict[str, Any]:
        """The static fields (everything but ``tol`` and ``rtol``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in _LEAVES}


def _flatten(ssn):
    return (ssn.tol, ssn.rtol), tuple(ssn.static().items())


def _unflatten(static, leaves):
    # No checks here: JAX rebuilds trees with tracers and placeholders.
    ssn = object.__new__(SSN)
    for name, value in (*zip(_LEAVES, leaves, strict=True), *static):
        object.__setattr__(ssn, name, value)
    return ssn


jax.tree_util.register_pytree_node(SSN, _flatten, _unflatten)

_BOOLS = ("loose_secant_shift", "path_steps", "path_float32", "jacobi_first")
_COUNTS = ("max_steps", "cg_threshold", "secant_passes", "line_search_passes", "max_breaks")
_SCALES = ("rho_scale", "loose_rho_scale", "unit_accept", "path_rho_scale", "path_accept",
           "path_progress", "jacobi_rho_scale", "plain_rho_scale", "escalate")


def _check(ssn: SSN) -> None:
    for name, choices in (("method", METHODS), ("linear_solver", LINEAR_SOLVERS),
                          ("warm_start", WARM_STARTS)):
        if getattr(ssn, name) not in choices:
            raise ValueError(f"SSN.{name} must be one of {choices}, got "
                             f"{getattr(ssn, name)!r}.")
    for name in _COUNTS:
        value = _checks.index_or_none(getattr(ssn, name))
        if value is None or value < 0:
            raise ValueError(f"SSN.{name} must be an int >= 0, got {getattr(ssn, name)!r}.")
        object.__setattr__(ssn, name, value)
    for name in _BOOLS:
        if not isinstance(getattr(ssn, name), (bool, np.bool_)):
            raise ValueError(f"SSN.{name} must be a bool, got {getattr(ssn, name)!r}.")
        object.__setattr__(ssn, name, bool(getattr(ssn, name)))
    if ssn.sequential_lanes is not None and not isinstance(ssn.sequential_lanes, bool):
        raise ValueError(f"SSN.sequential_lanes must be None, True or False, got "
                         f"{ssn.sequential_lanes!r}.")
    for name in _SCALES:
        value = getattr(ssn, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating,
                                                             np.integer)):
            raise ValueError(f"SSN.{name} must be a number, got {value!r}.")
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"SSN.{name} must be finite and >= 0, got {value!r}.")
        object.__setattr__(ssn, name, float(value))
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
                  f"removed in rproxjax 0.4: pass ssn=rproxjax.SSN(...) with {hint} instead "
                  "(see the CHANGELOG's migration table).", DeprecationWarning, stacklevel=3)
    return ssn.replace(**changes)
