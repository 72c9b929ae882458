"""Array-likes across the public surface: NumPy arrays (and pytrees of them) for data,
parameters and hyperparameters give the same results as JAX arrays; other types (lists,
strings, None) are a TypeError naming the argument. Budgets: ``num_steps`` means steps."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rproxjax
from rproxjax import problems

RNG = np.random.default_rng(0)
DATA = RNG.standard_normal((120, 10))
X0 = np.linalg.qr(RNG.standard_normal((10, 3)))[0]
G = RNG.standard_normal((10, 3))
KEY = jax.random.key(0)


def _as_jax(tree):
    return jax.tree.map(jnp.asarray, tree)


def _same(a, b):
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
        assert jnp.result_type(u) == jnp.result_type(v)


OPTIMIZERS = {
    "r_prox_sgd": (lambda h: rproxjax.r_prox_sgd(h["eta"], h["gamma"], rproxjax.l1(h["mu"])),
                   {}),
    "r_prox_spb": (lambda h: rproxjax.r_prox_spb(h["eta"], h["gamma"], rproxjax.l1(h["mu"]),
                                                 q=4), {}),
    "r_prox_svrg": (lambda h: rproxjax.r_prox_svrg(h["eta"], h["gamma"], rproxjax.l1(h["mu"]),
                                                   m=4), {}),
    "r_prox_sarah": (lambda h: rproxjax.r_prox_sarah(h["gamma"], h["eta"],
                                                     rproxjax.l21(h["mu"]), q=4), {}),
    "r_subgrad": (lambda h: rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(h["eta"]),
                                               rproxjax.l1(h["mu"])), {}),
    "manpg": (lambda h: rproxjax.manpg(h["gamma"], rproxjax.l1(h["mu"]), tol=1e-10),
              {"batch_size": 120}),
}
HYPER = {"eta": np.float64(0.2), "gamma": np.array(0.5), "mu": np.array(0.05)}


@pytest.mark.parametrize("name", [n if n not in ("manpg", "r_prox_svrg") else pytest.param(
    n, marks=pytest.mark.slow) for n in sorted(OPTIMIZERS)])
def test_fit_and_pure_fit_take_numpy(name):
    make, kw = OPTIMIZERS[name]
    kw = {"batch_size": 20, **kw}
    ref = rproxjax.fit(make(_as_jax(HYPER)), problems.spca_loss, jnp.asarray(X0),
                       jnp.asarray(DATA), key=KEY, num_steps=5, **kw)
    got = rproxjax.fit(make(HYPER), problems.spca_loss, X0, DATA, key=KEY, num_steps=5, **kw)
    _same(ref.params, got.params)
    _same(ref.history.ifo, got.history.ifo)
    pure = jax.jit(lambda: rproxjax.pure_fit(make(HYPER), problems.spca_loss, X0, DATA,
                                             key=KEY, num_steps=5, **kw))()
    np.testing.assert_allclose(pure.params, ref.params, rtol=0, atol=1e-12)
    assert pure.history.ifo.shape == (5,)


def test_pytree_of_numpy_data_and_resumed_numpy_state():
    opt = rproxjax.r_prox_sgd(0.2, 0.5, rproxjax.l1(0.05))

    def loss(x, sample):
        return problems.spca_loss(x, sample["z"]) * sample["w"]

    data = {"z": DATA, "w": np.ones(120)}
    ref = rproxjax.fit(opt, loss, jnp.asarray(X0), _as_jax(data), key=KEY, batch_size=20,
                       num_epochs=2)
    got = rproxjax.fit(opt, loss, X0, data, key=KEY, batch_size=20, num_epochs=2)
    _same(ref.params, got.params)
    half = rproxjax.fit(opt, loss, X0, data, key=KEY, batch_size=20, num_epochs=1)
    state = jax.tree.map(lambda a: np.asarray(a) if isinstance(a, jax.Array)
                         and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key) else a,
                         half.opt_state)
    resumed = rproxjax.fit(opt, loss, np.asarray(half.params), data, key=half.key,
                           batch_size=20, num_epochs=1, opt_state=state)
    _same(ref.params, resumed.params)


def test_transformations_take_numpy():
    opt = rproxjax.r_prox_sgd(np.float64(0.2), np.array(0.5), rproxjax.l1(np.array(0.05)))
    ref = rproxjax.r_prox_sgd(0.2, 0.5, rproxjax.l1(0.05))
    x, g = jnp.asarray(X0), jnp.asarray(G)
    _same(ref.update(g, ref.init(x), x)[0], opt.update(G, opt.init(X0), X0)[0])
    step = rproxjax.proximal_step(np.array(0.5), rproxjax.l1(np.array(0.05)))
    _same(step.update(g, step.init(x), x)[0], step.update(G, step.init(X0), X0)[0])


def test_subproblem_geometry_and_sweep_take_numpy():
    ref = rproxjax.tangent_prox(jnp.asarray(X0), jnp.asarray(G), 0.5, rproxjax.l1(0.05))[0]
    got = rproxjax.tangent_prox(X0, G, np.float64(0.5), rproxjax.l1(np.float64(0.05)))[0]
    _same(ref, got)
    _same(rproxjax.stiefel.retract(jnp.asarray(X0), jnp.asarray(0.1 * G)),
          rproxjax.stiefel.retract(X0, 0.1 * G))
    _same(rproxjax.stiefel.project(jnp.asarray(X0), jnp.asarray(G)),
          rproxjax.stiefel.project(X0, G))

    def solve(mu):
        return rproxjax.tangent_prox(X0, G, 0.5, rproxjax.l1(mu))[0]

    _same(rproxjax.sweep(solve, jnp.array([0.05, 0.1])),
          rproxjax.sweep(solve, np.array([0.05, 0.1])))


def test_problems_take_numpy():
    x, z = jnp.asarray(X0), jnp.asarray(DATA)
    for fn in (lambda a, b: problems.spca_objective(a, b, 0.1),
               lambda a, b: problems.explained_variance(a, b, True),
               lambda a, b: problems.spca_loss(a, b[0]),
               lambda a, b: problems.spca_grad(a, b[0]),
               lambda a, b: problems.nonzeros(a)):
        _same(fn(x, z), fn(X0, DATA))
    m = RNG.standard_normal((12, 9))
    mask = RNG.random((12, 9)) < 0.6
    prob = problems.rmc_problem(m, mask)
    u = np.linalg.qr(RNG.standard_normal((12, 2)))[0]
    s = np.zeros(prob.values.shape)
    params = {"U": u, "S": s}
    _same(problems.rmc_objective(_as_jax(params), prob, 0.1),
          problems.rmc_objective(params, prob, np.float64(0.1)))
    _same(problems.rmc_background(_as_jax(params), prob), problems.rmc_background(params, prob))


BAD = [
    ("data a list", lambda: rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss, X0,
                                         DATA.tolist(), key=KEY, batch_size=20, num_epochs=1),
     r"\bdata\b.*numpy.asarray"),
    ("data a str", lambda: rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss, X0,
                                        "data.npy", key=KEY, batch_size=20, num_epochs=1),
     r"\bdata\b"),
    ("pure_fit data a list", lambda: rproxjax.pure_fit(
        rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss, X0, DATA.tolist(), key=KEY,
        batch_size=20, num_epochs=1), r"\bdata\b"),
    ("data of strings", lambda: rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss,
                                             X0, np.array(["a"] * 120), key=KEY, batch_size=20,
                                             num_epochs=1), r"\bdata\b.*numbers"),
    ("params a list", lambda: rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss,
                                           X0.tolist(), DATA, key=KEY, batch_size=20,
                                           num_epochs=1), r"\bparams\b"),
    ("mu a str", lambda: rproxjax.l1("0.1"), r"\bmu\b"),
    ("mu a list", lambda: rproxjax.l1([0.1, 0.2]), r"\bmu\b"),
    ("mu None", lambda: rproxjax.l21(None), r"\bmu\b"),
    ("learning_rate a str", lambda: rproxjax.r_prox_sgd("0.1", 0.5), r"\blearning_rate\b"),
    ("gamma a list", lambda: rproxjax.r_prox_spb(0.1, [0.5], q=3), r"\bgamma\b"),
    ("t a str", lambda: rproxjax.tangent_prox(X0, G, "0.5", rproxjax.l1(0.1)), r"\bt\b"),
    ("x a list", lambda: rproxjax.tangent_prox(X0.tolist(), G, 0.5, rproxjax.l1(0.1)),
     r"\bx\b"),
    ("sweep args a list", lambda: rproxjax.sweep(lambda m: m, [0.1, 0.2]), r"\bargs\b"),
    ("spca_objective data a list", lambda: problems.spca_objective(X0, DATA.tolist(), 0.1),
     r"\bdata\b"),
]


@pytest.mark.parametrize("call, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_other_types_are_a_type_error_naming_the_argument(call, match):
    with pytest.raises(TypeError, match=match):
        call()


# ---------------------------------------------------------------- budgets as asked


@pytest.mark.parametrize("q", [None, 4])
@pytest.mark.parametrize("num_steps", [3, 7, 13])
def test_num_steps_is_exact_and_a_prefix_of_the_longer_run(q, num_steps):
    """A partial last epoch (and block) takes exactly num_steps steps, the same ones as the
    first num_steps of a run of whole epochs; IFOs are exact (a refresh costs n)."""
    opt = (rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05)) if q is None
           else rproxjax.r_prox_spb(0.1, 0.5, rproxjax.l1(0.05), q=q))
    kw = dict(key=KEY, batch_size=20)
    res = rproxjax.fit(opt, problems.spca_loss, X0, DATA, num_steps=num_steps, **kw)
    assert res.history.ifo.shape == (num_steps,)
    full = rproxjax.fit(opt, problems.spca_loss, X0, DATA, num_steps=24, **kw)
    np.testing.assert_array_equal(res.history.zeta_norm, full.history.zeta_norm[:num_steps])
    np.testing.assert_array_equal(res.history.ifo, full.history.ifo[:num_steps])
    refreshes = 0 if q is None else -(-num_steps // q)
    per_step = 20 if q is None else 40  # an R-SARAH step: the minibatch at X_t and X_{t-1}
    expected = refreshes * 120 + (num_steps - refreshes) * per_step
    assert int(res.epoch_ifo[-1]) == int(res.history.ifo[-1]) == expected
    pure = rproxjax.pure_fit(opt, problems.spca_loss, X0, DATA, num_steps=num_steps, **kw)
    np.testing.assert_array_equal(pure.params, res.params)
    np.testing.assert_array_equal(pure.epoch_ifo, res.epoch_ifo)
    np.testing.assert_allclose(pure.epoch_loss, res.epoch_loss, rtol=1e-12)  # as test_runner


def test_num_steps_in_segments_of_a_block():
    opt = rproxjax.r_prox_spb(0.1, 0.5, rproxjax.l1(0.05), q=4)
    kw = dict(key=KEY, batch_size=20, sampling=rproxjax.Sampling(steps_per_epoch=2))
    short = rproxjax.fit(opt, problems.spca_loss, X0, DATA, num_steps=7, **kw)
    long = rproxjax.fit(opt, problems.spca_loss, X0, DATA, num_steps=8, **kw)
    assert short.history.ifo.shape == (7,)
    np.testing.assert_array_equal(short.history.zeta_norm, long.history.zeta_norm[:7])


def test_num_steps_and_num_epochs_together_is_an_error():
    with pytest.raises(ValueError, match="not both"):
        rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5), problems.spca_loss, X0, DATA, key=KEY,
                     batch_size=20, num_epochs=1, num_steps=3)


def test_a_chain_with_numpy_hyperparameters_matches_jax_ones():
    def chain(clip, eta, gamma):
        return optax.chain(optax.clip_by_global_norm(clip), rproxjax.r_prox_sgd(eta, gamma))

    kw = dict(key=KEY, batch_size=20, num_steps=4)
    got = rproxjax.fit(chain(np.float64(10.0), np.float64(0.1), np.float64(0.5)),
                       problems.spca_loss, X0, DATA, **kw)
    ref = rproxjax.fit(chain(jnp.asarray(10.0), jnp.asarray(0.1), jnp.asarray(0.5)),
                       problems.spca_loss, jnp.asarray(X0), jnp.asarray(DATA), **kw)
    _same(ref.params, got.params)


_FLOAT64_NUMPY = """
import warnings
warnings.simplefilter("error")  # any warning fails the script
import jax, numpy as np, optax, rproxjax
from rproxjax import problems, stiefel
assert not jax.config.jax_enable_x64
rng = np.random.default_rng(0)
x = np.linalg.qr(rng.standard_normal((20, 3)))[0]  # float64, as NumPy makes them
g, data = rng.standard_normal((20, 3)), rng.standard_normal((50, 20))
for opt in (rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)),
            rproxjax.r_prox_spb(0.1, 0.5, rproxjax.l21(0.1), q=5),
            rproxjax.r_subgrad(0.1, rproxjax.l1(0.1))):
    state = opt.init(x)
    updates, state = opt.update(g, state, x)
    assert optax.apply_updates(x, updates).dtype == np.float32
