"""rproxjax.sparse_pca and rproxjax.SparsePCA: the task against the library's own fit path,
sparsity targets on real data, invariants, bad inputs, and scikit-learn's estimator checks."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import problems
from rproxjax._tasks import spca as spca_task
from rproxjax.datasets import load_fashion_mnist, load_mnist

RNG = np.random.default_rng(0)
SMALL = RNG.standard_normal((400, 16)) * np.linspace(3.0, 0.3, 16)


def test_same_result_as_the_fit_path_for_the_same_settings():
    """sparse_pca with mu (and refit=False) is R-ProxSPB through rproxjax.fit from the PCA
    start: the same optimizer, budget and key give the same components."""
    res = rproxjax.sparse_pca(SMALL, 3, mu=0.2, passes=6, seed=3, refit=False)
    s = res.settings
    data = jnp.asarray(SMALL - SMALL.mean(axis=0))
    opt = rproxjax.r_prox_spb(s["eta"], s["gamma"], rproxjax.l1(jnp.full((3,), 0.2)),
                              q=s["q"], ssn=rproxjax.SSN.stochastic())
    key = jax.random.split(jax.random.key(3))[1]
    start = _pca_start(data, 3, seed=3)  # the task's PCA start
    ref = rproxjax.fit(opt, problems.spca_loss, start, data, key=key, batch_size=s["batch_size"],
                       num_steps=res.num_steps)
    np.testing.assert_allclose(res.loadings, ref.params, rtol=0, atol=1e-10)
    assert int(ref.epoch_ifo[-1]) == round(res.passes * 400)
    assert res.passes <= 6.0
    np.testing.assert_allclose(res.scores, data @ res.loadings, atol=1e-10)


def test_components_is_the_deprecated_name_of_the_loadings():
    """The d x r field is ``loadings``, in the place ``components`` had (the result's pytree
    leaves keep their order); ``components`` still reads it, with a warning naming the new
    field and the release that removes it; the estimator's ``components_`` is its transpose
    (scikit-learn's r x d)."""
    assert rproxjax.SparsePCAResult._fields[:3] == ("loadings", "mean", "scores")
    res = rproxjax.sparse_pca(SMALL, 2, mu=0.6, passes=1)
    assert res.loadings.shape == (16, 2)
    assert jax.tree.leaves(res)[0] is res.loadings
    with pytest.warns(DeprecationWarning,
                      match=r"components is deprecated .* rproxjax 0\.5: use \.loadings"):
        old = res.components
    assert old is res.loadings
    est = rproxjax.SparsePCA(n_components=2, mu=0.6, passes=1).fit(SMALL)
    assert est.components_.shape == (2, 16)
    np.testing.assert_array_equal(est.components_, np.asarray(res.loadings).T)


def test_refit_keeps_the_support_and_orthonormality_and_adds_variance():
    """The default refit: the model's point's zero pattern (|X_ij| <= 1e-3) becomes exact
    zeros and is kept, the columns stay orthonormal, and the adjusted variance is at
    least the model's; the history is the same run."""
    model = rproxjax.sparse_pca(SMALL, 4, mu=0.6, passes=5, refit=False)
    res = rproxjax.sparse_pca(SMALL, 4, mu=0.6, passes=5)
    x, x_model = np.asarray(res.loadings), np.asarray(model.loadings)
    assert res.settings["refit"] and not model.settings["refit"]
    support = np.abs(x_model) > 1e-3
    assert np.all(x[~support] == 0.0)
    assert np.linalg.norm(x.T @ x - np.eye(4)) < 1e-12
    assert float(res.adjusted_variance) >= float(model.adjusted_variance) - 1e-12
    np.testing.assert_array_equal(res.history.params, model.history.params)


def test_refit_of_one_component_is_the_top_eigenvector_on_its_support():
    """r = 1: the refit is the leading eigenvector of the covariance restricted to the
    support (a dense eigh), when that explains more variance than the model's point."""
    model = rproxjax.sparse_pca(SMALL, 1, mu=1.5, passes=5, refit=False)
    res = rproxjax.sparse_pca(SMALL, 1, mu=1.5, passes=5)
    s = np.flatnonzero(np.abs(np.asarray(model.loadings)[:, 0]) > 1e-3)
    assert 1 < s.size < 16
    a = SMALL - SMALL.mean(axis=0)
    w, v = np.linalg.eigh(a[:, s].T @ a[:, s] / 400)
    x = np.asarray(res.loadings)[:, 0]
    np.testing.assert_allclose(np.abs(x[s]), np.abs(v[:, -1]), atol=1e-10)
    assert float(res.component_variance[0]) == pytest.approx(w[-1], rel=1e-10)
    assert w[-1] > float(model.component_variance[0])


@pytest.mark.parametrize("loader", [load_mnist, load_fashion_mnist])
def test_refit_explains_more_variance_on_real_data(loader):
    """On 2,000 images at about 300 nonzeros (r = 5, float32): the refit keeps the count
    and raises the adjusted variance."""
    data = loader(n=2000, seed=2)
    model = rproxjax.sparse_pca(data, 5, mu=0.8, passes=3, refit=False)
    res = rproxjax.sparse_pca(data, 5, mu=0.8, passes=3)
    assert res.loadings.dtype == jnp.float32
    assert res.nonzeros <= model.nonzeros
    assert float(res.adjusted_variance) > float(model.adjusted_variance) + 1e-3
    x = np.asarray(res.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(5)) < 1e-5


def test_refit_on_support_unit():
    """The helper alone: no entry above the threshold leaves x as it is; an orthonormal
    start that is already optimal on its support is returned unchanged."""
    from rproxjax._tasks.refit import refit_on_support

    a = SMALL - SMALL.mean(axis=0)
    x = np.linalg.qr(RNG.standard_normal((16, 2)))[0] * 1e-4
    out, before, after = refit_on_support(x, a, 1e-3)
    assert out is x and before == after
    top = np.linalg.eigh(a.T @ a)[1][:, ::-1][:, :2]  # dense PCA: nothing to gain
    out, before, after = refit_on_support(top, a, 0.0)
    assert after == before and out is top


def test_cut_keeps_the_k_largest_entries():
    from rproxjax._tasks.spca import _cut

    x = RNG.standard_normal((30, 4))
    out = _cut(x, 17)
    kept = np.abs(out) > 0
    assert kept.sum() == 17
    assert np.abs(x[kept]).min() >= np.abs(x[~kept]).max()
    np.testing.assert_array_equal(out[kept], x[kept])


def test_refit_best_picks_the_better_pattern_and_stays_orthonormal():
    """On 2,000 MNIST images (float64, r = 5) at 1,500 of 3,920 entries: an l1 run's
    pattern against the principal directions cut to their 1,500 largest entries. The
    result is orthonormal, inside the winning start's pattern, at least the l1 run's own
    refit, and its reported value is its adjusted variance recomputed from the scores; at
    this dense target the cut wins."""
    from rproxjax._tasks.refit import refit_best, refit_on_support
    from rproxjax._tasks.spca import _cut

    data = load_mnist(n=2000, seed=4, dtype=np.float64)
    a = data - data.mean(axis=0)
    model = rproxjax.sparse_pca(data, 5, mu=0.1, passes=3, refit=False)
    x = np.asarray(model.loadings)
    cut = _cut(np.linalg.eigh(a.T @ a)[1][:, ::-1][:, :5], 1500)
    index, out, value = refit_best([x, cut], a, 1e-3)
    np.testing.assert_allclose(out.T @ out, np.eye(5), atol=1e-12)
    start = [x, cut][index]
    assert np.all((np.abs(out) > 0) <= (np.abs(start) > 1e-3))
    assert value == pytest.approx(
        np.sum(np.diag(np.linalg.qr(a @ out, mode="r")) ** 2) / len(a), rel=1e-10)
    assert value >= refit_on_support(x, a, 1e-3)[2] - 1e-12
    assert index == 1 and np.sum(np.abs(out) > 1e-3) <= 1500


@pytest.mark.parametrize(("target", "support"), [(15, "cut"), (5, "run")])
def test_a_targets_pattern_and_mu_say_where_they_come_from(target, support):
    """nonzeros= with the refit on small data (r = 3, 48 entries): the result has at most k
    nonzeros. A cut pattern names the mu of a denser run of the path; a run's pattern
    names the mu of the path's run nearest k with at most k nonzeros, and explains at
    least the variance of that run's own point. Both orthonormal. (Which wins is
    deterministic here: a cut at 15, the run at 5.)"""
    res = rproxjax.sparse_pca(SMALL, 3, nonzeros=target, passes=3)
    assert res.settings["support"] == support
    assert res.nonzeros <= target
    mus, counts = np.asarray(res.path.mu), np.asarray(res.path.nonzeros)
    at = np.flatnonzero(mus == float(res.mu))
    assert at.size == 1
    if support == "cut":
        assert counts[at[0]] > target
    else:
        assert counts[at[0]] == counts[counts <= target].max()
        own = rproxjax.sparse_pca(SMALL, 3, mu=float(res.mu), passes=3, refit=False)
        assert float(res.adjusted_variance) >= float(own.adjusted_variance) - 1e-6
    x = np.asarray(res.loadings)
    np.testing.assert_allclose(x.T @ x, np.eye(3), atol=1e-12)


def test_a_target_with_the_refit_stops_at_a_run_it_can_cut():
    """With the refit, the path stops refining once a run has between k and 1.25 k nonzeros
    (and another at most k); without it, only at a count within 2% of k. The refit's
    path then runs fewer values of mu, and its result explains within 0.1% of the variance
    of the nearest run's pattern refitted (refit=False's point refitted on its support:
    0.008% less here)."""
    from rproxjax._tasks.refit import refit_on_support
    from rproxjax._tasks.spca import CUT_SLACK, NONZERO_RTOL

    target = 24
    res = rproxjax.sparse_pca(SMALL, 3, nonzeros=target, passes=3)
    near = rproxjax.sparse_pca(SMALL, 3, nonzeros=target, passes=3, refit=False)
    counts, near_counts = np.asarray(res.path.nonzeros), np.asarray(near.path.nonzeros)
    assert np.any((counts >= target) & (counts <= (1 + CUT_SLACK) * target))
    assert np.any(counts <= target)
    assert not np.any(np.abs(counts - target) <= NONZERO_RTOL * target)  # it stopped early
    assert len(counts) < len(near_counts)  # refit=False refined on
    assert np.any(np.abs(near_counts - target) <= NONZERO_RTOL * target)
    a = SMALL - SMALL.mean(axis=0)
    own = refit_on_support(np.asarray(near.loadings, np.float64), a, 1e-3)[2]
    ours = np.sum(np.diag(np.linalg.qr(a @ np.asarray(res.loadings, np.float64),
                                       mode="r")) ** 2) / len(a)
    assert res.nonzeros <= target and ours >= own * (1 - 1e-3)


def test_a_given_start_is_not_cut_as_the_principal_directions():
    x0 = np.linalg.qr(np.random.default_rng(3).standard_normal((16, 3)))[0]
    res = rproxjax.sparse_pca(SMALL, 3, nonzeros=15, passes=3, x0=x0)
    assert res.settings["support"] in ("run", "cut") and float(res.mu) > 0


def test_refit_best_with_the_first_start_alone_is_refit_on_support():
    from rproxjax._tasks.refit import refit_best, refit_on_support

    a = SMALL - SMALL.mean(axis=0)
    x = np.asarray(rproxjax.sparse_pca(SMALL, 3, mu=0.6, passes=3, refit=False).loadings)
    index, out, value = refit_best([x], a, 1e-3)
    ref, _, ref_value = refit_on_support(x, a, 1e-3)
    assert index == 0 and value == ref_value
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_refit_krylov_eigenvector_against_dense_eigh(dtype):
    """Supports above 128 entries are solved by restarted Krylov: the leading eigenpair of
    P K P (P projecting out 9 columns) against numpy's dense eigh, in both dtypes."""
    from rproxjax._tasks.refit import DENSE_SIZE, leading_eigenvector

    rng = np.random.default_rng(5)
    size = 3 * DENSE_SIZE
    f = rng.standard_normal((600, size)) * np.geomspace(3.0, 0.1, size)
    k = (f.T @ f / 600).astype(dtype)
    q = np.linalg.qr(rng.standard_normal((size, 9)))[0].astype(dtype)
    p = np.eye(size) - q.astype(np.float64) @ q.T.astype(np.float64)
    w, v = np.linalg.eigh(p @ k.astype(np.float64) @ p)
    vec, value = leading_eigenvector(k, q, rng.standard_normal(size).astype(dtype))
    assert vec.dtype == dtype
    tol = 1e-9 if dtype == np.float64 else 1e-4
    assert value == pytest.approx(w[-1], rel=tol)
    assert abs(abs(vec.astype(np.float64) @ v[:, -1]) - 1.0) < tol
    assert np.linalg.norm(q.T @ vec) < 10 * tol


def _pca_start(data, r, seed):
    from rproxjax._tasks.spca import _scales

    key = jax.random.split(jax.random.key(seed))[0]
    return _scales(data, key, False, jnp.zeros((data.shape[1], r), data.dtype))[0]


def test_pca_start_spans_the_top_principal_subspace():
    data = jnp.asarray(SMALL - SMALL.mean(axis=0))
    x0 = _pca_start(data, 3, 0)
    top = np.linalg.svd(np.asarray(data), full_matrices=False)[2][:3].T
    np.testing.assert_allclose(np.linalg.svd(top.T @ np.asarray(x0))[1], 1.0, atol=1e-8)


def test_invariants_and_metrics_against_numpy():
    res = rproxjax.sparse_pca(SMALL, 4, mu=0.5, passes=5)
    x = np.asarray(res.loadings)
    assert np.linalg.norm(x.T @ x - np.eye(4)) < 1e-12
    a = SMALL - SMALL.mean(axis=0)
    total = np.sum(a * a)
    assert float(res.explained_variance) == pytest.approx(
        np.sum((a @ x) ** 2) / np.sum(x * x) / total, rel=1e-10)
    r_diag = np.abs(np.diag(np.linalg.qr(a @ x, mode="r")))
    assert float(res.adjusted_variance) == pytest.approx(np.sum(r_diag**2) / total, rel=1e-10)
    assert res.nonzeros == int(np.sum(np.abs(x) > 1e-3))
    np.testing.assert_allclose(res.transform(SMALL[:5]), a[:5] @ x, atol=1e-10)
    assert res.mean.shape == (16,) and res.scores.shape == (400, 4)
    with _COMPILATIONS as new_shape:  # rows of a shape no test transforms: one program
        np.testing.assert_allclose(res.transform(SMALL[:13]), a[:13] @ x, atol=1e-10)
    assert new_shape.count <= 1


def test_follows_the_input_dtype_and_numpy_equals_jax():
    a = rproxjax.sparse_pca(SMALL.astype(np.float32), 2, mu=0.3, passes=3)
    b = rproxjax.sparse_pca(jnp.asarray(SMALL, jnp.float32), 2, mu=0.3, passes=3)
    assert a.loadings.dtype == jnp.float32
    np.testing.assert_array_equal(a.loadings, b.loadings)
    x = np.asarray(a.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(2)) < 1e-5
    c = rproxjax.sparse_pca(np.round(SMALL * 10).astype(np.int64), 2, passes=3)
    assert jnp.issubdtype(c.loadings.dtype, jnp.floating)


@pytest.mark.parametrize("method", ["r_prox_sgd", "r_subgrad", "manpg"])
def test_other_methods_decrease_the_objective(method):
    res = rproxjax.sparse_pca(SMALL, 3, mu=0.3, method=method, passes=6)
    loss = np.asarray(res.history.epoch_loss)
    assert loss[-1] < loss[0]
    x = np.asarray(res.loadings)
    assert np.linalg.norm(x.T @ x - np.eye(3)) < 1e-10


class _Compilations:
    """Counts XLA compilations (JAX's backend-compile events) while active."""

    def __init__(self):
        self.count, self.active = 0, False
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event, duration, **kwargs):
        if self.active and event == "/jax/core/compile/backend_compile_duration":
            self.count += 1

    def __enter__(self):
        self.count, self.active = 0, True
        return self

    def __exit__(self, *exc):
        self.active = False


