"""The data side of a run: what the compiled epochs iterate over, and how it becomes batches.

* :class:`FiniteSum`: a data set resident in memory (a pytree of arrays with a
  leading sample axis). Epochs iterate over sample indices drawn from a PRNG
  key; the full loss and gradient are available.
* :class:`Stream`: an iterator of minibatches. Epochs ("chunks") iterate over
  the stacked batches themselves; the data are never all resident.

Both describe an epoch by a :class:`Plan` (static): ``steps`` plain steps, or
``blocks`` blocks of one refresh (``refresh_size`` samples, or the full data
set when ``refresh_size`` is None) followed by q - 1 minibatch steps.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["BlockInputs", "FiniteSum", "Plan", "Stream", "chunk_steps", "chunked_mean",
           "leading_size"]


class Plan(NamedTuple):
    """The static shape of an epoch."""

    steps: int
    batch_size: int
    q: int | None = None
    refresh_size: int | None = None

    @property
    def blocks(self) -> int:
        return self.steps // self.q


class BlockInputs(NamedTuple):
    """The inputs of an epoch of blocks (a refresh, then q - 1 minibatch steps each).

    Attributes:
      minibatches: per block, its q - 1 minibatches: sample indices of shape
        (blocks, q - 1, b) in finite-sum mode, the stacked samples themselves online.
      refresh: per block, the refresh's large batch (indices of shape (blocks, |S1|), or
        online its samples), or None where the refresh is the full data set.
    """

    minibatches: Any
    refresh: Any


def leading_size(tree) -> int:
    sizes = {a.shape[0] if a.ndim else None for a in jax.tree.leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            "data must be an array (or a pytree of arrays) with one common leading "
            f"sample axis; got leading sizes {sizes}."
        )
    return sizes.pop()


def take(data, idx):
    return jax.tree.map(lambda a: a[idx], data)


def chunked_mean(fn, data, n, chunk):
    """Mean over the n samples of fn(batch) * len(batch), in chunks of ``chunk``.

    Chunks are read with ``dynamic_slice`` inside a ``fori_loop``, with no reshaped copy
    of the data.
    """
    full = n // chunk

    def part(i):
        batch = jax.tree.map(lambda a: lax.dynamic_slice_in_dim(a, i * chunk, chunk, axis=0),
                             data)
        return jax.tree.map(lambda v: v * chunk, fn(batch))

    total = None
    if full:
        total = part(0)
        if full > 1:
            total = lax.fori_loop(1, full, lambda i, acc: jax.tree.map(jnp.add, acc, part(i)),
                                  total)
    if n % chunk:
        rest = jax.tree.map(lambda v: v * (n % chunk),
                            fn(jax.tree.map(lambda a: a[full * chunk:], data)))
        total = rest if total is None else jax.tree.map(jnp.add, total, rest)
    return jax.tree.map(lambda v: v / n, total)


def _indices(key, n, shape):
    """Minibatch indices: without replacement when they fit in one permutation."""
    count = math.prod(shape)
    if count <= n:
        return jax.random.permutation(key, n)[:count].reshape(shape)
    return jax.random.randint(key, shape, 0, n)


class FiniteSum:
    """A resident data set of n samples."""

    def __init__(self, data, chunk_size: int):
        self.data = data
        self.n = leading_size(data)
        self.chunk_size = chunk_size

    def batch(self, indices):
        return take(self.data, indices)

    def mean(self, fn, x):
        """fn(x, batch) averaged over the n samples (in chunks)."""
        return chunked_mean(lambda b: fn(x, b), self.data, self.n, self.chunk_size)

    def apply(self, fn, x, element, plan: Plan):
        """fn(x, batch) on the minibatch of one step's ``element``."""
        return fn(x, self.get(element, plan))

    def apply_large(self, fn, x, element, size: int):
        """fn(x, batch) averaged over a large batch of ``size`` indices (in chunks)."""
        return chunked_mean(lambda b: fn(x, b), self.batch(element), size, self.chunk_size)

    def epoch_inputs(self, key, plan: Plan):
        """Index arrays of one epoch: (steps, b), or with blocks a :class:`BlockInputs`."""
        if plan.q is None:
            if plan.batch_size == self.n:  # full batches: the data set itself, no gather
                return jnp.zeros((plan.steps,), jnp.int32)
            return _indices(key, self.n, (plan.steps, plan.batch_size))
        k_big, k_small = jax.random.split(key)
        small = _indices(k_small, self.n, (plan.blocks, plan.q - 1, plan.batch_size))
        if plan.refresh_size is None:
            return BlockInputs(small, None)
        big = jax.vmap(lambda k: _indices(k, self.n, (plan.refresh_size,)))(
            jax.random.split(k_big, plan.blocks))
        return BlockInputs(small, big)

    def get(self, element, plan: Plan):
        if plan.q is None and plan.batch_size == self.n:
            return self.data
        return self.batch(element)


class Stream:
    """An iterator of minibatches of ``batch_size`` samples, stacked per chunk on the host."""

    def __init__(self, iterator, batch_size: int):
        if not hasattr(iterator, "__next__"):
            raise ValueError(
                "data must be an array/pytree of arrays (finite-sum mode) or an iterator of "
                f"minibatches (online mode); got {type(iterator).__name__}."
            )
        self.iterator = iterator
        self.batch_size = batch_size

    def _take(self, count):
        out = []
        for _ in range(count):
            try:
                batch = next(self.iterator)
            except StopIteration:
                raise ValueError("the data stream ended before num_steps steps were taken.") \
                    from None
            size = leading_size(batch)
            if size != self.batch_size:
                raise ValueError(
                    f"the data stream yielded a batch of {size} samples; expected "
                    f"batch_size = {self.batch_size}."
                )
            out.append(batch)
        return jax.tree.map(lambda *a: np.stack(a), *out)

    def chunk(self, plan: Plan, steps: int):
        """The inputs of the next ``steps`` steps (at most one epoch's): stacked batches, or
        the :class:`BlockInputs` of one block, cut short if ``steps < q``."""
        if plan.q is None:
            return self._take(steps)
        per_refresh = -(-plan.refresh_size // self.batch_size)
        big = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[None, :plan.refresh_size],
                           self._take(per_refresh))
        if steps == 1:  # a refresh alone: no minibatch steps in this block
            return BlockInputs(jax.tree.map(
                lambda a: np.zeros((1, 0, self.batch_size) + a.shape[2:], a.dtype), big), big)
        small = jax.tree.map(lambda a: a[None], self._take(steps - 1))
        return BlockInputs(small, big)

    @staticmethod
    def apply(fn, x, element, plan: Plan):
        return fn(x, element)

    @staticmethod
    def apply_large(fn, x, element, size: int):
        return chunked_mean(lambda b: fn(x, b), element, size, 2048)


def chunk_steps(num_steps: int, per_chunk: int) -> list[int]:
    """Steps of each online chunk: whole chunks, then the remainder (exactly num_steps)."""
    return [per_chunk] * (num_steps // per_chunk) + ([num_steps % per_chunk]
                                                     if num_steps % per_chunk else [])


def is_dataset(data) -> bool:
    if hasattr(data, "__next__"):
        return False
    leaves = jax.tree.leaves(data)
    return bool(leaves) and all(hasattr(a, "shape") and hasattr(a, "dtype") for a in leaves)
