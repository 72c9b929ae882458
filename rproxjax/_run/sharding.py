"""Data-parallel finite sums: the samples sharded over one axis of a device mesh.

:class:`ShardedFiniteSum` is the data side of a run whose data set is split into k
equal shards, one per device along the mesh axis ``axis`` (``jax.sharding``'s
``NamedSharding(mesh, P(axis))`` on the leading sample axis). Sampling semantics:

* each device draws its share of every minibatch, b / k samples, from its own shard,
  with its own permutation (PRNG key ``fold_in(epoch_key, shard)``): no sample crosses
  devices, and no sample repeats within a shard's epoch;
* the minibatch gradient is the mean of the k shard means (an all-reduce,
  ``lax.pmean``), equal to the single-device gradient on the union of the shards'
  samples; large batches (the refresh of the variance-reduced methods, ``|S1|``) and
  full gradients are computed the same way;
* the point, the optimizer state, the subproblem and the retraction are replicated (they
  are small); every device computes the same update.

Unlike the single-device :class:`~rproxjax._run.data.FiniteSum` (one permutation of all n
samples), a minibatch here always holds exactly b / k samples of each shard: the same
distribution when the shards are exchangeable (e.g. the data set was shuffled before it
was split), a stratified one otherwise. Runs on different numbers of devices therefore
draw different samples from the same key.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rproxjax._run.data import BlockInputs, Plan, _indices, chunked_mean, leading_size, take
from rproxjax._run.options import check_sharding

__all__ = ["ShardedFiniteSum", "data_mesh", "shard_indices"]


def data_mesh(data, sharding):
    """(mesh, axis) of a data-parallel run, or None for a single-device one.

    ``sharding`` given (a ``NamedSharding`` checked by
    :func:`rproxjax._run.options.check_sharding`): its mesh and the axis that splits the
    samples. Else, data already placed with a ``NamedSharding`` that splits the leading
    axis give theirs; traced data (``pure_fit`` under ``jax.jit``) give it where their type
    holds it, on a mesh with Explicit axes (``jax.make_mesh``'s default), as an
    AbstractMesh (:func:`_sharding_of`).
    """
    if sharding is None:
        return _mesh_of(data)
    return check_sharding(sharding)


def _sharding_of(leaf):
    """A leaf's sharding: a concrete array's, or a traced one's type's (pure_fit under jit:
    data placed over a mesh with Explicit axes, ``jax.make_mesh``'s default, keep their
    split in their type, over the mesh's AbstractMesh; with Auto axes the type holds no
    split, and the run is a single-device one unless ``sharding=`` is given)."""
    if isinstance(leaf, jax.core.Tracer):
        return jax.typeof(leaf).sharding
    return getattr(leaf, "sharding", None)


def _mesh_of(data):
    found = {}  # (abstract mesh, axis) -> the mesh (a concrete one where a leaf has one)
    for leaf in jax.tree.leaves(data):
        sharding = _sharding_of(leaf)
        if isinstance(sharding, NamedSharding) and len(sharding.spec) and sharding.spec[0]:
            mesh = sharding.mesh
            key = (getattr(mesh, "abstract_mesh", mesh), sharding.spec[0])
            if isinstance(found.get(key), Mesh):
                continue
            found[key] = mesh
    if not found:
        return None
    if len(found) > 1:
        raise ValueError("the data's arrays are sharded over different meshes or axes; "
                         "shard them alike or pass sharding=.")
    (_, axis), mesh = found.popitem()
    if not isinstance(axis, str):
        raise ValueError(f"the data's leading axis is sharded over several mesh axes {axis}; "
                         "rproxjax shards samples over one axis: pass sharding=.")
    return mesh, axis


def shard_indices(key, n_local, shards, shape):
    """Each shard's local sample indices, shape ``(*shape[:-1], shards * shape[-1])``: shard
    s's block is columns ``s * m : (s + 1) * m`` (m = shape[-1]), drawn with key
    ``fold_in(key, s)`` without replacement when they fit in one permutation."""
    keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(jnp.arange(shards))
    per = jax.vmap(lambda k: _indices(k, n_local, shape))(keys)  # (shards, *shape)
    return jnp.moveaxis(per, 0, -2).reshape(*shape[:-1], shards * shape[-1])


class ShardedFiniteSum:
    """A resident data set of n samples in k equal shards along ``axis`` of ``mesh``."""

    def __init__(self, data, mesh: Mesh | AbstractMesh, axis: str, chunk_size: int):
        # Auto axes: shard_map then splits replicated inputs (the indices) by local slices,
        # whatever axis types the caller's mesh has (jax.make_mesh makes Explicit ones).
        # An AbstractMesh (read off traced data under jit) is one too: the devices are the
        # data's.
        if isinstance(mesh, AbstractMesh):
            self.mesh = mesh.update_axis_types({a: AxisType.Auto for a in mesh.axis_names})
        else:
            self.mesh = Mesh(mesh.devices, mesh.axis_names,
                             axis_types=(AxisType.Auto,) * len(mesh.axis_names))
        self.axis = axis
        self.shards = mesh.shape[axis]
        self.n = leading_size(data)
        if self.n % self.shards:
            raise ValueError(
                f"n = {self.n} samples do not split evenly over the {self.shards} devices of "
                f"mesh axis {axis!r}: drop or add samples (e.g. data[:{self.n} - "
                f"{self.n % self.shards}]) so that k divides n.")
        self.n_local = self.n // self.shards
        self.chunk_size = min(chunk_size, self.n_local)
        self.data = _place(data, NamedSharding(self.mesh, P(axis)))

    def check_plan(self, plan: Plan):
        for name, size in (("batch_size", plan.batch_size),
                           ("refresh_batch_size", plan.refresh_size)):
            if size is not None and size % self.shards:
                raise ValueError(
                    f"{name} = {size} does not split over the {self.shards} devices of mesh "
                    f"axis {self.axis!r}: each device draws {name} / k samples, so k must "
                    f"divide it.")

    def _full(self, plan: Plan) -> bool:
        return plan.q is None and plan.batch_size == self.n

    def epoch_inputs(self, key, plan: Plan):
        """Local index arrays of one epoch; shard s's indices are its block of the last axis.

        They are computed replicated (they are small); ``shard_map`` hands each device its
        block, a local slice (no communication)."""
        k = self.shards
        if plan.q is None:
            if self._full(plan):
                return jnp.zeros((plan.steps,), jnp.int32)
            return shard_indices(key, self.n_local, k, (plan.steps, plan.batch_size // k))
        k_big, k_small = jax.random.split(key)
        small = shard_indices(k_small, self.n_local, k,
                              (plan.blocks, plan.q - 1, plan.batch_size // k))
        if plan.refresh_size is None:
            return BlockInputs(small, None)
        big = jax.vmap(lambda kb: shard_indices(kb, self.n_local, k,
                                                (plan.refresh_size // k,)))(
            jax.random.split(k_big, plan.blocks))
        return BlockInputs(small, big)

    def _map(self, local, x, *args):
        """``local(x, data shard, *local args)`` on every device, averaged (all-reduce)."""
        def body(x, data, *rest):
            # x made device-varying first: jax.grad inside then differentiates the local
            # loss alone (of a replicated x it would return the psum of the local gradients).
            x = jax.tree.map(lambda a: lax.pcast(a, self.axis, to="varying"), x)
            return lax.pmean(local(x, data, *rest), self.axis)

        specs = (P(), P(self.axis)) + (P(self.axis),) * len(args)
        return jax.shard_map(body, mesh=self.mesh, in_specs=specs, out_specs=P())(
            x, self.data, *args)

    def mean(self, fn, x):
        """fn(x, batch) averaged over the n samples: shard means (in chunks), all-reduced."""
        return self._map(lambda x, d: chunked_mean(lambda b: fn(x, b), d, self.n_local,
                                                   self.chunk_size), x)

    def apply(self, fn, x, element, plan: Plan):
        if self._full(plan):
            return self._map(fn, x)
        return self._map(lambda x, d, i: fn(x, take(d, i)), x, element)

    def apply_large(self, fn, x, element, size: int):
        local = size // self.shards
        return self._map(lambda x, d, i: chunked_mean(lambda b: fn(x, b), take(d, i), local,
                                                      self.chunk_size), x, element)


def _place(data, sharding):
    """The data on the mesh (on the host; traced data are split by ``shard_map`` itself)."""
    def one(a):
        if isinstance(a, jax.core.Tracer):
            return a
        placed = getattr(a, "sharding", None)
        if placed is not None and placed.is_equivalent_to(sharding, a.ndim):
            return a  # already split so (e.g. a global array of several processes)
        return jax.device_put(a, sharding)

    return jax.tree.map(one, data)