_COMPILATIONS = _Compilations()


def test_a_first_call_compiles_few_programs_and_a_second_compiles_none():
    """The data's side and the results' are one program each, the run one more: a first
    call compiles at most 3 programs (fewer where this process compiled them already), a
    second with new values of mu, seed and data compiles nothing."""
    data = SMALL[:300, :12]
    with _COMPILATIONS as first:
        rproxjax.sparse_pca(data, 2, mu=0.3, passes=2)
    assert 1 <= first.count <= 3, first.count
    with _COMPILATIONS as second:
        rproxjax.sparse_pca(data * 1.5 + 1.0, 2, mu=0.7, passes=2, seed=4)
    assert second.count == 0


_FRESH = """
import json, jax, numpy as np, rproxjax
count = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **k: count.__setitem__(0, count[0] + e.endswith("backend_compile_duration")))
data = np.random.default_rng(0).standard_normal((300, 12)) * np.linspace(3.0, 0.3, 12)
counts = {}
for name, call in [("path", lambda: rproxjax.sparse_pca(data, 2, nonzeros=8, passes=2)),
                   ("single", lambda: rproxjax.sparse_pca(data, 2, mu=0.3, passes=2)),
                   ("again", lambda: rproxjax.sparse_pca(data + 1.0, 2, nonzeros=6, passes=2)),
                   ("estimator", lambda: rproxjax.SparsePCA(2, mu=0.2, passes=2).fit(data))]:
    count[0] = 0
    call()
    counts[name] = count[0]
print(json.dumps(counts))
"""


