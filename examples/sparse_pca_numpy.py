"""Sparse PCA on your own NumPy matrix, with a sparsity target, in one call.

Ten sparse components of 5,000 handwritten digits (784 pixels each), about 300 nonzero
loadings in all: ``rproxjax.sparse_pca`` centres the data, starts from PCA, reads every step
size off the data, and finds the l1 weight mu that gives the target by a regularization
path computed as one compiled program. The path shows the trade-off between sparsity and
explained variance.

    python examples/sparse_pca_numpy.py              # about 30 s on 2 cores, compiling
    python examples/sparse_pca_numpy.py --n 1000 --nonzeros 100
"""

from __future__ import annotations

import argparse

import numpy as np

import rproxjax


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="images to use")
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--nonzeros", type=int, default=300, help="target nonzeros in all")
    args = parser.parse_args(argv)

    data = rproxjax.datasets.load_mnist(n=args.n, seed=0)    # any (n, d) NumPy array
    res = rproxjax.sparse_pca(data, args.components, nonzeros=args.nonzeros)

    print(f"{args.components} components, {res.nonzeros} nonzeros (target {args.nonzeros}), "
          f"mu = {float(res.mu):.4g}")
    print(f"adjusted explained variance {float(res.adjusted_variance):.4f}, "
          f"components orthonormal to "
          f"{np.abs(res.loadings.T @ res.loadings - np.eye(args.components)).max():.1e}")
    print("path:     mu  nonzeros  adjusted variance")
    for mu, nnz, var in zip(res.path.mu, res.path.nonzeros, res.path.adjusted_variance,
                            strict=True):
        print(f"  {float(mu):10.4g}  {int(nnz):8d}  {float(var):8.4f}")
    return res


if __name__ == "__main__":
    main()
