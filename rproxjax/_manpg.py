r"""ManPG and ManPG-Ada (Chen, Ma, So and Zhang 2020): full-gradient proximal steps with
an Armijo search.

One transformation rather than a chain: ManPG-Ada's next proximal step depends
on the line search's outcome, which couples the two. It is built from the
same pieces as the chains (the blocks' proximal step and retraction) and
keeps the common :class:`rproxjax.StepInfo` record under ``info``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.tree_utils as otu
from jax import lax

from rproxjax._blocks import as_blocks, map_blocks, total_sq_norm
from rproxjax._contract import Needs, StepInfo
from rproxjax._ssn.config import SSN, with_deprecated
from rproxjax._transforms import (
    all_finite,
    blocks_state,
    check_params,
    check_state,
    dtype_of,
    empty_step_info,
    hyper,
    prox_directions,
)
from rproxjax._typing import Array, ArrayLike, PyTree, Regularizer

__all__ = ["ManPGState", "manpg"]

_NEEDS = Needs(value_fn=True, full_batch=True, lands=True)
#: manpg's former keyword arguments, by the SSN field each sets.
_OLD_NAMES = MappingProxyType({"linear_solver": "linear_solver", "ssn_max_steps": "max_steps",
                               "ssn_method": "rule"})


class ManPGState(NamedTuple):
    """State of :func:`manpg`.

    Attributes:
      count: steps taken (steps after convergence are not counted).
      info: the :class:`rproxjax.StepInfo` record.
      blocks: the blocks (regularizers) as arrays.
      gamma: the current proximal step (changes under ManPG-Ada).
      converged: True once ||zeta||^2 / gamma^2 < tol; later updates are zero.
      stationarity: ||zeta||_F^2 / gamma^2 at the last step (the stopping test).
      alpha: the Armijo step accepted at the last step.
      num_backtracks: line-search halvings, summed over steps.
      num_inexact: steps accepted with alpha < 1e-4 ("inexact"), summed.
      needs: the declared :class:`rproxjax.Needs` (static).

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.manpg(0.1, rproxjax.l1(0.1), tol=1e-8).init(x)
        >>> int(state.count), bool(state.converged), state.needs.full_batch
        (0, False, True)
    """

    count: Array  # type: ignore[assignment]  # a field, shadowing tuple.count
    info: StepInfo
    blocks: PyTree
    gamma: Array
    converged: Array
    stationarity: Array
    alpha: Array
    num_backtracks: Array
    num_inexact: Array
    needs: Needs


def _inner_tol(state, tol):
    """The reference code's subproblem tolerance (on ||E||^2), tightened after inexact steps."""
    g2 = tol * state.gamma**2
    tight = (state.alpha < 1e-4) | (state.num_inexact > 10)
    return jnp.where(tight, jnp.maximum(5e-16, jnp.minimum(1e-14, 1e-5 * g2)),
                     jnp.maximum(1e-13, jnp.minimum(1e-11, 1e-3 * g2)))


def _armijo(objective, trial, f_x, znorm2, gamma, max_backtracks, dtype):
    """Halves alpha from 1 while F(trial(alpha)) >= F(X) - alpha ||zeta||^2 / (2 gamma)."""

    def cond(c):  # a non-finite F(trial) never satisfies the decrease test
        alpha, f_new, k = c
        return (~(f_new < f_x - alpha / (2 * gamma) * znorm2) & (alpha >= 1e-4)
                & (k < max_backtracks))

    def body(c):
        alpha, _, k = c
        alpha = 0.5 * alpha
        return alpha, objective(trial(alpha)), k + 1

    one = jnp.ones((), dtype)
    alpha, f_new, backtracks = lax.while_loop(cond, body,
                                              (one, objective(trial(one)), jnp.int32(0)))
    return alpha, backtracks, jnp.isfinite(f_new)


def _next_gamma(adaptive, gamma0, gamma, backtracks, move):
    if not adaptive:
        return gamma
    new = jnp.where(backtracks == 0, 1.01 * gamma, jnp.maximum(gamma0, gamma / 1.01))
    return jnp.where(move, new, gamma)


def _check_args(gamma, tol, max_backtracks, adaptive):
    gamma, tol = hyper("gamma", gamma), hyper("tol", tol)
    if callable(gamma) or callable(tol):
        raise ValueError("manpg takes a scalar gamma and tol, not schedules.")
    if not isinstance(max_backtracks, int) or isinstance(max_backtracks, bool) or \
            max_backtracks < 0:
        raise ValueError(f"max_backtracks must be an int >= 0, got {max_backtracks!r}.")
    if not isinstance(adaptive, bool):
        raise ValueError(f"adaptive must be a bool, got {adaptive!r}.")
    return gamma, tol


def _objective(blocks, value_fn, x):
    """F = f + h, with h from the blocks' regularizers."""
    return value_fn(x) + sum(jax.tree.leaves(map_blocks(lambda b, xb: b.value(xb), blocks, x)))


