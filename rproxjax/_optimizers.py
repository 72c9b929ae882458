"""Riemannian proximal optimizers as optax gradient transformations.

Each factory returns an :class:`optax.GradientTransformationExtraArgs`:
``update(grads, state, params, **extra)`` takes a Euclidean gradient
(estimate) of the smooth part f at ``params`` and returns ``updates`` such
that ``optax.apply_updates(params, updates)`` is the retracted point
Retr_X(eta zeta).

``params`` is a point of St(d, r) when ``reg`` is a regularizer (or None), or
a pytree of parameters when ``reg`` is a matching pytree of blocks
(:func:`rproxjax.Stiefel`, :func:`rproxjax.Grassmann`,
:func:`rproxjax.Euclidean`), each with its own geometry and regularizer; the
step of each block is described in :mod:`rproxjax._blocks`. States then hold
one :class:`rproxjax.SubproblemInfo` per block, and ``zeta_norm`` is the norm
over all blocks. They must therefore be the *last* link of
an ``optax.chain``; gradient preprocessing (clipping, ...) goes before them.

Hyperparameters that are swept (step sizes, the regularizer's strength) are
arrays or optax schedules (callables of the step count), never Python-static:
build the optimizer inside a jitted or vmapped function and new values do not
recompile.

Non-finite gradients: if the gradient (or the subproblem) is not finite, the
update is zero, ``state.halted`` becomes True and stays True, and all later
updates are zero, so X is never corrupted. Inspect ``state.halted``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax

from rproxjax import _checks, stiefel
from rproxjax._blocks import as_blocks, map_blocks, total_sq_norm
from rproxjax._results import Status
from rproxjax._subproblem import METHODS, SubproblemInfo

__all__ = [
    "ManPGState",
    "ProxSGDState",
    "ProxSPBState",
    "SubgradState",
    "inverse_sqrt_schedule",
    "manpg",
    "r_prox_sgd",
    "r_prox_spb",
    "r_spider_boost",
    "r_subgrad",
]

Array = Any
ScalarOrSchedule = Any

#: Default relative subproblem tolerance of R-ProxSGD and R-ProxSPB: a solve stops
#: when ||E||_F <= ssn_tol + SSN_RTOL * ||zeta||_F. Chosen in
#: ``benchmarks/inexact.py``: loss against IFOs unchanged within the seed-to-seed
#: spread, fewer Newton steps.
SSN_RTOL = 1e-2


def inverse_sqrt_schedule(init_value, offset: int = 1, power: float = 0.5):
    """eta_t = init_value / (t + offset)^power (the paper's eta0 / sqrt(t + 1)).

    Example:
        >>> import rproxjax
        >>> sched = rproxjax.inverse_sqrt_schedule(0.5)
        >>> float(sched(3))
        0.25
    """

    def schedule(count):
        return init_value / (jnp.asarray(count) + offset) ** power

    return schedule


def _dtype(params):
    return jnp.result_type(*jax.tree.leaves(params))


def _value(hyper, count, dtype):
    value = hyper(count) if callable(hyper) else hyper
    return jnp.asarray(value, dtype)


def _check_hyper(name, hyper):
    if not callable(hyper):
        if jnp.ndim(hyper) != 0:
            raise ValueError(
                f"{name} must be a scalar or a schedule, got shape {jnp.shape(hyper)}."
            )
        _checks.check_positive(name, hyper)


def _check_retraction(method):
    if method not in stiefel.RETRACTIONS:
        raise ValueError(
            f"unknown retraction {method!r}; expected one of {stiefel.RETRACTIONS}."
        )


def _check_method(method):
    if method not in METHODS:
        raise ValueError(f"unknown ssn_method {method!r}; expected one of {METHODS}.")


def _check(blocks, params, grads=None):
    def check(block, x, *g):
        block.check("params", x)
        if g and jnp.shape(g[0]) != jnp.shape(x):
            raise ValueError(
                f"grads of shape {jnp.shape(g[0])} do not match params of shape "
                f"{jnp.shape(x)}."
            )
        return 0

    if params is None:
        raise ValueError("the Riemannian optimizers need params (the current point) in update().")
    trees = (params,) if grads is None else (params, grads)
    map_blocks(check, blocks, *trees)


def _all_finite(tree):
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree.leaves(tree)]))


def _empty_infos(blocks, params):
    return map_blocks(lambda b, x: b.empty_info(x), blocks, params)


def _prox_steps(blocks, params, v, gamma, eta, infos, tol, max_steps, linear_solver, rtol=0.0,
                method="secant"):
    """Proximal steps of all blocks: (new params, zetas, infos, any non-finite)."""
    new, zeta, info = map_blocks(
        lambda b, x, g, i: b.prox_step(x, g, gamma, eta, i, tol=tol, max_steps=max_steps,
                                       linear_solver=linear_solver, rtol=rtol,
                                       method=method),
        blocks, params, v, infos,
    )
    infos = jax.tree.leaves(info, is_leaf=lambda n: isinstance(n, SubproblemInfo))
    bad = jnp.any(jnp.stack([i.status == Status.NONFINITE for i in infos]))
    return new, zeta, info, bad


def _guarded_prox_update(blocks, params, v, state, learning_rate, gamma, tol, max_steps,
                         linear_solver, rtol, method):
    """The proximal step shared by R-ProxSGD and R-ProxSPB, guarded against non-finite values.

    Returns (updates, ok, (count, ssn, zeta_norm, halted)) for the new state.
    """
    dtype = _dtype(params)
    eta = _value(learning_rate, state.count, dtype)
    gam = _value(gamma, state.count, dtype)
    x_new, zeta, info, bad = _prox_steps(
        blocks, params, v, gam, eta, state.ssn, tol, max_steps, linear_solver, rtol, method)
    ok = (~state.halted) & (~bad) & _all_finite(x_new) & _all_finite(v)
    updates = _guarded(ok, _delta(x_new, params), _zeros_like(params))
    common = (
        state.count + 1,
        _guarded(ok, info, state.ssn),
        jnp.where(ok, jnp.sqrt(total_sq_norm(zeta)), state.zeta_norm),
        ~ok,
    )
    return updates, ok, common


def _delta(new, old):
    return jax.tree.map(lambda a, b: a - b, new, old)


def _zeros_like(tree):
    return jax.tree.map(jnp.zeros_like, tree)


class ProxSGDState(NamedTuple):
    """State of :func:`r_prox_sgd`.

    Attributes:
      count: number of updates taken (int32).
      ssn: :class:`rproxjax.SubproblemInfo` of the last subproblem; its
        ``lam`` warm-starts the next one.
      zeta_norm: ||zeta_t||_F of the last step.
      halted: True once a non-finite gradient or subproblem was met.
    """

    count: Array
    ssn: SubproblemInfo
    zeta_norm: Array
    halted: Array


class ProxSPBState(NamedTuple):
    """State of :func:`r_prox_spb`.

    Attributes:
      count, ssn, zeta_norm, halted: as in :class:`ProxSGDState`.
      v: the gradient estimate V_t used by the last step.
      prev_params: the point X_t at which it was used (the R-SARAH estimator
        of the next step transports V_t from it).
    """

    count: Array
    ssn: SubproblemInfo
    zeta_norm: Array
    halted: Array
    v: Array
    prev_params: Array


class ManPGState(NamedTuple):
    """State of :func:`manpg`.

    Attributes:
      count, ssn, zeta_norm, halted: as in :class:`ProxSGDState`.
      t: the current proximal step (changes under ManPG-Ada).
      converged: True once ||zeta||^2 / t^2 < tol; later updates are zero.
      stationarity: ||zeta||_F^2 / t^2 at the last step (the stopping test).
      alpha: the Armijo step accepted at the last step.
      num_backtracks: line-search halvings, summed over steps.
      num_inexact: steps accepted with alpha < 1e-4 ("inexact"), summed.
    """

    count: Array
    ssn: SubproblemInfo
    zeta_norm: Array
    halted: Array
    t: Array
    converged: Array
    stationarity: Array
    alpha: Array
    num_backtracks: Array
    num_inexact: Array


class SubgradState(NamedTuple):
    """State of :func:`r_subgrad`: step count, last direction norm, halted flag."""

    count: Array
    zeta_norm: Array
    halted: Array


def _guarded(ok, new, old):
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


def r_prox_sgd(
    learning_rate: ScalarOrSchedule,
    gamma: ScalarOrSchedule,
    reg,
    *,
    retraction: str = "polar",
    ssn_tol=None,
    ssn_rtol=SSN_RTOL,
    ssn_max_steps: int = 100,
    linear_solver: str = "auto",
    ssn_method: str = "adaptive",
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSGD (the paper's Algorithm 1).

    Each update takes the minibatch gradient V_t of f at X_t, solves

    .. math::
        \zeta_t = \operatorname*{argmin}_{\zeta \in T_{X_t}}
        \langle V_t, \zeta\rangle + \frac{1}{2\gamma}\|\zeta\|^2 + h(X_t + \zeta)

    with :func:`rproxjax.tangent_prox` (warm-started from the last multiplier)
    and moves to X_{t+1} = Retr_{X_t}(eta_t zeta_t).

    Args:
      learning_rate: eta_t, a scalar or a schedule (e.g.
        :func:`inverse_sqrt_schedule` for the paper's eta0 / sqrt(t + 1)).
      gamma: the proximal step gamma (scalar or schedule).
      reg: regularizer h (e.g. ``rproxjax.l1(mu)``), ``None`` for h = 0, or a
        pytree of blocks matching ``params`` (see the module docstring).
      retraction: ``"qr"``, ``"polar"``, ``"exp"`` or ``"cayley"`` (for a
        single Stiefel block; blocks carry their own).
      ssn_tol, ssn_rtol, ssn_max_steps, linear_solver, ssn_method: ``tol``, ``rtol``,
        ``max_steps``, ``linear_solver`` and ``method`` of :func:`rproxjax.tangent_prox`.
        Each solve stops at ||E||_F <= ssn_tol + ssn_rtol ||zeta||_F (default
        :data:`SSN_RTOL`, far below the minibatch noise; 0.0 for ssn_tol alone) with the
        ``"adaptive"`` rule (as few steps as ``"secant"`` at that tolerance, for about
        half the cost per call: ``benchmarks/results/subproblem_real.md``).

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

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
    _check_hyper("learning_rate", learning_rate)
    _check_hyper("gamma", gamma)
    _check_retraction(retraction)
    _check_method(ssn_method)
    blocks = as_blocks(reg, retraction)

    def init(params):
        _check(blocks, params)
        dtype = _dtype(params)
        return ProxSGDState(
            jnp.zeros((), jnp.int32), _empty_infos(blocks, params),
            jnp.zeros((), dtype), jnp.bool_(False),
        )

    def update(grads, state, params=None, **extra_args):
        del extra_args
        _check(blocks, params, grads)
        updates, ok, common = _guarded_prox_update(
            blocks, params, grads, state, learning_rate, gamma, ssn_tol, ssn_max_steps,
            linear_solver, ssn_rtol, ssn_method,
        )
        return updates, ProxSGDState(*common)

    return _transformation(init, update, blocks)


def r_prox_spb(
    learning_rate: ScalarOrSchedule,
    gamma: ScalarOrSchedule,
    reg,
    *,
    q: int,
    retraction: str = "polar",
    ssn_tol=None,
    ssn_rtol=SSN_RTOL,
    ssn_max_steps: int = 100,
    linear_solver: str = "auto",
    ssn_method: str = "adaptive",
) -> optax.GradientTransformationExtraArgs:
    r"""R-ProxSPB, Riemannian proximal SpiderBoost (the paper's Algorithm 2).

    Every q-th update (``count % q == 0``, a *refresh*) ``grads`` must be a
    large-batch gradient (the batch S1; the full gradient in finite-sum mode)
    and is used as V_t. Otherwise ``grads`` is the minibatch gradient of S2 at
    X_t and V_t is the R-SARAH estimator

    .. math::
        V_t = \nabla f_{S_2}(X_t)
        - \Gamma_{X_{t-1}}^{X_t}\big(\nabla f_{S_2}(X_{t-1}) - V_{t-1}\big),

    with Gamma the projection transport; the gradient of the *same* minibatch
    at X_{t-1} comes from the extra argument ``grad_fn`` (a function of the
    point, like optax's ``value_fn``). Then the proximal and retraction steps
    are those of :func:`r_prox_sgd` with a constant step ``learning_rate``.

    ``update(grads, state, params, *, grad_fn=None, refresh=None)``: ``refresh``
    may be a Python bool (the runner passes it statically: no branch is
    compiled), a traced bool, or ``None`` (then ``state.count % q == 0``).
    ``grad_fn`` is required on non-refresh steps.

    Args:
      learning_rate: eta (scalar or schedule; the theory uses a constant).
      gamma: proximal step (scalar or schedule).
      reg: regularizer, ``None`` for h = 0 (R-SpiderBoost), or a pytree of blocks.
      q: refresh period (a Python int >= 1: it shapes compiled loops).
      retraction, ssn_tol, ssn_rtol, ssn_max_steps, linear_solver, ssn_method: as in
        :func:`r_prox_sgd`.

    Returns:
      An ``optax.GradientTransformationExtraArgs``; its attributes
      ``refresh_every`` (``q``) and ``blocks`` are read by :func:`rproxjax.fit`.
    """
    _check_hyper("learning_rate", learning_rate)
    _check_hyper("gamma", gamma)
    _check_retraction(retraction)
    _check_method(ssn_method)
    if not isinstance(q, int) or isinstance(q, bool) or q < 1:
        raise ValueError(f"q must be a Python int >= 1, got {q!r}.")

    blocks = as_blocks(reg, retraction)

    def init(params):
        _check(blocks, params)
        dtype = _dtype(params)
        return ProxSPBState(
            jnp.zeros((), jnp.int32), _empty_infos(blocks, params),
            jnp.zeros((), dtype), jnp.bool_(False),
            _zeros_like(params), params,
        )

    def update(grads, state, params=None, *, grad_fn=None, refresh=None, **extra_args):
        del extra_args
        _check(blocks, params, grads)
        if refresh is None:
            count = _checks.concrete_or_none(state.count)
            refresh = bool(count % q == 0) if count is not None else state.count % q == 0

        def sarah():
            if grad_fn is None:
                raise ValueError(
                    "r_prox_spb needs the extra argument grad_fn (the minibatch "
                    "gradient as a function of the point) on non-refresh steps."
                )
            diff = _delta(grad_fn(state.prev_params), state.v)
            moved = map_blocks(lambda b, xo, xn, u: b.transport(xo, xn, u),
                               blocks, state.prev_params, params, diff)
            return _delta(grads, moved)

        if isinstance(refresh, bool):
            v = grads if refresh else sarah()
        else:
            v = lax.cond(refresh, lambda: grads, sarah)
        updates, ok, common = _guarded_prox_update(
            blocks, params, v, state, learning_rate, gamma, ssn_tol, ssn_max_steps,
            linear_solver, ssn_rtol, ssn_method,
        )
        return updates, ProxSPBState(
            *common, _guarded(ok, v, state.v), _guarded(ok, params, state.prev_params)
        )

    return _transformation(init, update, blocks, refresh_every=q)


class _Transformation(optax.GradientTransformationExtraArgs):
    """A GradientTransformationExtraArgs that also records, for :func:`rproxjax.fit`,
    the parameter blocks (``blocks``) and the refresh period (``refresh_every``)."""


def _transformation(init, update, blocks, refresh_every=None):
    tx = _Transformation(init, update)
    tx.blocks = blocks
    tx.refresh_every = refresh_every
    return tx


def r_spider_boost(learning_rate, gamma, *, q: int, retraction: str = "polar"):
    """R-SpiderBoost: :func:`r_prox_spb` with h = 0 (smooth problems)."""
    return r_prox_spb(learning_rate, gamma, None, q=q, retraction=retraction)


def manpg(
    t,
    reg,
    *,
    tol,
    adaptive: bool = False,
    retraction: str = "polar",
    max_backtracks: int = 14,
    linear_solver: str = "auto",
    ssn_max_steps: int = 100,
    ssn_method: str = "secant",
) -> optax.GradientTransformationExtraArgs:
    r"""ManPG (Chen, Ma, So and Zhang 2020) and ManPG-Ada, with full gradients.

    Each update solves the subproblem at X with the full gradient and step t,
    stops (``state.converged``; the update and all later ones are zero) when
    ||zeta||^2 / t^2 < tol, and otherwise takes the Armijo step: alpha = 1,
    halve while F(Retr_X(alpha zeta)) >= F(X) - alpha / (2t) ||zeta||^2,
    accepting when alpha < 1e-4 (an "inexact" step). The subproblem tolerance
    on ||E||^2 is max(1e-13, min(1e-11, 1e-3 tol t^2)), tightened to
    max(5e-16, min(1e-14, 1e-5 tol t^2)) after an inexact step or more than 10
    of them, as in the reference code. ManPG-Ada (``adaptive=True``) sets
    t <- 1.01 t after a step without backtracking and t <- max(t0, t / 1.01)
    otherwise.

    ``update(grads, state, params, *, value_fn)``: ``grads`` is the full
    gradient of f at ``params`` and ``value_fn(x)`` returns f(x) (the smooth
    part; the optimizer adds h).

    Args:
      t: initial proximal step (1/L in the reference).
      reg: regularizer h, or a pytree of blocks.
      tol: stopping tolerance on ||zeta||^2 / t^2.
      adaptive: ManPG-Ada's adaptive t.
      retraction: retraction name.
      max_backtracks: most Armijo halvings (14 takes alpha below 1e-4).
      linear_solver, ssn_max_steps: passed to :func:`rproxjax.tangent_prox`.
      ssn_method: the Newton rule of :func:`rproxjax.tangent_prox` (``method``):
        ``"secant"``, or ``"reference"`` to follow the reference ManPG code's
        iterates digit for digit.
    """
    _check_hyper("t", t)
    _check_hyper("tol", tol)
    _check_method(ssn_method)
    _check_retraction(retraction)
    blocks = as_blocks(reg, retraction)

    def init(params):
        _check(blocks, params)
        dtype = _dtype(params)
        zero = jnp.zeros((), jnp.int32)
        return ManPGState(
            zero, _empty_infos(blocks, params), jnp.zeros((), dtype), jnp.bool_(False),
            jnp.asarray(t, dtype), jnp.bool_(False), jnp.asarray(jnp.inf, dtype),
            jnp.ones((), dtype), zero, zero,
        )

    def objective(value_fn, x):
        h = map_blocks(lambda b, xb: b.value(xb), blocks, x)
        return value_fn(x) + sum(jax.tree.leaves(h))

    def update(grads, state, params=None, *, value_fn=None, **extra_args):
        del extra_args
        if value_fn is None:
            raise ValueError("manpg needs the extra argument value_fn (f, the smooth part).")
        _check(blocks, params, grads)
        dtype = _dtype(params)
        tk = state.t
        tol_ = jnp.asarray(tol, dtype)
        tight = (state.alpha < 1e-4) | (state.num_inexact > 10)
        inner = jnp.where(
            tight,
            jnp.maximum(5e-16, jnp.minimum(1e-14, 1e-5 * tol_ * tk**2)),
            jnp.maximum(1e-13, jnp.minimum(1e-11, 1e-3 * tol_ * tk**2)),
        )
        x_one, zeta, info, bad = _prox_steps(
            blocks, params, grads, tk, jnp.ones((), dtype), state.ssn, jnp.sqrt(inner),
            ssn_max_steps, linear_solver, method=ssn_method,
        )
        znorm2 = total_sq_norm(zeta)
        stationarity = znorm2 / tk**2
        converged = state.converged | (stationarity < tol_)
        f_x = objective(value_fn, params)

        def trial(alpha):
            return map_blocks(lambda b, x, z: b.retract(x, alpha * z), blocks, params, zeta)

        def ls_cond(c):
            alpha, f_new, k = c
            return (f_new >= f_x - alpha / (2 * tk) * znorm2) & (alpha >= 1e-4) & (
                k < max_backtracks)

        def ls_body(c):
            alpha, _, k = c
            alpha = 0.5 * alpha
            return alpha, objective(value_fn, trial(alpha)), k + 1

        one = jnp.ones((), dtype)
        alpha, _, backtracks = lax.while_loop(
            ls_cond, ls_body, (one, objective(value_fn, x_one), jnp.int32(0)))
        x_new = trial(alpha)
        move = (~converged) & (~state.halted)
        ok = (~bad) & _all_finite(x_new) & _all_finite(grads)
        halted = state.halted | (move & ~ok)
        move = move & ok
        updates = _guarded(move, _delta(x_new, params), _zeros_like(params))
        if adaptive:
            t0 = jnp.asarray(t, dtype)
            t_new = jnp.where(backtracks == 0, 1.01 * tk, jnp.maximum(t0, tk / 1.01))
            t_new = jnp.where(move, t_new, tk)
        else:
            t_new = tk
        new_state = ManPGState(
            state.count + move.astype(jnp.int32),
            _guarded(ok, info, state.ssn),
            jnp.sqrt(znorm2),
            halted,
            t_new,
            converged,
            stationarity,
            jnp.where(move, alpha, state.alpha),
            state.num_backtracks + jnp.where(move, backtracks, 0),
            state.num_inexact + (move & (alpha < 1e-4)).astype(jnp.int32),
        )
        return updates, new_state

    return _transformation(init, update, blocks)


def r_subgrad(
    learning_rate: ScalarOrSchedule, reg, *, retraction: str = "polar"
) -> optax.GradientTransformationExtraArgs:
    """Riemannian (stochastic) subgradient method, the paper's baseline.

    X_{t+1} = Retr_X(-eta_t P_X(V_t + s)), with s = ``reg.subgradient(X)`` an
    element of the subdifferential of h (mu sign(X) for l1).

    Args:
      learning_rate: eta_t, scalar or schedule (the paper: eta0 / sqrt(t + 1)).
      reg: regularizer with a ``subgradient`` method, ``None``, or a pytree of
        blocks (Euclidean blocks take X - eta (V + s)).
      retraction: retraction name.
    """
    _check_hyper("learning_rate", learning_rate)
    _check_retraction(retraction)
    blocks = as_blocks(reg, retraction)

    def init(params):
        _check(blocks, params)
        return SubgradState(jnp.zeros((), jnp.int32), jnp.zeros((), _dtype(params)),
                            jnp.bool_(False))

    def update(grads, state, params=None, **extra_args):
        del extra_args
        _check(blocks, params, grads)
        eta = _value(learning_rate, state.count, _dtype(params))
        x_new, direction = map_blocks(
            lambda b, x, g: b.subgradient_step(x, g, eta), blocks, params, grads)
        ok = (~state.halted) & _all_finite(x_new) & _all_finite(grads)
        updates = _guarded(ok, _delta(x_new, params), _zeros_like(params))
        return updates, SubgradState(
            state.count + 1,
            jnp.where(ok, jnp.sqrt(total_sq_norm(direction)), state.zeta_norm), ~ok,
        )

    return _transformation(init, update, blocks)