def test_a_fresh_process_compiles_three_programs_for_a_first_call():
    """In a new process (nothing compiled yet): a path's first call compiles its three
    programs (the data's side, the vmapped run, the results' side) and nothing else (the
    NumPy results reach the device by transfers, which compile nothing); a single run then
    compiles only its run; a new target on new data and the estimator at the same budget
    compile nothing."""
    import json
    import subprocess
    import sys

    from tests.subprocess_env import subprocess_env

    proc = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                          timeout=300, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts == {"path": 3, "single": 1, "again": 0, "estimator": 0}, counts


BAD = [
    (lambda: rproxjax.sparse_pca(SMALL.astype(np.complex128), 2), TypeError, "real numbers"),
    (lambda: rproxjax.sparse_pca(jnp.asarray(SMALL, jnp.complex64), 2), TypeError,
     "real numbers"),
    (lambda: rproxjax.sparse_pca([["a", "b"], ["c", "d"]], 1), TypeError, r"\bdata\b"),
    (lambda: rproxjax.sparse_pca("data.csv", 2), TypeError, r"\bdata\b"),
    (lambda: rproxjax.sparse_pca(SMALL[0], 2), ValueError, r"\bdata\b.*2-D"),
    (lambda: rproxjax.sparse_pca(SMALL[:1], 1), ValueError, "2 samples"),
    (lambda: rproxjax.sparse_pca(np.where(SMALL > 2, np.nan, SMALL), 2), ValueError, "NaN"),
    (lambda: rproxjax.sparse_pca(SMALL, 0), ValueError, r"\bn_components\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 17), ValueError, r"\bn_components\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2.5), TypeError, r"\bn_components\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=0.1, nonzeros=10), ValueError, "not both"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=-0.1), ValueError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu="0.1"), TypeError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=[0.1, 0.2, 0.3]), ValueError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=["0.1", "0.2"]), TypeError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=[0.1, None]), TypeError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, mu=np.ones(3)), ValueError, r"\bmu\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, nonzeros=1), ValueError, r"\bnonzeros\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, nonzeros=33), ValueError, r"\bnonzeros\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, method="sgd"), ValueError, r"\bmethod\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, passes=0), ValueError, r"\bpasses\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, batch_size=401), ValueError, r"\bbatch_size\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, q=1), ValueError, r"\bq\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, eta=-1.0), ValueError, r"\beta\b"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, x0=np.ones((16, 3))), ValueError, r"\bx0\b"),
    (lambda: rproxjax.sparse_pca(np.zeros((5, 3)), 1), ValueError, "no variance"),
    (lambda: rproxjax.sparse_pca(np.zeros((5, 3)), 1, center=False), ValueError, "no variance"),
    (lambda: rproxjax.sparse_pca(SMALL * 1e-200, 2, mu=0.1), ValueError, "underflows"),
    (lambda: rproxjax.sparse_pca(SMALL, 2, refit="yes"), TypeError, r"\brefit\b"),
]