def _step(blocks, ssn, gamma0, tol, adaptive, max_backtracks, grads, state, params, objective):
    """One ManPG step: the subproblem, the stopping test, the Armijo search, the new state."""
    dtype = dtype_of(params)
    tol_, gk = jnp.asarray(tol, dtype), state.gamma
    settings = ssn.replace(tol=jnp.sqrt(_inner_tol(state, tol_)))
    zeta, ssn_info, bad = prox_directions(blocks, params, grads, gk, state.info.ssn, settings)
    znorm2 = total_sq_norm(zeta)
    stationarity = znorm2 / gk**2
    f_x = objective(params)
    # A non-finite gradient, subproblem or objective is never "converged": the
    # non-finite path returns zeta = 0, which would pass the stationarity test.
    finite = ~bad & all_finite(grads) & jnp.isfinite(f_x)
    converged = state.converged | (finite & (stationarity < tol_))

    def trial(alpha):
        return map_blocks(lambda b, x, z: b.retract(x, alpha * z), blocks, params, zeta)

    alpha, backtracks, f_finite = _armijo(objective, trial, f_x, znorm2, gk, max_backtracks,
                                          dtype)
    x_new = trial(alpha)
    ok = finite & f_finite & all_finite(x_new)
    move = ~converged & ~state.info.halted
    halted = state.info.halted | (move & ~ok)
    move = move & ok
    info = StepInfo(otu.tree_where(ok, ssn_info, state.info.ssn), jnp.sqrt(znorm2), halted)
    new_state = ManPGState(
        state.count + move.astype(jnp.int32), info, blocks_state(blocks, params),
        _next_gamma(adaptive, jnp.asarray(gamma0, dtype), gk, backtracks, move),
        converged, stationarity, jnp.where(move, alpha, state.alpha),
        state.num_backtracks + jnp.where(move, backtracks, 0),
        state.num_inexact + (move & (alpha < 1e-4)).astype(jnp.int32), _NEEDS)
    delta = otu.tree_where(move, otu.tree_sub(x_new, params), otu.tree_zeros_like(params))
    return delta, new_state


def manpg(gamma: ArrayLike, reg: Regularizer | None = None, *, tol: ArrayLike,
          blocks: PyTree | None = None, adaptive: bool = False, retraction: str = "polar",
          max_backtracks: int = 14, ssn: SSN | None = None,
          **deprecated: Any) -> optax.GradientTransformationExtraArgs:
    r"""ManPG (Chen, Ma, So and Zhang 2020) and ManPG-Ada, with full gradients.

    Each update solves the subproblem at X with the full gradient and step
    gamma, stops (``state.converged``; the update and all later ones are zero)
    when ||zeta||^2 / gamma^2 < tol, and otherwise takes the Armijo step:
    alpha = 1, halve while F(Retr_X(alpha zeta)) >= F(X) - alpha / (2 gamma)
    ||zeta||^2, accepting when alpha < 1e-4 (an "inexact" step). The
    subproblem tolerance on ||E||^2 is max(1e-13, min(1e-11, 1e-3 tol gamma^2)),
    tightened to max(5e-16, min(1e-14, 1e-5 tol gamma^2)) after an inexact step
    or more than 10 of them, as in the reference code. ManPG-Ada
    (``adaptive=True``) sets gamma <- 1.01 gamma after a step without
    backtracking and gamma <- max(gamma0, gamma / 1.01) otherwise.

    ``update(grads, state, params, *, value_fn)``: ``grads`` is the full
    gradient of f at ``params`` and ``value_fn(x)`` returns f(x) (the smooth
    part; the optimizer adds h). :func:`rproxjax.fit` provides both (the
    state declares them) and runs it on full batches.

    Args:
      gamma: initial proximal step (1/L in the reference; ``t`` in its paper).
      reg: regularizer h (one Stiefel block), or None; ``blocks`` for a pytree.
      tol: stopping tolerance on ||zeta||^2 / gamma^2.
      adaptive: ManPG-Ada's adaptive gamma.
      retraction: retraction name.
      max_backtracks: most Armijo halvings (14 takes alpha below 1e-4).
      ssn: the subproblem solver's settings, :class:`rproxjax.SSN` (default ``SSN()``;
        its ``tol`` is replaced by the schedule above). ``SSN(rule="reference")``
        follows the reference ManPG code's iterates digit for digit.
      **deprecated: ``linear_solver``, ``ssn_max_steps`` and ``ssn_method``, the fields
        ``linear_solver``, ``max_steps`` and ``method`` of ``ssn``
        (``DeprecationWarning``; removed in 0.5).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state :class:`ManPGState`.

    Raises:
      ValueError: for a concrete gamma or tol <= 0, a bad ``max_backtracks``, or a bad
        ``reg``/``blocks``/``retraction``.

    Example:
        >>> import jax, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> opt = rproxjax.manpg(0.05, rproxjax.l1(0.05), tol=1e-8, adaptive=True)
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    num_epochs=5)  # full gradients: one step per epoch
        >>> res.epoch_loss.shape, int(res.opt_state.count)
        ((6,), 5)
        >>> bool(res.epoch_loss[-1] < res.epoch_loss[0])
        True
    """
    gamma, tol = _check_args(gamma, tol, max_backtracks, adaptive)
    ssn = with_deprecated(ssn, "manpg", deprecated, _OLD_NAMES)
    blocks = as_blocks(reg, blocks, retraction)

    def init(params):
        check_params(blocks, params)
        dtype = dtype_of(params)
        zero = jnp.zeros((), jnp.int32)
        return ManPGState(zero, empty_step_info(blocks, params), blocks_state(blocks, params),
                          jnp.asarray(gamma, dtype), jnp.bool_(False),
                          jnp.asarray(jnp.inf, dtype), jnp.ones((), dtype), zero, zero, _NEEDS)

    def update(grads, state, params=None, *, value_fn=None, **extra_args):
        del extra_args
        if value_fn is None:
            raise ValueError("manpg needs the extra argument value_fn (f, the smooth part).")
        check_state(state, ManPGState, "manpg")
        check_params(blocks, params, grads)
        return _step(blocks, ssn, gamma, tol, adaptive, max_backtracks, grads, state, params,
                     lambda x: _objective(blocks, value_fn, x))

    return optax.GradientTransformationExtraArgs(init, update)
