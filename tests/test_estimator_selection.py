"""Model selection with ``SparsePCA.score``: a grid search on data with a planted sparse
structure picks a sparse model; ``sparsity_weight`` and ``verbose``."""

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.model_selection import GridSearchCV  # noqa: E402

import rproxjax  # noqa: E402


def _planted(n=300, d=40, k=5, seed=0):
    rng = np.random.default_rng(seed)
    spikes = np.zeros((2, d))
    spikes[0, :k] = spikes[1, k:2 * k] = 1 / np.sqrt(k)
    data = (rng.standard_normal((n, 2)) * [3.0, 2.0]) @ spikes + rng.standard_normal((n, d))
    return data, np.any(spikes != 0, axis=0)


def _support_errors(est, support):
    found = np.any(np.abs(est.components_) > 1e-3, axis=0)
    return int(np.sum(found != support))


def test_grid_search_picks_the_planted_sparse_model():
    data, support = _planted()
    grid = [0.05, 0.2, 0.5, 1.5]
    search = GridSearchCV(rproxjax.SparsePCA(n_components=2, passes=5), {"mu": grid},
                          cv=3).fit(data)
    assert search.best_params_["mu"] != grid[0]  # not the densest
    densest = rproxjax.SparsePCA(n_components=2, mu=grid[0], passes=5).fit(data)
    best = search.best_estimator_
    assert best.nonzeros_ < densest.nonzeros_
    assert _support_errors(best, support) < _support_errors(densest, support)
    assert _support_errors(best, support) <= 2


def test_score_is_the_held_out_adjusted_variance_less_the_density_price():
    data, _ = _planted(n=200)
    train, test = data[:150], data[150:]
    est = rproxjax.SparsePCA(n_components=2, mu=0.2, passes=3).fit(train)
    centred = test - est.mean_
    r = np.linalg.qr(centred @ est.components_.T, mode="r")
    expected = np.sum(np.diag(r) ** 2) / np.sum(centred ** 2)
    assert est.score(test) == pytest.approx(expected, rel=1e-6)
    assert 0 < est.score(test) < 1
    priced = est.set_params(sparsity_weight=0.5)
    assert priced.score(test) == pytest.approx(
        expected - 0.5 * est.nonzeros_ / est.components_.size, rel=1e-6)
    with pytest.raises(ValueError, match="sparsity_weight"):
        est.set_params(sparsity_weight=-1.0).score(test)


def test_sparsity_weight_makes_a_search_trade_variance_for_sparsity():
    """Dense structure (two spikes on every variable): the plain score prefers the densest
    candidate, a price per nonzero a sparser one."""
    rng = np.random.default_rng(1)
    spikes = np.linalg.qr(rng.standard_normal((20, 2)))[0].T  # dense, orthonormal rows
    data = (rng.standard_normal((240, 2)) * [3.0, 2.0]) @ spikes + rng.standard_normal((240, 20))
    grid = [0.02, 2.0]
    plain = GridSearchCV(rproxjax.SparsePCA(n_components=2, passes=3), {"mu": grid},
                         cv=3).fit(data)
    priced = GridSearchCV(rproxjax.SparsePCA(n_components=2, passes=3, sparsity_weight=0.5),
                          {"mu": grid}, cv=3).fit(data)
    assert plain.best_params_["mu"] == grid[0]
    assert priced.best_params_["mu"] == grid[1]


def test_verbose_is_accepted():
    data, _ = _planted(n=60, d=10, k=2)
    est = rproxjax.SparsePCA(n_components=2, passes=1, verbose=True).fit(data)
    assert est.get_params()["verbose"] is True
    assert est.components_.shape == (2, 10)
