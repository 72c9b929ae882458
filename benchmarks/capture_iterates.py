"""Captures iterates to check that a refactor leaves every result bit-identical.

``python benchmarks/capture_iterates.py OUT.npz`` runs, in float64 and float32:

* the subproblem kernel's rules (secant with and without path steps, adaptive, reference;
  dense and CG systems) on captured MNIST subproblems, tight and loose;
* a ``jax.vmap`` sweep of R-ProxSGD over 4 values of mu;
* 30 steps of ``fit`` with every named optimizer on a small sparse PCA problem;
* ``sparse_pca`` (one mu and a ``nonzeros=`` target) and ``robust_matrix_completion``
  (the default method and R-ProxSPB);

and saves every array. ``--compare OLD.npz`` then reports the arrays that differ in any bit
(and exits 1 when one does). Run it on the old checkout, then on the new one. The kernel's
settings are built through ``rproxjax.SSN``'s flat keywords where both versions accept them,
and ``fit`` records the loss through ``recording=rproxjax.Recording(loss=True)``, or on a
checkout without the option groups, its former ``record_loss=True``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import rproxjax as rp  # noqa: E402

RULES = {
    "secant": dict(method="secant"),
    "secant_nopath": dict(method="secant", path_steps=False),
    "adaptive": dict(method="adaptive"),
    "reference": dict(method="reference"),
    "secant_cg": dict(method="secant", linear_solver="cg"),
}


def _ssn(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return rp.SSN(**kw)


def _fit_recording_loss(*args, **kw):
    """``rp.fit(*args, **kw)`` recording the loss: grouped where this checkout has
    ``rp.Recording``, else (an older checkout) by the former flat keyword."""
    if hasattr(rp, "Recording"):
        try:
            return rp.fit(*args, recording=rp.Recording(loss=True), **kw)
        except TypeError as err:
            if "recording" not in str(err):
                raise
    return rp.fit(*args, record_loss=True, **kw)


def _leaves(prefix, tree, out):
    for i, leaf in enumerate(jax.tree_util.tree_leaves(tree)):
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        if hasattr(leaf, "dtype") or isinstance(leaf, (int, float)):
            out[f"{prefix}/{i}"] = np.asarray(leaf)


def _load_subproblems(r, dtype):
    """The captured subproblems: from the lab (``experiments.subproblems``, run from the
    repository root) or, in older checkouts, ``rproxjax.datasets``."""
    if hasattr(rp.datasets, "load_subproblems"):
        return rp.datasets.load_subproblems(r, dtype)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from experiments.subproblems import load_subproblems
    return load_subproblems(r, dtype)


def kernel(out):
    for dtype in (np.float64, np.float32):
        insts = _load_subproblems(10, dtype)[::4]
        for name, kw in RULES.items():
            for rtol in (0.0, 0.1):
                ssn = _ssn(rtol=rtol, **kw)
                for i, inst in enumerate(insts):
                    res = rp.tangent_prox(inst["x"], inst["g"], inst["t"], rp.l1(inst["mu"]),
                                          lam=inst["lam0"], ssn=ssn)
                    _leaves(f"kernel/{np.dtype(dtype).name}/{name}/{rtol}/{i}", res, out)


def _problem(dtype, n=400, d=60, r=4, seed=0):
    a = np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)
    x0 = np.linalg.qr(np.random.default_rng(seed + 1).standard_normal((d, r)))[0].astype(dtype)

    def loss(x, s):
        return -0.5 * jnp.sum((s @ x) ** 2)
    return jnp.asarray(a), jnp.asarray(x0), loss


def optimizers(out):
    for dtype in (np.float64, np.float32):
        a, x0, loss = _problem(dtype)
        reg = rp.l1(0.1)
        named = {
            "r_subgrad": rp.r_subgrad(0.01, reg),
            "r_prox_sgd": rp.r_prox_sgd(0.5, 0.02, reg),
            "r_prox_sgd_adaptive": rp.r_prox_sgd(0.5, 0.02, reg,
                                                 ssn=_ssn(method="adaptive", rtol=0.1)),
            "r_prox_spb": rp.r_prox_spb(0.5, 0.02, reg, q=5),
            "r_prox_svrg": rp.r_prox_svrg(0.5, 0.02, reg, m=5),
            "r_prox_sarah": rp.r_prox_sarah(0.02, 0.5, reg, q=5),
            "r_spider_boost": rp.r_spider_boost(0.5, 0.02, q=5),
            "manpg": rp.manpg(0.02, reg, tol=1e-8),
        }
        for name, opt in named.items():
            b = None if name == "manpg" else 40
            res = _fit_recording_loss(opt, loss, x0, a, key=jax.random.key(0), batch_size=b,
                                      num_steps=30)
            _leaves(f"fit/{np.dtype(dtype).name}/{name}", (res.params, res.history), out)


def sweep(out):
    for dtype in (np.float64, np.float32):
        a, x0, loss = _problem(dtype, seed=3)
        mus = jnp.asarray([0.05, 0.1, 0.2, 0.4], dtype)

        def run(mu, a=a, x0=x0, loss=loss):
            return rp.pure_fit(rp.r_prox_sgd(0.5, 0.02, rp.l1(mu)), loss, x0, a,
                               key=jax.random.key(1), batch_size=40, num_steps=20).params
        out[f"sweep/{np.dtype(dtype).name}"] = np.asarray(jax.jit(jax.vmap(run))(mus))


def tasks(out):
    for dtype in (np.float64, np.float32):
        a = np.asarray(rp.datasets.load_mnist(n=2000), dtype)
        t = np.dtype(dtype).name
        res = rp.sparse_pca(a, 5, mu=0.3, passes=3, seed=0)
        _leaves(f"spca/{t}/mu", res, out)
        res = rp.sparse_pca(a, 5, nonzeros=400, passes=3, seed=0)
        _leaves(f"spca/{t}/nonzeros", res, out)
        rng = np.random.default_rng(0)
        m = (rng.standard_normal((60, 3)) @ rng.standard_normal((3, 50))).astype(dtype)
        mask = rng.random(m.shape) < 0.6
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = rp.robust_matrix_completion(m, mask, 3, seed=0, throw=False)
            _leaves(f"rmc/{t}/alternating", res, out)
            res = rp.robust_matrix_completion(m, mask, 3, seed=0, method="r_prox_spb",
                                              passes=2, throw=False)
            _leaves(f"rmc/{t}/r_prox_spb", res, out)


def compare(new, old_path) -> int:
    old = dict(np.load(old_path))
    bad = [k for k in sorted(set(old) | set(new))
           if k not in old or k not in new or old[k].shape != new[k].shape
           or old[k].tobytes() != new[k].tobytes()]
    print(f"{len(new)} arrays, {len(old)} before; {len(bad)} differ")
    for k in bad[:40]:
        print("  ", k)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="where to save the arrays (.npz)")
    p.add_argument("--compare", help="a capture to compare with")
    p.add_argument("--parts", nargs="*", default=["kernel", "optimizers", "sweep", "tasks"])
    args = p.parse_args(argv)
    out: dict[str, np.ndarray] = {}
    for part in args.parts:
        globals()[part](out)
        print(part, "done", len(out), flush=True)
    np.savez_compressed(args.out, **out)
    return compare(out, args.compare) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
