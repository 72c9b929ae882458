"""Benchmark: the error of an inexact subproblem solve against the minibatch noise in zeta.

Run from the repository root (about 20 seconds on a 2-core CPU)::

    python benchmarks/inexact_noise.py [--no-save]

Question: R-ProxSGD's step zeta_t solves the tangent-space subproblem for one minibatch
gradient G_b. How large is the error of a solve stopped at ``||E|| <= tol + rtol ||zeta||``
(``rtol`` of the optimizers' ``SSN``) next to the error that the minibatch itself puts into
zeta? A solve error well below that noise cannot matter to the run; ``inexact.py``
measures the loss curves themselves.

Instances: MNIST (``rproxjax.datasets.load_mnist(20000, seed=0)``, d = 784), r = 10, float64,
per-sample loss ``rproxjax.problems.spca_loss``, ``r_prox_sgd(inverse_sqrt_schedule(1.0), 0.1,
l1(mu))`` with the library's defaults (as ``step_cost.py``), driven for STEPS updates by a
Python loop from ``stiefel.random_point(key(0), 784, 10)`` with minibatches of b = 100 drawn
by ``numpy.random.default_rng(0)``. Every CAPTURE_EVERY-th update from FIRST_CAPTURE on, the
subproblem it is about to solve is kept: X_t, G_b and the subgradient of h that the optimizer
warm-starts from (its state's ``SubproblemInfo.subgradient``).

Per instance (all solves warm-started as the optimizer does, ``subgradient=``, by the
optimizers' Newton rule, ``method="adaptive"``):

* zeta*: the solve to tol = 1e-12 (200 steps at most; the script stops if one fails);
* minibatch noise: ``||zeta*(G_b') - zeta*(G_b)|| / (sqrt(2) ||zeta*||)`` with G_b' the
  gradient of an independent minibatch at the same X (the standard deviation of zeta over
  minibatches, relative), and ``||zeta*(G_b) - zeta*(G_n)|| / ||zeta*||`` with G_n the full
  gradient over the n samples;
* for each rtol: the relative solve error ``||zeta_rtol - zeta*|| / ||zeta*||`` (default tol)
  and its Newton steps.

Reported per mu and rtol: the medians of the noise, the solve error (median / p90 / max),
the median of the per-instance ratio error / noise, and the mean Newton steps.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import rproxjax  # noqa: E402
from rproxjax import stiefel  # noqa: E402
from rproxjax.problems import spca_loss  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
except ImportError:  # run as `python -m benchmarks.inexact_noise`
    from benchmarks import _timing

N, D, R, B = 20_000, 784, 10, 100
GAMMA, ETA0 = 0.1, 1.0
MUS = (0.05, 0.2, 0.4, 0.8)
RTOLS = (0.01, 0.03, 0.1, 0.2, 0.3)
STEPS, FIRST_CAPTURE, CAPTURE_EVERY = 400, 100, 20
EXACT_TOL = 1e-12


def batch_loss(x, batch):
    return jnp.mean(jax.vmap(spca_loss, in_axes=(None, 0))(x, batch))


batch_grad = jax.jit(jax.grad(batch_loss))


def capture(mu, data):
    """The subproblems (X, G_b, warm-start subgradient) of one R-ProxSGD run."""
    opt = rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(ETA0), GAMMA, rproxjax.l1(mu))

    @jax.jit
    def step(x, state, batch):
        g = batch_grad(x, batch)
        updates, state = opt.update(g, state, x)
        return optax.apply_updates(x, updates), state, g

    x = stiefel.random_point(jax.random.key(0), D, R, jnp.float64)
    state = opt.init(x)
    rng = np.random.default_rng(0)
    subs = []
    for k in range(STEPS):
        sub = rproxjax.step_info(state).ssn.subgradient  # what this update warm-starts from
        x_new, state, g = step(x, state, data[rng.choice(N, B, replace=False)])
        if k >= FIRST_CAPTURE and (k - FIRST_CAPTURE) % CAPTURE_EVERY == 0:
            subs.append((x, g, sub))
        x = x_new
    return subs


def solve(x, g, mu, sub, **fields):
    """The subproblem by the optimizers' Newton rule, with other settings ``fields``."""
    return rproxjax.tangent_prox(x, g, GAMMA, rproxjax.l1(mu), subgradient=sub,
                                 ssn=rproxjax.SSN(method="adaptive", **fields))


