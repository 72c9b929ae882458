"""The step transformations: proximal step, subgradient direction, retraction.

Each is an ``optax.GradientTransformationExtraArgs`` acting on a pytree of
parameters with one geometry per leaf (:mod:`rproxjax._blocks`):

* :func:`proximal_step` maps a gradient (estimate) V_t to the tangent step
  zeta_t of the proximal subproblem (design notes section 3);
* :func:`subgradient_direction` maps V_t to -P_X(V_t + s), s in dh(X);
* :func:`retract` maps a tangent step zeta to the update
  Retr_X(eta_t zeta) - X, so that ``optax.apply_updates`` lands on the manifold.

The named optimizers (:mod:`rproxjax._optimizers`) are chains of an estimator
(:mod:`rproxjax._estimators`), one of the first two and the retraction, e.g.
``r_prox_sgd(eta, gamma, reg) = chain(proximal_step(gamma, reg), retract(eta))``.

Non-finite values and invalid traced hyperparameters: a step whose gradient or
subproblem is not finite, or whose step (gamma), regularizer strength (mu < 0)
or step scale is invalid, returns a zero step and sets ``info.halted`` (sticky:
every later step is zero); the retraction returns a zero update for a zero
step, a non-finite point or a learning rate that is not finite and > 0 (and
then sets its own ``halted``), so the params are never corrupted. Concrete
hyperparameters are checked when the factory is called (clear errors); traced
ones (under ``jit``/``vmap``, or schedules' values) only by these flags.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.tree_utils as otu

from rproxjax import _checks
from rproxjax._blocks import as_blocks, is_block, map_blocks, total_sq_norm
from rproxjax._checks import renamed
from rproxjax._contract import Needs, StepInfo
from rproxjax._results import Status
from rproxjax._ssn.config import SSN, with_deprecated
from rproxjax._ssn.solve import SubproblemInfo
from rproxjax._typing import Array, PyTree, Regularizer, ScalarOrSchedule

__all__ = ["ProximalStepState", "RetractionState", "SubgradientState", "proximal_step",
           "retract", "subgradient_direction"]


def hyper(name, value):
    """Validates a hyperparameter; scalars become arrays (arguments, not constants,
    of compiled programs, so new values do not recompile)."""
    if callable(value):
        return value
    if _checks.not_a_number(value):
        raise TypeError(f"{name} must be a real number or a schedule, got {value!r}.")
    if jnp.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar or a schedule, got shape {jnp.shape(value)}.")
    _checks.check_positive(name, value)
    return _checks.to_device(value)  # no compile, no buffer shared with the caller


def value_at(hyperparameter, count, dtype):
    value = hyperparameter(count) if callable(hyperparameter) else hyperparameter
    return jnp.asarray(value, dtype)


def dtype_of(params):
    return jnp.result_type(*jax.tree.leaves(params))


def all_finite(tree):
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree.leaves(tree)]))


def check_params(blocks, params, grads=None):
    def check(block, x, *g):
        block.check("params", x)
        if g and jnp.shape(g[0]) != jnp.shape(x):
            raise ValueError(
                f"grads of shape {jnp.shape(g[0])} do not match params of shape {jnp.shape(x)}."
            )
        if g and jnp.result_type(g[0]) != jnp.result_type(x):
            raise ValueError(f"grads (dtype {jnp.result_type(g[0])}) must have the dtype of "
                             f"params ({jnp.result_type(x)}).")
        return 0

    if params is None:
        raise ValueError("the Riemannian transformations need params (the current point) in "
                         "update().")
    map_blocks(check, blocks, *((params,) if grads is None else (params, grads)))


def blocks_state(blocks, params):
    """The blocks (regularizers, step scales) as arrays of the params' dtype, for the state:
    the runner reports F = f + h with the h found there, whatever the chain."""
    dtype = dtype_of(params)
    return jax.tree.map(lambda a: jnp.asarray(a, dtype), blocks)


def _no_retraction(name, retraction):
    """The Stiefel block's retraction for a direction transformation, which never retracts:
    a ``retraction`` given to it would be silently unused (the chain's :func:`retract`
    chooses), so it warns; the name is still checked."""
    if retraction is None:
        return "polar"
    warnings.warn(
        f"{name}(retraction={retraction!r}) has no effect and will be removed in rproxjax "
        "0.4: it does not retract. Give the retraction to the chain's "
        f"retract(eta, retraction={retraction!r}) (the named optimizers take retraction=).",
        DeprecationWarning, stacklevel=3)
    return retraction


def check_state(state, cls, name):
    if not isinstance(state, cls):
        raise ValueError(f"{name}.update got a {type(state).__name__}, not a {cls.__name__}: "
                         "an opt_state from another optimizer?")


def valid_strengths(blocks):
    """Traced regularizer strengths and step scales are checked at run time: mu >= 0 and
    step_scale > 0 (finite). Invalid values halt the step instead of a wrong answer."""
    leaves = jax.tree.leaves(blocks, is_leaf=is_block)
    oks = [jnp.all(jnp.isfinite(a) & (a >= 0)) for b in leaves for a in jax.tree.leaves(b.reg)]
    oks += [jnp.all(jnp.isfinite(b.step_scale) & (jnp.asarray(b.step_scale) > 0))
            for b in leaves]
    return jnp.all(jnp.stack(oks)) if oks else jnp.bool_(True)


def valid_step(value):
    return jnp.isfinite(value) & (value > 0)


def empty_step_info(blocks, params):
    ssn = map_blocks(lambda b, x: b.empty_info(x), blocks, params)
    return StepInfo(ssn, jnp.zeros((), dtype_of(params)), jnp.bool_(False))


def prox_directions(blocks, params, v, gamma, ssn_infos, ssn: SSN):
    """(zeta, subproblem infos, any subproblem non-finite or invalid) over all blocks."""
    zeta, ssn_info = map_blocks(lambda b, x, g, i: b.prox_step(x, g, gamma, i, ssn),
                                blocks, params, v, ssn_infos)
    infos = jax.tree.leaves(ssn_info, is_leaf=lambda n: isinstance(n, SubproblemInfo))
    bad = jnp.any(jnp.stack([(i.status == Status.NONFINITE) | (i.status == Status.INVALID)
                             for i in infos]))
    return zeta, ssn_info, bad


class ProximalStepState(NamedTuple):
    """State of :func:`proximal_step`, which creates it (``init``) and updates it.

    Attributes:
      count: updates taken (int32; the argument of a gamma schedule).
      info: the :class:`rproxjax.StepInfo` record of the last step.
      blocks: the blocks (with their regularizers) as arrays of the params' dtype, from
        which the runner reads h.

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.proximal_step(0.1, rproxjax.l1(0.1)).init(x)
        >>> int(state.count), bool(state.info.halted), type(state.blocks).__name__
        (0, False, 'Stiefel')
    """

    count: Array  # type: ignore[assignment]  # a field, shadowing tuple.count
    info: StepInfo
    blocks: PyTree


def proximal_step(gamma: ScalarOrSchedule, reg: Regularizer | None = None, *,
                  blocks: PyTree | None = None, retraction: str | None = None,
                  ssn: SSN | None = None) -> optax.GradientTransformationExtraArgs:
    r"""The proximal step: V_t -> zeta_t, solving on each block

    .. math::
        \zeta_t = \operatorname*{argmin}_{\zeta \in T_{X_t}}
        \langle V_t, \zeta\rangle + \frac{1}{2\gamma}\|\zeta\|^2 + h(X_t + \zeta)

    (:func:`rproxjax.tangent_prox` on Stiefel blocks, warm-started from the
    last solution's subgradient of h, or its multiplier for the reference rule;
    closed forms on Grassmann and Euclidean blocks).

    Args:
      gamma: the proximal step (scalar or schedule of the step count).
      reg: a regularizer for one Stiefel block (params a d x r matrix), or None.
      blocks: instead of ``reg``, a block or pytree of blocks matching params.
      retraction: deprecated, without effect: this step does not retract; the chain's
        :func:`retract` does, with its own ``retraction`` (``DeprecationWarning``).
      ssn: the subproblem solver's settings, :class:`rproxjax.SSN` (default
        ``SSN.stochastic()``, as every stochastic optimizer).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state
      :class:`ProximalStepState`; ``update`` needs ``params``.

    Raises:
      ValueError: for a concrete gamma that is not a scalar, finite and > 0, or a bad
        ``reg``/``blocks``/``retraction``.
      TypeError: for a gamma that is neither a number nor a schedule, or ``ssn`` not an
        :class:`rproxjax.SSN`.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> opt = optax.chain(rproxjax.proximal_step(0.1, rproxjax.l1(0.01)),
        ...                   rproxjax.retract(0.5))  # r_prox_sgd(0.5, 0.1, l1(0.01))
        >>> updates, state = opt.update(jnp.ones((6, 2)), opt.init(x), x)
        >>> x = optax.apply_updates(x, updates)
        >>> bool(rproxjax.stiefel.feasibility(x) < 1e-5), bool(rproxjax.step_info(state).halted)
        (True, False)
    """
    gamma = hyper("gamma", gamma)
    ssn = with_deprecated(ssn, "proximal_step", {}, {}, SSN.stochastic)
    blocks = as_blocks(reg, blocks, _no_retraction("proximal_step", retraction))

    def init(params):
        check_params(blocks, params)
        return ProximalStepState(jnp.zeros((), jnp.int32), empty_step_info(blocks, params),
                                 blocks_state(blocks, params))

    def update(updates, state, params=None, **extra_args):
        del extra_args
        check_state(state, ProximalStepState, "proximal_step")
        check_params(blocks, params, updates)
        gam = value_at(gamma, state.count, dtype_of(params))
        zeta, ssn_info, bad = prox_directions(blocks, params, updates, gam, state.info.ssn, ssn)
        ok = (~state.info.halted & ~bad & all_finite(zeta) & all_finite(updates)
              & valid_step(gam) & valid_strengths(blocks))
        info = StepInfo(otu.tree_where(ok, ssn_info, state.info.ssn),
                        jnp.where(ok, jnp.sqrt(total_sq_norm(zeta)), state.info.zeta_norm), ~ok)
        return (otu.tree_where(ok, zeta, otu.tree_zeros_like(zeta)),
                ProximalStepState(state.count + 1, info, blocks_state(blocks, params)))

    return optax.GradientTransformationExtraArgs(init, update)


class SubgradientState(NamedTuple):
    """State of :func:`subgradient_direction`, which creates it (``init``) and updates it.

    Attributes:
      info: the :class:`rproxjax.StepInfo` record of the last step (its ``ssn`` is empty;
        ``zeta_norm`` is the norm of the subgradient direction).
      blocks: the blocks (with their regularizers) as arrays of the params' dtype.

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.subgradient_direction(rproxjax.l1(0.1)).init(x)
        >>> state.info.ssn, bool(state.info.halted)
        ((), False)
    """

    info: StepInfo
    blocks: PyTree


def subgradient_direction(reg: Regularizer | None = None, *, blocks: PyTree | None = None,
                          retraction: str | None = None,
                          ) -> optax.GradientTransformationExtraArgs:
    """V_t -> -step_scale P_X(V_t + s), s = ``reg.subgradient(X)`` in dh(X) (mu sign(X) for
    l1): the Riemannian subgradient direction; Euclidean blocks take -(V_t + s).

    Followed by :func:`retract` it is :func:`rproxjax.r_subgrad`. A non-finite direction
    (or an invalid traced strength) gives a zero update and sets ``info.halted``.

    Args:
      reg: a regularizer with a ``subgradient`` method for one Stiefel block (params a
        d x r matrix), or None for h = 0.
      blocks: instead of ``reg``, a block or pytree of blocks matching params.
      retraction: deprecated, without effect: this direction does not retract; the
        chain's :func:`retract` does, with its own ``retraction`` (``DeprecationWarning``).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state
      :class:`SubgradientState`; ``update`` needs ``params``.

    Raises:
      ValueError: for a bad ``reg``/``blocks``/``retraction``.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> sub = rproxjax.subgradient_direction(rproxjax.l1(0.1))
        >>> d, state = sub.update(jnp.ones((6, 2)), sub.init(x), x)
        >>> s = 0.1 * jnp.sign(x)
        >>> bool(jnp.allclose(d, -rproxjax.stiefel.project(x, jnp.ones((6, 2)) + s), atol=1e-6))
        True
    """
    blocks = as_blocks(reg, blocks, _no_retraction("subgradient_direction", retraction))

    def init(params):
        check_params(blocks, params)
        info = StepInfo((), jnp.zeros((), dtype_of(params)), jnp.bool_(False))
        return SubgradientState(info, blocks_state(blocks, params))

    def update(updates, state, params=None, **extra_args):
        del extra_args
        check_state(state, SubgradientState, "subgradient_direction")
        check_params(blocks, params, updates)
        direction = map_blocks(lambda b, x, g: b.subgradient_direction(x, g),
                               blocks, params, updates)
        ok = ~state.info.halted & all_finite(direction) & valid_strengths(blocks)
        scaled = map_blocks(lambda b, x, u: b.scaled(1.0, x) * u, blocks, params, direction)
        info = StepInfo((), jnp.where(ok, jnp.sqrt(total_sq_norm(direction)),
                                      state.info.zeta_norm), ~ok)
        return (otu.tree_where(ok, scaled, otu.tree_zeros_like(scaled)),
                SubgradientState(info, blocks_state(blocks, params)))

    return optax.GradientTransformationExtraArgs(init, update)


class RetractionState(NamedTuple):
    """State of :func:`retract`, which creates it (``init``) and updates it.

    Attributes:
      count: updates taken (int32; the argument of a learning-rate schedule).
      halted: True once a retracted point was not finite or a traced learning rate was
        not finite and > 0; from then on every update is zero.
      needs: the declared :class:`rproxjax.Needs` (static): the update lands on the
        manifold.

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.retract(0.5).init(x)
        >>> int(state.count), bool(state.halted), state.needs.lands
        (0, False, True)
    """

    count: Array  # type: ignore[assignment]  # a field, shadowing tuple.count
    halted: Array
    needs: Needs = Needs(lands=True)


def retract(learning_rate: ScalarOrSchedule, *, blocks: PyTree | None = None,
            retraction: str = "polar",
            **deprecated: Any) -> optax.GradientTransformationExtraArgs:
    """zeta -> Retr_X(eta_t zeta) - X on each block: the params one Stiefel block
    retracted by ``retraction`` (``blocks=None``), or a pytree of blocks with their own
    retractions. A zero step gives a zero update (Retr_X(0) = X), so that
    ``optax.apply_updates(params, updates)`` is the retracted point.

    Args:
      learning_rate: eta_t, a scalar or a schedule of the step count.
      blocks: a block or pytree of blocks matching params (default: one Stiefel block).
      retraction: the Stiefel block's retraction, ``"qr"``, ``"polar"``, ``"exp"`` or
        ``"cayley"`` (without ``blocks``).
      **deprecated: ``method``, the former name of ``retraction`` (``DeprecationWarning``;
        removed in 0.5).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state
      :class:`RetractionState`; ``update`` needs ``params``.

    Raises:
      ValueError: for a concrete learning rate that is not a scalar, finite and > 0, or a
        bad ``blocks``/``retraction``.
      TypeError: for a learning rate that is neither a number nor a schedule, or another
        keyword argument.

    Example:
        >>> import jax, jax.numpy as jnp, optax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> zeta = rproxjax.stiefel.project(x, jnp.ones((6, 2)))
        >>> ret = rproxjax.retract(0.5, retraction="qr")
        >>> updates, state = ret.update(zeta, ret.init(x), x)
        >>> y = rproxjax.stiefel.retract(x, 0.5 * zeta, retraction="qr")
        >>> bool(jnp.allclose(optax.apply_updates(x, updates), y, atol=1e-6))
        True
    """
    learning_rate = hyper("learning_rate", learning_rate)
    retraction = renamed(deprecated, "retract", "method", "retraction", retraction)
    blocks = as_blocks(None, blocks, retraction)

    def init(params):
        check_params(blocks, params)
        return RetractionState(jnp.zeros((), jnp.int32), jnp.bool_(False))

    def update(updates, state, params=None, **extra_args):
        del extra_args
        check_state(state, RetractionState, "retract")
        check_params(blocks, params, updates)
        eta = value_at(learning_rate, state.count, dtype_of(params))
        x_new = map_blocks(lambda b, x, z: b.retract(x, eta * z), blocks, params, updates)
        finite = all_finite(x_new) & valid_step(eta)  # a traced eta <= 0 halts
        moved = jnp.any(jnp.stack([jnp.any(z != 0) for z in jax.tree.leaves(updates)]))
        ok = ~state.halted & finite & moved
        delta = jax.tree.map(lambda a, b: a - b, x_new, params)
        return (otu.tree_where(ok, delta, otu.tree_zeros_like(params)),
                RetractionState(state.count + 1, state.halted | ~finite))

    return optax.GradientTransformationExtraArgs(init, update)
