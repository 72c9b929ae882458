"""The captured subproblems: a fixture of the subproblem solver's tests and benchmarks.

``experiments/data/subproblems_mnist.npz`` holds 64 tangent-space proximal subproblems that
R-ProxSGD and R-ProxSPB were about to solve in runs of online sparse PCA on MNIST
(``benchmarks/capture_subproblems.py`` made it; ``data/README.md`` gives its provenance). It
lives in the repository, not in the wheel: run from the repository root (the tests and
benchmarks do)::

    from experiments.subproblems import load_subproblems
    insts = load_subproblems(10)     # 32 dicts of NumPy arrays, float64
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DATA_DIR", "SUBPROBLEMS_FILE", "load_subproblems"]

#: The folder of the captured subproblems, beside this module.
DATA_DIR = Path(__file__).resolve().parent / "data"
SUBPROBLEMS_FILE = "subproblems_mnist.npz"


def _orthonormalize(x: np.ndarray) -> np.ndarray:
    """The polar factor X (X^T X)^{-1/2}, in float64 (a new array)."""
    x = x.astype(np.float64)
    w, v = np.linalg.eigh(x.T @ x)
    return x @ ((v / np.sqrt(w)) @ v.T)


def _read(data_dir) -> tuple[Path, dict[str, np.ndarray]]:
    folder = DATA_DIR if data_dir is None else Path(data_dir).expanduser()
    path = folder / SUBPROBLEMS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"captured subproblems {SUBPROBLEMS_FILE!r} not found in {folder}"
            f"{'' if folder.is_dir() else ' (that folder does not exist)'}. They live in the "
            f"repository ({DATA_DIR}); benchmarks/capture_subproblems.py remakes them.")
    with np.load(path, allow_pickle=False) as f:
        return path, {name: f[name] for name in f.files}


def load_subproblems(r: int, dtype: npt.DTypeLike = np.float64, *,
                     data_dir: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The captured tangent-space proximal subproblems of rank ``r``, as NumPy arrays.

    ``subproblems_mnist.npz`` holds 32 instances for each r in {10, 15}: the subproblems
    R-ProxSGD and R-ProxSPB were about to solve at iterations 60, 140, 220 and 299 of
    300-iteration runs of online sparse PCA on 20,000 MNIST digits, for mu in {0.05, 0.2,
    0.4, 0.8} and t = 0.1. Solve one with :func:`rproxjax.tangent_prox`, e.g.
    ``tangent_prox(inst["x"], inst["g"], inst["t"], rproxjax.l1(inst["mu"]),
    lam=inst["lam0"])`` (with ``jax_enable_x64`` for float64).

    Each instance is a dict with

    * ``x``: the point X (784 x r). Stored in float32, it is re-orthonormalized here by its
      polar factor X (X^T X)^{-1/2} (eigh in float64, then cast to ``dtype``), since the
      float32 rounding leaves ||X^T X - I|| ~ 1e-7;
    * ``g``: the gradient estimate G (784 x r; stored rounded to float32), cast to ``dtype``;
    * ``t``, ``mu``: the proximal step and the l1 weight (Python floats);
    * ``lam_prev``: the multiplier the optimizer warm-started from (r x r);
    * ``lam_h_prev``: lam_prev - sym(X_prev^T G_prev) / 2 for the previous step's X_prev and
      G_prev (r x r);
    * ``lam_s``: sym(X^T S_prev) / 2 with S_prev the previous solution's subgradient of h
      (r x r): the optimizers' warm start is Lambda_0 = sym(X^T G) / 2 + lam_s
      (``tangent_prox(..., lam=sym(X^T G) / 2 + lam_s)`` solves what
      ``tangent_prox(..., subgradient=S_prev)`` does);
    * ``lam0``: that warm start, sym(X^T G) / 2 + lam_s (r x r, formed from the arrays above);
    * ``method``: ``"R-ProxSGD"`` or ``"R-ProxSPB"``; ``step``: the iteration (int);
      ``eta``: the step eta_t the optimizer used at that iteration (float).

    Arrays are of ``dtype`` and new (safe to modify); the file is read at each call.

    Args:
        r: the rank, 10 or 15.
        dtype: a floating NumPy dtype for the arrays.
        data_dir: folder holding ``subproblems_mnist.npz``; default :data:`DATA_DIR`.

    Returns:
        A list of 32 dicts, ordered by mu, then method, then iteration.

    Raises:
        FileNotFoundError: the file is not in the folder.
        ValueError: the file holds no instances of rank ``r``, or ``r`` or ``dtype`` is
            invalid.

    Example:
        >>> import numpy as np
        >>> from experiments.subproblems import load_subproblems
        >>> insts = load_subproblems(10)
        >>> len(insts), insts[0]["x"].shape, insts[0]["x"].dtype
        (32, (784, 10), dtype('float64'))
        >>> x = insts[0]["x"]
        >>> bool(np.allclose(x.T @ x, np.eye(10), atol=1e-12))
        True
        >>> sorted({inst["mu"] for inst in insts}), insts[0]["method"]
        ([0.05, 0.2, 0.4, 0.8], 'R-ProxSGD')
    """
    if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
        raise ValueError(f"r must be an int >= 1, got {r!r}")
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"dtype must be a floating dtype, got {dtype!r}") from err
    if not np.issubdtype(dt, np.floating):
        raise ValueError(f"dtype must be a floating dtype (e.g. np.float32), got {dt}")
    path, a = _read(data_dir)
    if f"x_r{r}" not in a:
        ranks = sorted(int(k[3:]) for k in a if k.startswith("x_r"))
        raise ValueError(f"no instances of rank {r} in {path}; ranks: {ranks}")
    methods = [str(m) for m in a["methods"]]
    out = []
    for i in range(a[f"x_r{r}"].shape[0]):
        inst = {
            "x": _orthonormalize(a[f"x_r{r}"][i]).astype(dt),
            "g": a[f"g_r{r}"][i].astype(dt),
            "t": float(a[f"t_r{r}"][i]),
            "mu": float(a[f"mu_r{r}"][i]),
            "lam_prev": a[f"lam_r{r}"][i].astype(dt),
            "lam_h_prev": a[f"lamh_r{r}"][i].astype(dt),
            "lam_s": a[f"lams_r{r}"][i].astype(dt),
            "method": methods[int(a[f"method_r{r}"][i])],
            "step": int(a[f"step_r{r}"][i]),
            "eta": float(a[f"eta_r{r}"][i]),
        }
        xtg = inst["x"].T @ inst["g"]
        inst["lam0"] = 0.25 * (xtg + xtg.T) + inst["lam_s"]
        out.append(inst)
    return out
