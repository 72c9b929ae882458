"""A short demonstration of the library on this machine (``python -m rproxjax``)."""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from rproxjax import stiefel


def _subproblem_demo(d: int, r: int, n: int, seed: int) -> None:
    key_z, key_x = jax.random.split(jax.random.key(seed))
    z = jax.random.normal(key_z, (n, d))
    a_x = lambda x: z.T @ (z @ x) / n  # noqa: E731  (sample covariance times X)
    x = stiefel.random_point(key_x, d, r)
    g = -2.0 * a_x(x)
    t = 0.5 / float(jnp.linalg.norm(z, 2) ** 2 / n)

    solve = jax.jit(lambda x, g, t, mu: rproxjax.tangent_prox(x, g, t, rproxjax.l1(mu)))
    jax.block_until_ready(solve(x, g, t, 0.1))
    start = time.perf_counter()
    zeta, info = jax.block_until_ready(solve(x, g, t, 0.1))
    elapsed = time.perf_counter() - start
    tangency = jnp.linalg.norm(x.T @ zeta + zeta.T @ x)
    print(f"tangent_prox at d={d}, r={r} ({x.dtype}): {int(info.num_steps)} Newton steps, "
          f"||E|| = {float(info.residual):.2e}, tangency {float(tangency):.1e}, "
          f"{1e3 * elapsed:.2f} ms, {rproxjax.describe(info.status)}")

    mus = jnp.geomspace(1e-3, 1.0, 8)
    sweep = jax.jit(jax.vmap(lambda mu: solve(x, g, t, mu)))
    zetas, infos = jax.block_until_ready(sweep(mus))
    nnz = np.count_nonzero(np.abs(np.asarray(x + zetas)) > 1e-12, axis=(1, 2))
    print("vmapped over 8 values of mu:")
    print("   mu       nonzeros of X + zeta   Newton steps")
    for mu, k, steps in zip(np.asarray(mus), nnz, np.asarray(infos.num_steps), strict=True):
        print(f"   {mu:8.4f} {k:10d} / {d * r:<10d} {steps:6d}")

    y = x
    for method in stiefel.RETRACTIONS:
        y = stiefel.retract(x, zeta, method=method)
        print(f"retraction {method:7s}: ||Y^T Y - I||_F = {float(stiefel.feasibility(y)):.1e}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rproxjax", description=__doc__)
    parser.add_argument("--d", type=int, default=784)
    parser.add_argument("--r", type=int, default=10)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--float32", action="store_true", help="compute in float32")
    args = parser.parse_args(argv)
    if not args.float32:
        jax.config.update("jax_enable_x64", True)  # the demo's choice, not the library's
    print(f"rproxjax {rproxjax.__version__} on {jax.devices()[0].platform}")
    _subproblem_demo(args.d, args.r, args.n, args.seed)


if __name__ == "__main__":
    main()