@pytest.mark.parametrize("call, error, match", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_inputs_raise_named_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _bad_starts():
    q = np.linalg.qr(np.random.default_rng(5).standard_normal((16, 2)))[0]
    nan = q.copy()
    nan[3, 1] = np.nan
    return {"NaN": (nan, "NaN or inf"), "2 Q": (2 * q, "orthonormal columns"),
            "rank one": (np.repeat(q[:, :1], 2, axis=1), "rank 1 < r = 2")}


@pytest.mark.parametrize("which", ["NaN", "2 Q", "rank one"])
def test_a_bad_start_is_refused_before_anything_compiles(which):
    """An x0 with NaN, not orthonormal or of rank one: a ValueError naming x0, raised by a
    check on the host (no XLA compilation happens first)."""
    x0, match = _bad_starts()[which]
    events = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(event)

    data = np.random.default_rng(6).standard_normal((40, 16)) + 0.5  # not seen before
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        with pytest.raises(ValueError, match=rf"\bx0\b.*{match}|{match}.*\bx0\b|^x0"):
            rproxjax.sparse_pca(data, 2, mu=0.1, passes=2, x0=x0)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert events == []


@pytest.mark.parametrize("kw", [dict(gamma=1e3), dict(method="r_prox_sgd", eta=1e4)])
def test_too_large_a_step_is_an_error_not_a_wrong_answer(kw):
    """gamma 1e3 is 3e4 times the default 1/L here: the run ends above its start's F."""
    with pytest.raises(ValueError, match="steps? sizes are too large"):
        rproxjax.sparse_pca(SMALL, 2, mu=0.1, passes=2, **kw)


def test_noise_around_a_near_optimal_start_is_not_a_failure():
    """R-Subgrad from the PCA start at a small mu (the start is nearly optimal): its
    last-iterate noise raises F a little (0.2% here), which must not read as steps too
    large (as it did at a 0.1% threshold, inside a GridSearchCV over mu)."""
    from sklearn.preprocessing import StandardScaler

    data = StandardScaler().fit_transform(SMALL)
    res = rproxjax.sparse_pca(data, 3, mu=0.01, method="r_subgrad", passes=3)
    loss = np.asarray(res.history.epoch_loss)
    assert loss[-1] > loss[0]  # it did rise


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("value", [0.1, 1.0 / 3.0, 7.7])
def test_equal_rows_have_no_variance_up_to_rounding(dtype, value):
    """Equal rows centre to the mean's rounding error, not to zero (0.1 summed 57 times):
    components fitted to that error were returned before; it is the no-variance error."""
    data = np.full((57, 10), value, dtype)
    with pytest.raises(ValueError, match="no variance"):
        rproxjax.sparse_pca(data, 3, mu=0.1)
    rows = np.tile(np.random.default_rng(7).standard_normal(10), (57, 1)).astype(dtype)
    with pytest.raises(ValueError, match="no variance"):
        rproxjax.sparse_pca(rows, 3, mu=0.1)


def test_a_small_spread_about_a_large_mean_is_variance():
    """One entry off by 1e-4 of a mean of about 1.5 in float32: a variance per sample of
    about 2e-10, below the level (n eps)^2 ||mean||^2 (about 1e-9) where the rows are
    compared exactly, and far above the centring's rounding. The rows differ, so the data
    have variance, along that entry."""
    rows = np.tile(1.0 + np.random.default_rng(8).random(10), (57, 1)).astype(np.float32)
    rows[5, 3] += 1e-4
    res = rproxjax.sparse_pca(rows, 1, mu=1e-9, passes=2)
    assert int(np.argmax(np.abs(np.asarray(res.loadings[:, 0])))) == 3
    uncentred = rproxjax.sparse_pca(np.full((57, 10), 0.1), 1, mu=1e-3, center=False,
                                    passes=2)  # equal rows are a direction uncentred
    np.testing.assert_allclose(np.abs(np.asarray(uncentred.loadings[:, 0])),
                               np.full(10, 10 ** -0.5), atol=1e-6)


def test_nested_lists_and_mu_lists_are_arrays():
    """A nested list of numbers is the array it spells (as for robust_matrix_completion),
    and mu given as a list is the array of its values."""
    data = SMALL[:200, :8]
    ref = rproxjax.sparse_pca(data, 2, mu=np.array([0.1, 0.3]), passes=2)
    got = rproxjax.sparse_pca(data.tolist(), 2, mu=[0.1, 0.3], passes=2)
    np.testing.assert_array_equal(np.asarray(got.loadings), np.asarray(ref.loadings))
    np.testing.assert_array_equal(np.asarray(ref.transform(data[:5].tolist())),
                                  np.asarray(ref.transform(data[:5])))


def test_overflowing_data_is_an_error():
    with pytest.raises(ValueError, match="overflows"):
        rproxjax.sparse_pca(SMALL * 1e200, 2, mu=0.1, passes=2)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("entries", [[np.inf], [np.nan], [-np.inf], [np.inf, -np.inf]])
def test_non_finite_entries_are_an_error_and_overflow_is_not_one(entries, center):
    """Non-finite entries (also +inf and -inf in one column, whose mean is NaN) are the
    non-finite error with and without centring; finite entries whose column sums overflow
    are the overflow error, not that one (the data's side checks the entries one by one
    only where a column's mean or variance is not finite)."""
    data = np.array(SMALL[:100, :6], np.float64)
    for i, value in enumerate(entries):
        data[3 + i, 2] = value
    with pytest.raises(ValueError, match="data holds NaN or inf"):
        rproxjax.sparse_pca(data, 2, mu=0.1, passes=1, center=center)
    big = np.array(SMALL[:100, :6], np.float64)
    big[:, 2] = np.finfo(np.float64).max / 4  # a column whose sum overflows, all finite
    with pytest.raises(ValueError, match="overflows"):
        rproxjax.sparse_pca(big, 2, mu=0.1, passes=1, center=center)


# ------------------------------------------------------------------ sparsity targets


@pytest.mark.parametrize(("target", "loader"), [  # one target per data set by default
    pytest.param(60, load_fashion_mnist, id="60-fashion"),
    pytest.param(400, load_mnist, id="400-mnist"),
    pytest.param(60, load_mnist, id="60-mnist", marks=pytest.mark.slow),
    pytest.param(400, load_fashion_mnist, id="400-fashion", marks=pytest.mark.slow)])
def test_nonzeros_target_is_hit_on_real_data(loader, target):
    """On 2,000 images (784 pixels), r = 5, without the refit: the chosen run's count is
    within 5% of the target (the path stops refining within 2%; a count can jump between
    neighbouring mus), the path is sorted by mu with counts falling overall, and the
    reported mu reproduces the chosen run."""
    data = loader(n=2000, seed=1)
    res = rproxjax.sparse_pca(data, 5, nonzeros=target, passes=4, refit=False)
    assert res.settings["support"] == "run"
    assert abs(res.nonzeros - target) <= max(2, 0.05 * target), res.nonzeros
    path = res.path
    mus = np.asarray(path.mu)
    assert np.all(np.diff(mus) > 0)
    counts = np.asarray(path.nonzeros)
    assert counts[0] > target > counts[-1]
    assert res.nonzeros in counts
    again = rproxjax.sparse_pca(data, 5, mu=float(res.mu), passes=4, refit=False)
    assert abs(again.nonzeros - res.nonzeros) <= max(2, 0.02 * target)
    x = np.asarray(res.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(5)) < 1e-4  # float32 data


@pytest.mark.parametrize("loader", [load_fashion_mnist, load_mnist])
def test_nonzeros_target_with_the_refit_beats_the_nearest_run(loader):
    """The default refit at 400 nonzeros (2,000 images, r = 5, float32): at most the
    target's count, within 5% of it, orthonormal, and at least the variance of the path's
    run nearest the target refitted on its own pattern (the first candidate)."""
    from rproxjax._tasks.refit import refit_on_support

    data = loader(n=2000, seed=1)
    res = rproxjax.sparse_pca(data, 5, nonzeros=400, passes=4)
    near = rproxjax.sparse_pca(data, 5, nonzeros=400, passes=4, refit=False)
    assert abs(res.nonzeros - 400) <= 20
    if res.settings["support"] != "run":
        assert res.nonzeros <= 400
    x = np.asarray(res.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(5)) < 1e-4
    a = np.asarray(data - data.mean(axis=0))
    refitted = refit_on_support(np.asarray(near.loadings), a, 1e-3)[2] * len(a)
    assert float(res.adjusted_variance) * np.sum(a.astype(np.float64) ** 2) >= \
        refitted * (1 - 1e-4)


# ------------------------------------------------------------------ the estimator


def test_estimator_in_pipeline_and_grid_search():
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(),
                         rproxjax.SparsePCA(n_components=3, method="r_subgrad", passes=3))
    search = GridSearchCV(pipe, {"sparsepca__mu": [0.01, 0.5]}, cv=2).fit(SMALL)
    assert search.best_params_["sparsepca__mu"] in (0.01, 0.5)
    est = search.best_estimator_[-1]
    assert est.components_.shape == (3, 16)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(3), atol=1e-10)
    z = est.transform(StandardScaler().fit_transform(SMALL))
    assert z.shape == (400, 3)


def test_estimator_matches_the_task_function():
    est = rproxjax.SparsePCA(n_components=3, mu=0.4, passes=4, random_state=2).fit(SMALL)
    res = rproxjax.sparse_pca(SMALL, 3, mu=0.4, passes=4, seed=2)
    np.testing.assert_array_equal(est.components_, np.asarray(res.loadings).T)
    back = est.inverse_transform(est.transform(SMALL))
    a = SMALL - SMALL.mean(axis=0)
    x = np.asarray(res.loadings)
    np.testing.assert_allclose(back, a @ x @ x.T + SMALL.mean(axis=0), atol=1e-10)
    assert est.get_params()["mu"] == 0.4
    assert est.set_params(mu=0.1).mu == 0.1
    assert est.explained_variance_ratio_.sum() == pytest.approx(float(res.adjusted_variance))


def test_scikit_learn_estimator_checks():
    """scikit-learn's whole ``check_estimator`` suite, with R-Subgrad (no subproblem: each of
    the ~45 checks fits new shapes, so it compiles new programs; the API under test is the
    same for every method). Only the array-API check is skipped (scikit-learn skips it
    without SCIPY_ARRAY_API)."""
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(rproxjax.SparsePCA(method="r_subgrad", passes=2), on_fail=None,
                              on_skip=None)
    bad = [(r["check_name"], r["status"]) for r in results
           if r["status"] != "passed" and r["check_name"] != "check_array_api_input"]
    assert not bad, bad
    assert len(results) > 40


@pytest.mark.slow
def test_scikit_learn_estimator_checks_default_method():
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(rproxjax.SparsePCA(passes=2), on_fail=None, on_skip=None)
    bad = [(r["check_name"], r["status"]) for r in results
           if r["status"] != "passed" and r["check_name"] != "check_array_api_input"]
    assert not bad, bad


def test_defaults_follow_the_data_scale():
    """gamma = 1/L and mu = 0.1 mu_max scale as 1/s^2 and s^2 with the data: data scaled by
    s give the same components up to the subproblems' tolerance (its absolute part does
    not scale: 1e-6 differences here), so the defaults need no tuning per unit."""
    a = rproxjax.sparse_pca(SMALL, 3, passes=4)
    b = rproxjax.sparse_pca(SMALL * 255.0, 3, passes=4)
    np.testing.assert_allclose(b.loadings, a.loadings, atol=1e-4)
    assert float(b.mu) == pytest.approx(float(a.mu) * 255.0**2, rel=1e-10)
    assert a.nonzeros == b.nonzeros


