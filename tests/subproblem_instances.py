"""Real tangent-space proximal subproblems captured on MNIST (``data/subproblems_mnist.npz``).

The file holds 32 instances per rank r in {10, 15}: the subproblems R-ProxSGD and R-ProxSPB
solved at iterations 60, 140, 220 and 299 of 300-iteration runs of online sparse PCA on 20,000
MNIST digits, for mu in {0.05, 0.2, 0.4, 0.8}, t = 0.1 (see ``data/README.md`` and
``benchmarks/capture_subproblems.py``, which made it). Used by the tests and, through
``benchmarks/_instances.py``, by the benchmarks::

    from tests.subproblem_instances import load_instances
    for inst in load_instances(10, np.float64):
        zeta, info = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"],
                                           rproxjax.l1(inst["mu"]), lam=inst["lam_prev"])
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

PATH = Path(__file__).resolve().parents[1] / "data" / "subproblems_mnist.npz"


@functools.cache
def _arrays() -> dict:
    with np.load(PATH, allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def _orthonormalize(x: np.ndarray) -> np.ndarray:
    """The polar factor X (X^T X)^{-1/2}, in float64."""
    x = x.astype(np.float64)
    w, v = np.linalg.eigh(x.T @ x)
    return x @ ((v / np.sqrt(w)) @ v.T)


def load_instances(r: int, dtype=np.float64) -> list[dict]:
    """The captured subproblems of rank ``r`` (10 or 15), as NumPy arrays of ``dtype``.

    Each instance is a dict with

    * ``x``: the point X (784 x r). Stored in float32, it is re-orthonormalized here by its
      polar factor X (X^T X)^{-1/2} (eigh in float64, then cast to ``dtype``), since the
      float32 rounding leaves ||X^T X - I|| ~ 1e-7;
    * ``g``: the gradient estimate G (784 x r; stored rounded to float32), cast to ``dtype``;
    * ``t``, ``mu``: the proximal step and the l1 weight (Python floats);
    * ``lam_prev``: the multiplier the optimizer warm-started from (r x r, ``dtype``);
    * ``lam_h_prev``: lam_prev - sym(X_prev^T G_prev) / 2 for the previous step's X_prev,
      G_prev (r x r, ``dtype``);
    * ``lam_s``: sym(X^T S_prev) / 2 with S_prev the previous solution's subgradient of h
      (r x r, ``dtype``): the optimizers' warm start is Lambda_0 = sym(X^T G) / 2 + lam_s
      (``tangent_prox(..., lam=sym(X^T G) / 2 + lam_s)`` solves what
      ``tangent_prox(..., subgradient=S_prev)`` does);
    * ``lam0``: that warm start, sym(X^T G) / 2 + lam_s (r x r, ``dtype``, formed from the
      arrays above);
    * ``method``: ``"R-ProxSGD"`` or ``"R-ProxSPB"``; ``step``: the iteration (int);
      ``eta``: the step eta_t the optimizer used at that iteration (float).

    The arrays are fresh copies (safe to modify); the file is read once per process.
    """
    a = _arrays()
    if f"x_r{r}" not in a:
        ranks = sorted(int(k[3:]) for k in a if k.startswith("x_r"))
        raise ValueError(f"no instances of rank {r} in {PATH.name}; ranks: {ranks}.")
    dtype = np.dtype(dtype)
    methods = [str(m) for m in a["methods"]]
    out = []
    for i in range(a[f"x_r{r}"].shape[0]):
        out.append({
            "x": _orthonormalize(a[f"x_r{r}"][i]).astype(dtype),
            "g": a[f"g_r{r}"][i].astype(dtype),
            "t": float(a[f"t_r{r}"][i]),
            "mu": float(a[f"mu_r{r}"][i]),
            "lam_prev": a[f"lam_r{r}"][i].astype(dtype),
            "lam_h_prev": a[f"lamh_r{r}"][i].astype(dtype),
            "lam_s": a[f"lams_r{r}"][i].astype(dtype),
            "method": methods[int(a[f"method_r{r}"][i])],
            "step": int(a[f"step_r{r}"][i]),
            "eta": float(a[f"eta_r{r}"][i]),
        })
        inst = out[-1]
        xtg = inst["x"].T @ inst["g"]
        inst["lam0"] = 0.25 * (xtg + xtg.T) + inst["lam_s"]
    return out
