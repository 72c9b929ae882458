"""The named optimizers: short chains of the estimator, step and retraction transforms.

Each factory returns an :class:`optax.GradientTransformationExtraArgs`:
``update(grads, state, params, **extra)`` takes a Euclidean gradient
(estimate) of the smooth part f at ``params`` and returns ``updates`` such
that ``optax.apply_updates(params, updates)`` is the retracted point
Retr_X(eta zeta). As ``optax.adam`` is ``chain(scale_by_adam(),
scale_by_learning_rate(lr))``:

* ``r_prox_sgd = chain(proximal_step(gamma), retract(eta))``
* ``r_prox_spb = chain(sarah_estimator(q), proximal_step(gamma), retract(eta))``
* ``r_prox_svrg = chain(svrg_estimator(m), proximal_step(gamma), retract(eta))``
* ``r_prox_sarah = chain(sarah_estimator(q), proximal_step(gamma), retract(alpha))``
* ``r_subgrad = chain(subgradient_direction(), retract(eta))``

``params`` is a point of St(d, r) when ``reg`` is a regularizer (or None),
or a pytree of parameters with ``blocks=`` a matching pytree of blocks
(:class:`rproxjax.Stiefel`, :class:`rproxjax.Grassmann`,
:class:`rproxjax.Euclidean`), each with its own geometry and regularizer.
Gradient preprocessing (clipping, ...) may be chained before them with
``optax.chain``; :func:`rproxjax.fit` finds what they need (the refresh
period, ``grad_fn``, ``value_fn``) and the regularizer through the chain, and
:func:`rproxjax.step_info` finds the common step record.

Hyperparameters (step sizes, the regularizer's strength) are arrays or
schedules (callables of the step count), never Python-static: new values
do not recompile (:func:`rproxjax.fit` compiles once per structure).

Non-finite gradients: if the gradient (or the subproblem) is not finite, the
update is zero, ``step_info(state).halted`` becomes True and stays True, and
all later updates are zero, so X is never corrupted.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import optax

from rproxjax import _checks
from rproxjax._blocks import as_blocks, is_block
from rproxjax._estimators import sarah_estimator, svrg_estimator
from rproxjax._ssn.config import SSN, SSN_RTOL, with_deprecated
from rproxjax._transforms import (
    hyper,
    proximal_step,
    retract,
    subgradient_direction,
)
from rproxjax._typing import Array, ArrayLike, PyTree, Regularizer, ScalarOrSchedule

__all__ = [
    "InverseSqrtSchedule",
    "SSN_RTOL",
    "inverse_sqrt_schedule",
    "r_prox_sarah",
    "r_prox_sgd",
    "r_prox_spb",
    "r_prox_svrg",
    "r_spider_boost",
    "r_subgrad",
]


class InverseSqrtSchedule:
    """eta_t = init_value / (t + offset)^power; a pytree (its values are arrays, so a
    sweep over them compiles once). Build it with :func:`inverse_sqrt_schedule`."""

    def __init__(self, init_value: Array, offset: ArrayLike = 1,
                 power: ArrayLike = 0.5) -> None:
        self.init_value, self.offset, self.power = init_value, offset, power

    def __call__(self, count: ArrayLike) -> Array:
        return self.init_value / (jnp.asarray(count) + self.offset) ** self.power

    def tree_flatten(self) -> tuple[tuple[Array, ArrayLike, ArrayLike], None]:
        return (self.init_value, self.offset, self.power), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple[Any, Any, Any]) -> InverseSqrtSchedule:
        return cls(*children)

    def __repr__(self) -> str:
        return f"inverse_sqrt_schedule({self.init_value}, {self.offset}, {self.power})"


jax.tree_util.register_pytree_node_class(InverseSqrtSchedule)


def inverse_sqrt_schedule(init_value: ArrayLike, offset: int = 1,
                          power: float = 0.5) -> InverseSqrtSchedule:
    """eta_t = init_value / (t + offset)^power (the paper's eta0 / sqrt(t + 1)).

    Args:
      init_value: the numerator eta0 (a scalar, finite and > 0).
      offset: added to the step count t (a scalar, finite and > 0).
      power: the exponent (a scalar >= 0; 0.5 by default).

    Returns:
      An :class:`InverseSqrtSchedule`: a callable of the step count and a pytree whose
      values are arrays (new values do not recompile).

    Raises:
      ValueError: for an ``init_value`` or ``offset`` that is not a scalar, finite and > 0,
        or a concrete ``power`` that is not a scalar, finite and >= 0.
      TypeError: for an ``init_value``, ``offset`` or ``power`` that is not a number.

    Example:
        >>> import rproxjax
        >>> sched = rproxjax.inverse_sqrt_schedule(0.5)
        >>> float(sched(3))
        0.25
    """
    hyper("init_value", init_value)
    hyper("offset", offset)  # eta_0 = init_value / offset^power must be finite
    if jnp.ndim(power) != 0:
        raise ValueError(f"power must be a scalar >= 0, got {power!r}.")
    _checks.check_nonnegative("power", power)  # concrete values; a traced one is used as is
    to_device = _checks.to_device  # compiles nothing, shares no buffer with the caller
    return InverseSqrtSchedule(to_device(init_value), to_device(offset), to_device(power))


#: The optimizers' former keyword arguments, by the SSN field each sets.
_OLD_NAMES = MappingProxyType({"ssn_tol": "tol", "ssn_rtol": "rtol",
                               "ssn_max_steps": "max_steps", "linear_solver": "linear_solver",
                               "ssn_method": "rule"})


def _chain(name, *links):
    """``optax.chain(*links)`` whose update says so when given another optimizer's state."""
    chained = optax.chain(*links)

    def update(updates, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(links):
            raise ValueError(f"{name}.update got a state that is not this optimizer's (an "
                             "opt_state from another optimizer?).")
        return chained.update(updates, state, params, **extra_args)

    return optax.GradientTransformationExtraArgs(chained.init, update)


def _prox_chain(name, estimator, learning_rate, gamma, reg, blocks, retraction, ssn):
    """[estimator,] proximal step, retraction, on the blocks of ``reg``/``blocks``."""
    blocks = as_blocks(reg, blocks, retraction)
    links = [] if estimator is None else [estimator(blocks)]
    links += [proximal_step(gamma, blocks=blocks, ssn=ssn), retract(learning_rate, blocks=blocks)]
    return _chain(name, *links)


def r_prox_sgd(
    learning_rate: ScalarOrSchedule,
    gamma: ScalarOrSchedule,
    reg: Regularizer | None = None,
    *,
    blocks: PyTree | None = None,
    retraction: str = "polar",
    ssn: SSN | None = None,
    **deprecated: Any,
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSGD (the paper's Algorithm 1): ``chain(proximal_step(gamma), retract(eta))``.

    Each update takes the minibatch gradient V_t of f at X_t, solves

    .. math::
        \zeta_t = \operatorname*{argmin}_{\zeta \in T_{X_t}}
        \langle V_t, \zeta\rangle + \frac{1}{2\gamma}\|\zeta\|^2 + h(X_t + \zeta)

    with :func:`rproxjax.tangent_prox` (warm-started from the last solution's
    subgradient of h) and moves to X_{t+1} = Retr_{X_t}(eta_t zeta_t).

    Args:
      learning_rate: eta_t, a scalar or a schedule (e.g.
        :func:`inverse_sqrt_schedule` for the paper's eta0 / sqrt(t + 1)).
      gamma: the proximal step gamma (scalar or schedule).
      reg: regularizer h (e.g. ``rproxjax.l1(mu)``) or ``None`` for h = 0.
      blocks: instead of ``reg``, a pytree of blocks matching ``params``.
      retraction: ``"qr"``, ``"polar"``, ``"exp"`` or ``"cayley"`` (for a
        single Stiefel block; blocks carry their own).
      ssn: the subproblem solver's settings, :class:`rproxjax.SSN`; default
        ``SSN.stochastic()``: the adaptive rule, each solve stopping at
        ||E||_F <= tol + SSN_RTOL ||zeta||_F (SSN_RTOL = 0.1).
      **deprecated: ``ssn_tol``, ``ssn_rtol``, ``ssn_max_steps``, ``linear_solver`` and
        ``ssn_method``, the fields ``tol``, ``rtol``, ``max_steps``, ``linear_solver`` and
        ``method`` of ``ssn`` (``DeprecationWarning``; removed in 0.5).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`; ``update`` needs ``params``.

    Raises:
      ValueError: for a concrete step size <= 0 or a bad ``reg``/``blocks``/``retraction``.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> opt = rproxjax.r_prox_sgd(0.5, 0.1, rproxjax.l1(0.01))
        >>> state = opt.init(x)
        >>> for _ in range(100):
        ...     updates, state = opt.update(-2 * a @ x, state, x)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-6)
        True
    """
    ssn = with_deprecated(ssn, "r_prox_sgd", deprecated, _OLD_NAMES, SSN.stochastic)
    return _prox_chain("r_prox_sgd", None, learning_rate, gamma, reg, blocks, retraction, ssn)


def r_prox_spb(
    learning_rate: ScalarOrSchedule,
    gamma: ScalarOrSchedule,
    reg: Regularizer | None = None,
    *,
    q: int,
    blocks: PyTree | None = None,
    retraction: str = "polar",
    ssn: SSN | None = None,
    **deprecated: Any,
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSPB, Riemannian proximal SpiderBoost (the paper's Algorithm 2):
    ``chain(sarah_estimator(q), proximal_step(gamma), retract(eta))``.

    Every q-th update (the first included, a *refresh*) ``grads`` must be a
    large-batch gradient (the batch S1; the full gradient in finite-sum mode)
    and is used as V_t; the others take the minibatch gradient of S2 at X_t and
    the R-SARAH estimator (:func:`rproxjax.sarah_estimator`; it needs the
    extra argument ``grad_fn``). Then the proximal and retraction steps of
    :func:`r_prox_sgd`, with a constant ``learning_rate`` in the theory.

    Args:
      learning_rate: eta (scalar or schedule).
      gamma: proximal step (scalar or schedule).
      reg: regularizer, ``None`` for h = 0 (R-SpiderBoost); ``blocks`` for a pytree.
      q: refresh period (a Python int >= 1: it shapes compiled loops).
      retraction, ssn: as in
        :func:`r_prox_sgd`.
      **deprecated: the former keyword arguments of :func:`r_prox_sgd`.

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`; ``update`` needs ``params`` and,
      on non-refresh steps, the extra argument ``grad_fn`` (:func:`rproxjax.fit` passes it).

    Raises:
      ValueError: for a concrete step size that is not a scalar, finite and > 0, a ``q`` that
        is not an int >= 1, or a bad ``reg``/``blocks``/``retraction``.
      TypeError: for a step size that is neither a number nor a schedule, ``ssn`` not an
        :class:`rproxjax.SSN`, or an unknown keyword argument.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # f(X) = -tr(X^T A X), one fixed "minibatch"
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> f0 = jnp.trace(x.T @ a @ x)
        >>> opt = rproxjax.r_prox_spb(0.5, 0.1, rproxjax.l1(0.01), q=5)
        >>> state = opt.init(x)
        >>> for _ in range(10):
        ...     updates, state = opt.update(grad(x), state, x, grad_fn=grad)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-5), bool(jnp.trace(x.T @ a @ x) > f0)
        (True, True)
    """
    ssn = with_deprecated(ssn, "r_prox_spb", deprecated, _OLD_NAMES, SSN.stochastic)
    return _prox_chain("r_prox_spb", lambda b: sarah_estimator(q, blocks=b), learning_rate,
                       gamma, reg,
                       blocks, retraction, ssn)


def r_prox_svrg(
    learning_rate: ScalarOrSchedule,
    gamma: ScalarOrSchedule,
    reg: Regularizer | None = None,
    *,
    m: int,
    blocks: PyTree | None = None,
    retraction: str = "polar",
    ssn: SSN | None = None,
    **deprecated: Any,
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSVRG: ``chain(svrg_estimator(m), proximal_step(gamma), retract(eta))``.

    A cell the paper's Table 1 leaves empty. Every m-th update (the first
    included) takes a large-batch gradient at X_t and makes X_t the snapshot
    X~; the others use

    .. math::
        V_t = \nabla f_S(X_t) - \Gamma_{\tilde X}^{X_t}\big(\nabla f_S(\tilde X)
        - \nabla f(\tilde X)\big)

    (:func:`rproxjax.svrg_estimator`), then the proximal and retraction steps
    of :func:`r_prox_sgd`. In the Euclidean case (Gamma the identity, Retr the
    sum) this is ProxSVRG (Reddi et al. 2016) with its snapshot at the last
    iterate of the previous epoch. IFOs: |S1| per refresh, 2 |S| otherwise.

    Args:
      learning_rate, gamma, reg, blocks, retraction, ssn: as in :func:`r_prox_spb`.
      m: snapshot period (a Python int >= 1).
      **deprecated: the former keyword arguments of :func:`r_prox_sgd`.

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`; ``update`` needs ``params`` and,
      on non-refresh steps, the extra argument ``grad_fn`` (:func:`rproxjax.fit` passes it).

    Raises:
      ValueError: for a concrete step size that is not a scalar, finite and > 0, a ``m`` that
        is not an int >= 1, or a bad ``reg``/``blocks``/``retraction``.
      TypeError: for a step size that is neither a number nor a schedule, ``ssn`` not an
        :class:`rproxjax.SSN`, or an unknown keyword argument.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # f(X) = -tr(X^T A X), one fixed "minibatch"
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> f0 = jnp.trace(x.T @ a @ x)
        >>> opt = rproxjax.r_prox_svrg(0.5, 0.1, rproxjax.l1(0.01), m=5)
        >>> state = opt.init(x)
        >>> for _ in range(10):
        ...     updates, state = opt.update(grad(x), state, x, grad_fn=grad)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-5), bool(jnp.trace(x.T @ a @ x) > f0)
        (True, True)
    """
    ssn = with_deprecated(ssn, "r_prox_svrg", deprecated, _OLD_NAMES, SSN.stochastic)
    return _prox_chain("r_prox_svrg", lambda b: svrg_estimator(m, blocks=b), learning_rate,
                       gamma, reg,
                       blocks, retraction, ssn)


def r_prox_sarah(
    gamma: ScalarOrSchedule,
    alpha: ScalarOrSchedule,
    reg: Regularizer | None = None,
    *,
    q: int,
    blocks: PyTree | None = None,
    retraction: str = "polar",
    ssn: SSN | None = None,
    **deprecated: Any,
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSARAH: ``chain(sarah_estimator(q), proximal_step(gamma), retract(alpha))``.

    A cell the paper's Table 1 leaves empty. ProxSARAH (Pham, Nguyen, Phan and
    Tran-Dinh 2020) takes a proximal-gradient point and averages:
    x^_{t+1} = prox_{gamma h}(x_t - gamma v_t), x_{t+1} = (1 - alpha) x_t +
    alpha x^_{t+1}. On the manifold the proximal-gradient point is X_t +
    zeta_t with zeta_t the tangent-space proximal step (:func:`proximal_step`
    with step gamma) and the averaging step moves a fraction alpha along it:
    X_{t+1} = Retr_{X_t}(alpha zeta_t), with the R-SARAH estimator. This is
    the same iteration as :func:`r_prox_spb` with ``learning_rate = alpha``: in
    the Euclidean case too, ProxSARAH and ProxSpiderBoost differ only in their
    step rules, ProxSARAH's theory taking proximal steps gamma above 1/L with an
    averaging weight alpha < 1 where SpiderBoost takes gamma = 1/(2L), alpha = 1.
    The factory exists so that both parameterizations are spelled as in their
    papers. IFOs as :func:`r_prox_spb`.

    Args:
      gamma: the proximal step (ProxSARAH's eta).
      alpha: the averaging weight in (0, 1] (ProxSARAH's gamma).
      reg, q, blocks, retraction, ssn: as in :func:`r_prox_spb`.
      **deprecated: the former keyword arguments of :func:`r_prox_sgd`.

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`; ``update`` needs ``params`` and,
      on non-refresh steps, the extra argument ``grad_fn`` (:func:`rproxjax.fit` passes it).

    Raises:
      ValueError: for a concrete gamma or alpha that is not a scalar, finite and > 0, an
        alpha above 1, a ``q`` that is not an int >= 1, or a bad
        ``reg``/``blocks``/``retraction``.
      TypeError: for a gamma or alpha that is neither a number nor a schedule, ``ssn`` not
        an :class:`rproxjax.SSN`, or an unknown keyword argument.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # f(X) = -tr(X^T A X), one fixed "minibatch"
        >>> def run(opt, x):
        ...     state = opt.init(x)
        ...     for _ in range(4):
        ...         updates, state = opt.update(grad(x), state, x, grad_fn=grad)
        ...         x = optax.apply_updates(x, updates)
        ...     return x
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> x1 = run(rproxjax.r_prox_sarah(0.2, 0.5, rproxjax.l1(0.01), q=3), x0)
        >>> x2 = run(rproxjax.r_prox_spb(0.5, 0.2, rproxjax.l1(0.01), q=3), x0)
        >>> bool(jnp.allclose(x1, x2, atol=1e-6))  # the same iteration as R-ProxSPB's
        True
    """
    hyper("alpha", alpha)
    value = None if callable(alpha) else _checks.concrete_or_none(alpha)
    if value is not None and float(value) > 1.0:
        raise ValueError(f"alpha is an averaging weight in (0, 1], got {float(value)}.")
    ssn = with_deprecated(ssn, "r_prox_sarah", deprecated, _OLD_NAMES, SSN.stochastic)
    return _prox_chain("r_prox_sarah", lambda b: sarah_estimator(q, blocks=b), alpha, gamma,
                       reg, blocks,
                       retraction, ssn)


def r_spider_boost(learning_rate: ScalarOrSchedule, gamma: ScalarOrSchedule, *, q: int,
                   blocks: PyTree | None = None,
                   retraction: str = "polar") -> optax.GradientTransformationExtraArgs:
    """R-SpiderBoost: :func:`r_prox_spb` with h = 0 (smooth problems).

    With h = 0 the proximal step has the closed form zeta = -gamma P_X(V_t) (no
    subproblem), so X_{t+1} = Retr_X(-eta gamma P_X(V_t)) with the R-SARAH estimator.

    Args:
      learning_rate: eta (scalar or schedule).
      gamma: the proximal step (scalar or schedule).
      q: refresh period (a Python int >= 1: it shapes compiled loops).
      blocks: a pytree of blocks matching ``params``, none with a regularizer (h = 0;
        :func:`r_prox_spb` takes regularized blocks), or None for one Stiefel block.
      retraction: as in :func:`r_prox_sgd`.

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`, as :func:`r_prox_spb`'s.

    Raises:
      ValueError: for a concrete step size that is not a scalar, finite and > 0, a ``q`` that
        is not an int >= 1, a block with a regularizer, or a bad ``blocks``/``retraction``.
      TypeError: for a step size that is neither a number nor a schedule.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # f(X) = -tr(X^T A X), one fixed "minibatch"
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> f0 = jnp.trace(x.T @ a @ x)
        >>> opt = rproxjax.r_spider_boost(1.0, 0.05, q=5)
        >>> state = opt.init(x)
        >>> for _ in range(10):
        ...     updates, state = opt.update(grad(x), state, x, grad_fn=grad)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-5), bool(jnp.trace(x.T @ a @ x) > f0)
        (True, True)
    """
    if blocks is not None and any(getattr(b, "reg", None) is not None for b in jax.tree.leaves(
            as_blocks(None, blocks), is_leaf=is_block)):
        raise ValueError("r_spider_boost is R-ProxSPB with h = 0: its blocks take no "
                         "regularizer; use r_prox_spb(eta, gamma, q=q, blocks=...) for h.")
    return r_prox_spb(learning_rate, gamma, None, q=q, blocks=blocks, retraction=retraction)


def r_subgrad(learning_rate: ScalarOrSchedule, reg: Regularizer | None = None, *,
              blocks: PyTree | None = None,
              retraction: str = "polar") -> optax.GradientTransformationExtraArgs:
    """Riemannian (stochastic) subgradient method, the paper's baseline:
    ``chain(subgradient_direction(), retract(eta))``.

    X_{t+1} = Retr_X(-eta_t P_X(V_t + s)), with s = ``reg.subgradient(X)`` an
    element of the subdifferential of h (mu sign(X) for l1).

    Args:
      learning_rate: eta_t, scalar or schedule (the paper: eta0 / sqrt(t + 1)).
      reg: regularizer with a ``subgradient`` method, or ``None``.
      blocks: instead of ``reg``, a pytree of blocks (Euclidean blocks take
        X - eta (V + s)); each block's ``step_scale`` multiplies eta.
      retraction: retraction name.

    Returns:
      An :class:`optax.GradientTransformationExtraArgs`; ``update`` needs ``params``.

    Raises:
      ValueError: for a concrete learning rate that is not a scalar, finite and > 0, or a
        bad ``reg``/``blocks``/``retraction``.
      TypeError: for a learning rate that is neither a number nor a schedule.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # f(X) = -tr(X^T A X), one fixed "minibatch"
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> f0 = jnp.trace(x.T @ a @ x)
        >>> opt = rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(0.05), rproxjax.l1(0.01))
        >>> state = opt.init(x)
        >>> for _ in range(10):
        ...     updates, state = opt.update(grad(x), state, x)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-5), bool(jnp.trace(x.T @ a @ x) > f0)
        (True, True)
    """
    blocks = as_blocks(reg, blocks, retraction)
    return _chain("r_subgrad", subgradient_direction(blocks=blocks),
                  retract(learning_rate, blocks=blocks))
