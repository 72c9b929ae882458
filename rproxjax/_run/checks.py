"""Eager checks of :func:`rproxjax.fit`'s and :func:`rproxjax.pure_fit`'s arguments.

Each raises a ValueError (TypeError for a wrong kind of object) naming the
argument. They run on the host before anything is compiled; values that are
traced (under ``jax.jit``/``jax.vmap``) are checked for shape and dtype only.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp

from rproxjax import _checks, _foreign

__all__ = ["check_key", "check_loss", "check_opt_state", "check_optimizer", "positive_int"]


def positive_int(name, value, allow_none=True):
    """``value`` as a Python int >= 1 (NumPy integers accepted, bools rejected)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__") or jnp.ndim(value) != 0:
        raise TypeError(f"{name} must be a positive int, got {value!r}.")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def check_key(key):
    _checks.check_key("key", key)


def check_optimizer(optimizer, state):
    """fit runs this package's steps: a chain without one could leave the manifold."""
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError("optimizer must be an optax GradientTransformation (with init and "
                        f"update), got {type(optimizer).__name__}.")
    from rproxjax._contract import step_info

    if state is not None and step_info(state) is None:
        raise ValueError(
            "optimizer has no rproxjax step (proximal_step, subgradient_direction or manpg): "
            "fit keeps params on their manifolds only through one; chain optax "
            "preprocessing before an rproxjax optimizer (e.g. optax.chain(clip, r_prox_sgd))."
        )
    if state is not None and _is_optax_chain(optimizer):
        _check_nothing_after_the_step(state)


def _is_optax_chain(optimizer) -> bool:
    """``optimizer`` is built by ``optax.chain`` (the named optimizers are), so its state is
    the plain tuple of its links' states (:func:`rproxjax._foreign.is_optax_chain`)."""
    return _foreign.is_optax_chain(optimizer)


def _lands_on_manifold(node) -> bool:
    """A state (or part of one) holding a link whose update lands on the manifold (its
    :class:`rproxjax.Needs` says ``lands``)."""
    from rproxjax._contract import find_needs

    return find_needs(node).lands


def _check_nothing_after_the_step(state, where="optimizer"):
    """No link of an ``optax.chain`` may follow the one that lands on the manifold (the
    retraction, or ManPG): its update Retr_X(eta zeta) - X, changed (scaled, clipped,
    added to), moves X off the manifold. Only ``optax.chain``'s state is read (the caller
    checks that the optimizer is one): the plain tuple of its links' states, and a link
    that is a plain tuple again, a nested chain (the named optimizers are chains; a
    NamedTuple state is one transformation's, whose fields are not links). Wrappers whose
    state is not a plain tuple (``optax.inject_hyperparams``, ``optax.masked``, ...) are
    not looked into: the epoch program's feasibility guard catches what this misses."""
    if type(state) is not tuple:  # noqa: E721 - a NamedTuple is one link's state
        return
    last = max((i for i, link in enumerate(state) if _lands_on_manifold(link)), default=None)
    if last is None:
        return
    if last < len(state) - 1:
        after = ", ".join(type(link).__name__ for link in state[last + 1:])
        raise ValueError(
            f"{where} chains a transformation after the rproxjax step (link {last + 1} of "
            f"{len(state)}; after it, links with states {after}): a transformation after "
            "the rproxjax step moves X off the manifold; put gradient preprocessing before it "
            "(e.g. optax.chain(optax.clip_by_global_norm(1.0), rproxjax.r_prox_sgd(...))), "
            "and scale the step through the optimizer's learning rate.")
    _check_nothing_after_the_step(state[last], f"{where}'s link {last + 1}")


def check_opt_state(optimizer, params, opt_state):
    """opt_state must have the structure (and leaf shapes) of ``optimizer.init(params)``."""
    expected = jax.eval_shape(optimizer.init, params)
    if jax.tree.structure(opt_state) != jax.tree.structure(expected):
        raise ValueError(
            "opt_state does not match the optimizer: it has the structure "
            f"{jax.tree.structure(opt_state)}, but optimizer.init(params) gives "
            f"{jax.tree.structure(expected)} (a state from another optimizer?)."
        )
    for got, want in zip(jax.tree.leaves(opt_state), jax.tree.leaves(expected), strict=True):
        if jnp.shape(got) != want.shape:
            raise ValueError(f"opt_state has a leaf of shape {jnp.shape(got)} where "
                             f"optimizer.init(params) has {want.shape}.")


def check_loss(loss_fn, params, sample, batched: bool):
    """loss_fn(params, one sample) (or of a batch, if ``batched``) must be a real scalar."""
    what = "a batch" if batched else "one sample"
    try:
        out = jax.eval_shape(loss_fn, params, sample)
    except Exception as err:  # noqa: BLE001 - re-raised with the argument named
        raise ValueError(
            f"loss_fn(params, {what} of data) failed: {type(err).__name__}: {err}. Check "
            "that data's samples match params (e.g. the feature dimension)."
        ) from err
    if not hasattr(out, "shape") or out.shape != ():
        raise ValueError(
            f"loss_fn(params, {what} of data) must return a scalar, got "
            f"{getattr(out, 'shape', type(out).__name__)}"
            + ("" if batched else " (with batched_loss=False it is one sample's loss)") + "."
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"loss_fn must return a real floating scalar, got {out.dtype}.")
