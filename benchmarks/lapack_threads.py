"""Benchmark: a tall LAPACK factorization between XLA products on the CPU, with OpenBLAS's
threads on and off.

Run from the repository root (about 1 minute on 2 CPU cores)::

    python benchmarks/lapack_threads.py            # results/lapack_threads.{md,json}

jaxlib runs ``jnp.linalg.qr`` and the other factorizations on the CPU through LAPACK
(OpenBLAS). On a tall matrix OpenBLAS splits the work over its own threads, which keep
spinning for a while after the call and take cores from XLA's next computation. The
benchmark times, on 20,000 MNIST digits (float64, centred, d = 784) and k = 20 columns:

* the subspace iteration of ``sparse_pca``'s start (6 passes y = A^T (A q), then an
  orthonormal basis of y): with ``jnp.linalg.qr`` of y (d x k, LAPACK), with the library's
  ``_basis`` (k x k eigendecompositions and products), and with neither (columns
  normalized: the products alone, the floor);
* one product pass A^T (A q) alone;
* ``sparse_pca(data, 10, mu=0.06)`` compiled, with and without the refit.

Each case runs in a fresh process, once with OpenBLAS's default threads and once with
``OPENBLAS_NUM_THREADS=1``; times are the minimum of 7 calls after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.lapack_threads`
    from benchmarks import _timing

CASES = ("passes, LAPACK QR", "passes, _basis", "passes, normalized only", "one pass",
         "sparse_pca fit", "sparse_pca fit, refit=False")


def child() -> dict:
    """The timings of this process (its OPENBLAS_NUM_THREADS as given)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import rproxjax
    from rproxjax._linalg import mm
    from rproxjax._tasks import spca

    raw = rproxjax.datasets.load_mnist(20000, seed=0, dtype=np.float64)
    data = jnp.asarray(raw - raw.mean(axis=0))
    q0 = jax.random.normal(jax.random.key(0), (784, 20), jnp.float64)

    def passes(basis):
        return jax.jit(lambda a, q: jax.lax.fori_loop(
            0, 6, lambda _, q: basis(mm(a.T, mm(a, q))), q))

    def best(fn, *args):
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
        return min(times)

    def fit(refit):
        return lambda: rproxjax.sparse_pca(raw, 10, mu=0.06, refit=refit).components

    return {
        CASES[0]: best(passes(lambda y: jnp.linalg.qr(y)[0]), data, q0),
        CASES[1]: best(passes(spca._basis), data, q0),
        CASES[2]: best(passes(lambda y: y / jnp.linalg.norm(y, axis=0)), data, q0),
        CASES[3]: best(jax.jit(lambda a, q: mm(a.T, mm(a, q))), data, q0),
        CASES[4]: best(fit(True)),
        CASES[5]: best(fit(False)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child()))
        return
    results = {}
    for threads in ("default", "1"):
        env = dict(os.environ)
        env.pop("OPENBLAS_NUM_THREADS", None)
        if threads == "1":
            env["OPENBLAS_NUM_THREADS"] = "1"
        out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                             capture_output=True, text=True).stdout
        results[threads] = json.loads(out.strip().splitlines()[-1])
    rows = [[case, f"{results['default'][case] * 1e3:.1f}", f"{results['1'][case] * 1e3:.1f}",
             f"{results['default'][case] / results['1'][case]:.2f}"] for case in CASES]
    markdown = "\n".join([
        "## A tall LAPACK factorization between XLA products (MNIST n = 20,000, d = 784, "
        "k = 20, float64)", "",
        _timing.markdown_table(["case", "OpenBLAS threads: default (ms)",
                                "OPENBLAS_NUM_THREADS=1 (ms)", "ratio"], rows), "",
        "Protocol: the script's docstring. 'passes': 6 subspace-iteration passes in one "
        "compiled loop; 'sparse_pca fit': the compiled task call at a given mu (centring, "
        "start, run, refit, metrics)."])
    print(markdown)
    if not args.no_save:
        _timing.save_results("lapack_threads", results, markdown)


if __name__ == "__main__":
    main()
