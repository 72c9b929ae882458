"""One epoch as a pure function: the compiled unit of a run.

An epoch is a ``lax.scan`` over minibatches (or an outer scan over blocks of
one refresh and q - 1 minibatch steps, each a scan whose body chooses the refresh's
gradient by ``lax.cond`` on the step's index in its block: the optimizer's update is
traced once, and a vmapped sweep, whose lanes share that index, never computes large
batches at small steps). An
epoch can also be a segment of a block (:meth:`EpochProgram.segments`): the
block's samples are drawn from its key as a whole-block epoch draws them, and
each segment runs its slice of them.
Minibatch gradients are ``jax.grad`` of the mean of the ``jax.vmap``-ed
per-sample loss; the per-step :class:`History` is the scan's output, so it
costs no host round trip per iteration. What the optimizer needs (``grad_fn``,
``value_fn``, ``refresh``) is passed as its state declares
(:class:`rproxjax.Needs`); IFOs are counted by :mod:`rproxjax._contract`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.tree_utils as otu
from jax import lax

from rproxjax._blocks import Stiefel, is_block, map_blocks, total_sq_norm
from rproxjax._contract import (
    Needs,
    any_halted,
    halt,
    refresh_cost,
    ssn_totals,
    step_cost,
    step_info,
)
from rproxjax._run.data import BlockInputs, Plan
from rproxjax._typing import Array, PyTree

__all__ = ["FEASIBILITY_TOL", "Carry", "EpochProgram", "History", "Objective",
           "feasibility_tolerance"]


class Carry(NamedTuple):
    """What a run carries from step to step (and from epoch to epoch).

    Attributes:
      params: the point.
      opt_state: the optimizer's state.
      ifo: IFOs spent so far (an integer scalar; counted from ``initial_ifo``).
    """

    params: PyTree
    opt_state: PyTree
    ifo: Array


class History(NamedTuple):
    """Per-step history of a run (arrays of length ``num_steps``).

    Attributes:
      ifo: cumulative IFO count after each step.
      zeta_norm: ||zeta_t||_F (the subgradient direction's norm for R-Subgrad).
      ssn_steps: semi-smooth Newton steps of each subproblem (0 if none).
      ssn_residual: ||E(Lambda)||_F at the end of each subproblem.
      ssn_status: the subproblems' :class:`rproxjax.Status` (the worst over blocks;
        0 if none): e.g. ``Status.COLLAPSED`` where the step was refused (zeta = 0)
        because the prox zeroed a column of X + zeta.
      feasibility: ||X^T X - I||_F after each step (the largest over the
        Stiefel/Grassmann blocks) of the point the step computed; at a refused step
        (see ``halted``) that of the point refused.
      halted: True from the first step on that the run halted at (updates stop, the
        params are kept): a non-finite gradient, subproblem or point, an invalid
        traced hyperparameter, or a point off the manifold, feasibility above
        :data:`FEASIBILITY_TOL` (1e-3 in float32, 1e-6 in float64; e.g. a
        transformation chained after the rproxjax step). Such a step is refused
        (params kept at the previous point) and the chain's ``halted`` flags set in
        the state, so no run ends silently off the manifold; ``fit(throw=True)``
        raises.
      refresh: True at the estimators' large-batch (refresh) steps.
      variance: ||V_t - grad f(X_t)||_F^2 (Euclidean), with ``Recording(variance=True)``,
        else None. Its normal component is minibatch noise the step never uses.
      riemannian_variance: ||P_{X_t}(V_t - grad f(X_t))||_F^2, the variance of the
        Riemannian gradient estimate (each block's tangent projection at X_t, the
        part of V_t the proximal step sees), with ``Recording(variance=True)``, else
        None.
      loss: F(X_{t+1}) = f + h after each step, with ``Recording(loss=True)``, else None
        (f over the whole data set in finite-sum mode, over the current
        minibatch in online mode).

    Example:
        >>> import jax, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    batch_size=16, num_epochs=2,
        ...                    recording=rproxjax.Recording(loss=True))
        >>> h = res.history
        >>> h.zeta_norm.shape, h.loss.shape, h.variance is None, bool(h.halted.any())
        ((8,), (8,), True, False)
    """

    ifo: Array
    zeta_norm: Array
    ssn_steps: Array
    ssn_residual: Array
    ssn_status: Array
    feasibility: Array
    halted: Array
    refresh: Array
    variance: Array | None
    loss: Array | None
    riemannian_variance: Array | None = None


#: ||X^T X - I||_F above which a point is off its manifold (Stiefel/Grassmann blocks), by
#: dtype. The start check (``fit``'s ``_check_params``, and the blocks' own) and the epoch
#: program's guard on every step (:meth:`EpochProgram.step`) use the same values, so a run
#: never ends at a point that a resumed run would refuse. The retractions keep points within
#: rounding of their manifolds, far below these values, with one exception: the Cayley
#: retraction does not re-orthonormalize, so in float32 its rounding adds up over a long
#: run and can reach float32's value (use the polar or QR retraction there). A point above
#: them otherwise comes from a transformation chained after the rproxjax step (e.g.
#: ``optax.scale``), which the guard refuses.
FEASIBILITY_TOL = MappingProxyType({"float32": 1e-3, "float64": 1e-6})


def feasibility_tolerance(dtype) -> float:
    """The largest ||X^T X - I||_F of a feasible point of ``dtype`` (see
    :data:`FEASIBILITY_TOL`; dtypes other than float64 take float32's)."""
    return FEASIBILITY_TOL["float64" if jnp.dtype(dtype) == jnp.float64 else "float32"]


def state_blocks(state):
    """The blocks recorded in an optimizer state (one Stiefel block if none is)."""
    found = otu.tree_get(state, "blocks", None, filtering=lambda _, v: _has_blocks(v))
    return Stiefel() if found is None else found


def _has_blocks(value):
    leaves = jax.tree.leaves(value, is_leaf=is_block)
    return bool(leaves) and all(is_block(b) for b in leaves)


class Objective(NamedTuple):
    """F = f + h: the per-batch smooth part and h read from the optimizer state."""

    batch_loss: Callable  # (x, batch) -> mean f over the batch

    def grad(self, x, batch):
        return jax.grad(self.batch_loss)(x, batch)

    @staticmethod
    def h(state, x):
        values = map_blocks(lambda b, xb: b.value(xb), state_blocks(state), x)
        return sum(jax.tree.leaves(values))

    @staticmethod
    def feasibility(state, x):
        values = map_blocks(lambda b, xb: b.feasibility(xb), state_blocks(state), x)
        return jnp.max(jnp.stack(jax.tree.leaves(values)))


def make_objective(loss_fn, batched_loss: bool) -> Objective:
    """F's smooth part on a batch; a loss that is not a scalar (per sample, or per batch
    with ``batched_loss``) is an error when the program is traced (streams included)."""

    def checked(out, what):
        if jnp.shape(out) != ():
            raise ValueError(f"loss_fn must return a scalar {what}, got shape "
                             f"{jnp.shape(out)}.")
        return out

    if batched_loss:
        return Objective(lambda x, batch: checked(loss_fn(x, batch), "per batch"))
    per_sample = jax.vmap(lambda x, z: checked(loss_fn(x, z), "per sample"), in_axes=(None, 0))
    return Objective(lambda x, batch: jnp.mean(per_sample(x, batch)))


@dataclasses.dataclass(frozen=True)
class EpochProgram:
    """The epoch of a run; ``sampler`` is a :class:`FiniteSum` or a :class:`Stream`."""

    optimizer: optax.GradientTransformationExtraArgs
    objective: Objective
    sampler: Any
    plan: Plan
    needs: Needs
    record_loss: bool = False
    record_variance: bool = False

    def segments(self):
        """Segments per block where epochs are segments of a block (``steps < q``: a
        curve point every ``steps`` steps), else None. Every segment of a block is one
        program, :meth:`run_segment`."""
        plan = self.plan
        if plan.q is None or plan.steps >= plan.q:
            return None
        return plan.q // plan.steps

    def block_inputs(self, key):
        """The samples of a whole block drawn from its key, as a whole-block epoch draws
        them (so a run in segments takes the same steps)."""
        plan = self.plan
        return self.sampler.epoch_inputs(key, Plan(plan.q, plan.batch_size, plan.q,
                                                   plan.refresh_size))

    def run_segment(self, carry, block, j, steps: int | None = None):
        """(carry, history) of segment ``j`` (traced) of the block whose samples
        (:meth:`block_inputs`) are ``block``: the block's steps j * s, ..., j * s + steps - 1
        (s the plan's steps; ``steps`` defaults to s, fewer for a run's last, partial
        segment), the refresh at the block's first step."""
        small, big = block.minibatches, block.refresh
        at = self.plan.steps
        steps = at if steps is None else steps
        body = self._block_body(jax.tree.map(lambda a: a[0], small),
                                None if big is None else big[0])
        return lax.scan(body, carry, j * at + jnp.arange(steps))

    @property
    def finite_sum(self) -> bool:
        return hasattr(self.sampler, "mean")

    def full_loss(self, state, x):
        return self.sampler.mean(self.objective.batch_loss, x) + self.objective.h(state, x)

    def full_grad(self, x):
        return self.sampler.mean(self.objective.grad, x)

    def _on_batch(self, fn, x, element, refresh):
        """fn(x, batch) on a step's batch: a minibatch, or the refresh's large batch."""
        if not refresh:
            return self.sampler.apply(fn, x, element, self.plan)
        if element is None:
            return self.sampler.mean(fn, x)
        return self.sampler.apply_large(fn, x, element, self.plan.refresh_size)

    def _grad_point(self, state, x):
        """The point at which the optimizer will call ``grad_fn`` (its state's
        ``Needs.grad_fn_point`` field), or None where there is none to pair with X."""
        name = self.needs.paired_point
        if name is None:
            return None
        try:
            point = otu.tree_get(state, name)
        except KeyError:  # two states hold such a field: grad_fn is called instead
            return None
        same = jax.tree.structure(point) == jax.tree.structure(x) and all(
            getattr(a, "shape", None) == b.shape and getattr(a, "dtype", None) == b.dtype
            for a, b in zip(jax.tree.leaves(point), jax.tree.leaves(x), strict=True))
        return point if same else None

    def minibatch_grads(self, x, state, element):
        """(grad at X, grad at the optimizer's ``grad_fn`` point or None) on one minibatch;
        both from one ``jax.vmap``-ed gradient over the two points where there is such a
        point (the batch is gathered once, and the two products share their operands).
        A loss that cannot be vmapped over X (a callback without a batching rule) gets the
        two gradients separately, the second from ``grad_fn``."""
        point = self._grad_point(state, x)
        if point is not None:
            def pair(xs, batch):
                return jax.vmap(self.objective.grad, in_axes=(0, None))(xs, batch)

            stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), x, point)
            try:
                both = self._on_batch(pair, stacked, element, False)
            except NotImplementedError:  # no batching rule: jax.vmap raises when traced
                pass
            else:
                return jax.tree.map(lambda a: a[0], both), jax.tree.map(lambda a: a[1], both)
        return self._on_batch(self.objective.grad, x, element, False), None

    def _batch_fn(self, fn, element, refresh):
        """p -> fn(p, the step's batch). With a Python bool ``refresh`` the batch is
        ``element``; in a block's step (:meth:`_block_body`: ``refresh`` traced) ``element`` is
        a :class:`_BlockStep` and the batch is chosen at run time."""
        if isinstance(refresh, bool):
            return lambda p: self._on_batch(fn, p, element, refresh)
        small, big = element.minibatch, element.large
        return lambda p: lax.cond(refresh, lambda: self._on_batch(fn, p, big, True),
                                  lambda: self._on_batch(fn, p, small, False))

    def _extra(self, element, refresh, grad_fn_value=None):
        extra = {}
        if self.needs.refresh_every is not None:
            extra["refresh"] = refresh
        if grad_fn_value is not None:
            extra["grad_fn_value"] = grad_fn_value
        if self.needs.grad_fn and refresh is not True:  # called on minibatch steps only
            small = element if refresh is False else element.minibatch
            extra["grad_fn"] = lambda p: self._on_batch(self.objective.grad, p, small, False)
        if self.needs.value_fn:
            extra["value_fn"] = self._batch_fn(self.objective.batch_loss, element, refresh)
        return extra

    def step(self, carry: Carry, g, element, cost, refresh, grad_fn_value=None):
        """One update from gradient ``g`` of the batch that ``element`` describes
        (``refresh`` and ``element`` as in :meth:`_batch_fn`)."""
        x, state = carry.params, carry.opt_state
        g_true = self.full_grad(x) if self.record_variance else None
        updates, state = self.optimizer.update(g, state, x,
                                               **self._extra(element, refresh, grad_fn_value))
        x_new = optax.apply_updates(x, updates)
        # The manifold guard: a step whose point leaves the Stiefel/Grassmann blocks
        # (||X^T X - I||_F above FEASIBILITY_TOL, or not finite) is refused, X kept, and the
        # chain halted (sticky), e.g. a transformation chained after the rproxjax step.
        feas = self.objective.feasibility(state, x_new)
        off = ~(feas <= feasibility_tolerance(feas.dtype))
        x_new = otu.tree_where(off, x, x_new)
        state = halt(state, off)
        ifo = carry.ifo + cost
        hist = self._history(x_new, state, ifo, g, g_true, refresh, element, feas)
        if self.record_variance:
            hist = hist._replace(riemannian_variance=self._tangent_sq(state, x, g, g_true))
        return Carry(x_new, state, ifo), hist

    @staticmethod
    def _tangent_sq(state, x, g, g_true):
        """||P_X(V - grad f(X))||^2 at the step's point X (before the update)."""
        diff = jax.tree.map(jnp.subtract, otu.tree_get(state, "v", g), g_true)
        return total_sq_norm(map_blocks(lambda b, xb, ub: b.project(xb, ub),
                                        state_blocks(state), x, diff))

    def _history(self, x, state, ifo, g, g_true, refresh, element, feasibility):
        dtype = jnp.result_type(*jax.tree.leaves(x))
        info = step_info(state)
        steps, residual, status = ssn_totals(info, dtype)
        zeta_norm = jnp.zeros((), dtype) if info is None else info.zeta_norm
        variance = loss = None
        if self.record_variance:
            v = otu.tree_get(state, "v", g)
            variance = total_sq_norm(jax.tree.map(jnp.subtract, v, g_true))
        if self.record_loss:
            loss = self.full_loss(state, x) if self.finite_sum else \
                self._batch_fn(self.objective.batch_loss, element, refresh)(x) \
                + self.objective.h(state, x)
        return History(ifo, zeta_norm, steps, residual, status, feasibility,
                       any_halted(state), jnp.bool_(refresh), variance, loss)

    def _plain(self, carry, inputs, limit=None):
        def body(c, element):
            g, g_point = self.minibatch_grads(c.params, c.opt_state, element)
            return self.step(c, g, element, step_cost(self.needs, self.plan.batch_size), False,
                             g_point)

        if limit is None:
            return lax.scan(body, carry, inputs)
        steps = jnp.arange(jax.tree.leaves(inputs)[0].shape[0])
        return lax.scan(_limited(body, limit), carry, (inputs, steps))

    def _block_body(self, small, big):
        """The scan body of a block's steps, over the step's index k in its block: one
        traced :meth:`step` (one copy of the optimizer's update, its subproblem solver
        included), on the refresh's gradient over ``big`` (None: the data set) at k = 0,
        chosen by ``lax.cond``, else on minibatch k - 1 of ``small`` (read in place, not
        copied). Under ``vmap`` the lanes share k, so the cond stays a branch and no lane
        computes the large batch at a small step."""
        refresh_ifo = refresh_cost(self.sampler.n if big is None else self.plan.refresh_size)
        minibatch_ifo = step_cost(self.needs, self.plan.batch_size)

        def body(c, k):
            element = _minibatch(small, k - 1)
            refresh = k == 0

            def minibatch():
                return self.minibatch_grads(c.params, c.opt_state, element)

            paired = jax.eval_shape(minibatch)[1]  # None where unpaired

            def large():  # the refresh's gradient; its paired one is unused (zeros)
                g = self._on_batch(self.objective.grad, c.params, big, True)
                return g, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), paired)

            g, g_point = lax.cond(refresh, large, minibatch)
            ifo_dtype = c.ifo.dtype
            cost = jnp.where(refresh, jnp.asarray(refresh_ifo, ifo_dtype),
                             jnp.asarray(minibatch_ifo, ifo_dtype))
            return self.step(c, g, _BlockStep(element, big), cost, refresh, g_point)

        return body

    def _blocks(self, carry, inputs, limit=None):
        """Blocks of a refresh (on the block's large batch) and minibatch steps, each one
        scan of :meth:`_block_body`; with ``limit``, the epoch's first ``limit`` steps."""

        def block(c, block_inputs: BlockInputs, first=None):
            small, big = block_inputs.minibatches, block_inputs.refresh
            steps = jnp.arange(jax.tree.leaves(small)[0].shape[0] + 1)
            body = self._block_body(small, big)
            if first is None:
                return lax.scan(body, c, steps)
            # the block's step k is the epoch's step first + k
            return lax.scan(_limited(body, limit - first), c, (steps, steps))

        if limit is None:
            carry, hist = lax.scan(block, carry, inputs)
        else:
            small = jax.tree.leaves(inputs.minibatches)[0]  # (blocks, q - 1, ...)
            firsts = jnp.arange(small.shape[0]) * (small.shape[1] + 1)
            carry, hist = lax.scan(lambda c, xs: block(c, *xs), carry, (inputs, firsts))
        return carry, jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), hist)

    def run(self, carry, inputs):
        """(carry, history) of one epoch from a :class:`Carry`."""
        return (self._plain if self.plan.q is None else self._blocks)(carry, inputs)

    def run_limited(self, carry, inputs, limit):
        """(carry, history) of the epoch's first ``limit`` steps (a traced count) in the
        program of a whole epoch: the later steps leave the carry as it is and give history
        rows of zeros, for the caller to drop. On CPU a run whose last epoch is partial runs
        every epoch so (:func:`rproxjax.pure_fit`, :func:`rproxjax.fit`): one copy of the
        step, subproblem solver included, in its program instead of two (:meth:`run`'s and
        :meth:`run_partial`'s), at the cost of a branch per step, which CPUs take without a
        host round trip. The steps are :meth:`run_partial`'s, on the same samples."""
        return (self._plain if self.plan.q is None else self._blocks)(carry, inputs, limit)

    def run_partial(self, carry, inputs, steps: int):
        """(carry, history) of the first ``steps`` steps of the epoch whose inputs (drawn as
        a whole epoch's) are ``inputs``: a run's last, partial epoch. With blocks, the
        whole blocks it holds and then a partial block (its refresh and the first minibatch
        steps), on the same samples as the whole epoch's first ``steps`` steps."""
        if self.plan.q is None:
            return self._plain(carry, inputs[:steps])
        small, big = inputs.minibatches, inputs.refresh
        whole, rest = divmod(steps, self.plan.q)
        pieces = []
        if whole:
            pieces.append(BlockInputs(small[:whole], None if big is None else big[:whole]))
        if rest:
            pieces.append(BlockInputs(small[whole:whole + 1, :rest - 1],
                                      None if big is None else big[whole:whole + 1]))
        hists = []
        for piece in pieces:
            carry, hist = self._blocks(carry, piece)
            hists.append(hist)
        return carry, jax.tree.map(lambda *a: jnp.concatenate(a), *hists)

    def end_loss(self, carry, inputs):
        """F at the epoch's end point: over the data set, or online over its minibatches."""
        x, state = carry.params, carry.opt_state
        if self.finite_sum:
            return self.full_loss(state, x)
        batches = inputs if self.plan.q is None else inputs.minibatches
        lead = 2 if self.plan.q is None else 3
        if self.plan.q is not None and jax.tree.leaves(batches)[0].shape[1] == 0:
            batches, lead = inputs.refresh, 2  # a block cut to its refresh: F over that batch
        flat = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[lead:]), batches)
        return self.objective.batch_loss(x, flat) + self.objective.h(state, x)



