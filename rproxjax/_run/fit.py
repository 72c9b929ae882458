"""Training runs: :func:`fit` (the host driver) and :func:`pure_fit` (for ``jit``/``vmap``).

Both run whole epochs as single XLA programs (:mod:`rproxjax._run.program`) on
the data side given by :mod:`rproxjax._run.data`. :func:`fit` runs them from
a host loop (timing, progress, online streams) and compiles each program
once per structure (:mod:`rproxjax._run.compile`): a second call that changes
only hyperparameter values (mu, step sizes, the data's values, the key)
compiles nothing. :func:`pure_fit` is a pure function of its arrays: all
epochs in one ``lax.scan``, to be wrapped in ``jax.jit`` and ``jax.vmap``
(e.g. over mu or PRNG keys). Both take their options as the values of
:mod:`rproxjax._run.options` and carry a :class:`~rproxjax._run.program.Carry` from
step to step.

IFO convention (one IFO = the gradient of one sample's loss): a plain step on
a minibatch of b samples costs b; a refresh step costs |S1| (n for a full
gradient); a step that also needs the minibatch gradient at another point
(R-SARAH, SVRG) costs 2 b. Gradients computed only for the history (the
variance of the estimate, the loss) are not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.sharding import NamedSharding

from rproxjax import _checks
from rproxjax._blocks import map_blocks
from rproxjax._contract import Needs, find_needs
from rproxjax._run.checks import (
    check_key,
    check_loss,
    check_opt_state,
    check_optimizer,
    positive_int,
)
from rproxjax._run.compile import compile_once
from rproxjax._run.data import FiniteSum, Plan, Stream, chunk_steps, is_dataset
from rproxjax._run.monitor import EpochInfo, Monitor, traced_callback
from rproxjax._run.options import Recording, Sampling, grouped
from rproxjax._run.program import (
    Carry,
    EpochProgram,
    History,
    fold_partial,
    make_objective,
    state_blocks,
)
from rproxjax._run.sharding import ShardedFiniteSum, data_mesh
from rproxjax._typing import Array, ArrayLike, PRNGKey, PyTree

__all__ = ["FitResult", "History", "fit", "pure_fit"]


class FitResult(NamedTuple):
    """Outcome of :func:`fit` and :func:`pure_fit`.

    Attributes:
      params: the final point.
      opt_state: the final optimizer state (resume by passing it back).
      history: per-step :class:`History`.
      epoch_loss: F at the start and after each epoch (finite-sum mode; in
        online mode, the mean minibatch loss of each chunk), length epochs + 1.
      epoch_ifo: cumulative IFOs at the same points.
      epoch_time: cumulative wall seconds of the optimization at the same
        points (measured on the host; excluding compilation and, in
        finite-sum mode, the end-of-epoch evaluations of F and drawing each
        epoch's sample indices, so that the time does not depend on how many
        curve points are recorded; NaN in :func:`pure_fit`).
      key: the PRNG key after the run (resume by passing it back).

    Example:
        >>> import jax, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    batch_size=16, num_epochs=2)
        >>> [int(i) for i in res.epoch_ifo], res.epoch_loss.shape, res.history.ifo.shape
        ([0, 64, 128], (3,), (8,))
        >>> more = rproxjax.fit(opt, rproxjax.problems.spca_loss, res.params, z, key=res.key,
        ...                     batch_size=16, num_epochs=1, opt_state=res.opt_state,
        ...                     initial_ifo=int(res.epoch_ifo[-1]))  # resumes the run
        >>> int(more.epoch_ifo[-1])
        192
    """

    params: PyTree
    opt_state: PyTree
    history: History
    epoch_loss: Array
    epoch_ifo: Array
    epoch_time: Array
    key: PRNGKey

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(np.shape(p))) for p in jax.tree.leaves(self.params))
        loss = self.epoch_loss
        if isinstance(loss, jax.core.Tracer) or np.size(loss) == 0:
            end = f"{np.shape(loss)[0] - 1 if np.ndim(loss) else 0} epochs"
        else:
            end = (f"{np.size(loss) - 1} epochs, loss {float(np.asarray(loss)[0]):.6g} -> "
                   f"{float(np.asarray(loss)[-1]):.6g}, {int(np.asarray(self.epoch_ifo)[-1])} "
                   "IFOs")
        return f"FitResult(params {shapes}, {end})"


@dataclasses.dataclass(frozen=True)
class _Settings:
    batch_size: int | None
    num_epochs: int | None
    num_steps: int | None
    steps_per_epoch: int | None
    refresh_batch_size: int | None
    chunk_size: int


def _settings(batch_size, num_epochs, num_steps, sampling: Sampling) -> _Settings:
    """The sizes as Python ints (NumPy integers accepted), each checked by name
    (:class:`Sampling` checks its own when built)."""
    return _Settings(positive_int("batch_size", batch_size),
                     positive_int("num_epochs", num_epochs),
                     positive_int("num_steps", num_steps),
                     sampling.steps_per_epoch, sampling.refresh_batch_size,
                     sampling.chunk_size)


def _check_params(state, params):
    """Each block's point: its shape and dtype, and (concrete points, on the host) its
    distance to the manifold within the epoch program's guard tolerance."""
    map_blocks(lambda b, x: b.check("params", x), state_blocks(state), params)


