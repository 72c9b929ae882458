"""Benchmark: online R-ProxSGD over a generated stream of 10^5, 10^6 and 10^7 samples.

Run from the repository root (about 3 minutes on 2 CPU cores)::

    python benchmarks/streaming.py
    python benchmarks/streaming.py --samples 100000 1000000 --no-save

Each length runs in a fresh Python process (so that its peak memory is its own):
``rproxjax.fit(r_prox_sgd(inverse_sqrt_schedule(1.0), 0.1, l1(0.1)), spca_loss, X0, stream,
batch_size=1000, num_steps=samples / 1000, sampling=Sampling(chunk_size=20000))`` over a
generator of float32 minibatches (d = 784, a sparse spiked model plus noise drawn with NumPy
batch by batch; nothing is kept), X0 = ``stiefel.random_point(key(0), 784, 10)`` in float32.
Reported: the peak resident set size of the process (``ru_maxrss``) and its value just before
the run (after imports, the data generator and one compiled warm-up run of 20 steps), the
wall time of the run, and samples per second. Memory should not grow with the stream: the
runner stacks ``chunk_size / batch_size`` = 20 batches at a time on the host, and the history
(a few numbers per step) is the only thing that grows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.streaming`
    from benchmarks import _timing

D, R, B, CHUNK = 784, 10, 1000, 20_000


def child(samples: int) -> dict:
    import resource

    import jax
    import numpy as np

    import rproxjax
    from rproxjax.problems import spca_loss

    def rss_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    rng = np.random.default_rng(0)
    loadings = np.zeros((D, R), np.float32)
    for j in range(R):
        loadings[j * 20:(j + 1) * 20, j] = 1 / np.sqrt(20)

    def stream():
        while True:
            s = rng.standard_normal((B, R), dtype=np.float32) * 2.0
            yield s @ loadings.T + 0.5 * rng.standard_normal((B, D), dtype=np.float32)

    opt = rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 0.1, rproxjax.l1(0.1))
    x0 = rproxjax.stiefel.random_point(jax.random.key(0), D, R, np.float32)
    kwargs = dict(key=jax.random.key(1), batch_size=B,
                  sampling=rproxjax.Sampling(chunk_size=CHUNK))
    rproxjax.fit(opt, spca_loss, x0, stream(), num_steps=CHUNK // B, **kwargs)  # compiles
    before = rss_mib()
    tic = time.perf_counter()
    res = rproxjax.fit(opt, spca_loss, x0, stream(), num_steps=samples // B, **kwargs)
    jax.block_until_ready(res.params)
    seconds = time.perf_counter() - tic
    return {"samples": samples, "steps": samples // B, "seconds": seconds,
            "samples_per_s": samples / seconds, "rss_before_mib": before,
            "rss_peak_mib": rss_mib(),
            "final_minibatch_F": float(res.epoch_loss[-1]),
            "halted": bool(np.asarray(res.history.halted).any())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", nargs="+", type=int, default=[10**5, 10**6, 10**7])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return
    machine = _timing.machine_info()
    rows, results = [], []
    for samples in args.samples:
        out = subprocess.run([sys.executable, __file__, "--child", str(samples)],
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(res)
        print(res, flush=True)
        rows.append((f"{samples:,}", f"{res['steps']:,}", f"{res['seconds']:.1f}",
                     f"{res['samples_per_s']:,.0f}", f"{res['rss_before_mib']:.0f}",
                     f"{res['rss_peak_mib']:.0f}", "yes" if res["halted"] else "no"))
    title = (f"## Online R-ProxSGD over a generated stream (d = {D}, r = {R}, b = {B}, float32, "
             f"{CHUNK // B} steps per compiled chunk), one process per length")
    print(f"\n{title}\n")
    table = _timing.print_table(["samples", "steps", "wall (s)", "samples/s",
                                 "RSS before run (MiB)", "peak RSS (MiB)", "halted"], rows)
    if not args.no_save:
        paths = _timing.save_results("streaming", {"results": results}, title + "\n\n" + table,
                                     machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
