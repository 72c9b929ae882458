"""The contract between transformations and the runner, readable through any optax chain.

A transformation states what it needs from the runner in its *state*: a
:class:`Needs` node is a pytree node without children whose fields are static
(hashable) data, so it survives ``optax.chain``, ``jax.jit``, ``jax.vmap`` and
``jax.eval_shape`` and costs nothing at run time. The runner reads the
needs of a whole chain from ``jax.eval_shape(optimizer.init, params)``.

Every proximal (or subgradient) step keeps one :class:`StepInfo` record in its
state under the field name ``info``: find it, whatever the chain, with
:func:`step_info` (or ``optax.tree_utils.tree_get(state, "info")``).

IFO accounting (one IFO = the gradient of one sample's loss) lives here alone:
:func:`step_cost` and :func:`refresh_cost`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rproxjax._ssn.records import SubproblemInfo
from rproxjax._typing import Array, DTypeLike, PyTree

__all__ = ["Needs", "StepInfo", "any_halted", "block_cost", "find_needs", "halt",
           "refresh_cost", "step_cost", "step_info"]


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Needs:
    """What a transformation needs from the runner (static data; no arrays).

    Attributes:
      refresh_every: every ``refresh_every``-th update (from the first) takes a
        large-batch gradient (the batch S1; the full gradient by default) and
        the extra argument ``refresh=True``; the others a minibatch gradient and
        ``refresh=False``. None: no refresh.
      grad_fn: non-refresh updates need the extra argument ``grad_fn``, the
        current minibatch's gradient as a function of the point (they cost
        2 |S2| IFOs: the gradient at X_t and at one other point).
      value_fn: updates need ``value_fn``, the smooth part f on the current
        batch as a function of the point (line searches).
      full_batch: a deterministic method: every gradient is over all n samples.
      grad_fn_point: the field of the transformation's state that holds the point at
        which its update calls ``grad_fn`` (``"prev_params"``, ``"snapshot"``), or None.
        A runner may then evaluate the minibatch gradient at X_t and at that point in one
        ``jax.vmap``-ed call and pass the latter as the extra argument ``grad_fn_value``
        (``fit`` does, in one batched gradient evaluation).
        A chain whose transformations call ``grad_fn`` at different points, or one of which
        declares no point, merges to :data:`CONFLICTING_POINTS`: no value is passed then.
      lands: the update lands on the manifold (a retraction, ManPG): ``params + update`` is
        the new feasible point, so no link of an ``optax.chain`` may follow it (a changed
        update would move X off the manifold); the runner checks this before compiling.

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> needs = rproxjax.sarah_estimator(5).init(x).needs
        >>> needs.refresh_every, needs.grad_fn, needs.grad_fn_point
        (5, True, 'prev_params')
        >>> needs.merge(rproxjax.Needs(value_fn=True)).value_fn
        True
    """

    refresh_every: int | None = None
    grad_fn: bool = False
    value_fn: bool = False
    full_batch: bool = False
    grad_fn_point: str | None = None
    lands: bool = False

    def merge(self, other: Needs) -> Needs:
        """The needs of two transformations of one chain together.

        Raises:
          ValueError: for two different refresh periods.
        """
        if None not in (self.refresh_every, other.refresh_every) and (
                self.refresh_every != other.refresh_every):
            raise ValueError(
                "two transformations of the chain need different refresh periods "
                f"({self.refresh_every} and {other.refresh_every})."
            )
        return Needs(
            self.refresh_every if self.refresh_every is not None else other.refresh_every,
            self.grad_fn or other.grad_fn, self.value_fn or other.value_fn,
            self.full_batch or other.full_batch, _merge_points(self, other),
            self.lands or other.lands,
        )

    @property
    def paired_point(self) -> str | None:
        """The state field whose point a runner may pair with X_t, or None."""
        if not self.grad_fn or self.grad_fn_point in (None, CONFLICTING_POINTS):
            return None
        return self.grad_fn_point


#: ``Needs.grad_fn_point`` of a merge that must not be paired (see :class:`Needs`). A
#: conflict absorbs every later merge, so the result does not depend on the merge order.
CONFLICTING_POINTS = "<conflicting>"


def _merge_points(a: Needs, b: Needs) -> str | None:
    # A transformation that calls grad_fn at an undeclared point counts as "?": alone (or
    # with others like it) it merges to None, with a declared point to a conflict.
    found = {n.grad_fn_point if n.grad_fn_point is not None else "?" if n.grad_fn else None
             for n in (a, b)} - {None}
    if not found or found == {"?"}:
        return None
    return found.pop() if len(found) == 1 else CONFLICTING_POINTS


class StepInfo(NamedTuple):
    """The common record of every proximal or subgradient step.

    Attributes:
      ssn: a :class:`rproxjax.SubproblemInfo` per block (a pytree matching the
        params): the last subproblem's; its subgradient of h (its multiplier, for the
        reference rule) warm-starts the next.
      zeta_norm: ||zeta_t||_F of the last step, over all blocks (the
        subgradient direction's norm for the subgradient step).
      halted: True once a non-finite gradient or subproblem was met; from then
        on every update is zero, so the params are never corrupted.

    Example:
        >>> import jax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> info = rproxjax.step_info(rproxjax.r_subgrad(0.1, rproxjax.l1(0.1)).init(x))
        >>> info.ssn, float(info.zeta_norm), bool(info.halted)
        ((), 0.0, False)
    """

    ssn: PyTree
    zeta_norm: Array
    halted: Array


def _is_needs(node) -> bool:
    return isinstance(node, Needs)


def find_needs(state: PyTree) -> Needs:
    """The merged :class:`Needs` of all transformations of a (chained) state."""
    found = Needs()
    for leaf in jax.tree.leaves(state, is_leaf=_is_needs):
        if _is_needs(leaf):
            found = found.merge(leaf)
    return found


def _is_info(node) -> bool:
    return isinstance(node, StepInfo)


def step_info(state: PyTree) -> StepInfo | None:
    """The :class:`StepInfo` of a (chained) optimizer state, or None if it has none.

    Args:
      state: an optimizer state (any pytree, e.g. an ``optax.chain``'s tuple of states).

    Returns:
      The state's one :class:`StepInfo` record, or None if it holds none.

    Raises:
      ValueError: if the state holds several step records.

    Example:
        >>> import jax, optax, rproxjax
        >>> x = rproxjax.stiefel.random_point(jax.random.key(0), 6, 2)
        >>> opt = optax.chain(optax.clip_by_global_norm(1.0),
        ...                   rproxjax.r_prox_sgd(0.5, 0.1, rproxjax.l1(0.1)))
        >>> info = rproxjax.step_info(opt.init(x))
        >>> bool(info.halted)
        False
    """
    found = [n for n in jax.tree.leaves(state, is_leaf=_is_info) if _is_info(n)]
    if len(found) > 1:
        raise ValueError("the state holds several step records (several proximal steps?).")
    return found[0] if found else None


def _is_halted_field(path) -> bool:
    return bool(path) and getattr(path[-1], "name", None) == "halted"


def any_halted(state: PyTree) -> Array:
    """True if any transformation of the chain has halted."""
    flags = [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]
             if _is_halted_field(path)]
    return jnp.any(jnp.stack(flags)) if flags else jnp.bool_(False)


def halt(state: PyTree, flag: Array) -> PyTree:
    """The state with every ``halted`` field of the chain set where ``flag`` is True (a
    traced bool; elementwise, so vmapped lanes halt alone). The runner's refusal of a step
    (a point off the manifold): the transformations' own flags are sticky, so every later
    update is zero, as after a non-finite gradient."""
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: leaf | flag if _is_halted_field(path) else leaf, state)


def ssn_totals(info: StepInfo | None, dtype: DTypeLike) -> tuple[Array, Array, Array]:
    """(Newton steps summed over blocks, largest final residual, largest status code)."""
    infos = [] if info is None else jax.tree.leaves(
        info.ssn, is_leaf=lambda n: isinstance(n, SubproblemInfo))
    if not infos:
        zero = jnp.zeros((), jnp.int32)
        return zero, jnp.zeros((), dtype), zero
    steps = sum(i.num_steps for i in infos)
    return (steps, jnp.max(jnp.stack([i.residual for i in infos])).astype(dtype),
            jnp.max(jnp.stack([i.status for i in infos])))


def step_cost(needs: Needs, batch_size: int) -> int:
    """IFOs of one non-refresh step on a minibatch of ``batch_size``."""
    return 2 * batch_size if needs.grad_fn else batch_size


def refresh_cost(refresh_size: int) -> int:
    """IFOs of a refresh step: one gradient per sample of S1."""
    return refresh_size


def block_cost(q: int, batch_size: int, refresh_size: int) -> int:
    """IFOs of a block of a variance-reduced method: a refresh and q - 1 estimator steps."""
    return refresh_cost(refresh_size) + (q - 1) * step_cost(Needs(grad_fn=True), batch_size)
