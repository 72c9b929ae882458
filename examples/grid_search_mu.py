"""Choosing mu by cross-validation: ``rproxjax.SparsePCA`` in a scikit-learn ``GridSearchCV``.

The estimator's ``score`` is minus the mean squared reconstruction error on held-out rows;
a grid over mu trades it against sparsity. Every mu of the grid reuses one compiled
program per data shape (mu is a value, not a constant of the program).

    python examples/grid_search_mu.py                # about 30 s on 2 cores
"""

from __future__ import annotations

import argparse

from sklearn.model_selection import GridSearchCV

import rproxjax


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="images to use")
    args = parser.parse_args(argv)

    data = rproxjax.datasets.load_fashion_mnist(n=args.n, seed=0)
    search = GridSearchCV(rproxjax.SparsePCA(n_components=5, passes=5),
                          {"mu": [0.05, 0.2, 0.5, 1.0]}, cv=3)
    search.fit(data)
    for mu, score in zip(search.cv_results_["param_mu"], search.cv_results_["mean_test_score"],
                         strict=True):
        print(f"mu = {float(mu):5.2f}: held-out reconstruction error {-score:.4f}")
    best = search.best_estimator_
    print(f"best mu = {search.best_params_['mu']}: {best.nonzeros_} nonzeros, adjusted "
          f"variance {best.adjusted_variance_:.4f}")
    return search


if __name__ == "__main__":
    main()
