"""Benchmark: ``rproxjax.robust_matrix_completion`` at its defaults against tensorly's robust
PCA and a nonconvex NumPy reference, on planted problems and the shipped video.

Run from the repository root, with the ``experiments`` extra installed (tensorly; float64;
about 20 minutes on 2 CPU cores, most of it tensorly on the largest family; ``--quick``:
the small families, a few minutes)::

    python benchmarks/rmc_peers.py [--quick] [--no-save] [--only NAME ...]

Protocol:

* Planted families (:data:`FAMILIES`): L = A B of rank r (Gaussian factors, or uniform
  [0, 1] ones divided by r: "nonneg"), outliers on a fraction of the entries of size
  ``size`` times the median |L_ij| (times a uniform factor in [0.5, 1.5], random signs;
  positive for "nonneg"), an observed fraction drawn uniformly; seed 0; "zero-rows": 80% of
  L's rows set to 0 (a coherent L, most entries 0; the outliers' size then counts the median
  of the other entries). The error is ||L_hat - L||_F / ||L||_F over all entries.
* Digits: 1,500 raw MNIST images (pixels x images, 784 x 1500, pixels in [0, 1], 81% exactly
  0), 5% of the entries moved by +-1, 70% observed, rank 10, seed 0: the error is against
  the clean images' rank-10 truncation (the data are not exactly low-rank).
* Video: the shipped video's experiment ("rmc-video", paper size, seed 0: 50% observed, 10%
  outliers): the error is the experiment's background error ||L_hat - b 1^T|| / ||b 1^T||
  (b the clean frames' temporal median); the experiment's tuned runs are in
  ``results/rmc-video.json``.
* rproxjax: ``robust_matrix_completion(M, mask, r)`` with every default (the first call,
  which compiles, and a second call, compiled).
* tensorly: ``robust_pca(M0, mask=mask, reg_E=1/sqrt(max(m, n)), n_iter_max=500)`` (its
  inexact ALM of the convex model; M0 zero-filled); one call.
* altproj: :func:`altproj`, a NumPy reference of the nonconvex field with the rank known:
  alternating projections (rank-r SVD of the observed entries with the unobserved ones
  imputed from the last L; hard thresholding of the residual at 3 robust sigmas of the
  inliers, falling geometrically), 100 iterations.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the repository root, for the lab's video experiment (experiments/, not in the wheel)
sys.path.append(str(Path(__file__).resolve().parents[1]))
jax.config.update("jax_enable_x64", True)

import _timing  # noqa: E402

import rproxjax  # noqa: E402

#: name: (m, n, rank, outlier fraction, outlier size, observed fraction, nonneg, fraction of
#: L's rows that are zero)
FAMILIES = {
    "issue-a": (200, 150, 3, 0.05, 10, 0.7, False, 0.0),
    "issue-b": (400, 300, 5, 0.10, 5, 0.5, False, 0.0),
    "issue-c": (600, 200, 2, 0.05, 3, 0.8, True, 0.0),
    "issue-d": (1500, 400, 8, 0.05, 20, 0.6, False, 0.0),
    "clean-full": (500, 400, 1, 0.0, 1, 1.0, False, 0.0),
    "tiny-outliers": (800, 600, 10, 0.20, 1, 0.3, True, 0.0),
    "r1-sparse-seen": (1000, 300, 1, 0.10, 10, 0.3, False, 0.0),
    "big-20pct-x50": (3000, 1000, 10, 0.20, 50, 0.3, False, 0.0),
    "zero-rows": (400, 300, 3, 0.05, 10, 0.6, False, 0.8),
}
QUICK = ("issue-a", "issue-b", "issue-c", "clean-full")


def planted(m, n, r, frac, size, seen, nonneg, zero_rows=0.0, seed=0):
    """(M, mask, L) of one planted family."""
    rng = np.random.default_rng(seed)
    if nonneg:
        low = rng.random((m, r)) @ rng.random((r, n)) / r
    else:
        low = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    if zero_rows:
        low[rng.random(m) < zero_rows] = 0.0
    med = np.median(np.abs(low[low != 0]))
    out = (rng.random((m, n)) < frac) * size * med * (0.5 + rng.random((m, n)))
    out = out if nonneg else out * rng.choice([-1.0, 1.0], (m, n))
    mask = rng.random((m, n)) < seen
    return low + out, mask, low


def altproj(M, mask, r, iters=100):
    """Alternating projections for robust matrix completion, the rank known (NumPy)."""
    obs = mask.astype(float)
    low = np.zeros_like(M)
    sparse = np.zeros_like(M)
    zeta = None
    for _ in range(iters):
        filled = np.where(mask, M - sparse, low)
        u, s, vt = np.linalg.svd(filled, full_matrices=False)
        low = (u[:, :r] * s[:r]) @ vt[:r]
        resid = (M - low) * obs
        scale = 1.4826 * np.median(np.abs(resid[mask]))
        zeta = 3 * scale if zeta is None else max(3 * scale, 0.7 * zeta)
        sparse = np.where(np.abs(resid) > zeta, resid, 0.0)
    return low


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_planted(name, args):
    m, n, r, frac, size, seen, nonneg, zero_rows = FAMILIES[name]
    M, mask, low = planted(m, n, r, frac, size, seen, nonneg, zero_rows)
    row = {"family": name, "shape": f"{m} x {n}", "rank": r, "outliers": frac, "size": size,
           "observed": seen, "nonneg": nonneg}
    return compare(row, M, mask, r, lambda est: relative_error(est, low), args)


def relative_error(est, low):
    return float(np.linalg.norm(np.asarray(est) - low) / np.linalg.norm(low))


def compare(row, M, mask, r, err, args):
    """``row`` with rproxjax's defaults (a first call, then a compiled one), altproj and
    tensorly on (M, mask) at rank r: their errors by ``err`` and their times."""
    jax.clear_caches()
    res, row["rproxjax_first_s"] = timed(lambda: rproxjax.robust_matrix_completion(
        M, mask, r, throw=False))
    res, row["rproxjax_s"] = timed(lambda: rproxjax.robust_matrix_completion(
        M, mask, r, throw=False))
    row.update(rproxjax=err(res.low_rank), converged=bool(getattr(res, "converged", False)),
               steps=getattr(res, "steps", "-"))
    if not args.no_peers:
        low_ap, row["altproj_s"] = timed(lambda: altproj(M, mask, r))
        row["altproj"] = err(low_ap)
    if not args.no_tensorly:
        from tensorly.decomposition import robust_pca
        (d, _), row["tensorly_s"] = timed(lambda: robust_pca(
            np.where(mask, M, 0.0), mask=mask.astype(float), reg_E=1 / np.sqrt(max(M.shape)),
            n_iter_max=500, verbose=False))
        row["tensorly"] = err(d)
    return row


def run_digits(args):
    images = rproxjax.datasets.load_mnist(1500, seed=0, center=False, dtype=np.float64).T
    rng = np.random.default_rng(0)
    u, s, vt = np.linalg.svd(images, full_matrices=False)
    clean = u[:, :10] * s[:10] @ vt[:10]
    noisy = images + (rng.random(images.shape) < 0.05) * rng.choice([-1.0, 1.0], images.shape)
    mask = rng.random(images.shape) < 0.7
    M = np.where(mask, noisy, 0.0)
    row = {"family": "digits", "shape": f"{M.shape[0]} x {M.shape[1]}", "rank": 10,
           "outliers": 0.05, "size": "1", "observed": 0.7, "nonneg": False}
    return compare(row, M, mask, 10, lambda est: relative_error(est, clean), args)


def run_video(args):
    from experiments import _rmc, get_config
    cfg = get_config("rmc-video", "paper")
    prob, _, _, median, _, mask, observed, _ = _rmc.video_problem(cfg, 0)
    row = {"family": "video", "shape": f"{observed.shape[0]} x {observed.shape[1]}",
           "rank": cfg.rank, "outliers": cfg.outliers, "size": "0.5-1", "observed":
           cfg.observed, "nonneg": True}
    M = np.where(mask, observed, 0.0)
    return compare(row, M, mask, cfg.rank, lambda est: _rmc.relative_error(est, median), args)


def fmt(x, digits=3):
    return "-" if x is None else (f"{x:.{digits}g}" if isinstance(x, float) else str(x))


def commit() -> str:
    """The repository's commit (with "+changes" when the tree differs from it)."""
    import subprocess
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "rproxjax", "benchmarks"],
                               cwd=root, text=True, capture_output=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--no-tensorly", action="store_true")
    parser.add_argument("--no-peers", action="store_true",
                        help="rproxjax alone (for a table of another commit's defaults)")
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    args.no_tensorly |= args.no_peers
    names = args.only or (QUICK if args.quick else [*FAMILIES, "video", "digits"])
    runners = {"video": run_video, "digits": run_digits}
    rows = []
    for name in names:
        row = runners[name](args) if name in runners else run_planted(name, args)
        print(row, flush=True)
        rows.append(row)
    headers = ["family", "shape", "r", "outliers", "observed", "rproxjax", "altproj",
               "tensorly", "rproxjax s", "first call s", "altproj s", "tensorly s",
               "rproxjax / tensorly time", "steps"]
    table = []
    for row in rows:
        t_tl = row.get("tensorly_s")
        table.append([
            row["family"], row["shape"], row["rank"],
            f"{row['outliers']:.0%} x {row['size']}", f"{row['observed']:.0%}",
            fmt(row["rproxjax"]), fmt(row.get("altproj")), fmt(row.get("tensorly")),
            fmt(row["rproxjax_s"]), fmt(row["rproxjax_first_s"]), fmt(row.get("altproj_s")),
            fmt(t_tl), fmt(row["rproxjax_s"] / t_tl if t_tl else None, 2),
            f"{row['steps']}{'' if row['converged'] else ' (not converged)'}"])
    markdown = ("# robust_matrix_completion at its defaults against its peers\n\n"
                "Relative error of L (video: the background error) and wall time, float64, "
                f"seed 0, at commit {commit()} (`benchmarks/rmc_peers.py`; protocol in its "
                "docstring).\n\n"
                + _timing.markdown_table(headers, table) + "\n")
    print(markdown)
    if not args.no_save:
        _timing.save_results("rmc_peers", {"rows": rows, "commit": commit()}, markdown)


if __name__ == "__main__":
    main()