opt = rproxjax.manpg(0.5, rproxjax.l1(0.1), tol=1e-6)
opt.update(g, opt.init(x), x, value_fn=lambda p: problems.spca_objective(p, data, 0.0))
assert rproxjax.tangent_prox(x, g, 0.5, rproxjax.l1(0.1))[0].dtype == np.float32
stiefel.retract(x, g), stiefel.project(x, g), stiefel.transport(x, x, g)
problems.spca_objective(x, data, 0.1), problems.explained_variance(x, data)
problems.stationarity(x, g, 0.5, rproxjax.l1(0.1))
rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)), problems.spca_loss, x, data,
             key=jax.random.key(0), batch_size=10, num_epochs=1)
# The tasks say once that float64 data are computed in float32 (their own warning, JAX's none).
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    assert rproxjax.sparse_pca(data, 2, mu=0.1, passes=1).loadings.dtype == np.float32
    rproxjax.robust_matrix_completion(rng.random((10, 8)), rng.random((10, 8)) < 0.7, rank=1,
                                      passes=1, throw=False)
assert [str(w.message).split(" is ")[0] for w in seen] == ["data", "M"], [
    str(w.message) for w in seen]
assert all("computed in float32" in str(w.message) for w in seen)
print("ok")
"""


def test_float64_numpy_inputs_without_x64_warn_only_where_a_task_says_so():
    """With JAX's default (x64 disabled), NumPy's float64 arrays are computed in float32;
    the library asks JAX for that dtype, not for float64 (which JAX truncated with a
    UserWarning per array: ten in one optax step of the optimizers). The building blocks
    warn nothing; the tasks (sparse_pca, robust_matrix_completion), which a user calls on
    data, say once that float64 data run in float32. In a new process, as the tests' own
    process enables x64."""
    import subprocess
    import sys

    from tests.subprocess_env import subprocess_env

    proc = subprocess.run([sys.executable, "-c", _FLOAT64_NUMPY], capture_output=True,
                          text=True, timeout=300, env=subprocess_env(JAX_ENABLE_X64="0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def _aligned(shape, dtype, offset):
    """A C-contiguous NumPy array of ``shape`` whose buffer starts ``offset`` bytes past a
    64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(int(np.prod(shape)) * itemsize + 128, np.uint8)
    start = (-raw.ctypes.data % 64) + offset
    return raw[start:start + int(np.prod(shape)) * itemsize].view(dtype).reshape(shape)


