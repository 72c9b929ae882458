"""Benchmark: how the form of a per-sample loss decides the cost of its minibatch gradient.

Run from the repository root (about 30 seconds on 2 CPU cores)::

    python benchmarks/loss_form.py [--repeats 7] [--no-save]

The optimizers differentiate the mean of ``jax.vmap`` of a per-sample loss over the
minibatch, and a sweep ``jax.vmap``-s that again over lanes. XLA emits the batched products
from the loss as written, so two ways to write the same number can cost differently. This
script times the minibatch gradient (gather included) of the sparse PCA loss
||z||^2 - ||X^T z||^2 written three ways:

* ``X^T z``: ``jnp.sum((x.T @ z) ** 2)``, the form of ``rproxjax.problems.spca_loss``;
* ``z X``: ``jnp.sum((z @ x) ** 2)``;
* ``dot_general(z, X)``: ``lax.dot_general`` contracting z with X's rows (the same as ``z X``).

in the three patterns the library runs (MNIST n = 20,000, d = 784, r = 10, b = 100):

* "one point": one X, one minibatch (a step of R-ProxSGD or R-Subgrad);
* "two points, one minibatch": ``jax.vmap`` over two X on one minibatch (R-ProxSPB's SARAH
  step, the gradients at X_t and X_{t-1});
* "8 lanes, a minibatch each": ``jax.vmap`` over 8 X with their own minibatches (a sweep
  with a key per lane).

Each is a compiled ``lax.scan`` of T = 100 steps that moves X by 1e-6 times the gradient;
times per step, the minimum over ``--repeats`` calls after a warm-up call, the forms
interleaved round by round; the ratio is to the ``X^T z`` form in the same rounds.
"""

from __future__ import annotations

import argparse

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import rproxjax  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.loss_form`
    from benchmarks import _timing

N, D, R, B, T, LANES = 20000, 784, 10, 100, 100, 8
HIGHEST = lax.Precision.HIGHEST

FORMS = {
    "X^T z": lambda x, z: jnp.matmul(x.T, z, precision=HIGHEST),
    "z X": lambda x, z: jnp.matmul(z, x, precision=HIGHEST),
    "dot_general(z, X)": lambda x, z: lax.dot_general(z, x, (((0,), (0,)), ((), ())),
                                                      precision=HIGHEST),
}
PATTERNS = ("one point", "two points, one minibatch", "8 lanes, a minibatch each")


def program(form, pattern, data):
    """jit of (X (LANES, d, r), idx (T, LANES, b)) -> X after T gradient steps."""

    def loss(x, z):
        p = form(x, z)
        return jnp.sum(z * z) - jnp.sum(p * p)

    grad = jax.grad(lambda x, batch: jnp.mean(jax.vmap(loss, in_axes=(None, 0))(x, batch)))

    def step(xs, ib):
        if pattern == "one point":
            g = grad(xs[0], data[ib[0]])[None]
        elif pattern == "two points, one minibatch":
            g = jax.vmap(grad, in_axes=(0, None))(xs[:2], data[ib[0]])
        else:
            g = jax.vmap(lambda x, i: grad(x, data[i]))(xs, ib)
        return xs.at[:g.shape[0]].add(1e-6 * g), None

    return jax.jit(lambda xs, idx: lax.scan(step, xs, idx)[0])


def measure(dtype, repeats):
    data = jnp.asarray(rproxjax.datasets.load_mnist(N, seed=0, dtype=np.dtype(dtype)))
    xs = rproxjax.stiefel.random_point(jax.random.key(0), D, R, jnp.dtype(dtype),
                                       shape=(LANES,))
    idx = jax.random.randint(jax.random.key(1), (T, LANES, B), 0, N)
    rows = []
    for pattern in PATTERNS:
        samples = _timing.round_robin(
            {name: (program(form, pattern, data), (xs, idx)) for name, form in FORMS.items()},
            repeats)
        best = {name: min(s) / T for name, s in samples.items()}
        for name, seconds in best.items():
            rows.append({"dtype": dtype, "pattern": pattern, "form": name, "s_per_step": seconds,
                         "ratio": seconds / best["X^T z"]})
        print(f"{dtype} {pattern}: " + ", ".join(
            f"{name} {1e6 * s:.0f} us" for name, s in best.items()), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    machine = _timing.machine_info()
    rows = [row for dtype in ("float64", "float32") for row in measure(dtype, args.repeats)]
    title = (f"## The minibatch gradient of one loss written three ways (MNIST n={N}, d={D}, "
             f"r={R}, b={B}, T={T}-step scans)")
    print(f"\n{title}\n")
    table = _timing.print_table(
        ["dtype", "pattern", "form", "us / step", "against X^T z"],
        [(row["dtype"], row["pattern"], row["form"], f"{1e6 * row['s_per_step']:.0f}",
          f"{row['ratio']:.2f}") for row in rows])
    if not args.no_save:
        paths = _timing.save_results("loss_form", {"rows": rows, "repeats": args.repeats},
                                     f"{title}\n\n{table}", machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
