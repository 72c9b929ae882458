"""Benchmark: dense versus CG Newton systems inside R-ProxSGD runs, as the run progresses.

Run from the repository root (about 3 minutes on 2 CPU cores)::

    python benchmarks/linear_solver_runs.py [--warmups 10 20 60] [--no-save]

Instance: the synthetic sparse PCA of ``scale.py`` at (d, r, b) = (4096, 32, 500), float64,
mu = 0.2. R-ProxSGD (``r_prox_sgd(inverse_sqrt_schedule(1.0), 0.1, l1(mu))``) first runs W
steps with ``pure_fit`` (dense systems) from X0; from that point and state, 10 more steps
are timed with ``linear_solver="dense"`` and with ``"cg"`` (each compiled and run once
untimed, then 3 rounds alternating the two; median / 10). As the run goes on, X gets sparser
and the subproblems more degenerate. With the regularization of loose solves at 1e-4 ||E||
(before this release) the Newton steps per call grew to 16 and CG cost 3.5x dense after 60
steps; with 1.0 ||E|| and the secant shift a call took about 3 steps and CG was the faster
solver at r = 32; without the shift in loose solves (now) a call takes 2.4-4.5 steps and CG
costs 0.60-1.02x dense (``results/linear_solver_runs.md``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rproxjax  # noqa: E402
from rproxjax.problems import spca_loss  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
    import scale
except ImportError:  # run as `python -m benchmarks.linear_solver_runs`
    from benchmarks import _timing, scale

D, R, B = scale.SIZES[1]
S = 10


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--warmups", nargs="+", type=int, default=[10, 20, 60])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    machine = _timing.machine_info()
    data = scale.make_data(D, R, B, jnp.float64)
    x0 = rproxjax.stiefel.random_point(jax.random.key(0), D, R, jnp.float64)
    sched = rproxjax.inverse_sqrt_schedule(1.0)
    opts = {ls: rproxjax.r_prox_sgd(sched, 0.1, rproxjax.l1(scale.MU),
                                    ssn=rproxjax.SSN.stochastic(linear_solver=ls))
            for ls in ("dense", "cg")}

    def runner(opt):
        return jax.jit(lambda x, st, k, dd: rproxjax.pure_fit(
            opt, spca_loss, x, dd, key=k, batch_size=B, num_epochs=1, steps_per_epoch=S,
            opt_state=st))

    fns = {ls: runner(o) for ls, o in opts.items()}
    rows, results = [], []
    for w in args.warmups:
        warm = rproxjax.pure_fit(opts["dense"], spca_loss, x0, data, key=jax.random.key(5),
                                 batch_size=B, num_epochs=1, steps_per_epoch=w)
        args_ = (warm.params, warm.opt_state, jax.random.key(1), data)
        steps = {ls: float(np.mean(np.asarray(jax.block_until_ready(f(*args_)).history
                                              .ssn_steps))) for ls, f in fns.items()}
        times = {ls: [] for ls in fns}
        for _ in range(3):
            for ls, f in fns.items():
                t0 = time.perf_counter()
                jax.block_until_ready(f(*args_))
                times[ls].append((time.perf_counter() - t0) / S)
        med = {ls: statistics.median(v) for ls, v in times.items()}
        nnz = float(jnp.mean(jnp.abs(warm.params) > 1e-3))
        results.append({"warmup_steps": w, "time_s": med, "samples_s": times,
                        "newton_steps": steps, "nonzeros_fraction": nnz})
        rows.append((w, f"{nnz:.3f}", f"{1e3 * med['dense']:.1f}", f"{1e3 * med['cg']:.1f}",
                     f"{med['cg'] / med['dense']:.2f}",
                     f"{steps['dense']:.2f} / {steps['cg']:.2f}"))
        print(rows[-1], flush=True)
    title = (f"## R-ProxSGD steps with dense vs CG Newton systems after W steps, synthetic "
             f"sparse PCA (d, r, b) = ({D}, {R}, {B}), mu = {scale.MU}, float64")
    print(f"\n{title}\n")
    table = _timing.print_table(["W", "nonzeros of X", "dense (ms/step)", "cg (ms/step)",
                                 "cg / dense", "Newton steps dense / cg"], rows)
    if not args.no_save:
        paths = _timing.save_results("linear_solver_runs", {"results": results},
                                     title + "\n\n" + table, machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
