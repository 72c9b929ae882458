"""Background / foreground separation on the shipped street video, in one call.

Half of the pixels of every frame are observed (a random mask); robust matrix completion
splits the observed video into a low-rank background U V (rank 2) and sparse outliers S (the
pedestrians), and fills in the unobserved pixels. The background error is measured against
the per-pixel temporal median of the frames.

    python examples/rmc_video.py                      # 100 frames, about 10 s on 2 cores
    python examples/rmc_video.py --frames 200 --plot rmc.png
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rproxjax import robust_matrix_completion
from rproxjax.datasets import load_video_frames, video_matrix


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames to use (<= 795)")
    parser.add_argument("--method", default="alternating",
                        choices=("alternating", "r_prox_spb", "r_prox_sgd", "r_subgrad"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the mask and the run")
    parser.add_argument("--plot", metavar="PNG", help="save a figure of the middle frame")
    args = parser.parse_args(argv)

    frames = load_video_frames(args.frames)                 # (t, 72, 96), float32 in [0, 1]
    M, shape = video_matrix(frames)                         # pixels x frames
    mask = np.random.default_rng(args.seed).random(M.shape) < 0.5
    start = time.perf_counter()
    res = robust_matrix_completion(M, mask, rank=2, method=args.method, seed=args.seed,
                                   throw=False)
    seconds = time.perf_counter() - start

    median = np.median(M, axis=1, keepdims=True)            # the background's stand-in
    low_rank = np.asarray(res.low_rank)
    error = np.linalg.norm(low_rank - median) / np.linalg.norm(np.broadcast_to(median, M.shape))
    print(f"video {M.shape[0]} pixels x {M.shape[1]} frames, {int(mask.sum())} observed")
    steps = (f"{res.steps} steps, converged {res.converged}" if res.step_scale is None else
             f"eta {res.eta:.4g}, step_scale {res.step_scale:.4g}")
    print(f"method {res.method}, {steps}, mu {res.mu:.3g}, {seconds:.1f} s (with compilation)")
    print(f"objective F = {float(res.objective):.6g} (start {float(res.initial_objective):.6g})")
    print(f"background error = {error:.4f}")
    if args.plot:
        save_figure(args.plot, M, mask, low_rank, np.asarray(res.outliers), shape)
        print(f"figure saved to {args.plot}")
    return res, error


def save_figure(path, M, mask, low_rank, outliers, shape):
    """The middle frame: observed pixels, background, foreground (matplotlib's object API;
    the global backend is left alone)."""
    from matplotlib.figure import Figure

    j = M.shape[1] // 2
    panels = {"frame": M[:, j], "observed (50%)": np.where(mask[:, j], M[:, j], np.nan),
              "background U V": low_rank[:, j], "outliers S": np.abs(outliers[:, j])}
    fig = Figure(figsize=(3.2 * len(panels), 2.8), layout="constrained")
    for ax, (title, image) in zip(fig.subplots(1, len(panels)), panels.items(), strict=True):
        ax.imshow(image.reshape(shape), cmap="gray", vmin=0.0, vmax=1.0)
        ax.set_title(title)
        ax.set_axis_off()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