@pytest.mark.parametrize("offset", [0, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
def test_numpy_data_are_copied_once_and_never_shared(dtype, offset):
    """A NumPy array reaches the device as a private copy (JAX's transfer shares a 64-byte
    aligned host buffer on the CPU; the caller's may be one, and may change later) in JAX's
    canonical dtype, with its values; the copy is aligned, so that the transfer shares it
    instead of copying it again."""
    from rproxjax import _checks

    caller = _aligned((50, 7), dtype, offset)
    caller[...] = (RNG.standard_normal((50, 7)) * 10).astype(dtype)
    expected = caller.astype(jax.dtypes.canonicalize_dtype(caller.dtype))
    copy = _checks.host_copy(caller)
    assert copy.ctypes.data % 64 == 0 and copy.flags.c_contiguous
    assert copy.dtype == expected.dtype and not np.shares_memory(copy, caller)
    np.testing.assert_array_equal(copy, expected)
    for moved in (_checks.to_device(caller), _checks.array_tree("data", caller)):
        assert moved.dtype == expected.dtype
        caller_before = caller.copy()
        caller[...] = 0
        np.testing.assert_array_equal(np.asarray(moved), expected)
        caller[...] = caller_before


def test_big_endian_numpy_data_are_taken_in_native_order():
    """Data read from a file can be big-endian; JAX takes native byte order only: the
    transfer converts (the same result as the native array's)."""
    native = RNG.standard_normal((200, 12))
    swapped = native.astype(native.dtype.newbyteorder(">"))
    res = [rproxjax.sparse_pca(d, 2, mu=0.1, passes=2) for d in (swapped, native)]
    np.testing.assert_array_equal(np.asarray(res[0].loadings), np.asarray(res[1].loadings))
    assert rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)), problems.spca_loss,
                        X0, swapped[:, :10], key=KEY, batch_size=20, num_epochs=1).params.shape \
        == X0.shape