def _finite_plan(needs: Needs, n: int, s: _Settings) -> tuple[Plan, int, int | None]:
    """(epoch plan, number of epochs, steps of a partial last epoch or None) in finite-sum
    mode: ``num_steps`` not a multiple of the epoch's steps ends with a partial epoch."""
    b = n if s.batch_size is None and needs.full_batch else s.batch_size
    positive_int("batch_size", b, allow_none=False)
    if b > n:
        raise ValueError(f"batch_size = {b} exceeds the number of samples n = {n}.")
    if needs.full_batch and b != n:
        raise ValueError(f"this optimizer is a full-batch method: batch_size must be n = {n}.")
    q = needs.refresh_every
    if q is not None and q < 2:
        raise ValueError("the refresh period q must be >= 2 in the runner (q = 1 would "
                         "refresh every step).")
    if s.refresh_batch_size is not None and not 1 <= s.refresh_batch_size <= n:
        raise ValueError(f"refresh_batch_size must be in [1, n = {n}], got "
                         f"{s.refresh_batch_size}.")
    positive_int("steps_per_epoch", s.steps_per_epoch)
    steps = s.steps_per_epoch
    if steps is None:
        steps = n // b if q is None else max(1, (n // b) // (q - 1)) * q
    if q is not None and steps < q:  # segments of a block: a curve point every `steps`
        if q % steps:
            raise ValueError(f"steps_per_epoch = {steps} below the refresh period q = {q} "
                             f"must divide q (epochs are segments of a block).")
    elif q is not None:
        steps = max(1, steps // q) * q
    num_epochs, last = s.num_epochs, None
    if num_epochs is None:
        if s.num_steps is None:
            raise ValueError("give num_epochs (or num_steps) in finite-sum mode.")
        num_epochs, rest = divmod(s.num_steps, steps)
        if rest:  # a partial last epoch: exactly num_steps steps
            num_epochs, last = num_epochs + 1, rest
    elif s.num_steps is not None:
        raise ValueError("give num_epochs or num_steps, not both.")
    positive_int("num_epochs", num_epochs, allow_none=False)
    refresh = s.refresh_batch_size if s.refresh_batch_size not in (None, n) else None
    return Plan(steps, b, q, refresh), num_epochs, last


def _stream_plan(needs: Needs, s: _Settings) -> tuple[Plan, int, None]:
    positive_int("batch_size", s.batch_size, allow_none=False)
    if not isinstance(s.num_steps, int) or s.num_steps < 1:
        raise ValueError("online mode needs num_steps, a positive int.")
    if needs.full_batch:
        raise ValueError("a full-batch method (e.g. manpg) needs a data set, not a stream.")
    q = needs.refresh_every
    if q is None:
        steps = max(1, s.chunk_size // s.batch_size)
    else:
        if s.refresh_batch_size is None:
            raise ValueError("online variance-reduced methods need refresh_batch_size (|S1|).")
        if q < 2:
            raise ValueError("the refresh period q must be >= 2 in the runner.")
        steps = q
    return Plan(steps, s.batch_size, q, s.refresh_batch_size), -(-s.num_steps // steps), None


def _ifo0(initial=0):
    """The IFO counter's start: ``initial_ifo`` (a Python int >= 0) when a count continues."""
    if isinstance(initial, bool) or not hasattr(initial, "__index__") or initial < 0:
        raise ValueError(f"initial_ifo must be an int >= 0, got {initial!r}.")
    return jax.device_put(np.asarray(int(initial), np.int64 if jax.config.jax_enable_x64
                                     else np.int32))


def _finite_elements(program, key, epochs):
    """(key after the run, one element per epoch): the epoch keys, or for segments of a
    block (block key, segment index), one key per block as whole-block epochs have."""
    per = program.segments()
    if per is None:
        return _epoch_keys(key, epochs)
    key, keys = _epoch_keys(key, -(-epochs // per))
    return key, [(keys[e // per], np.int32(e % per)) for e in range(epochs)]


def _epoch_keys(key, num_epochs):
    """(key, a list of epoch keys) split off one at a time, so that a run of a + b epochs
    and a run of a epochs resumed (with its returned key and state) for b more draw the
    same samples."""
    keys = []
    for _ in range(num_epochs):
        key, sub = _split(key)
        keys.append(sub)
    return key, keys


# A split as one program returning both keys (eagerly, unpacking the split's array and
# stacking the keys compiled a program each).
_split = jax.jit(lambda key: tuple(jax.random.split(key)))


def _init(optimizer, params):
    """``optimizer.init(params)``: one compiled program for concrete params (eagerly, each
    array it creates would compile a program of its own), traced inline under ``jit``."""
    if _is_traced(params):
        return optimizer.init(params)
    return compile_once(optimizer.init, params)(params)  # inlined if the optimizer is traced


def _prepare(optimizer, loss_fn, params, data, key, opt_state, settings, batched_loss,
             recording: Recording, initial_ifo, sharding=None):
    """(program, number of epochs, steps of a partial last epoch or None, initial
    :class:`Carry`) for both drivers."""
    check_key(key)
    check_optimizer(optimizer, None)
    params = _checks.array_tree("params", params)
    if not hasattr(data, "__next__"):  # a data set: NumPy leaves become JAX arrays
        data = _checks.array_tree("data", data)
    if opt_state is not None:
        opt_state = jax.tree.map(
            lambda a: jax.device_put(a) if isinstance(a, np.ndarray | np.generic) else a,
            opt_state)
    if opt_state is not None:
        check_opt_state(optimizer, params, opt_state)
    state = _init(optimizer, params) if opt_state is None else opt_state
    check_optimizer(optimizer, state)
    _check_params(state, params)
    needs = find_needs(state)
    objective = make_objective(loss_fn, batched_loss)
    if is_dataset(data):
        sampler = FiniteSum(data, settings.chunk_size)  # checks the leading sample axis
        if sampler.n < 1:
            raise ValueError("data holds no sample (leading axis of size 0).")
        sample = jax.tree.map(  # shapes only: check_loss evaluates shapes
            lambda a: jax.ShapeDtypeStruct(((min(2, a.shape[0]),) if batched_loss else ())
                                           + a.shape[1:], a.dtype), data)
        check_loss(loss_fn, params, sample, batched_loss)
        plan, num_epochs, last = _finite_plan(needs, sampler.n, settings)
        placement = data_mesh(data, sharding)
        if placement is not None:
            sampler = ShardedFiniteSum(data, *placement, settings.chunk_size)
            sampler.check_plan(plan)
    else:
        if sharding is not None:
            raise ValueError("sharding= shards a data set; an online stream is not sharded "
                             "(give each process its own stream, see docs/usage.md, Scaling "
                             "out).")
        if recording.variance:
            raise ValueError("Recording(variance=True) needs the full gradient: finite-sum "
                             "mode only.")
        sampler = Stream(data, settings.batch_size)
        plan, num_epochs, last = _stream_plan(needs, settings)
    program = EpochProgram(optimizer, objective, sampler, plan, needs, recording.loss,
                           recording.variance)
    return program, num_epochs, last, Carry(params, state, _ifo0(initial_ifo))


def _is_traced(tree):
    return any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(tree))




def fit(optimizer: optax.GradientTransformation, loss_fn: Callable[[PyTree, PyTree], ArrayLike],
        params: PyTree, data: PyTree | Iterator[PyTree], *, key: PRNGKey,
        batch_size: int | None = None, num_epochs: int | None = None,
        num_steps: int | None = None, sampling: Sampling | None = None,
        recording: Recording | None = None, sharding: NamedSharding | None = None,
        opt_state: PyTree | None = None, initial_ifo: int = 0, batched_loss: bool = False,
        throw: bool = False, **former: Any) -> FitResult:
    """Runs ``optimizer`` on the per-sample loss ``loss_fn(params, sample)`` from the host.

    Finite-sum mode (``data`` a data set of n samples): each epoch draws one
    random permutation and consumes disjoint minibatches; online mode
    (``data`` an iterator of minibatches of ``batch_size``): ``num_steps``
    steps in compiled chunks, the data never all resident. Blocks of the
    variance-reduced methods (a refresh on S1, then q - 1 minibatch steps on
    S2) are an outer ``lax.scan`` around an inner one. Epoch programs are
    compiled once per structure and reused by later calls. Between epochs the
    run reports to ``recording``'s callback (which may stop it), a progress bar and
    the ``"rproxjax"`` logger. Inside ``jax.jit``/``jax.vmap`` use :func:`pure_fit`,
    which takes the same arguments and gives identical results.

    Args:
      optimizer: a transformation of this package, or a chain holding one
        (gradient preprocessing first). What it needs from the runner (a
        refresh period, ``grad_fn``, ``value_fn``, full batches) is read from
        its state (:class:`rproxjax.Needs`), and so are the blocks whose
        regularizers give F = f + h.
      loss_fn: per-sample loss ``loss_fn(params, sample) -> scalar``.
      params: initial point (on the blocks' manifolds: e.g. X0 on St(d, r)).
      data: the data set (finite-sum: an array or pytree of arrays with a
        leading sample axis of size n) or, in :func:`fit` only, an iterator
        of minibatches (online).
      key: PRNG key for sampling.
      batch_size: minibatch size b (|S| or |S2|); full-batch methods (ManPG)
        default to n.
      num_epochs: epochs to run (finite-sum mode).
      num_steps: steps to run, exactly, instead of ``num_epochs`` (online mode:
        required; finite-sum mode: whole epochs, then a partial last epoch that
        takes the first steps of its epoch's samples, a partial block included).
      sampling: a :class:`Sampling`: steps per epoch, the refreshes' batch size |S1| and
        the chunk size (default ``Sampling()``).
      recording: a :class:`Recording`: F and the gradient estimate's variance in the
        history, a progress bar, a ``callback`` after each epoch that may stop the run
        (default ``Recording()``: none of them).
      sharding: a ``jax.sharding.NamedSharding(mesh, PartitionSpec(axis))``: a
        data-parallel run, the samples split evenly over the devices of the mesh axis
        ``axis``. Each device draws b / k samples of every minibatch from its own
        shard (its own permutation), the gradients are all-reduced, and the point and
        the optimizer state are replicated; n, ``batch_size`` and |S1| must be
        multiples of k. Data placed beforehand with such a sharding are run so without
        it (under ``jax.jit``, :func:`pure_fit` reads a mesh with Explicit axes off the
        data; with Auto axes pass ``sharding``). Finite-sum mode only; see
        ``docs/usage.md``, "Scaling out".
      opt_state: a state to resume from (default ``optimizer.init(params)``).
      initial_ifo: IFOs already spent: ``epoch_ifo`` and ``history.ifo`` count from
        it. A resumed run counts its own IFOs from 0 unless given the run's
        ``int(res.epoch_ifo[-1])``.
      batched_loss: ``loss_fn(params, batch)`` already returns the mean loss
        over a batch (its leading axis), instead of one sample's loss.
      throw: raise a RuntimeError (with the run as ``err.result``) if the run halted
        (``history.halted``: a non-finite gradient, subproblem or objective, an
        invalid traced hyperparameter, or a step that left the manifold,
        ||X^T X - I||_F above 1e-6 in float64 or 1e-3 in float32, which only a
        transformation changing the step's update can cause; the step is refused).
        By default the flag is data, as in the state.
      **former: the former flat keywords, accepted until rproxjax 0.5 removes them:
        ``steps_per_epoch``, ``refresh_batch_size`` and ``chunk_size`` (now
        :class:`Sampling`'s fields), ``record_loss``, ``record_variance``, ``progress``
        and ``callback`` (now :class:`Recording`'s ``loss``, ``variance``, ``progress``
        and ``callback``), ``mesh`` and ``data_axis`` (now
        ``sharding=NamedSharding(mesh, PartitionSpec(data_axis))``). Each raises a
        DeprecationWarning.

    An error raised after some epochs (e.g. by an online stream in a later chunk)
    carries the run so far, a :class:`FitResult`, as ``err.partial_result``.

    Returns:
      A :class:`FitResult`.

    Raises:
      TypeError: for an ``optimizer`` that is not an optax transformation, a ``key`` that
        is not a PRNG key, ``params`` or ``data`` that are not arrays (or pytrees of
        arrays), a size (``batch_size``, ``num_epochs``, ``num_steps``) that is not an int
        (a bool, a float), a ``sampling``, ``recording`` or ``sharding`` of another type, a
        group given with one of its former keywords, or an unknown keyword;
        :class:`Sampling` and :class:`Recording` raise their own when built.
      ValueError: for traced ``params``, ``opt_state`` or ``key`` (use :func:`pure_fit`
        inside ``jax.jit``/``jax.vmap``); a size below 1 or out of
        range (``batch_size`` above n, ``refresh_batch_size`` outside [1, n], a batch other
        than n for a full-batch method, a ``steps_per_epoch`` below q that does not divide
        q, a refresh period q < 2); neither or both of ``num_epochs`` and ``num_steps`` in
        finite-sum mode; online mode without ``num_steps`` (or, for a variance-reduced
        method, ``refresh_batch_size``), or with a full-batch method,
        ``Recording(variance=True)`` or ``sharding``; a ``loss_fn`` that fails on a sample
        or does not return a real scalar; an optimizer without an rproxjax step or with a
        transformation chained after it; an ``opt_state`` that does not match the
        optimizer; ``params`` off their manifolds or of a dtype other than
        float32/float64; a ``sharding`` that does not split the samples over one axis of a
        mesh of devices (or sizes it does not divide); an ``initial_ifo`` that is not an
        int >= 0; a data set without samples; a stream that ends before ``num_steps``.
      RuntimeError: ``throw=True`` and the run halted (the run as ``err.result``).

    Example:
        >>> import jax, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    batch_size=16, num_epochs=2, throw=True)
        >>> res.params.shape, [int(i) for i in res.epoch_ifo]
        ((8, 2), [0, 64, 128])
        >>> bool(rproxjax.stiefel.feasibility(res.params) < 1e-4)
        True
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    batch_size=16, num_epochs=2,
        ...                    sampling=rproxjax.Sampling(steps_per_epoch=2),
        ...                    recording=rproxjax.Recording(loss=True))
        >>> res.history.loss.shape, res.epoch_loss.shape  # a curve point every 2 steps
        ((4,), (3,))
    """
    if _is_traced((params, opt_state, key)):
        raise ValueError("fit drives epochs from the host and cannot be traced; inside "
                         "jax.jit or jax.vmap call rproxjax.pure_fit (same arguments).")
    sampling, recording, sharding = grouped("fit", sampling, recording, sharding, former)
    settings = _settings(batch_size, num_epochs, num_steps, sampling)
    program, epochs, last, carry = _prepare(optimizer, loss_fn, params, data, key, opt_state,
                                            settings, batched_loss, recording, initial_ifo,
                                            sharding)
    n = getattr(program.sampler, "n", program.plan.batch_size)
    progress, callback = recording.progress, recording.callback
    if program.finite_sum and program.segments() is None:
        monitor = Monitor(epochs, n, progress, callback)
        result = _finite_loop(program, carry, key, epochs, last, monitor)
    elif program.finite_sum:
        monitor = Monitor(epochs, n, progress, callback)
        key, elements = _finite_elements(program, key, epochs)
        result = _host_loop(program, carry, elements, key, monitor, epochs, last)
    else:
        sizes = chunk_steps(settings.num_steps, program.plan.steps)
        chunks = (program.sampler.chunk(program.plan, steps) for steps in sizes)
        first = next(chunks)  # checks loss_fn on the stream's first sample
        batches = first if program.plan.q is None else first.refresh
        check_loss(loss_fn, params, jax.tree.map(
            lambda a: a[0] if batched_loss else a[0, 0], batches), batched_loss)
        monitor = Monitor(len(sizes), n, progress, callback)
        result = _host_loop(program, carry, itertools.chain([first], chunks), key, monitor,
                            len(sizes))
    if throw:
        _raise_if_halted(result)
    return result


def _raise_if_halted(result: FitResult):
    """``throw=True``: a run that halted is an error (with the run attached)."""
    from rproxjax._run.program import feasibility_tolerance

    halted = np.asarray(result.history.halted)
    if halted.any():
        step = int(np.argmax(halted))
        feas = np.asarray(result.history.feasibility)[step]
        tol = feasibility_tolerance(feas.dtype)
        why = ("a non-finite gradient, subproblem or objective, or an invalid traced "
               "hyperparameter (a step <= 0, mu < 0)")
        if not feas <= tol:
            why = (f"its point left the manifold (||X^T X - I||_F = {feas:.3e} > {tol:g}): "
                   "a transformation after the rproxjax step moves X off the manifold; put "
                   "gradient preprocessing before it")
        err = RuntimeError(
            f"the run halted at step {step}: {why}; the params were kept from then on "
            "(err.result holds the run).")
        err.result = result
        raise err




def _draw_inputs(compiled, program, segmented, element, head, drawn):
    """The sample indices of a finite-sum epoch (drawn outside the timing): from its key,
    or for a segment of a block, (the block's samples, the segment's index), the samples
    drawn once per block at its head segment (``drawn`` keeps them)."""
    if not segmented:
        return compiled(("inputs",), lambda k: program.sampler.epoch_inputs(k, program.plan),
                        element)
    key, j = element
    if head:
        drawn["block"] = compiled(("block",), program.block_inputs, key)
    return drawn["block"], j


def _epoch_fn(program, partial=None, segmented=False, limited=False):
    """One epoch of ``program`` from its inputs (sample indices, an online chunk, or a
    block's samples with a segment's index), or its first ``partial`` steps (a run's last,
    partial epoch); ``limited``: its first ``inputs[1]`` steps (traced) of ``inputs[0]``
    (:meth:`EpochProgram.run_limited`)."""
    finite = program.finite_sum

    def epoch(c, inputs):
        if limited:
            c, hist = program.run_limited(c, *inputs)
        elif segmented:
            c, hist = program.run_segment(c, *inputs, partial)
        else:
            c, hist = (program.run(c, inputs) if partial is None
                       else program.run_partial(c, inputs, partial))
        return c, hist, (None if finite else program.end_loss(c, inputs))

    return epoch


def _finite_loop(program, carry, key, total, last, monitor):
    """The epochs of a finite-sum run (whole epochs, not segments of a block), one compiled
    call each, timed. Two programs besides the epoch's (and its partial last epoch's):
    ``post`` evaluates F at the carry and draws the next epoch's sample indices (both
    outside the timing), splitting one key per epoch as :func:`_epoch_keys` does."""
    def post(c, k, draw):
        def drawn(k):
            k, sub = jax.random.split(k)
            return k, program.sampler.epoch_inputs(sub, program.plan)

        shapes = jax.eval_shape(drawn, k)
        k, inputs = lax.cond(draw, drawn, lambda k: (k, jax.tree.map(
            lambda s: jnp.zeros(s.shape, s.dtype), shapes[1])), k)
        return program.end_loss(c, None), k, inputs

    post = compile_once(post, carry, key, np.bool_(True))
    loss, key_next, inputs = post(carry, key, np.bool_(True))
    programs, epochs, elapsed = {}, _Epochs(carry, True, key, loss), 0.0
    fold = last is not None and fold_partial()  # one program, as pure_fit's
    steps = np.int32(program.plan.steps)
    with epochs.kept(monitor):
        for e in range(total):
            partial = last if e == total - 1 else None
            if fold:
                if not programs:
                    programs[None] = compile_once(_epoch_fn(program, limited=True), carry,
                                                  (inputs, steps), notice=monitor.compiling)
                args = (inputs, steps if partial is None else np.int32(partial))
                run = programs[None]
            else:
                if partial not in programs:
                    programs[partial] = compile_once(_epoch_fn(program, partial), carry,
                                                     inputs, notice=monitor.compiling)
                args, run = inputs, programs[partial]
            start = time.perf_counter()
            carry, hist, _ = run(carry, args)
            jax.block_until_ready(carry)
            elapsed += time.perf_counter() - start
            if fold and partial is not None:
                hist = jax.tree.map(lambda a, n=partial: np.asarray(a)[:n], hist)  # on the host
            key = key_next
            loss, key_next, inputs = post(carry, key, np.bool_(e < total - 1))
            if monitor.update(epochs.add(carry, hist, loss, elapsed, total, key)):
                break
    return epochs.result()


def _host_loop(program, carry, inputs_iter, key, monitor, total, last=None):
    """Runs the epochs one compiled call at a time, timing each: online chunks, and
    finite-sum epochs that are segments of a block (``steps_per_epoch < q``; one program
    for every segment, given the block's samples and the segment's index). The times
    exclude compilation and, in finite-sum mode, drawing the epoch's sample indices and
    evaluating F. ``last``: the steps of a partial last epoch (finite-sum mode), which runs
    the first ``last`` steps of its epoch's (or segment's) samples."""
    finite = program.finite_sum
    per = program.segments()

    programs, end_loss, drawn = {}, None, {}  # online: a shorter last chunk is another program

    def compiled(name, fn, *args):
        if name not in programs:
            programs[name] = compile_once(fn, *args)
        return jax.block_until_ready(programs[name](*args))

    epochs, elapsed = _Epochs(carry, finite, key), 0.0
    with epochs.kept(monitor):  # e.g. a stream that fails in a later chunk: keep the work
        for e, element in enumerate(inputs_iter):
            partial = last if finite and e == total - 1 else None
            if finite:
                element = _draw_inputs(compiled, program, per is not None, element,
                                       per is not None and e % per == 0, drawn)
            shapes = (partial, str(jax.tree.map(jnp.shape, element)))
            if shapes not in programs:
                programs[shapes] = compile_once(_epoch_fn(program, partial, per is not None),
                                                carry, element, notice=monitor.compiling)
            if finite and end_loss is None:  # F after each epoch, outside the timing
                end_loss = compile_once(lambda c: program.end_loss(c, None), carry)
                epochs.losses.append(end_loss(carry))
            start = time.perf_counter()
            carry, hist, loss = programs[shapes](carry, element)
            jax.block_until_ready(carry)
            elapsed += time.perf_counter() - start
            loss = end_loss(carry) if finite else loss
            if monitor.update(epochs.add(carry, hist, loss, elapsed, total)):
                break
    return epochs.result()


class _Epochs:
    """The epochs a host loop has run: histories, F, IFOs and times (host lists), joined
    into a :class:`FitResult` on the host (nothing to compile). ``key`` is the run's key
    after the recorded epochs (finite-sum mode: each epoch's own; online: the run's)."""

    def __init__(self, carry, finite, key, loss0=None):
        self.carry, self.finite, self.key, self.ifo0 = carry, finite, key, carry.ifo
        self.hists, self.losses, self.ifos, self.times = [], [], [], [0.0]
        if loss0 is not None:
            self.losses.append(loss0)
        self.info = None

    def add(self, carry, hist, loss, elapsed, total, key=None) -> EpochInfo:
        """Records an epoch; its :class:`EpochInfo` (finite-sum mode: with the key that
        resumes the run; online: none)."""
        self.carry, self.key = carry, self.key if key is None else key
        self.hists.append(hist)
        self.losses.append(loss)
        self.ifos.append(carry.ifo)
        self.times.append(elapsed)
        self.info = EpochInfo(len(self.hists), total, carry.params, carry.opt_state, loss,
                              carry.ifo, elapsed, self.key if self.finite else None)
        return self.info

    @contextlib.contextmanager
    def kept(self, monitor):
        """An error raised by the loop carries the epochs run so far as
        ``err.partial_result``; the monitor is closed either way."""
        try:
            yield
        except Exception as err:
            if self.hists:
                err.partial_result = self.result()
            raise
        finally:
            monitor.close(self.info)

    def result(self) -> FitResult:
        carry, losses = self.carry, self.losses
        if not self.finite:
            losses = [np.asarray(np.nan, jnp.result_type(*jax.tree.leaves(carry.params)))] + losses
        put = jax.device_put  # a transfer; jnp.asarray would compile a copy per shape
        history = jax.tree.map(lambda *a: put(np.concatenate([np.asarray(x) for x in a])),
                               *self.hists)
        losses = put(np.stack([np.asarray(v) for v in losses]))
        ifos = np.stack([np.asarray(self.ifo0)] + [np.asarray(v) for v in self.ifos])
        return FitResult(carry.params, carry.opt_state, history, losses, put(ifos),
                         put(np.asarray(self.times)), self.key)


class _Run(NamedTuple):
    """The carry of :func:`pure_fit`'s scan over epochs: the run's :class:`Carry` and the
    key that the next epoch splits."""

    carry: Carry
    key: PRNGKey


class _EpochEnd(NamedTuple):
    """What :func:`pure_fit`'s scan records per epoch: its steps' history, F and the IFOs
    spent at its end."""

    history: History
    loss: Array
    ifo: Array


def pure_fit(optimizer: optax.GradientTransformation,
             loss_fn: Callable[[PyTree, PyTree], ArrayLike], params: PyTree, data: PyTree, *,
             key: PRNGKey, batch_size: int | None = None, num_epochs: int | None = None,
             num_steps: int | None = None, sampling: Sampling | None = None,
             recording: Recording | None = None, sharding: NamedSharding | None = None,
             opt_state: PyTree | None = None, initial_ifo: int = 0,
             batched_loss: bool = False, **former: Any) -> FitResult:
    """:func:`fit` as a pure function: all epochs in one ``lax.scan``, finite-sum mode.

    Wrap it in ``jax.jit`` and ``jax.vmap`` (over mu, step sizes or PRNG keys:
    build the optimizer inside the traced function). It gives the same
    iterates, history, ``epoch_loss`` and ``epoch_ifo`` as :func:`fit`;
    ``epoch_time`` is NaN.

    Args:
      optimizer, loss_fn, params, data, key, batch_size, num_epochs, num_steps, sampling,
        recording, sharding, opt_state, initial_ifo, batched_loss, **former: as in
        :func:`fit` (``progress`` is not a former keyword here), with these differences:
        ``data`` must be a data set (finite-sum mode), and ``sampling.steps_per_epoch``
        at least the refresh period q (whole blocks). ``recording.progress`` is an error
        (no bar inside ``jax.jit``); ``recording.callback`` is called through
        ``jax.debug.callback`` after each epoch, with an :class:`EpochInfo` of NumPy
        arrays (``time`` NaN), once per lane under ``jax.vmap``, and its return value is
        ignored (a compiled run cannot stop early: use :func:`fit` for that); without one
        the program holds no callback. Under ``jax.jit``, data placed with a
        ``NamedSharding`` over a mesh with Explicit axes (``jax.make_mesh``'s default)
        are run data-parallel without ``sharding``, as :func:`fit` runs them (the mesh is
        read off their traced type); over a mesh with Auto axes the traced data do not
        say their split: pass ``sharding``.

    Returns:
      A :class:`FitResult` (``epoch_time`` NaN). As in :func:`fit`, a step whose point
      leaves the manifold (||X^T X - I||_F above 1e-3 in float32, 1e-6 in float64) is
      refused and the run halted (``history.halted``); there is no ``throw`` under
      ``jit``: read the flag.

    Raises:
      TypeError: as :func:`fit` does.
      ValueError: as :func:`fit` does (e.g. for an ``optax.chain`` with a transformation
        after the rproxjax step, which would move X off the manifold), and for an online
        stream, epochs shorter than a block, or ``Recording(progress=True)``.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> def run(mu):
        ...     opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(mu))
        ...     res = rproxjax.pure_fit(opt, rproxjax.problems.spca_loss, x0, z,
        ...                             key=jax.random.key(2), batch_size=16, num_epochs=2)
        ...     return res.epoch_loss[-1]
        >>> jax.jit(jax.vmap(run))(jnp.array([0.01, 0.1])).shape
        (2,)
    """
    if hasattr(data, "__next__"):
        raise ValueError("pure_fit needs a data set (an array or pytree of arrays); stream "
                         "minibatches with fit.")
    sampling, recording, sharding = grouped("pure_fit", sampling, recording, sharding, former,
                                            progress=False)
    settings = _settings(batch_size, num_epochs, num_steps, sampling)
    program, epochs, last, carry = _prepare(optimizer, loss_fn, params, data, key, opt_state,
                                            settings, batched_loss, recording, initial_ifo,
                                            sharding)
    if program.segments() is not None:
        raise ValueError("pure_fit runs whole blocks: steps_per_epoch must be at least the "
                         "refresh period q (fit splits blocks into shorter epochs).")
    callback = recording.callback
    loss0 = program.end_loss(carry, None)

    fold = last is not None and fold_partial()

    def epoch(run: _Run, e, partial=None):  # one key split per epoch, as _epoch_keys splits
        k, sub = jax.random.split(run.key)
        inputs = program.sampler.epoch_inputs(sub, program.plan)
        if fold:  # every epoch in one program, the last one partial
            c, hist = program.run_limited(run.carry, inputs,
                                          jnp.where(e == epochs - 1, last, program.plan.steps))
        else:
            c, hist = (program.run(run.carry, inputs) if partial is None
                       else program.run_partial(run.carry, inputs, partial))
        loss = program.end_loss(c, None)
        if callback is not None:
            traced_callback(callback, e + 1, epochs, c, loss, k)
        return _Run(c, k), _EpochEnd(hist, loss, c.ifo)

    whole = epochs if last is None or fold else epochs - 1
    run, ends = lax.scan(epoch, _Run(carry, key), jnp.arange(whole))
    rows = (epochs - 1) * program.plan.steps + last if fold else None  # num_steps exactly
    hist = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[:rows], ends.history)
    losses, ifos = ends.loss, ends.ifo
    if last is not None and not fold:  # the partial last epoch: exactly num_steps steps
        run, end = epoch(run, whole, last)
        hist = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), hist, end.history)
        losses = jnp.concatenate([losses, end.loss[None]])
        ifos = jnp.concatenate([ifos, end.ifo[None]])
    return FitResult(run.carry.params, run.carry.opt_state, hist,
                     jnp.concatenate([loss0[None], losses]),
                     jnp.concatenate([_ifo0(initial_ifo)[None], ifos]),
                     jnp.full((epochs + 1,), jnp.nan), run.key)
