"""Single-device reference runs on the samples a data-parallel run draws (no rproxjax runner).

The sharded runner's sampling is reproduced from its definition (``shard_indices``: shard s
draws local indices with ``fold_in(epoch key, s)``; its samples are rows s * n / k + local
index of the data set); the gradients, updates and loops here are written out by hand with
``jax.grad`` and ``optimizer.update``, so an error in the sharded gradients (a sum instead
of a mean, a missing all-reduce, a shard read twice) shows as a difference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from rproxjax._run.fit import _epoch_keys
from rproxjax._run.sharding import shard_indices
from rproxjax.problems import spca_loss


def batch_grad(x, batch):
    return jax.grad(lambda p: jnp.mean(jax.vmap(spca_loss, (None, 0))(p, batch)))(x)


def global_indices(local, shards, n_local):
    """Rows of the data set for local indices laid out as shard_indices lays them out."""
    per = local.shape[-1] // shards
    return local + jnp.repeat(jnp.arange(shards) * n_local, per)


_grad = jax.jit(batch_grad)


def reference_plain(opt, x0, data, key, batch_size, num_epochs, shards):
    """R-ProxSGD-like optimizers: one minibatch gradient per step."""
    n = data.shape[0]
    n_local, steps = n // shards, n // batch_size
    _, keys = _epoch_keys(key, num_epochs)
    update = jax.jit(opt.update)
    x, state = x0, opt.init(x0)
    for e in range(num_epochs):
        rows = global_indices(shard_indices(keys[e], n_local, shards,
                                            (steps, batch_size // shards)), shards, n_local)
        for t in range(steps):
            updates, state = update(_grad(x, data[rows[t]]), state, x)
            x = optax.apply_updates(x, updates)
    return x


def reference_blocks(opt, x0, data, key, batch_size, q, num_epochs, shards,
                     refresh_batch_size=None):
    """Variance-reduced optimizers: per block a refresh, then q - 1 SARAH steps."""
    n = data.shape[0]
    n_local = n // shards
    blocks = max(1, (n // batch_size) // (q - 1))
    _, keys = _epoch_keys(key, num_epochs)
    refresh = jax.jit(lambda g, s, x: opt.update(g, s, x, refresh=True))
    inner = jax.jit(lambda g, s, x, b: opt.update(g, s, x, refresh=False,
                                                  grad_fn=lambda p: batch_grad(p, b)))
    x, state = x0, opt.init(x0)
    for e in range(num_epochs):
        k_big, k_small = jax.random.split(keys[e])
        small = global_indices(shard_indices(k_small, n_local, shards,
                                             (blocks, q - 1, batch_size // shards)),
                               shards, n_local)
        bigs = [None] * blocks
        if refresh_batch_size is not None:
            bigs = [global_indices(shard_indices(kb, n_local, shards,
                                                 (refresh_batch_size // shards,)),
                                   shards, n_local)
                    for kb in jax.random.split(k_big, blocks)]
        for j in range(blocks):
            big = data if bigs[j] is None else data[bigs[j]]
            updates, state = refresh(batch_grad(x, big), state, x)
            x = optax.apply_updates(x, updates)
            for i in range(q - 1):
                batch = data[small[j, i]]
                updates, state = inner(batch_grad(x, batch), state, x, batch)
                x = optax.apply_updates(x, updates)
    return x