def exact(x, g, mu, sub):
    zeta, info = solve(x, g, mu, sub, tol=EXACT_TOL, max_steps=200)
    if not bool(info.converged):
        raise RuntimeError(f"the reference solve did not converge: {rproxjax.describe(info)}")
    return zeta


def measure(mu, subs, data, rng):
    rel = lambda a, b: float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))  # noqa: E731
    noise, full, errors = [], [], {rtol: ([], []) for rtol in RTOLS}
    for x, g, sub in subs:
        ref = exact(x, g, mu, sub)
        other = exact(x, batch_grad(x, data[rng.choice(N, B, replace=False)]), mu, sub)
        noise.append(rel(other, ref) / np.sqrt(2.0))
        full.append(rel(exact(x, batch_grad(x, data), mu, sub), ref))
        for rtol, (err, steps) in errors.items():
            zeta, info = solve(x, g, mu, sub, rtol=rtol)
            err.append(rel(zeta, ref))
            steps.append(int(info.num_steps))
    return np.array(noise), np.array(full), {k: (np.array(e), np.array(s))
                                             for k, (e, s) in errors.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    data = jnp.asarray(rproxjax.datasets.load_mnist(N, seed=0, dtype=np.float64))
    rows, results = [], {}
    for mu in MUS:
        subs = capture(mu, data)
        noise, full, errors = measure(mu, subs, data, np.random.default_rng(1))
        results[f"mu={mu}"] = {"noise": noise.tolist(), "vs_full": full.tolist(),
                               "rtol": {str(k): {"error": e.tolist(), "steps": s.tolist()}
                                        for k, (e, s) in errors.items()}}
        for rtol, (err, steps) in errors.items():
            rows.append((mu, f"{np.median(noise):.3f}", f"{np.median(full):.3f}", rtol,
                         f"{np.median(err):.1e} / {np.quantile(err, 0.9):.1e} / "
                         f"{err.max():.1e}", f"{np.median(err / noise):.3f}",
                         f"{steps.mean():.2f}"))
            print(rows[-1], flush=True)
    title = (f"## Solve error against minibatch noise in zeta: R-ProxSGD on MNIST, n = {N}, "
             f"d = {D}, r = {R}, b = {B}, gamma = {GAMMA}, eta0 = {ETA0}, float64; "
             f"{len(subs)} subproblems per mu (updates {FIRST_CAPTURE}, "
             f"{FIRST_CAPTURE + CAPTURE_EVERY}, ... of {STEPS})")
    print(f"\n{title}\n")
    table = _timing.print_table(
        ["mu", "noise (median)", "vs full gradient (median)", "rtol",
         "solve error median / p90 / max", "error / noise (median)", "Newton steps mean"],
        rows)
    note = ("noise = ||zeta*(G_b') - zeta*(G_b)|| / (sqrt(2) ||zeta*||) for an independent "
            "minibatch b' at the same X; vs full gradient = ||zeta*(G_b) - zeta*(G_n)|| / "
            "||zeta*||; solve error = ||zeta_rtol - zeta*|| / ||zeta*|| with zeta* solved to "
            f"tol {EXACT_TOL:g}. All solves warm-started from the optimizer's subgradient.")
    print(note)
    elapsed = time.perf_counter() - start
    print(f"Total {elapsed:.0f} s.")
    if not args.no_save:
        paths = _timing.save_results("inexact_noise", {"results": results, "elapsed_s": elapsed},
                                     "\n".join([title, "", table, "", note]), machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
