"""fit's CPU programs are compiled with XLA's loop emitters (CPU_COMPILER_OPTIONS), the task
functions' also at LLVM's second level (TASK_COMPILER_OPTIONS): options
refused by an XLA that does not know them, results equal to a default compilation's up to
rounding, the same bits on every call, and no option for a program traced by the caller."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import problems, stiefel
from rproxjax._run import compile as _compile


def test_an_option_xla_does_not_know_is_dropped_once_and_the_program_still_compiles():
    lowered = jax.jit(lambda x: x * 2.0).lower(jnp.arange(3.0))
    unknown = {"xla_cpu_no_such_option": True}
    refusals = _compile.Refusals()
    compiled = _compile.compile_lowered(lowered, unknown, refusals)
    np.testing.assert_array_equal(compiled(jnp.arange(3.0)), 2.0 * np.arange(3.0))
    assert (("xla_cpu_no_such_option", True),) in refusals
    compiled = _compile.compile_lowered(lowered, _compile.CPU_COMPILER_OPTIONS, refusals)
    np.testing.assert_array_equal(compiled(jnp.arange(3.0)), 2.0 * np.arange(3.0))
    assert tuple(sorted(_compile.CPU_COMPILER_OPTIONS.items())) not in refusals


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["r_prox_sgd", "r_prox_spb"])
def test_the_options_give_the_default_compilations_results_up_to_rounding(name, dtype):
    """One program (three epochs of the solver's run), compiled with the library's options
    (as fit compiles it) and by plain jax.jit: the same iterates up to rounding, the same
    Newton steps, and the same bits on a second call and a second compilation."""
    z = jax.random.normal(jax.random.key(0), (240, 20), dtype)
    x0 = stiefel.random_point(jax.random.key(1), 20, 3, dtype)
    make = getattr(rproxjax, name)
    extra = {"q": 4} if name == "r_prox_spb" else {}

    def run(mu, data):
        opt = make(0.3, 0.5, rproxjax.l1(mu), **extra)
        res = rproxjax.pure_fit(opt, problems.spca_loss, x0, data, key=jax.random.key(2),
                                batch_size=20, num_epochs=3)
        return res.params, res.epoch_loss, res.history.ssn_steps

    mu = jnp.asarray(0.3, dtype)
    assert _compile._options((mu, z)) == _compile.CPU_COMPILER_OPTIONS
    _compile.clear_cache()
    ours = _compile.compile_once(run, mu, z)(mu, z)
    _compile.clear_cache()
    again = _compile.compile_once(run, mu, z)(mu, z)
    plain = jax.jit(run)(mu, z)
    assert int(jnp.sum(plain[2])) > 0  # the Newton loop ran
    np.testing.assert_array_equal(ours[2], plain[2])
    rtol = 1e-12 if dtype == "float64" else 2e-5
    for a, b, c in zip(jax.tree.leaves(ours), jax.tree.leaves(plain), jax.tree.leaves(again),
                       strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=rtol)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))


def test_no_option_for_a_program_traced_by_the_caller():
    x = jnp.arange(3.0)
    assert _compile._options(x) == _compile.CPU_COMPILER_OPTIONS
    seen = []
    jax.jit(lambda v: seen.append(_compile._on_cpu(v)) or v)(x)
    assert seen == [None]
    assert _compile._options(jax.ShapeDtypeStruct((3,), x.dtype)) == (
        _compile.CPU_COMPILER_OPTIONS if jax.default_backend() == "cpu" else {})


def test_the_jit_wrapper_compiles_cpu_calls_with_the_options_and_inlines_traced_ones():
    """tangent_prox's eager solve is such a program: its CPU calls compile with the options,
    and inside a caller's jit it is part of the caller's program (no executable of its own)."""
    wrapped = _compile.jit(lambda x: jnp.sin(x) * 2.0)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(wrapped(x), jnp.sin(x) * 2.0)
    assert (wrapped._cpu._cache_size(), wrapped._plain._cache_size()) == (1, 0)
    out = jax.jit(jax.vmap(lambda v: wrapped(v) + 1.0))(x[:, None])
    np.testing.assert_allclose(out[:, 0], jnp.sin(x) * 2.0 + 1.0)
    assert (wrapped._cpu._cache_size(), wrapped._plain._cache_size()) == (1, 0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_eager_tangent_prox_equals_the_jitted_one_up_to_rounding(dtype):
    x = stiefel.random_point(jax.random.key(0), 40, 4, dtype)
    g = jax.random.normal(jax.random.key(1), (40, 4), dtype)
    reg = rproxjax.l1(0.3)
    eager, info = rproxjax.tangent_prox(x, g, 0.5, reg)
    inside, info_jit = jax.jit(lambda x, g: rproxjax.tangent_prox(x, g, 0.5, reg))(x, g)
    assert int(info.num_steps) == int(info_jit.num_steps) > 0
    assert eager.dtype == inside.dtype == jnp.dtype(dtype)
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(eager, inside, rtol=tol, atol=tol)


def test_the_task_functions_compile_with_the_library_options():
    # sparse_pca's programs (the data's side, the runs and paths, the results' side) and
    # robust_matrix_completion's run go through the wrapper, as fit's do: a first call of
    # the README's quickstart compiles about 1 s less (benchmarks/compile_time.py).
    from rproxjax._tasks import rmc, spca

    path = spca._program("r_prox_spb", {"batch_size": 10, "num_steps": 20}, 5,
                         rproxjax.SSN.stochastic(), lanes=True)
    for program in (spca._prepare, spca._finish, path, rmc._solve):
        assert isinstance(program, _compile.jit)
        assert program.options == _compile.TASK_COMPILER_OPTIONS
    # fit's keep the default level, so that pure_fit under jax.jit gives its bits
    assert "xla_backend_optimization_level" not in _compile.CPU_COMPILER_OPTIONS
    assert _compile.TASK_COMPILER_OPTIONS["xla_backend_optimization_level"] == 2


def test_the_task_options_give_the_default_compilations_results_up_to_rounding():
    # A whole run compiled with the task functions' options (LLVM level 2) against a plain
    # jax.jit of it: the same computation, rounding apart.
    x0 = stiefel.random_point(jax.random.key(5), 30, 3)
    data = jax.random.normal(jax.random.key(6), (200, 30))

    def run(mu):
        opt = rproxjax.r_prox_spb(0.5, 0.2, rproxjax.l1(mu), q=5)
        return rproxjax.pure_fit(opt, problems.spca_loss, x0, data, key=jax.random.key(7),
                                 batch_size=20, num_steps=42).params

    task = _compile.jit(run, options=_compile.TASK_COMPILER_OPTIONS)
    np.testing.assert_allclose(task(0.1), jax.jit(run)(0.1), atol=1e-13)
    assert not bool(jnp.all(task(0.1) == task(0.3)))  # mu is an argument, not baked in
