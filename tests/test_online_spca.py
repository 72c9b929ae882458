"""Online sparse PCA: ``SparsePCA.partial_fit`` and ``fit`` over an iterator of chunks.

A stream of chunks (each larger than one minibatch) reaches the in-memory fit's adjusted
variance within 1% after the same number of stochastic gradients; the running moments are
exact; the state does not grow with the stream; each chunk size compiles once; bad
settings and chunks are errors."""

import jax
import numpy as np
import pytest

from rproxjax import SparsePCA
from tests.compilations import count_compilations

D, R, N = 30, 3, 6000


@pytest.fixture(scope="module")
def spiked():
    """n x d rows of a planted sparse spiked model: three disjoint supports of 5 features
    (variances 16, 9, 4) plus unit-free noise of standard deviation 0.5."""
    rng = np.random.default_rng(0)
    w = np.zeros((D, R))
    for j in range(R):
        w[5 * j:5 * j + 5, j] = 1 / np.sqrt(5)
    data = (rng.standard_normal((N, R)) * [4.0, 3.0, 2.0]) @ w.T
    return data + 0.5 * rng.standard_normal((N, D)) + 3.0  # an offset: centring matters


def _stream(data, reshuffles, chunks, seed=1):
    """The rows reshuffled ``reshuffles`` times, each cut into ``chunks`` chunks."""
    rng = np.random.default_rng(seed)
    for _ in range(reshuffles):
        for idx in np.array_split(rng.permutation(data.shape[0]), chunks):
            yield data[idx]


@pytest.mark.parametrize("method", ["r_prox_spb", "r_prox_sgd"])
def test_a_stream_reaches_the_in_memory_fit_within_one_percent(spiked, method):
    """10 passes in memory against the same 10 passes streamed: 5 reshuffles of the rows
    in chunks of 1200 (34 minibatches of 35), 2 passes over each chunk."""
    full = SparsePCA(R, mu=0.05, passes=10, method=method).fit(spiked)
    est = SparsePCA(R, mu=0.05, passes=2, method=method)
    for chunk in _stream(spiked, 5, 5):
        assert chunk.shape[0] > 35  # larger than one batch (b = sqrt(1200))
        est.partial_fit(chunk)
    assert est.n_samples_seen_ == 5 * N
    assert est._stream.ifo == pytest.approx(full.n_samples_seen_ * 10, rel=0.1)
    assert est.adjusted_variance_ >= 0.99 * full.adjusted_variance_
    np.testing.assert_allclose(est.mean_, spiked.mean(axis=0), rtol=1e-12)
    comps = est.components_
    np.testing.assert_allclose(comps @ comps.T, np.eye(R), atol=1e-10)
    # the planted supports are found: each component's mass lies on one support
    for row in comps:
        mass = [np.sum(row[5 * j:5 * j + 5] ** 2) for j in range(R)]
        assert max(mass) > 0.95


def test_the_running_moments_are_those_of_all_rows_seen(spiked):
    est = SparsePCA(R, mu=0.05, passes=1, method="r_prox_sgd")
    seen = []
    for chunk in _stream(spiked[:3000], 1, 7):
        est.partial_fit(chunk)
        seen.append(chunk)
    rows = np.concatenate(seen)
    state = est._stream
    np.testing.assert_allclose(state.mean, rows.mean(axis=0), rtol=1e-12)
    centred = rows - rows.mean(axis=0)
    np.testing.assert_allclose(state.scatter, centred.T @ centred, rtol=1e-10, atol=1e-8)
    # the reported variances are the covariance's: the adjusted variance of components_
    cov = centred.T @ centred / rows.shape[0]
    gram = est.components_ @ cov @ est.components_.T
    assert est.adjusted_variance_ == pytest.approx(
        np.sum(np.diag(np.linalg.cholesky(gram)) ** 2) / np.trace(cov), rel=1e-10)


def test_the_state_does_not_grow_and_later_chunks_compile_nothing(spiked):
    """After the first two chunks (the first compiles the start and the chunk's steps),
    ten more chunks of the same size compile nothing, and the state holds the same bytes
    after 12 chunks as after 2; a chunk of a new size compiles once, then not again."""
    est = SparsePCA(R, mu=0.05, passes=1)
    chunks = list(_stream(spiked, 2, 6))  # 12 chunks of 1000 rows

    def size():
        leaves = jax.tree.leaves((est._stream.x, est._stream.opt_state, est._stream.key,
                                  est._stream.mean, est._stream.scatter))
        return sum(np.asarray(jax.random.key_data(leaf) if jax.dtypes.issubdtype(
            leaf.dtype, jax.dtypes.prng_key) else leaf).nbytes for leaf in leaves)

    est.partial_fit(chunks[0]).partial_fit(chunks[1])
    after_two = size()
    assert count_compilations(lambda: [est.partial_fit(c) for c in chunks[2:]]) == 0
    assert size() == after_two
    assert count_compilations(lambda: est.partial_fit(spiked[:700])) >= 1
    assert count_compilations(lambda: est.partial_fit(spiked[700:1400])) == 0


def test_fit_over_an_iterator_is_partial_fit_over_its_chunks(spiked):
    chunks = list(_stream(spiked[:2400], 1, 3))
    streamed = SparsePCA(R, mu=0.05, passes=2).fit(iter(chunks))
    stepwise = SparsePCA(R, mu=0.05, passes=2)
    for chunk in chunks:
        stepwise.partial_fit(chunk)
    np.testing.assert_array_equal(streamed.components_, stepwise.components_)
    assert streamed.n_samples_seen_ == 2400 and streamed.path_ is None
    # a second fit starts afresh (not from the first stream's state)
    again = streamed.fit(iter(chunks))
    np.testing.assert_array_equal(again.components_, stepwise.components_)
    # and an in-memory fit after a stream drops the stream
    streamed.fit(spiked[:2400])
    assert not hasattr(streamed, "_stream")


def test_online_errors_are_raised_before_any_step(spiked):
    with pytest.raises(ValueError, match="nonzeros"):
        SparsePCA(R, nonzeros=15).partial_fit(spiked[:500])
    with pytest.raises(ValueError, match="manpg"):
        SparsePCA(R, method="manpg").partial_fit(spiked[:500])
    with pytest.raises(ValueError, match="empty iterator"):
        SparsePCA(R).fit(iter([]))
    est = SparsePCA(R, mu=0.05, passes=1).partial_fit(spiked[:500])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(spiked[:500, :10])
    with pytest.raises(ValueError, match="minimum of 2"):
        est.partial_fit(spiked[:1])
    with pytest.raises(ValueError, match="passes"):
        SparsePCA(R, passes=0).partial_fit(spiked[:500])


def test_a_pickled_stream_resumes_bit_identically(spiked):
    """An estimator saved mid-stream (pickle, as scikit-learn models are saved) and loaded
    continues exactly where the original does: the same components after the next chunk."""
    import pickle

    chunks = list(_stream(spiked[:3000], 1, 3))
    est = SparsePCA(R, mu=0.05, passes=1).partial_fit(chunks[0])
    saved = pickle.loads(pickle.dumps(est))
    for chunk in chunks[1:]:
        est.partial_fit(chunk)
        saved.partial_fit(chunk)
    np.testing.assert_array_equal(est.components_, saved.components_)
    assert est.n_iter_ == saved.n_iter_ and est.n_samples_seen_ == saved.n_samples_seen_