def test_masked_arrays_with_masked_entries_are_an_error():
    """A masked array's mask would be dropped and the values under it used: with masked
    entries it is an error naming the argument; without, its data are taken."""
    values = RNG.standard_normal((60, 8))
    masked = np.ma.masked_array(values, mask=RNG.random(values.shape) < 0.1)
    with pytest.raises(ValueError, match="data is a masked array with masked entries"):
        rproxjax.sparse_pca(masked, 2, mu=0.1, passes=1)
    with pytest.raises(ValueError, match="data is a masked array with masked entries"):
        rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)), problems.spca_loss,
                     np.linalg.qr(values[:3].T)[0], masked, key=KEY, batch_size=20,
                     num_epochs=1)
    with pytest.raises(ValueError, match="M is a masked array with masked .*missing entries"):
        rproxjax.robust_matrix_completion(masked, np.ones(values.shape, bool), rank=1)
    with pytest.raises(ValueError, match="masked array"):
        rproxjax.r_prox_sgd(0.1, np.ma.masked_array(0.5, mask=True), rproxjax.l1(0.1))
    unmasked = np.ma.masked_array(values, mask=np.zeros(values.shape, bool))
    np.testing.assert_array_equal(
        np.asarray(rproxjax.sparse_pca(unmasked, 2, mu=0.1, passes=1).loadings),
        np.asarray(rproxjax.sparse_pca(values, 2, mu=0.1, passes=1).loadings))


