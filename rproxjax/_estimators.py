r"""Variance-reduced gradient estimators: the R-SARAH recursion and the SVRG-type estimator.

Each maps the minibatch gradient ``grads`` at X_t to an estimate V_t of
grad f(X_t) and is meant to be followed, in an ``optax.chain``, by
:func:`rproxjax.proximal_step` and :func:`rproxjax.retract`. Both refresh
every q-th update (the first included): there ``grads`` must be a large-batch
gradient (the batch S1; the full gradient in finite-sum mode) and V_t is it.
Other updates need the extra argument ``grad_fn``, the *same* minibatch's
gradient as a function of the point. Gamma is the projection transport.

``update(grads, state, params, *, grad_fn=None, refresh=None, grad_fn_value=None)``:
``refresh`` may be a Python bool (the runner passes it statically: no branch is
compiled), a traced bool, or None (then ``state.count % q == 0``).
``grad_fn_value``, where given, is that minibatch's gradient at the point the estimator
would call ``grad_fn`` at (X_{t-1}, the snapshot: the state field named by
``Needs.grad_fn_point``), used instead of the call: :func:`rproxjax.fit` evaluates it with
the gradient at X_t in one vmapped call.
Both declare these needs (:class:`rproxjax.Needs`) in their states, so
:func:`rproxjax.fit` provides them through any chain.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.tree_utils as otu
from jax import lax

from rproxjax import _checks
from rproxjax._blocks import as_blocks, map_blocks
from rproxjax._contract import Needs
from rproxjax._transforms import check_params, check_state
from rproxjax._typing import Array, PyTree

__all__ = ["SarahState", "SvrgState", "sarah_estimator", "svrg_estimator"]


def _check_period(name, q):
    value = _checks.index_or_none(q)
    if value is None or value < 1:
        raise ValueError(f"{name} must be a Python int >= 1, got {q!r}.")
    return value


def _is_refresh(refresh, count, q):
    if refresh is not None:
        return refresh
    concrete = _checks.concrete_or_none(count)
    return bool(concrete % q == 0) if concrete is not None else count % q == 0


def _choose(refresh, on_refresh, otherwise):
    if isinstance(refresh, bool):
        return on_refresh() if refresh else otherwise()
    return lax.cond(refresh, on_refresh, otherwise)


def _need_grad_fn(grad_fn, name):
    if grad_fn is None:
        raise ValueError(
            f"{name} needs the extra argument grad_fn (the minibatch gradient as a function "
            "of the point) on non-refresh steps."
        )


def _grad_at(grad_fn, grad_fn_value, point, name):
    """The minibatch gradient at ``point`` (the state's ``Needs.grad_fn_point``): the
    caller's ``grad_fn_value`` where given (``fit`` computes it with the gradient at X_t),
    else ``grad_fn(point)``."""
    if grad_fn_value is not None:
        return grad_fn_value
    _need_grad_fn(grad_fn, name)
    return grad_fn(point)


def _sub(a, b):
    return jax.tree.map(jnp.subtract, a, b)


class SarahState(NamedTuple):
    """State of :func:`sarah_estimator`.

    Attributes:
      count: updates taken.
      v: the estimate V_t of the last update.
      prev_params: the point X_t of the last update.
      needs: the declared :class:`rproxjax.Needs` (static).

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.sarah_estimator(5).init(x)
        >>> int(state.count), state.v.shape, state.needs.refresh_every
        (0, (6, 2), 5)
    """

    count: Array  # type: ignore[assignment]  # a field, shadowing tuple.count
    v: PyTree
    prev_params: PyTree
    needs: Needs


def sarah_estimator(q: int, *,
                    blocks: PyTree | None = None) -> optax.GradientTransformationExtraArgs:
    r"""The R-SARAH estimator (the paper's equation (6)), refreshed every q updates:

    .. math::
        V_t = \nabla f_{S_2}(X_t)
        - \Gamma_{X_{t-1}}^{X_t}\big(\nabla f_{S_2}(X_{t-1}) - V_{t-1}\big).

    The first update and every q-th after it are refreshes: V_t = ``grads`` (a large-batch
    gradient). The others need the extra argument ``grad_fn`` (the same minibatch's
    gradient as a function of the point) or ``grad_fn_value`` (its value at X_{t-1}).

    Args:
      q: refresh period (a Python int >= 1: it shapes compiled loops).
      blocks: the params' blocks (default: one Stiefel block).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state :class:`SarahState`;
      chain it before :func:`rproxjax.proximal_step` (:func:`rproxjax.r_prox_spb` does).

    Raises:
      ValueError: for a ``q`` that is not an int >= 1, or bad ``blocks``; ``update``
        raises it without ``params``, with another transformation's state, or without
        ``grad_fn`` (and ``grad_fn_value``) on a non-refresh step.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # one fixed "minibatch": V_t is its gradient
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> est = rproxjax.sarah_estimator(3)
        >>> v, state = est.update(grad(x), est.init(x), x)  # a refresh: V_0 = grads
        >>> y = rproxjax.stiefel.retract(x, -0.1 * rproxjax.stiefel.project(x, v))
        >>> v, state = est.update(grad(y), state, y, grad_fn=grad)
        >>> bool(jnp.allclose(v, grad(y))), int(state.count)
        (True, 2)
    """
    q = _check_period("q", q)
    blocks = as_blocks(None, blocks)
    needs = Needs(refresh_every=q, grad_fn=True, grad_fn_point="prev_params")

    def init(params):
        check_params(blocks, params)
        return SarahState(jnp.zeros((), jnp.int32), otu.tree_zeros_like(params), params, needs)

    def update(updates, state, params=None, *, grad_fn=None, refresh=None, grad_fn_value=None,
               **extra_args):
        del extra_args
        check_state(state, SarahState, "sarah_estimator")
        check_params(blocks, params, updates)

        def recursion():
            diff = _sub(_grad_at(grad_fn, grad_fn_value, state.prev_params,
                                 "the R-SARAH estimator"), state.v)
            moved = map_blocks(lambda b, xo, xn, u: b.transport(xo, xn, u),
                               blocks, state.prev_params, params, diff)
            return _sub(updates, moved)

        v = _choose(_is_refresh(refresh, state.count, q), lambda: updates, recursion)
        return v, SarahState(state.count + 1, v, params, needs)

    return optax.GradientTransformationExtraArgs(init, update)


class SvrgState(NamedTuple):
    """State of :func:`svrg_estimator`.

    Attributes:
      count: updates taken.
      v: the estimate V_t of the last update.
      snapshot: the snapshot point X~ (the point of the last refresh).
      snapshot_grad: the large-batch gradient at X~.
      needs: the declared :class:`rproxjax.Needs` (static).

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> state = rproxjax.svrg_estimator(4).init(x)
        >>> int(state.count), state.snapshot.shape, state.needs.grad_fn_point
        (0, (6, 2), 'snapshot')
    """

    count: Array  # type: ignore[assignment]  # a field, shadowing tuple.count
    v: PyTree
    snapshot: PyTree
    snapshot_grad: PyTree
    needs: Needs


def svrg_estimator(m: int, *,
                   blocks: PyTree | None = None) -> optax.GradientTransformationExtraArgs:
    r"""The SVRG-type estimator with a snapshot every m updates:

    .. math::
        V_t = \nabla f_S(X_t)
        - \Gamma_{\tilde X}^{X_t}\big(\nabla f_S(\tilde X) - \nabla f(\tilde X)\big),

    with X~ the point of the last refresh and grad f(X~) its large-batch
    gradient (taken by the refresh update itself, so a refresh step costs
    |S1| IFOs and the others 2 |S|, as R-SARAH's).

    The non-refresh updates need the extra argument ``grad_fn`` (the same minibatch's
    gradient as a function of the point) or ``grad_fn_value`` (its value at X~).

    Args:
      m: snapshot period (a Python int >= 1).
      blocks: the params' blocks (default: one Stiefel block).

    Returns:
      An :class:`optax.GradientTransformationExtraArgs` with state :class:`SvrgState`;
      chain it before :func:`rproxjax.proximal_step` (:func:`rproxjax.r_prox_svrg` does).

    Raises:
      ValueError: for an ``m`` that is not an int >= 1, or bad ``blocks``; ``update``
        raises it without ``params``, with another transformation's state, or without
        ``grad_fn`` (and ``grad_fn_value``) on a non-refresh step.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> a = jnp.diag(jnp.arange(1.0, 7.0))
        >>> grad = lambda x: -2 * a @ x  # the minibatch is the whole (one-sample) data
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> est = rproxjax.svrg_estimator(3)
        >>> v, state = est.update(grad(x), est.init(x), x)  # a refresh: the snapshot X~ = x
        >>> y = rproxjax.stiefel.retract(x, -0.1 * rproxjax.stiefel.project(x, v))
        >>> v, state = est.update(grad(y), state, y, grad_fn=grad)
        >>> bool(jnp.allclose(v, grad(y))), bool(jnp.array_equal(state.snapshot, x))
        (True, True)
    """
    m = _check_period("m", m)
    blocks = as_blocks(None, blocks)
    needs = Needs(refresh_every=m, grad_fn=True, grad_fn_point="snapshot")

    def init(params):
        check_params(blocks, params)
        zeros = otu.tree_zeros_like(params)
        return SvrgState(jnp.zeros((), jnp.int32), zeros, params, zeros, needs)

    def update(updates, state, params=None, *, grad_fn=None, refresh=None, grad_fn_value=None,
               **extra_args):
        del extra_args
        check_state(state, SvrgState, "svrg_estimator")
        check_params(blocks, params, updates)

        def on_refresh():
            return updates, params, updates

        def corrected():
            diff = _sub(_grad_at(grad_fn, grad_fn_value, state.snapshot, "the SVRG estimator"),
                        state.snapshot_grad)
            moved = map_blocks(lambda b, xo, xn, u: b.transport(xo, xn, u),
                               blocks, state.snapshot, params, diff)
            return _sub(updates, moved), state.snapshot, state.snapshot_grad

        v, snap, snap_grad = _choose(_is_refresh(refresh, state.count, m), on_refresh,
                                     corrected)
        return v, SvrgState(state.count + 1, v, snap, snap_grad, needs)

    return optax.GradientTransformationExtraArgs(init, update)
