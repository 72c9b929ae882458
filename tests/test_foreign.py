"""The other libraries' private names rproxjax relies on (``rproxjax._foreign``), checked
against the installed JAX and optax: a release that renames or changes one fails here by
name."""

import jax
import jax.numpy as jnp
import optax

import rproxjax
from rproxjax import _foreign


def test_jax_trace_state_clean_exists_and_tells_a_trace_apart():
    from jax._src import core

    assert callable(core.trace_state_clean)  # the private name itself
    assert _foreign.trace_state_clean() is True
    seen = []
    jax.jit(lambda x: seen.append(_foreign.trace_state_clean()) or x)(1.0)
    jax.vmap(lambda x: seen.append(_foreign.trace_state_clean()) or x)(jnp.ones(2))
    assert seen == [False, False]


def test_optax_chain_init_is_recognised():
    chained = optax.chain(optax.scale(1.0), optax.scale(2.0))
    assert chained.init.__qualname__ == "chain.<locals>.init_fn"
    assert _foreign.is_optax_chain(chained)
    assert _foreign.is_optax_chain(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)))
    assert not _foreign.is_optax_chain(optax.scale(1.0))


def test_jit_cache_size_counts_compilations():
    fn = jax.jit(lambda x: x * 2)
    assert _foreign.jit_cache_size(fn) == 0
    fn(jnp.ones(3))
    fn(jnp.ones(3))
    assert _foreign.jit_cache_size(fn) == 1
    fn(jnp.ones(4))
    assert _foreign.jit_cache_size(fn) == 2


def test_jax_core_eval_jaxpr_evaluates_a_traced_program():
    closed = jax.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(2.0, 3.0)
    (out,) = _foreign.eval_jaxpr(closed.jaxpr, closed.consts, 2.0, 3.0)
    assert float(out) == float(jnp.sin(2.0) * 3.0 + 1.0)
