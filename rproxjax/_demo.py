"""The main demonstration (``python -m rproxjax``): online sparse PCA on MNIST.

Runs R-ProxSPB, R-ProxSGD and R-Subgrad on the shipped MNIST digits (a seeded
subset of 20,000 by default, ``--n 70000`` for all; pixels in [0, 1], centred)
at the paper's settings (r = 10, mu = 0.2; |S| = 100 for
R-ProxSGD and R-Subgrad; |S1| = n and |S2| = q = 100 for R-ProxSPB), at equal
IFO budgets, prints a table (loss, explained variance, nonzeros, time, IFOs)
and saves two figures: the loss against IFO/n, and the learned sparse
components as images. The README's table of this run, with its settings and provenance,
is recorded by the repository's lab (``python -m experiments --demo``), not by this command.
"""

from __future__ import annotations

import argparse
import pathlib
import time
from types import MappingProxyType

import jax
import numpy as np

import rproxjax
from rproxjax import datasets, problems
from rproxjax._contract import block_cost

#: The methods' step sizes: eta (R-ProxSGD, R-Subgrad: eta_t = eta / sqrt(t + 1)) and the
#: proximal step gamma, those the reproduction tuned for this panel (MNIST, r = 10,
#: mu = 0.2: ``results/spca-mnist-r10.json``, at its budget of 6 IFO/n).
STEPS = MappingProxyType({"R-ProxSPB": MappingProxyType({"eta": 1.0, "gamma": 0.1}),
                          "R-ProxSGD": MappingProxyType({"eta": 8.0, "gamma": 0.1}),
                          "R-Subgrad": MappingProxyType({"eta": 0.1})})


def _methods(reg, q):
    sgd, spb, sub = STEPS["R-ProxSGD"], STEPS["R-ProxSPB"], STEPS["R-Subgrad"]
    return {
        "R-ProxSPB": (rproxjax.r_prox_spb(spb["eta"], spb["gamma"], reg, q=q), True),
        "R-ProxSGD": (rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(sgd["eta"]),
                                          sgd["gamma"], reg), False),
        "R-Subgrad": (rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(sub["eta"]), reg),
                      False),
    }