def _compiled(fn):
    """(fn(), the names of the programs XLA compiled while it ran)."""
    names = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        return fn(), names
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def test_a_path_with_refinement_rounds_compiles_its_run_once():
    """The refinement rounds (fewer values of mu than the grid) are padded to the grid's
    lanes: one compiled path program serves every round."""
    res, names = _compiled(lambda: rproxjax.sparse_pca(SMALL[:, :13], 2, nonzeros=5, passes=2))
    assert res.path.mu.shape[0] > len(spca_task.PATH_FRACTIONS)  # it refined
    assert names.count("jit(run)") == 1, names


def _tall_factorizations(jaxpr, in_branch=False):
    """(primitive, input shape, inside a cond branch) of every qr, eigh, cholesky and svd of
    a jaxpr (sub-jaxprs included) whose input has more rows than columns."""
    import jax.extend.core as jex

    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("qr", "eigh", "cholesky", "svd"):
            shape = eqn.invars[0].aval.shape
            if shape[-2] > shape[-1]:
                found.append((eqn.primitive.name, shape, in_branch))
        branch = in_branch or eqn.primitive.name == "cond"
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(sub, jex.ClosedJaxpr):
                    found += _tall_factorizations(sub.jaxpr, branch)
                elif isinstance(sub, jex.Jaxpr):
                    found += _tall_factorizations(sub, branch)
    return found


def test_the_task_programs_factor_no_tall_matrix_but_in_a_fallback():
    """sparse_pca's programs (the data's side, a path's vmapped runs and metrics, the
    results' side) hand LAPACK square matrices only: on CPU a tall QR runs multi-threaded in
    OpenBLAS, whose spinning threads then slow XLA's next products. The one tall QR left
    is _basis's fallback (d x k) in the subspace iteration's passes (a loop), inside a
    cond branch."""
    n, d, r = 50, 16, 3
    data = jnp.asarray(SMALL[:n], jnp.float32)
    x0 = np.zeros((d, r), np.float32)
    prep = jax.make_jaxpr(lambda a, x: spca_task._prepare.__wrapped__(
        a, np.uint32(0), False, x, center=True))(data, x0)
    assert _tall_factorizations(prep.jaxpr) == [("qr", (d, min(d, r + 10)), True)]
    kw, _ = spca_task._plan("r_prox_spb", n, 2.0, 7, 4)
    run = jax.vmap(spca_task._make_run("r_prox_spb", kw, 4, rproxjax.SSN.stochastic()),
                   in_axes=(0, None, None, None, None, None))
    mus = jnp.full((12, r), 0.1, jnp.float32)
    path = jax.make_jaxpr(run)(mus, 1.0, 0.1, jnp.asarray(x0), data, jax.random.key(0))
    assert _tall_factorizations(path.jaxpr) == []
    finish = jax.make_jaxpr(spca_task._finish.__wrapped__)(jnp.asarray(x0), data)
    assert _tall_factorizations(finish.jaxpr) == []


@pytest.mark.parametrize("dtype, tol, small", [(np.float64, 1e-12, 1e-9),
                                               (np.float32, 1e-5, 1e-5)])
def test_basis_spans_y_orthonormally_and_falls_back_to_a_qr(dtype, tol, small):
    """_basis: the polar factor where the eigendecomposition passes are orthonormal to
    rounding; else a QR: where they give NaN (rank deficient), and near their reach (one
    isolated small singular value: here finite columns orthonormal only to about sqrt(eps),
    or NaN, depending on the eigendecomposition's rounding)."""
    from rproxjax.stiefel import _two_passes

    rng = np.random.default_rng(0)
    y = rng.standard_normal((40, 8)) * np.geomspace(1, 1e-2, 8)
    q = np.asarray(spca_task._basis(jnp.asarray(y, dtype)))
    ref = np.linalg.qr(y)[0]
    np.testing.assert_allclose(q.T @ q, np.eye(8), atol=tol)
    np.testing.assert_allclose(q @ q.T, ref @ ref.T, atol=10 * tol)
    deficient = y.copy()
    deficient[:, 3] = deficient[:, 2]
    u, _, vt = np.linalg.svd(y, full_matrices=False)
    isolated = (u * np.r_[np.ones(7), small]) @ vt
    assert np.isnan(np.asarray(_two_passes(jnp.asarray(deficient, dtype)))).any()
    for bad in (deficient, isolated):
        q = np.asarray(spca_task._basis(jnp.asarray(bad, dtype)))
        assert np.all(np.isfinite(q))
        np.testing.assert_allclose(q.T @ q, np.eye(8), atol=tol)
        np.testing.assert_allclose(q @ q.T @ bad, bad, atol=10 * tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_orthonormal_to_rounding_rejects_nan_and_sqrt_eps_defects(dtype):
    """_basis's test of the eigendecomposition passes: orthonormal columns pass, columns off
    by about sqrt(eps) (what the passes give near their reach) and NaN fail."""
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((40, 8)))[0].astype(dtype)
    eps = np.finfo(dtype).eps
    assert bool(spca_task._orthonormal(jnp.asarray(q)))
    off = q.copy()
    off[:, 7] = (q[:, 7] + np.sqrt(eps) * q[:, 6]) / np.sqrt(1 + eps)
    assert not bool(spca_task._orthonormal(jnp.asarray(off)))
    off[0, 0] = np.nan
    assert not bool(spca_task._orthonormal(jnp.asarray(off)))


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_r_diagonal_is_that_of_a_thin_qr(dtype, tol):
    """|R_jj| of a = Q R from the Gram matrix, against LAPACK's QR (float64): of a full-rank
    a, and of a rank-deficient one up to its first dependent column (R_jj = 0 to rounding;
    the later ones depend on the direction rounding gives that column)."""
    a = np.random.default_rng(1).standard_normal((300, 6)) * np.geomspace(5, 0.5, 6)
    a[:, 4] = a[:, 1] - 2 * a[:, 0]
    for b, upto in ((a[:, [0, 1, 2, 3, 5]], 5), (a, 5)):
        ref = np.abs(np.diag(np.linalg.qr(b, mode="r")))[:upto]
        got = np.asarray(spca_task._r_diagonal(jnp.asarray(b, dtype)), np.float64)[:upto]
        np.testing.assert_allclose(got**2, ref**2, atol=tol * np.sum(b * b))
    assert got[4] ** 2 <= tol * np.sum(a * a)


def _fake_path(counts_of, target, cut):
    """_rounds with a run whose counts are ``counts_of(mus)`` (no run fails): the mus of
    each round."""
    runs = []

    def run(mus):
        counts = counts_of(mus)
        runs.append((mus, None, None, counts, np.zeros(len(mus), bool), None))

    spca_task._rounds(run, runs, 1.0, target, cut)
    return [a[0] for a in runs]


def test_a_cut_stop_needs_a_run_at_most_k_and_one_within_the_slack():
    """With the refit, a run with between k and 1.25 k nonzeros ends the refinements only
    once another has at most k: counts that stay above k at the grid's largest mu (dense
    data at a sparse target) refine on toward larger mu. Without the refit only a count
    within 2% of k ends them."""
    target = 20
    dense = lambda mus: np.maximum(22, np.round(30 / mus)).astype(int)  # noqa: E731
    rounds = _fake_path(dense, target, cut=True)  # 22 <= 1.25 k from mu = 1.36, never <= k
    assert len(rounds) == 1 + spca_task.REFINE_ROUNDS
    assert rounds[1].min() > rounds[0].max()  # beyond the grid, where counts might fall
    steep = lambda mus: np.round(24 / mus).astype(int)  # noqa: E731
    rounds = _fake_path(steep, target, cut=True)  # 24 at mu = 1, 6 at mu = 4: both kinds
    assert len(rounds) == 1
    assert len(_fake_path(steep, target, cut=False)) > 1  # no count within 2% of 20 yet


