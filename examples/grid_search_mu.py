"""Choosing mu by cross-validation: ``rproxjax.SparsePCA`` in a scikit-learn ``GridSearchCV``.

The data have a planted sparse structure: two components, each carried by 5 of 40 variables,
plus unit noise on every variable. ``SparsePCA.score`` is the adjusted variance the components
explain on the held-out rows. A denser model (small mu) also loads the 30 noise variables:
those entries fit the training rows' noise and explain less of the held-out rows, so the
search picks a large mu, whose 10 nonzeros are the planted support. The held-out
reconstruction error, printed beside it, falls the same way here. On data without a sparse
structure (images, say) the densest candidate explains the most held-out variance by either
measure; ``SparsePCA(sparsity_weight=...)`` then charges for each nonzero (see
``SparsePCA.score``). Every mu reuses one compiled program per data shape (mu is a value, not
a constant of the program).

    python examples/grid_search_mu.py                # about 10 s on 2 cores
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.model_selection import GridSearchCV

import rproxjax


def planted(n: int, d: int = 40, k: int = 5, seed: int = 0):
    """n rows: two spikes (standard deviations 3 and 2) on disjoint supports of k variables,
    plus unit noise; returns the rows and the support (a boolean mask of the d variables)."""
    rng = np.random.default_rng(seed)
    spikes = np.zeros((2, d))
    spikes[0, :k] = spikes[1, k:2 * k] = 1 / np.sqrt(k)
    data = (rng.standard_normal((n, 2)) * [3.0, 2.0]) @ spikes + rng.standard_normal((n, d))
    return data, np.any(spikes != 0, axis=0)


def reconstruction(est, X, y=None):
    """Minus the mean squared reconstruction error of the rows X (the former ``score``)."""
    return -float(np.mean(np.sum((X - est.inverse_transform(est.transform(X))) ** 2, axis=1)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="rows of the planted data")
    args = parser.parse_args(argv)

    data, support = planted(args.n)
    search = GridSearchCV(rproxjax.SparsePCA(n_components=2, passes=5),
                          {"mu": [0.05, 0.2, 0.5, 1.5]}, cv=3,
                          scoring={"score": lambda est, X, y=None: est.score(X),
                                   "reconstruction": reconstruction}, refit="score")
    search.fit(data)
    res = search.cv_results_
    for mu, score, recon in zip(res["param_mu"], res["mean_test_score"],
                                res["mean_test_reconstruction"], strict=True):
        est = rproxjax.SparsePCA(n_components=2, mu=mu, passes=5).fit(data)
        found = np.any(np.abs(est.components_) > 1e-3, axis=0)
        print(f"mu = {float(mu):4.2f}: held-out adjusted variance {score:.4f}, held-out "
              f"reconstruction error {-recon:.3f}; {est.nonzeros_} nonzeros on "
              f"{np.sum(found & support)} of the {support.sum()} planted variables and "
              f"{np.sum(found & ~support)} others")
    best = search.best_estimator_
    print(f"best mu = {search.best_params_['mu']}: {best.nonzeros_} nonzeros, adjusted "
          f"variance {best.adjusted_variance_:.4f}")
    return search


if __name__ == "__main__":
    main()