def _points_step(q: int) -> int:
    """Steps between R-ProxSPB's curve points: the largest divisor of q up to q / 10
    (points inside its blocks, not only at their ends)."""
    return max(k for k in range(1, max(1, q // 10) + 1) if q % k == 0)


_MNIST_IMAGES = datasets._SHAPES[datasets.MNIST_FILE][0]


def _check_run(n, r, mu, budget, q, batch_size):
    """Clear errors for settings that cannot give the demonstration's equal IFO budgets."""
    for name, value, low in (("n", n, batch_size), ("r", r, 1), ("q", q, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    if not mu >= 0 or not budget > 0:
        raise ValueError(f"mu must be >= 0 and budget > 0, got mu = {mu}, budget = {budget}.")
    block = block_cost(q, batch_size, n) / n
    if block > budget:
        raise ValueError(
            f"one R-ProxSPB block (a refresh on n = {n} and q - 1 = {q - 1} steps on "
            f"{batch_size}) costs {block:.2f} IFO/n, above the budget {budget:g}: the budgets "
            "would not be equal. Raise the budget or n, or lower q."
        )


def _schedule(spb, n, budget, q, batch_size):
    """(epochs, steps per epoch) of a method within ``budget`` IFO/n: R-ProxSPB whole blocks
    with a curve point every tenth of a block, the others whole passes over the data."""
    if spb:
        steps = _points_step(q)
        blocks = max(1, int(budget * n // block_cost(q, batch_size, n)))
        return blocks * (q // steps), steps
    steps = n // batch_size
    return max(1, int(budget * n // (steps * batch_size))), steps


def _summary(res, data_np, total_var, wall):
    """A run's numbers, in NumPy (indexing a JAX array eagerly compiles a program per shape)."""
    n = data_np.shape[0]
    x, loss, ifo = (np.asarray(a) for a in (res.params, res.epoch_loss, res.epoch_ifo))
    proj = data_np @ x
    return {
        "loss": float(loss[-1]),
        "explained_variance": float(np.sum(proj * proj) / np.sum(x * x)) / total_var,
        "nonzeros": int(np.sum(np.abs(x) > 1e-3)),
        "run_time": float(np.asarray(res.epoch_time)[-1]),
        "wall_time": wall,
        "ifo_over_n": float(ifo[-1]) / n,
        "curve_ifo": ifo / n,
        "curve_loss": loss,
        "feasibility": float(np.asarray(res.history.feasibility)[-1]),
        "params": x,
    }


def _print_table(results, entries):
    header = (f"{'method':10s} {'loss F':>10s} {'expl. var.':>10s} {'nonzeros':>9s} "
              f"{'time (s)':>9s} {'IFO/n':>7s} {'||X^T X - I||':>14s}")
    print(header)
    print("-" * len(header))
    for name, s in results.items():
        print(f"{name:10s} {s['loss']:10.4f} {s['explained_variance']:10.4f} "
              f"{s['nonzeros']:9d} {s['run_time']:9.2f} {s['ifo_over_n']:7.2f} "
              f"{s['feasibility']:14.1e}")
    print("(explained variance: tr(X^T A A^T X) / tr(X X^T) / ||A||_F^2; nonzeros: |X_ij| > "
          "1e-3 of", entries, "; time: run time after compilation)")


def run(n=20000, r=10, mu=0.2, budget=4.0, q=100, batch_size=100, seed=0, out_dir=".",
        plot=True, methods=None):
    """Runs the demonstration, prints its table and returns ``{method: summary dict}``.

    Args:
      n: MNIST digits, a seeded subset (:func:`rproxjax.datasets.load_mnist`).
      r, mu: the rank and the l1 weight.
      budget: each method's IFO budget, in units of n (R-ProxSPB: whole blocks within it).
      q, batch_size: R-ProxSPB's inner steps per block and the minibatch size |S|.
      seed: seeds the subset, the start and the sampling.
      out_dir, plot: where the two figures go, and whether to draw them (matplotlib).
      methods: maps a name to ``(optimizer, is_spb)`` (``is_spb``: the optimizer runs whole
        refresh blocks of ``q`` steps); by default R-ProxSPB, R-ProxSGD and R-Subgrad with
        the regularizer l1(mu) and the step sizes :data:`STEPS`.

    Returns:
      ``{method: summary}``, each summary with ``loss``, ``explained_variance``,
      ``nonzeros``, ``run_time``, ``wall_time``, ``ifo_over_n``, ``feasibility``, the
      curves ``curve_ifo`` and ``curve_loss`` and the final point ``params`` (NumPy).

    Raises:
      ValueError: settings that cannot give equal IFO budgets (e.g. a budget below one
        R-ProxSPB block), or a non-positive size.

    Example (one R-ProxSPB block costs (n + 2 (q - 1) |S|) / n = 5 IFO/n here)::

        results = run(n=2000, budget=6.0, q=5, plot=False)
        results["R-ProxSPB"]["ifo_over_n"]    # at most 6.0
    """
    _check_run(n, r, mu, budget, q, batch_size)
    # The data stay a NumPy array on the host for the summary (NumPy, no compilations) and
    # go to the device once (device_put compiles nothing).
    data_np = datasets.load_mnist(n, seed=seed)
    data = jax.device_put(data_np)
    n, d = data.shape
    reg = rproxjax.l1(mu)
    x0 = rproxjax.stiefel.random_point(jax.random.key(seed), d, r, data.dtype)
    total_var = float(np.sum(np.square(data_np, dtype=np.float64)))
    print(f"online sparse PCA on MNIST: n = {n}, d = {d}, r = {r}, mu = {mu}, "
          f"budget {budget:g} IFO/n, {data.dtype}, {jax.devices()[0].platform}")
    results = {}
    methods = _methods(reg, q) if methods is None else methods
    for name, (opt, spb) in methods.items():
        epochs, steps = _schedule(spb, n, budget, q, batch_size)
        start = time.perf_counter()
        res = rproxjax.fit(opt, problems.spca_loss, x0, data, key=jax.random.key(seed + 1),
                           batch_size=batch_size, num_epochs=epochs,
                           sampling=rproxjax.Sampling(steps_per_epoch=steps))
        results[name] = _summary(res, data_np, total_var, time.perf_counter() - start)
    _print_table(results, d * r)
    if plot:
        _plot(results, pathlib.Path(out_dir), mu, r)
    return results


def _plot(results, out_dir, mu, r):
    try:  # Figure objects draw without pyplot: matplotlib's global backend is left alone
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed: no figures (pip install -e '.[demo]').")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for name, s in results.items():
        ax.plot(s["curve_ifo"], s["curve_loss"], marker="o", label=name)
    ax.set_xlabel("IFO / n")
    ax.set_ylabel("loss  E||z - X X^T z||^2 + mu ||X||_1")
    ax.set_title(f"Online sparse PCA, MNIST, r = {r}, mu = {mu}")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    loss_path = out_dir / "demo_loss.png"
    fig.savefig(loss_path, dpi=120)
    x = results["R-ProxSPB"]["params"]
    fig = Figure(figsize=(1.6 * x.shape[1], 2))
    axes = fig.subplots(1, x.shape[1])
    for j, ax in enumerate(np.atleast_1d(axes)):
        comp = x[:, j].reshape(28, 28)
        lim = np.max(np.abs(comp)) or 1.0
        ax.imshow(comp, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_title(f"{int(np.sum(np.abs(comp) > 1e-3))} nz", fontsize=8)
        ax.axis("off")
    fig.suptitle("R-ProxSPB sparse components (red +, blue -)", fontsize=9)
    fig.tight_layout()
    comp_path = out_dir / "demo_components.png"
    fig.savefig(comp_path, dpi=120)
    print(f"saved {loss_path} and {comp_path}")


def parse_args(argv=None) -> argparse.Namespace:
    """The command's arguments, checked (a usage error exits with argparse's message), with
    ``--quick``'s defaults where ``--n`` and ``--q`` are not given."""
    parser = argparse.ArgumentParser(prog="python -m rproxjax", description=__doc__)
    parser.add_argument("--n", type=int,
                        help="MNIST digits, a seeded subset (default 20,000; 70000 for all)")
    parser.add_argument("--r", type=int, default=10)
    parser.add_argument("--mu", type=float, default=0.2)
    parser.add_argument("--budget", type=float, default=4.0, help="IFO budget, in units of n")
    parser.add_argument("--q", type=int, help="R-ProxSPB's q = |S2| (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the subset, start and "
                        "sampling (an int >= 0)")
    parser.add_argument("--out", default=".", help="folder for the figures")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--no-cache", action="store_true",
                        help="do not use the persistent compilation cache, which "
                             "`python -m rproxjax` keeps in ~/.cache/rproxjax/xla")
    parser.add_argument("--quick", action="store_true",
                        help="a short run, as CI runs it: 5,000 digits and q = 20 unless --n "
                             "or --q say otherwise")
    args = parser.parse_args(argv)
    # --quick sets the defaults, never what was given (which it used to override silently).
    quick = {"n": 5000, "q": 20} if args.quick else {"n": 20000, "q": 100}
    args.n = quick["n"] if args.n is None else args.n
    args.q = quick["q"] if args.q is None else args.q
    try:
        _check_run(args.n, args.r, args.mu, args.budget, args.q, 100)
        if args.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {args.seed}.")
        if args.n > _MNIST_IMAGES:
            raise ValueError(f"n must be at most the {_MNIST_IMAGES} MNIST images shipped, "
                             f"got {args.n}.")
    except ValueError as err:  # a usage error, not a traceback
        parser.error(str(err))
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    run(n=args.n, r=args.r, mu=args.mu, budget=args.budget, q=args.q, seed=args.seed,
        out_dir=args.out, plot=not args.no_plot)


if __name__ == "__main__":
    main()