def test_the_screen_is_a_multiple_of_the_kth_gradient_entry_or_none():
    """_screen: SCREEN_SCALE times the k-th largest |gradient| entry (ties and signs
    included); None where that entry is zero (more nonzeros than the principal directions
    have), and the first round is then the grid of mu_max."""
    g = np.array([[0.5, -3.0], [2.0, 0.0], [-1.0, 0.25]])
    assert spca_task._screen(g, 1) == pytest.approx(spca_task.SCREEN_SCALE * 3.0)
    assert spca_task._screen(g, 3) == pytest.approx(spca_task.SCREEN_SCALE * 1.0)
    assert spca_task._screen(g, 6) is None
    assert spca_task._screen(np.full((3, 2), np.nan), 2) is None
    np.testing.assert_allclose(spca_task._first_round(2.0, None),
                               2.0 * np.asarray(spca_task.PATH_FRACTIONS))
    first = spca_task._first_round(2.0, 0.5)
    np.testing.assert_allclose(first, 0.5 * np.asarray(spca_task.SCREEN_FRACTIONS))
    assert len(first) == len(spca_task.PATH_FRACTIONS)  # one program serves either
    assert np.all(np.diff(first) > 0)


@pytest.mark.parametrize("r, target", [(5, 100), (5, 300), (10, 200), (10, 1000)])
def test_the_screen_brackets_targets_in_one_round_on_digits(r, target):
    """On 1,000 shipped MNIST digits (not the data the screen's constants were read on:
    2,000 digits and 2,000 Fashion-MNIST images) the first round, around the screen's
    estimate, holds runs on both sides of k and ends the path: 12 runs, one program call.
    The estimate lies inside the round's near values, and the result has k nonzeros to
    within the path's tolerance, at most k (the refit's cut). At 10 passes, the budget the
    constants were read at (the default here is 14: r = 5, k = 100 then takes a second
    round, for 0.0006 more adjusted variance)."""
    data = load_mnist(n=1000)
    res = rproxjax.sparse_pca(data, r, nonzeros=target, passes=10)
    counts = np.asarray(res.path.nonzeros)
    assert counts.shape == (len(spca_task.SCREEN_FRACTIONS),)
    assert counts.max() > target and counts.min() <= target
    assert target * (1 - spca_task.NONZERO_RTOL) <= res.nonzeros <= target


def test_the_default_step_of_r_prox_spb_follows_the_spread_of_the_variance():
    """default_eta: 1 where the top direction holds more than 1/12 of the variance (the
    shipped digits), 12 lambda_max / tr C below (here a Gaussian whose variance decays
    slowly over 200 features: 0.30); there eta = 1 ends the run above its start (a
    ValueError), and the default step descends, at a target too (every run of the path
    fitted)."""
    assert spca_task.default_eta("r_prox_spb", 5.0, 50.0) == 1.0
    assert spca_task.default_eta("r_prox_spb", 1.0, 24.0) == pytest.approx(0.5)
    assert spca_task.default_eta("r_prox_sgd", 1.0, 1000.0) == 1.0
    data = np.asarray(load_mnist(n=1000))
    assert rproxjax.sparse_pca(data, 5, mu=0.3, passes=1).settings["eta"] == 1.0
    z = (np.random.default_rng(2).standard_normal((1500, 200))
         * np.geomspace(3, 0.3, 200)).astype(np.float32)
    with pytest.raises(ValueError, match="step sizes are too large"):
        rproxjax.sparse_pca(z, 5, eta=1.0, refit=False)
    res = rproxjax.sparse_pca(z, 5, refit=False)
    c = np.cov(z.T.astype(np.float64), bias=True)
    ratio = np.linalg.eigvalsh(c)[-1] / np.trace(c)
    # lambda_max from the start's subspace iteration (6 passes): to within 1% here
    assert res.settings["eta"] == pytest.approx(12 * ratio, rel=1e-2)
    assert 0.2 < res.settings["eta"] < 0.4
    loss = np.asarray(res.history.epoch_loss)
    assert loss[-1] < loss[0]
    path = rproxjax.sparse_pca(z, 5, nonzeros=100)
    assert 98 <= path.nonzeros <= 100


def test_a_target_the_principal_directions_meet_runs_no_path():
    """MNIST's blank border pixels have no variance, so the principal directions have fewer
    nonzeros than d r: a target above their count is met by their refit, which explains all
    the variance r components can (the top r eigenvalues' share), with no path program
    compiled or run. Without the refit the path runs as before."""
    data = np.asarray(load_mnist(n=1000), np.float64)
    r, k = 5, 784 * 5 - 1
    res, names = _compiled(lambda: rproxjax.sparse_pca(data, r, nonzeros=k))
    assert "jit(run)" not in names
    assert res.settings["support"] == "start" and res.nonzeros <= k
    assert res.path.mu.shape == (0,) and "no values of mu" in repr(res.path)
    assert float(res.mu) == 0.0 and res.num_steps == 0 and res.passes == 0.0
    a = data - data.mean(axis=0)
    w = np.linalg.eigvalsh(a.T @ a)
    assert float(res.adjusted_variance) == pytest.approx(w[-r:].sum() / w.sum(), abs=1e-4)
    x = np.asarray(res.loadings, np.float64)
    assert np.linalg.norm(x.T @ x - np.eye(r)) < 1e-5
    with pytest.warns(RuntimeWarning, match="nearest run has"):  # no run has k entries
        assert rproxjax.sparse_pca(data, r, nonzeros=k, refit=False,
                                   passes=1).path.mu.size > 0


def test_a_failed_run_at_the_default_eta_is_run_again_with_a_quarter_of_it():
    """Student's t data (3 degrees of freedom: one sample's squared norm 55 times the
    average): R-ProxSPB's default eta fails (the objective rises) and the run is repeated
    with eta / 4, which descends; settings["eta"] is the step used. A given eta is not
    changed: the failure is an error. A path retries its failed round the same way."""
    rng = np.random.default_rng(7)
    data = (rng.standard_t(3, (1000, 60)) * np.geomspace(2, 0.2, 60)).astype(np.float32)
    first = spca_task.default_eta("r_prox_spb", *_scales_of(data))
    with pytest.raises(ValueError, match="step sizes are too large"):
        rproxjax.sparse_pca(data, 4, mu=0.2, eta=first, refit=False)
    res = rproxjax.sparse_pca(data, 4, mu=0.2, refit=False)
    assert res.settings["eta"] in (pytest.approx(first / 4), pytest.approx(first / 16))
    loss = np.asarray(res.history.epoch_loss)
    assert loss[-1] < loss[0]
    path = rproxjax.sparse_pca(data, 4, nonzeros=120)
    assert path.settings["eta"] < first and path.nonzeros <= 120


def _scales_of(data):
    """(lambda_max, tr C) of the data's covariance, as sparse_pca's start computes them."""
    res = rproxjax.sparse_pca(data, 4, mu=0.2, eta=1e-3, passes=1, refit=False)
    a = np.asarray(data, np.float64) - np.asarray(data, np.float64).mean(axis=0)
    return res.settings["lambda_max"], float(np.sum(a * a) / len(a))


def _unseen(kind, rng, n=1000, d=60):
    """Data of shapes and structures the defaults were not tuned on (one shape: one path
    program per method serves them all)."""
    if kind == "student_t":  # heavy tails, slowly decaying spectrum
        return rng.standard_t(3, (n, d)) * np.geomspace(2, 0.2, d)
    if kind == "poisson":  # counts
        return rng.poisson(np.geomspace(5, 0.05, d), (n, d)).astype(float)
    if kind == "flat":  # no structure at all
        return rng.standard_normal((n, d))
    if kind == "low_rank":  # dense rank 3 plus noise
        return rng.standard_normal((n, 3)) @ rng.standard_normal((3, d)) * 5 + 0.1 * (
            rng.standard_normal((n, d)))
    return rng.standard_normal((n, d)) * np.geomspace(1e3, 1e-2, d)  # scales 1e5 apart


