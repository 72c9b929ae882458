"""Benchmark: what 8 vmapped lanes of the work every method shares cost against one lane.

Run from the repository root (about 15 seconds on 2 CPU cores)::

    python benchmarks/sweep_floor.py [--no-save]

``step_cost.py`` measures a vmapped sweep over 8 mu against one run, and the same sweep of
R-Subgrad, which solves no subproblem: its floor. This script splits that floor into the
parts of a step that every method takes, on the instance of ``step_cost.py`` (MNIST,
n = 20,000, d = 784, r = 10, b = 100), float64 and float32:

* "gather + gradient": the minibatch gather ``data[idx]`` and ``jax.grad`` of the mean
  per-sample loss (``rproxjax.problems.spca_loss``) at X;
* "retraction": ``stiefel.retract`` (polar) of X along a tangent vector (``stiefel.project``
  of a fixed matrix);
* "gather + gradient + retraction": both, the retraction along the projected gradient.

Each is a compiled ``lax.scan`` of T = 50 steps carrying X, timed for one lane, for 8 lanes
under ``jax.vmap`` with their own minibatch indices ("a key per lane") and for 8 lanes that
share the indices ("one key for all"); medians over ``--repeats`` calls (default 20) after a
warm-up call, interleaved round by round. The ratio is to the one lane's time in the same
rounds. A ratio near 8 means the lanes gain nothing from the batch (each lane reads its own
gathered minibatch and runs its own thin products and r x r eigh); a ratio near 1 would mean
one lane was dominated by fixed per-call costs that the batch shares.
"""

from __future__ import annotations

import argparse
import statistics

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import rproxjax  # noqa: E402
from rproxjax import stiefel  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
    from step_cost import B, D, N, R, batch_grad  # the instance and gradient of step_cost
except ImportError:  # run as `python -m benchmarks.sweep_floor`
    from benchmarks import _timing
    from benchmarks.step_cost import B, D, N, R, batch_grad

T, LANES = 50, 8


def _retract(x, u):
    return stiefel.retract(x, -0.01 * stiefel.project(x, u))


PARTS = {
    "gather + gradient": lambda x, ib, data: x + 1e-6 * batch_grad(x, data[ib]),
    "retraction": lambda x, ib, data: _retract(x, 1e-3 * (x + 1.0)),
    "gather + gradient + retraction": lambda x, ib, data: _retract(x, batch_grad(x, data[ib])),
}


def scanned(part, in_axes=None):
    """jit of (X, idx, data) -> X after T steps of ``part``, vmapped over lanes if
    ``in_axes`` is given (for X and the step's indices)."""
    step = part if in_axes is None else jax.vmap(part, in_axes=(*in_axes, None))

    @jax.jit
    def run(x, idx, data):
        return lax.scan(lambda c, ib: (step(c, ib, data), None), x, idx)[0]

    return run


def measure(dtype, repeats):
    data = jnp.asarray(rproxjax.datasets.load_mnist(N, seed=0, dtype=np.dtype(dtype)))
    x1 = stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype))
    x8 = stiefel.random_point(jax.random.key(1), D, R, jnp.dtype(dtype), shape=(LANES,))
    idx = jax.random.randint(jax.random.key(2), (T, LANES, B), 0, N)
    rows = []
    for name, part in PARTS.items():
        calls = {"one lane": (scanned(part), (x1, idx[:, 0], data)),
                 "8 lanes, a key per lane": (scanned(part, (0, 0)), (x8, idx, data)),
                 "8 lanes, one key for all": (scanned(part, (0, None)), (x8, idx[:, 0], data))}
        samples = _timing.round_robin(calls, repeats)
        med = {label: statistics.median(s) / T for label, s in samples.items()}
        one = med["one lane"]
        rows.append({"dtype": dtype, "part": name, **{f"{k} (s/step)": v for k, v in med.items()},
                     "ratio, a key per lane": med["8 lanes, a key per lane"] / one,
                     "ratio, one key for all": med["8 lanes, one key for all"] / one})
        print(f"{dtype} {name}: one lane {1e6 * one:.0f} us, 8 lanes "
              f"{rows[-1]['ratio, a key per lane']:.2f}x (a key per lane), "
              f"{rows[-1]['ratio, one key for all']:.2f}x (one key)", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    machine = _timing.machine_info()
    rows = [row for dtype in ("float64", "float32") for row in measure(dtype, args.repeats)]
    headers = ["dtype", "part", "one lane (us/step)", "8 lanes, a key per lane: ratio",
               "8 lanes, one key for all: ratio"]
    title = (f"## 8 vmapped lanes against one: the parts of a step every method takes (MNIST "
             f"n={N}, d={D}, r={R}, b={B}, T={T}-step scans)")
    print(f"\n{title}\n")
    table = _timing.print_table(headers, [
        (row["dtype"], row["part"], f"{1e6 * row['one lane (s/step)']:.0f}",
         f"{row['ratio, a key per lane']:.2f}", f"{row['ratio, one key for all']:.2f}")
        for row in rows])
    if not args.no_save:
        paths = _timing.save_results("sweep_floor", {"rows": rows, "repeats": args.repeats},
                                     f"{title}\n\n{table}", machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