class _BlockStep(NamedTuple):
    """The batches of a step of a block (:meth:`EpochProgram._block_body`), where whether it
    is the refresh is known at run time only: its minibatch, and the block's large batch
    (None: the data set)."""

    minibatch: Any
    large: Any


def _minibatch(small, i):
    """Minibatch ``i`` (traced) of a block's minibatches ``small`` (leading axis q - 1);
    minibatch 0 for i < 0 (the refresh's step, which does not use it), zeros for a block
    cut to its refresh (no minibatch)."""
    def take(a):
        if a.shape[0] == 0:
            return jnp.zeros(a.shape[1:], a.dtype)
        return lax.dynamic_index_in_dim(a, jnp.maximum(i, 0), keepdims=False)

    return jax.tree.map(take, small)


def _limited(body, limit):
    """``body(c, x)`` as the body of a scan over (x, t), run where the step index t is below
    ``limit`` (traced, shared by ``vmap`` lanes: a ``lax.cond`` that stays a branch);
    elsewhere the carry passes unchanged with zero outputs."""

    def run(c, xs):
        x, t = xs
        out = jax.eval_shape(body, c, x)[1]

        def skip(c, _):
            return c, jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), out)

        return lax.cond(t < limit, body, skip, c, x)

    return run


def fold_partial() -> bool:
    """Whether a run whose last epoch is partial runs every epoch through
    :meth:`EpochProgram.run_limited`: on CPU (read when traced). On accelerators each
    branch costs a host round trip a step, and the partial epoch keeps its own copy."""
    return jax.default_backend() == "cpu"