@pytest.mark.parametrize("method", ["r_prox_spb", "r_prox_sgd"])
def test_targets_on_data_the_defaults_were_not_tuned_on(method):
    """Heavy tails, counts, white noise, a dense low-rank matrix and features whose scales
    span 1e5, at sparse and dense targets: every call returns (no halt: on the heavy tails,
    Student's t with 3 degrees of freedom, R-ProxSPB's first eta fails and the retry's
    eta / 4 descends), with orthonormal loadings, at most k nonzeros and at least 85% of k
    (or the principal directions, where they have fewer), and within 1% of the adjusted
    variance of the principal directions cut to k and refitted (a candidate the result
    must not lose to)."""
    from rproxjax._tasks.refit import adjusted_variance, refit_on_support

    rng = np.random.default_rng(7)
    for kind in ("student_t", "poisson", "flat", "low_rank", "scales"):
        data = _unseen(kind, rng).astype(np.float32)
        a = (data - data.mean(axis=0)).astype(np.float64)
        cov = a.T @ a / len(a)
        top = np.linalg.eigh(cov)[1][:, ::-1][:, :4]
        for k in (24, 120):
            res = rproxjax.sparse_pca(data, 4, nonzeros=k, method=method)
            x = np.asarray(res.loadings, np.float64)
            assert np.linalg.norm(x.T @ x - np.eye(4)) < 1e-4, (kind, k)
            assert res.nonzeros <= k, (kind, k)
            assert res.nonzeros >= 0.85 * k or res.settings["support"] == "start", (kind, k)
            cut = refit_on_support(spca_task._cut(top, k), a, 1e-3)[0]
            share = adjusted_variance(cut, cov) / np.trace(cov)
            # the refit is a local ascent: from the library's float32 start it can end a
            # little below the exact float64 eigenvectors' refit
            assert float(res.adjusted_variance) >= 0.99 * share, (kind, k)


def test_without_a_run_at_most_k_the_nearest_run_is_the_candidate():
    """_best with the refit: the run candidate is the nearest run with at most k nonzeros
    where there is one (the denser ones are all cut), else the nearest run (documented: the
    result may then have more than k)."""
    def runs_of(counts):
        counts = np.asarray(counts)
        params = np.arange(len(counts), dtype=float)[:, None, None] * np.ones((1, 3, 2))
        return [(np.linspace(0.1, 1.0, len(counts)), params, [counts * 0.0] * 4, counts,
                 np.zeros(len(counts), bool), np.ones(len(counts)))]

    x, _, _, _, denser = spca_task._best(runs_of([50, 40, 22, 12, 5]), 20, 1.0,
                                         np.float64, cut=True)
    assert float(x[0, 0]) == 3  # the run at 12, not the nearer one at 22
    assert sorted(float(p[0, 0]) for _, p in denser) == [0, 1, 2]
    x, _, _, _, denser = spca_task._best(runs_of([50, 40, 22, 12, 5]), 20, 1.0,
                                         np.float64, cut=False)
    assert float(x[0, 0]) == 2  # refit=False: the nearest
    x, _, _, _, denser = spca_task._best(runs_of([50, 40, 30]), 20, 1.0, np.float64, cut=True)
    assert float(x[0, 0]) == 2 and sorted(float(p[0, 0]) for _, p in denser) == [0, 1]


def test_component_variance_has_r_entries_with_fewer_samples_than_components():
    """3 samples, 5 components: the centred scores have rank 2 at most, so the last
    components add no variance (zeros), and every per-component array has length r."""
    data = np.random.default_rng(2).standard_normal((3, 10))
    res = rproxjax.sparse_pca(data, 5, mu=0.1, passes=2)
    assert res.component_variance.shape == (5,) and res.nonzeros_per_component.shape == (5,)
    np.testing.assert_allclose(np.asarray(res.component_variance)[2:], 0.0, atol=1e-5)
    assert float(res.adjusted_variance) <= 1.0 + 1e-6


def test_ragged_complex_and_uncentred_edge_inputs_are_named():
    """Ragged nested lists (data, mu) are TypeErrors naming the argument; complex128 is named
    as given; equal tiny uncentred rows underflow (they are not the mean, 0)."""
    with pytest.raises(TypeError, match=r"data must be .* one shape, got a ragged list"):
        rproxjax.sparse_pca([[1.0, 2.0], [3.0]], 1, mu=0.1)
    with pytest.raises(TypeError, match=r"mu must be .* one shape, got a ragged list"):
        rproxjax.sparse_pca(SMALL, 2, mu=[0.1, [0.2]])
    with pytest.raises(TypeError, match="got dtype complex128"):
        rproxjax.sparse_pca(np.ones((5, 3), np.complex128), 1)
    with pytest.raises(ValueError, match="underflows"):
        rproxjax.sparse_pca(np.full((5, 3), 1e-30, np.float32), 1, mu=0.0, center=False)


def test_a_mu_whose_every_step_collapses_is_an_error():
    """At mu = 1e6 every subproblem's prox zeroes a whole column (Status.COLLAPSED), every
    step is refused and the run stays at its (dense) start: that was returned as the answer
    at mu = 1e6; it is an error naming mu. A path counts such a run as failed."""
    with pytest.raises(ValueError, match=r"mu = 1000000.0 is too large for the proximal"):
        rproxjax.sparse_pca(SMALL, 2, mu=1e6, passes=2)
    collapsed = int(rproxjax.Status.COLLAPSED)
    status = np.array([[collapsed] * 4, [collapsed, 0, collapsed, 0], [0] * 4])
    np.testing.assert_array_equal(spca_task._stuck(status), [True, False, False])
    assert not spca_task._stuck(np.zeros((2, 0), np.int32)).any()  # no step: not stuck


def test_as_many_components_as_features_have_a_path():
    """r = d: no feature lies outside the r of largest variance, so the usual mu scale
    (mu_max) is 0; the path takes lambda_max instead of failing on a zero grid."""
    data = SMALL[:, :4]
    res = rproxjax.sparse_pca(data, 4, nonzeros=6, passes=3)
    x = np.asarray(res.loadings)
    assert res.nonzeros <= 6 and np.linalg.norm(x.T @ x - np.eye(4)) < 1e-10
    assert res.settings["mu_max"] > 0


def test_results_print_in_a_line_or_two():
    res = rproxjax.sparse_pca(SMALL, 2, nonzeros=12, passes=2)
    text = repr(res)
    assert len(text) < 300 and "\n" not in text, text
    assert f"nonzeros={res.nonzeros}" in text and "16 x 2" in text and "path of" in text
    assert repr(res.path).startswith("SparsePCAPath(") and len(repr(res.path)) < 200
    single = rproxjax.sparse_pca(SMALL, 2, mu=0.1, passes=2)
    assert "FitResult(params (16, 2)" in repr(single.history) and len(repr(single.history)) < 200