class _Frame:
    """A stand-in for a pandas DataFrame: a table that converts itself to NumPy."""

    def __init__(self, values):
        self._values = values
        self.shape = values.shape

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._values, dtype=dtype)


def test_objects_that_convert_to_numpy_are_data():
    """A table of another library (pandas, say) that converts itself with ``__array__`` is
    taken as its NumPy values, by the task functions, the estimator and ``fit``."""
    values = RNG.standard_normal((80, 6))
    res = [rproxjax.sparse_pca(d, 2, mu=0.1, passes=2) for d in (_Frame(values), values)]
    np.testing.assert_array_equal(np.asarray(res[0].loadings), np.asarray(res[1].loadings))
    np.testing.assert_array_equal(np.asarray(res[0].transform(_Frame(values[:5]))),
                                  np.asarray(res[1].transform(values[:5])))
    est = rproxjax.SparsePCA(2, mu=0.1, passes=2).fit(_Frame(values))
    np.testing.assert_array_equal(est.components_, np.asarray(res[1].loadings).T)
    x0 = np.linalg.qr(values[:2].T)[0]
    runs = [rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)), problems.spca_loss,
                         x0, d, key=KEY, batch_size=20, num_epochs=1)
            for d in (_Frame(values), values)]
    np.testing.assert_array_equal(np.asarray(runs[0].params), np.asarray(runs[1].params))
    with pytest.raises(TypeError, match="data must hold real numbers"):  # not cut to reals
        rproxjax.sparse_pca(_Frame(values + 1j), 2, mu=0.1, passes=2)
