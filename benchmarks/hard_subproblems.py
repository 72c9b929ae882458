"""Benchmark: Newton steps on degenerate subproblems at r = 32 (where every rule is slow).

Run from the repository root (about 12 minutes on 2 CPU cores: the solves to tol 1e-8)::

    python benchmarks/hard_subproblems.py [--no-save]

Instances: R-ProxSPB (``r_prox_spb(1.0, 0.1, l1(0.2), q=10, ssn=CAPTURE_SSN)``, float64) on
the synthetic sparse PCA of ``scale.py`` at (d, r, b) = (4096, 32, 500): one block (a refresh
and 9 SARAH steps) with ``pure_fit`` from X0, then the 10 steps of the next block written out (the
refresh on the full data set, then minibatches of a fixed NumPy permutation). Before each
step the point X, the gradient estimate V of that step (read from the state after the
update) and the previous multiplier's regularizer part ``lam_h`` are kept: the subproblem
the step solved. As the solutions get sparser (nonzeros per column of Y = X + zeta: median
106 -> 44, minimum 68 -> 17 < r), the Newton matrix is singular on more coordinates.

The instances are captured with rtol 1e-2 and the first rule of loose solves (``CAPTURE_SSN``:
``loose_rho_scale=1e-4`` with the secant shift and a line search at every step, no Jacobi
steps, the ``"lam_h"`` warm start; pinned, so that the run that produces them does not change
with the rule measured). Each subproblem is solved
by ``rproxjax.tangent_prox`` with each rule ("adaptive", the stochastic optimizers' default,
also with the two former rules of loose solves: regularization 1e-4 with the shift, and 1.0
with it, both with a line search at every step; "secant"; "reference", cold-started) at the
stochastic optimizers' stopping test (``rtol=SSN_RTOL``, 0.1, default tol), at the former one
(``rtol=1e-2``, where the former rules are measured too) and at ``tol=1e-8`` (``rtol=0``), at
most 200 steps; the table gives the steps per instance and
the mean (``!`` = not converged).
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import optax.tree_utils as otu  # noqa: E402

import rproxjax  # noqa: E402
from rproxjax.problems import spca_loss  # noqa: E402

try:  # run as a script: benchmarks/ is on sys.path
    import _timing
    import scale
except ImportError:  # run as `python -m benchmarks.hard_subproblems`
    from benchmarks import _timing, scale

D, R, B = scale.SIZES[1]
Q, GAMMA, MU = 10, 0.1, 0.2
RULES = ("adaptive", "secant", "reference")
#: The former rules of loose solves (fields of rproxjax.SSN): first a regularization of
#: 1e-4 min(||E||, 0.1) with the secant shift, then 1.0 with the shift; always a line
#: search, no Jacobi steps.
FIRST_LOOSE_RULE = {"loose_rho_scale": 1e-4, "loose_secant_shift": True, "unit_accept": 0.0,
                    "jacobi_first": False}
SHIFTED_LOOSE_RULE = {**FIRST_LOOSE_RULE, "loose_rho_scale": 1.0}
#: The optimizer's settings when the instances were chosen: rtol 1e-2 (the stochastic
#: optimizers' default then), the first rule of loose solves and the optimizers' first warm
#: start, the previous multiplier's regularizer part.
CAPTURE_SSN = rproxjax.SSN.stochastic(rtol=1e-2, warm_start="lam_h", **FIRST_LOOSE_RULE)
STOPS = {f"rtol {rproxjax.SSN_RTOL:g} (SSN_RTOL)": (None, rproxjax.SSN_RTOL),
         "rtol 1e-2": (None, 1e-2), "tol 1e-8": (1e-8, 0.0)}


def capture():
    """The 10 subproblems of the second block: [(x, v, lam_h)], captured with the former
    rule of loose solves and the optimizers' former warm start (``CAPTURE_SSN``, pinned, so
    that the instances do not move with the defaults)."""
    data = scale.make_data(D, R, B, jnp.float64)
    x = rproxjax.stiefel.random_point(jax.random.key(0), D, R, jnp.float64)
    opt = rproxjax.r_prox_spb(1.0, GAMMA, rproxjax.l1(MU), q=Q, ssn=CAPTURE_SSN)
    res = rproxjax.pure_fit(opt, spca_loss, x, data, key=jax.random.key(1), batch_size=B,
                            num_epochs=1, steps_per_epoch=Q)
    x, state = res.params, res.opt_state

    def grad(p, batch):
        return jax.grad(lambda q: jnp.mean(jax.vmap(spca_loss, (None, 0))(q, batch)))(p)

    grad = jax.jit(grad)
    refresh = jax.jit(lambda g, s, p: opt.update(g, s, p, refresh=True))
    inner = jax.jit(lambda g, s, p, b: opt.update(g, s, p, refresh=False,
                                                  grad_fn=lambda q: grad(q, b)))
    rng = np.random.default_rng(0)
    subs = []
    for j in range(Q):
        lam_h = rproxjax.step_info(state).ssn.lam_h
        if j == 0:
            updates, new = refresh(grad(x, data), state, x)
        else:
            batch = data[rng.permutation(data.shape[0])[:B]]
            updates, new = inner(grad(x, batch), state, x, batch)
        subs.append((x, otu.tree_get(new, "v"), lam_h))
        x, state = optax.apply_updates(x, updates), new
    return subs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    machine = _timing.machine_info()
    subs = capture()
    rows, results, nnz = [], {}, [None] * len(subs)
    runs = [(stop, rule, None) for stop in STOPS for rule in RULES]
    after = runs.index(("rtol 1e-2", "adaptive", None)) + 1
    runs[after:after] = [("rtol 1e-2", "adaptive", FIRST_LOOSE_RULE),  # the former loose rules
                         ("rtol 1e-2", "adaptive", SHIFTED_LOOSE_RULE)]
    for stop, rule, former in runs:
        tol, rtol = STOPS[stop]
        ssn = rproxjax.SSN(tol=tol, rtol=rtol, method=rule, max_steps=200, **(former or {}))
        steps, conv = [], []
        for i, (x, v, lam_h) in enumerate(subs):
            warm = {} if rule == "reference" else {"lam_h": lam_h}
            zeta, info = rproxjax.tangent_prox(x, v, GAMMA, rproxjax.l1(MU), ssn=ssn, **warm)
            steps.append(int(info.num_steps))
            conv.append(bool(info.converged))
            if rule == "secant" and rtol == 0:  # Y = X + zeta of the tight solve
                nnz[i] = np.sum(np.asarray(x + zeta) != 0, axis=0)
        name = rule if former is None else (
            f"{rule}, former loose rule (rho {former['loose_rho_scale']:g}, with shift, "
            "line search)")
        results[f"{stop} {name}"] = {"steps": steps, "converged": conv}
        rows.append((stop, name, " ".join(f"{s}{'' if c else '!'}"
                                          for s, c in zip(steps, conv, strict=True)),
                     f"{np.mean(steps):.1f}", sum(not c for c in conv)))
        print(rows[-1], flush=True)
    title = (f"## Newton steps on the 10 subproblems of R-ProxSPB's second block, synthetic "
             f"sparse PCA (d, r, b) = ({D}, {R}, {B}), mu = {MU}, t = {GAMMA}, float64")
    print(f"\n{title}\n")
    table = _timing.print_table(["stopping", "rule", "steps per instance", "mean",
                                 "unconverged"], rows)
    note = ("Nonzeros per column of the solution Y = X + zeta (tol 1e-8, secant) at the 10 "
            "steps, min / median (r = 32: a column with fewer than r makes the Newton "
            "matrix singular): "
            + ", ".join(f"{int(n.min())}/{int(np.median(n))}" for n in nnz) + ".")
    print(note)
    if not args.no_save:
        paths = _timing.save_results(
            "hard_subproblems", {"results": results, "nonzeros_min_median":
                                 [[int(n.min()), int(np.median(n))] for n in nnz],
                                 "elapsed_s": time.perf_counter() - start},
            "\n".join([title, "", table, "", note]), machine=machine)
        print("saved", *[str(p) for p in paths])


if __name__ == "__main__":
    main()