def test_float64_data_computed_in_float32_warn_at_the_callers_line(tmp_path):
    """With x64 off, float64 data run in float32: a UserWarning naming the argument, at the
    caller's line; float32 data do not warn."""
    import subprocess
    import sys

    from tests.subprocess_env import subprocess_env

    script = tmp_path / "user.py"
    script.write_text(
        "import warnings, numpy as np, rproxjax\n"
        "warnings.simplefilter('default')\n"
        "a = np.random.default_rng(0).standard_normal((60, 8)) + 1.0\n"
        "rproxjax.sparse_pca(a, 2, mu=0.1, passes=1)\n"
        "rproxjax.sparse_pca(a.astype(np.float32), 2, mu=0.1, passes=1)\n"
        "m = np.outer(np.arange(1.0, 13.0), np.arange(1.0, 9.0))\n"
        "rproxjax.robust_matrix_completion(m, np.ones(m.shape, bool), 1, throw=False)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=subprocess_env(JAX_ENABLE_X64="0"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if "is computed in float32" in line]
    assert len(lines) == 2, out.stderr[-2000:]
    assert lines[0].startswith(f"{script}:4: UserWarning: data is float64")
    assert lines[1].startswith(f"{script}:7: UserWarning: M is float64")


def test_the_default_budget_is_a_number_of_steps():
    """passes=None: 450 minibatches' IFOs (450 b / n passes, at most 100), at least 10 passes
    for a single fit and 2 for a nonzeros= path's runs: about as many R-ProxSPB steps on
    any n; an explicit passes is kept; ManPG takes 10 full-gradient steps."""
    rule = spca_task.default_passes
    assert rule("r_prox_spb", 2000, 45, path=True) == pytest.approx(450 * 45 / 2000)
    assert rule("r_prox_spb", 8000, 89, path=True) == pytest.approx(450 * 89 / 8000)
    assert rule("r_prox_spb", 70000, 265, path=True) == 2.0
    assert rule("r_prox_spb", 70000, 265) == rule("manpg", 70000, 70000, path=True) == 10.0
    assert rule("r_prox_spb", 200, 14) == rule("r_prox_spb", 200, 14, path=True) == 31.5
    assert rule("r_prox_sgd", 50, 50) == 100.0 and rule("manpg", 200, 14) == 10.0
    data = np.random.default_rng(5).standard_normal((8000, 12)) * np.linspace(3, 0.3, 12)
    single = rproxjax.sparse_pca(data, 2, mu=0.1)
    path = rproxjax.sparse_pca(data, 2, nonzeros=8)
    given = rproxjax.sparse_pca(data, 2, nonzeros=8, passes=7)
    near = int(np.argmin(np.abs(np.asarray(path.path.nonzeros) - 8)))
    again = rproxjax.sparse_pca(data, 2, mu=float(path.path.mu[near]), passes=path.passes,
                                refit=False)  # a path's run alone, at the path's budget
    assert again.num_steps == path.num_steps
    assert abs(again.nonzeros - int(path.path.nonzeros[near])) <= 1
    b = single.settings["batch_size"]
    assert b == 89
    assert single.passes == pytest.approx(10.0, abs=0.3)
    assert path.passes == pytest.approx(450 * b / 8000, abs=0.3)
    assert given.passes == pytest.approx(7.0, abs=0.3)
    small = rproxjax.sparse_pca(SMALL, 3, nonzeros=12)  # n = 400: 22.5 passes (whole blocks)
    assert small.passes == rproxjax.sparse_pca(SMALL, 3, nonzeros=12, passes=22.5).passes
    with pytest.raises(ValueError, match="passes"):
        rproxjax.sparse_pca(SMALL, 3, nonzeros=12, passes=0)


def test_fewer_rows_than_features():
    """n = 100 rows of white noise in d = 2,000: at the old budget (10 passes, 25 R-ProxSPB
    steps) a run at mu = 300 (hundreds of times mu_max) kept hundreds of entries, and
    nonzeros=30 returned 34; 450 minibatches reach the minimizer (one entry per column),
    the target is met (a run cut to it where no run has at most 30), and the refit's columns
    are orthonormal to 1e-14."""
    data = np.random.default_rng(0).standard_normal((100, 2000))
    big = rproxjax.sparse_pca(data, 3, mu=300.0, refit=False)
    assert big.settings["mu_max"] < 2.0
    assert big.nonzeros == 3
    res = rproxjax.sparse_pca(data, 3, nonzeros=30)
    assert 0.85 * 30 <= res.nonzeros <= 30
    x = np.asarray(res.loadings)
    assert np.linalg.norm(x.T @ x - np.eye(3)) < 1e-14
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the nearest run is near enough: no warning
        rproxjax.sparse_pca(data, 3, nonzeros=30, refit=False)


def test_a_target_no_run_reaches_is_cut_to_it_or_warns():
    """Where no run of the path has at most k nonzeros (k = 30 at 2 passes on 100 x 2,000
    white noise), the nearest run is cut to k: the refitted result has at most k; without
    the refit, the nearest run is returned with a RuntimeWarning naming its count."""
    data = np.random.default_rng(0).standard_normal((100, 2000))
    res = rproxjax.sparse_pca(data, 3, nonzeros=30, passes=2)
    assert min(np.asarray(res.path.nonzeros)) > 30  # no run reached the target
    assert res.nonzeros <= 30 and res.settings["support"] == "cut"
    with pytest.warns(RuntimeWarning, match=r"nonzeros=30: the path's nearest run has \d+") as w:
        bare = rproxjax.sparse_pca(data, 3, nonzeros=30, passes=2, refit=False)
    assert bare.nonzeros > 33
    assert [r.filename for r in w if "nearest run" in str(r.message)] == [__file__]  # the call


def test_refit_columns_are_orthonormal_on_large_supports():
    """The refit's columns on supports of thousands of entries (the Krylov eigensolver):
    orthonormal to 1e-14 (each column is projected twice at the end; 9e-12 at d = 5,000
    before)."""
    from rproxjax._tasks.refit import refit_on_support
    rng = np.random.default_rng(1)
    centred = rng.standard_normal((150, 3000))
    x = np.linalg.qr(rng.standard_normal((3000, 3)))[0]
    x[rng.random(x.shape) < 0.1] = 0.0
    out = refit_on_support(x, centred, 1e-3)[0]
    assert np.linalg.norm(out.T @ out - np.eye(3)) < 1e-14
    assert np.array_equal(out == 0, np.abs(x) <= 1e-3)


def test_fill_keeps_the_runs_pattern_and_adds_a_denser_runs_largest_entries():
    """The "fill" candidate: the run's own entries, and the denser run's largest entries
    off that pattern up to k in all (with the denser run's values); None where the run
    has k entries already or the denser run adds none."""
    x = np.zeros((6, 2))
    x[[0, 1], 0], x[2, 1] = (0.8, 0.6), 1.0
    denser = np.full((6, 2), 1e-4)
    denser[[0, 3, 4], 0], denser[[2, 5], 1] = (0.7, 0.5, 0.2), (0.9, 0.3)
    filled = spca_task._fill(x, denser, 5)
    keep = np.abs(filled) > 1e-3
    assert keep.sum() == 5
    np.testing.assert_array_equal(filled[[0, 1], 0], x[[0, 1], 0])  # the run's own values
    assert filled[2, 1] == 1.0 and filled[3, 0] == 0.5 and filled[5, 1] == 0.3
    assert filled[4, 0] == 0.0  # the third-largest addition is beyond k
    assert spca_task._fill(x, denser, 3) is None
    assert spca_task._fill(x, np.where(np.abs(x) > 0, 1.0, 0.0), 5) is None


def test_a_target_refit_is_at_least_as_good_as_its_filled_pattern_refitted():
    """With a sparser run and a denser one, the nonzeros= refit also refits the sparser
    run's pattern filled up to k from the denser run: its result explains at least as much
    variance as each candidate's refit alone (the run's, its filled pattern's, the denser
    run's cut), with at most k nonzeros, orthonormal. Here, one entry above the sparser
    run's count, the filled pattern wins over both the run and the cut."""
    from rproxjax._tasks.refit import refit_best

    a = SMALL - SMALL.mean(axis=0)
    sparse = np.asarray(rproxjax.sparse_pca(SMALL, 3, mu=2.0, passes=3, refit=False).loadings)
    dense = np.asarray(rproxjax.sparse_pca(SMALL, 3, mu=0.2, passes=3, refit=False).loadings)
    k = spca_task._count(sparse) + 1
    assert k < spca_task._count(dense)
    x, mu, support = spca_task._refit_target(sparse, np.float64(2.0),
                                             [(np.float64(0.2), dense)], a, k)
    x = np.asarray(x)
    ours = np.sum(np.diag(np.linalg.qr(a @ x, mode="r")) ** 2) / len(a)
    run = refit_best([sparse], a, 1e-3)[2]
    filled = refit_best([sparse, spca_task._fill(sparse, dense, k)], a, 1e-3, kept=2)[2]
    cut = refit_best([sparse, spca_task._cut(dense, k)], a, 1e-3)[2]
    assert ours >= max(run, filled, cut) - 1e-9 * ours
    assert support == "fill" and float(mu) == 2.0 and filled > max(run, cut)
    assert spca_task._count(x) <= k
    np.testing.assert_allclose(x.T @ x, np.eye(3), atol=1e-12)
