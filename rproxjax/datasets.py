"""Real data for the demos and tests, shipped with the repository (NumPy only; nothing downloads).

The files ship inside the package, in ``rproxjax/_data/`` (so an installed wheel carries them:
14 MB); the repository's ``data/README.md`` gives their provenance, licences, exact derivation
and sha256 values. Each is one uint8 ``.npy`` array in an
``.xz`` stream (read with Python's ``lzma``):

* ``mnist70k.npy.xz``: all 70,000 MNIST digits (60,000 train then 10,000 test), 28 x 28.
* ``fashion_mnist10k.npy.xz``: the first 10,000 Fashion-MNIST training images, 28 x 28. It is
  the stand-in for the paper's COIL-100 (n = 7,200), which no package registry ships.
* ``vtest_72x96.npy.xz``: all 795 frames of OpenCV's fixed-camera ``vtest.avi`` street video,
  grayscale, 72 x 96 (2x2 block means of 144 x 192). It is the stand-in for the paper's I2R
  "Hall" / "Airport" videos, which no package registry ships.

Where the files are looked for, first match of:

1. the ``data_dir`` argument of a loader, if given;
2. else the environment variable ``RPROXJAX_DATA_DIR``, if set and non-empty;
3. else the package's own copy, ``Path(rproxjax.__file__).resolve().parent / "_data"``
   (in a clone, an editable install and an installed wheel alike).

Only that one folder is searched; a missing file raises :class:`FileNotFoundError` naming the
file, the folder and how to fix it. The decompressed uint8 arrays are cached (read-only) per
file, so repeated loads only pay for the float conversion.

The loaders return NumPy arrays and never touch JAX's configuration; pass them to
``jax.numpy.asarray`` (float64 only if you have enabled ``jax_enable_x64``).

Example:
    >>> from rproxjax import datasets
    >>> x = datasets.load_mnist(n=200, seed=1)
    >>> x.shape, x.dtype
    ((200, 784), dtype('float32'))
    >>> datasets.load_video_frames(10, start=0, step=5).shape
    (10, 72, 96)
    >>> datasets.default_data_dir().name
    '_data'
"""

from __future__ import annotations

import functools
import lzma
import numbers
import os
from pathlib import Path
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

__all__ = [
    "DATA_DIR_ENV",
    "FASHION_MNIST_FILE",
    "MNIST_FILE",
    "VIDEO_FILE",
    "default_data_dir",
    "load_fashion_mnist",
    "load_mnist",
    "load_video_frames",
    "video_matrix",
]


def __dir__() -> list[str]:
    """The module's public names alone (``dir``, tab completion): not its imports."""
    return sorted(__all__)


DATA_DIR_ENV = "RPROXJAX_DATA_DIR"
MNIST_FILE = "mnist70k.npy.xz"
FASHION_MNIST_FILE = "fashion_mnist10k.npy.xz"
VIDEO_FILE = "vtest_72x96.npy.xz"

_SHAPES = MappingProxyType({
    MNIST_FILE: (70000, 784),
    FASHION_MNIST_FILE: (10000, 784),
    VIDEO_FILE: (795, 72, 96),
})


def default_data_dir() -> Path:
    """The package's ``_data/`` folder, where the shipped files live (clone and wheel alike)."""
    return Path(__file__).resolve().parent / "_data"


def _locate(name: str, data_dir) -> Path:
    """Path of data file ``name`` in the folder chosen by ``data_dir`` / env / default."""
    if data_dir is not None:
        folder, source = Path(data_dir).expanduser(), "the data_dir argument"
    elif os.environ.get(DATA_DIR_ENV):
        folder, source = Path(os.environ[DATA_DIR_ENV]).expanduser(), f"${DATA_DIR_ENV}"
    else:
        folder, source = default_data_dir(), "the package's own rproxjax/_data"
    path = folder / name
    if path.is_file():
        return path
    why = "" if folder.is_dir() else " (that folder does not exist)"
    raise FileNotFoundError(
        f"rproxjax data file {name!r} not found. Searched: {path}{why}, from {source} "
        f"(order: data_dir argument, else ${DATA_DIR_ENV}, else {default_data_dir()}). "
        "The files ship inside the package (rproxjax/_data/); an installation without them "
        f"is incomplete: reinstall rproxjax, or pass data_dir= / set {DATA_DIR_ENV} to a "
        f"folder holding {name!r}. Nothing is downloaded."
    )


@functools.lru_cache(maxsize=4)
def _read_cached(path: str, mtime_ns: int, size: int) -> np.ndarray:
    del mtime_ns, size  # cache key only: a rewritten file is read again
    with lzma.open(path, "rb") as f:
        array = np.lib.format.read_array(f, allow_pickle=False)
    array.flags.writeable = False
    return array


def _read(name: str, data_dir) -> np.ndarray:
    """The shipped uint8 array ``name`` (read-only, cached), with its shape checked."""
    path = _locate(name, data_dir)
    stat = path.stat()
    array = _read_cached(str(path), stat.st_mtime_ns, stat.st_size)
    if array.dtype != np.uint8 or array.shape != _SHAPES[name]:
        raise ValueError(
            f"{path} holds a {array.dtype} array of shape {array.shape}; expected uint8 "
            f"{_SHAPES[name]} (see data/README.md and data/make_data.py)"
        )
    return array


def _check_int(value, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_float_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"dtype must be a floating dtype, got {dtype!r}") from err
    if not np.issubdtype(dt, np.floating):
        raise ValueError(f"dtype must be a floating dtype (e.g. np.float32), got {dt}")
    return dt


def _load_images(name, label, n, seed, center, scale, dtype, data_dir) -> np.ndarray:
    dt = _check_float_dtype(dtype)
    seed = _check_int(seed, "seed", minimum=0)
    raw = _read(name, data_dir)
    available = raw.shape[0]
    if n is None:
        rows = raw
    else:
        n = _check_int(n, "n", minimum=1)
        if n > available:
            raise ValueError(f"n = {n} exceeds the {available} {label} images shipped in {name}")
        idx = np.sort(np.random.default_rng(seed).choice(available, size=n, replace=False))
        rows = raw[idx]
    x = rows.astype(dt)
    if scale:
        x /= dt.type(255)
    if center:
        x -= x.mean(axis=0, dtype=np.float64).astype(dt)
    return x


def load_mnist(
    n: int | None = None,
    *,
    seed: int = 0,
    center: bool = True,
    scale: bool = True,
    dtype: npt.DTypeLike = np.float32,
    data_dir: str | os.PathLike[str] | None = None,
) -> np.ndarray:
    """MNIST digits as an (n, 784) data matrix, one flattened 28 x 28 image per row.

    The shipped file holds all 70,000 digits (60,000 training then 10,000 test images, rows in
    that order; pixels row-major). Labels are not shipped.

    Transformation, in this order (from the uint8 pixels p in 0..255):

    1. rows: all 70,000 in file order if ``n`` is None; else the ``n`` rows
       ``np.sort(np.random.default_rng(seed).choice(70000, size=n, replace=False))``
       (drawn without replacement, deterministic for a given seed, kept in file order);
    2. ``x = p.astype(dtype)``, then ``x /= 255`` if ``scale`` (so x is in [0, 1]);
    3. if ``center``: subtract the per-pixel (column) mean over the returned rows, so every
       column has mean zero (up to rounding in ``dtype``).

    The defaults (scaled and centred) give the centred samples of the sparse PCA problems; the
    paper's online sparse PCA streams raw samples z in R^784: use ``center=False`` (and
    ``scale=False`` for the 0..255 values).

    Args:
        n: number of images, 1 <= n <= 70000; None for all of them.
        seed: non-negative int seeding the subset draw (ignored when ``n`` is None).
        center: subtract the per-feature mean of the returned rows.
        scale: divide the pixels by 255.
        dtype: a floating NumPy dtype for the result.
        data_dir: folder holding ``mnist70k.npy.xz``; default ``$RPROXJAX_DATA_DIR``, else the
            package's ``_data/`` (:func:`default_data_dir`).

    Returns:
        A new, writable ``(n, 784)`` array of ``dtype``.

    Raises:
        FileNotFoundError: the data file is not in the searched folder.
        ValueError: ``n``, ``seed`` or ``dtype`` is invalid.

    Example:
        >>> from rproxjax.datasets import load_mnist
        >>> x = load_mnist(n=500, seed=0)
        >>> x.shape, x.dtype
        ((500, 784), dtype('float32'))
        >>> bool(abs(x.mean(axis=0)).max() < 1e-6)
        True
        >>> raw = load_mnist(n=500, seed=0, center=False)
        >>> float(raw.min()), float(raw.max())
        (0.0, 1.0)
    """
    return _load_images(MNIST_FILE, "MNIST", n, seed, center, scale, dtype, data_dir)


def load_fashion_mnist(
    n: int | None = None,
    *,
    seed: int = 0,
    center: bool = True,
    scale: bool = True,
    dtype: npt.DTypeLike = np.float32,
    data_dir: str | os.PathLike[str] | None = None,
) -> np.ndarray:
    """Fashion-MNIST images as an (n, 784) data matrix, one flattened 28 x 28 image per row.

    The shipped file holds a fixed subset: the first 10,000 Fashion-MNIST training images, in
    order. It is the stand-in for the paper's COIL-100 data (n = 7,200), which no package
    registry ships. Labels are not shipped.

    Transformation, in this order (from the uint8 pixels p in 0..255):

    1. rows: all 10,000 in file order if ``n`` is None; else the ``n`` rows
       ``np.sort(np.random.default_rng(seed).choice(10000, size=n, replace=False))``
       (drawn without replacement, deterministic for a given seed, kept in file order);
    2. ``x = p.astype(dtype)``, then ``x /= 255`` if ``scale`` (so x is in [0, 1]);
    3. if ``center``: subtract the per-pixel (column) mean over the returned rows.

    Use ``center=False`` for raw samples z (as the paper's online sparse PCA streams them).

    Args:
        n: number of images, 1 <= n <= 10000; None for all of them. The full 70,000-image
            dataset is not shipped: a larger ``n`` is a ValueError.
        seed: non-negative int seeding the subset draw (ignored when ``n`` is None).
        center: subtract the per-feature mean of the returned rows.
        scale: divide the pixels by 255.
        dtype: a floating NumPy dtype for the result.
        data_dir: folder holding ``fashion_mnist10k.npy.xz``; default ``$RPROXJAX_DATA_DIR``,
            else the package's ``_data/`` (:func:`default_data_dir`).

    Returns:
        A new, writable ``(n, 784)`` array of ``dtype``.

    Raises:
        FileNotFoundError: the data file is not in the searched folder.
        ValueError: ``n``, ``seed`` or ``dtype`` is invalid.

    Example:
        >>> import numpy as np
        >>> from rproxjax.datasets import load_fashion_mnist
        >>> x = load_fashion_mnist(n=300, seed=1, dtype=np.float64)
        >>> x.shape, x.dtype
        ((300, 784), dtype('float64'))
        >>> bool(np.allclose(x.mean(axis=0), 0.0))
        True
    """
    return _load_images(
        FASHION_MNIST_FILE, "Fashion-MNIST", n, seed, center, scale, dtype, data_dir
    )


def load_video_frames(
    n_frames: int | None = None,
    *,
    start: int = 0,
    step: int = 1,
    dtype: npt.DTypeLike = np.float32,
    data_dir: str | os.PathLike[str] | None = None,
) -> np.ndarray:
    """Grayscale frames of a fixed-camera street video, as a (frames, 72, 96) array in [0, 1].

    The shipped file holds all 795 frames (10 fps) of OpenCV's ``vtest.avi``, each reduced to
    72 x 96 by 2x2 block averaging of the 144 x 192 grayscale frames. It is the stand-in for
    the paper's I2R "Hall" / "Airport" videos, which no package registry ships. The static
    background is low rank, the pedestrians a sparse foreground.

    Frames ``start, start + step, start + 2 step, ...`` are returned: ``n_frames`` of them, or
    as many as exist if ``n_frames`` is None. Pixels are ``p.astype(dtype) / 255`` for the
    uint8 values p (no centring). Use :func:`video_matrix` for the pixels x frames matrix.

    Args:
        n_frames: number of frames (>= 1); None for all from ``start`` on with stride ``step``.
        start: index of the first frame, 0 <= start < 795.
        step: stride between returned frames (>= 1).
        dtype: a floating NumPy dtype for the result.
        data_dir: folder holding ``vtest_72x96.npy.xz``; default ``$RPROXJAX_DATA_DIR``, else
            the package's ``_data/`` (:func:`default_data_dir`).

    Returns:
        A new, writable ``(frames, 72, 96)`` array of ``dtype`` with values in [0, 1].

    Raises:
        FileNotFoundError: the data file is not in the searched folder.
        ValueError: the frame range is invalid (e.g. runs past frame 794) or ``dtype`` is not
            floating.

    Example:
        >>> from rproxjax.datasets import load_video_frames, video_matrix
        >>> frames = load_video_frames(40, start=100, step=2)
        >>> frames.shape, frames.dtype
        ((40, 72, 96), dtype('float32'))
        >>> m, shape = video_matrix(frames)
        >>> m.shape, shape
        ((6912, 40), (72, 96))
    """
    dt = _check_float_dtype(dtype)
    start = _check_int(start, "start", minimum=0)
    step = _check_int(step, "step", minimum=1)
    raw = _read(VIDEO_FILE, data_dir)
    total = raw.shape[0]
    if start >= total:
        raise ValueError(f"start = {start} is past the last frame ({total - 1}) of {VIDEO_FILE}")
    available = len(range(start, total, step))
    if n_frames is None:
        n_frames = available
    n_frames = _check_int(n_frames, "n_frames", minimum=1)
    if n_frames > available:
        raise ValueError(
            f"n_frames = {n_frames} with start = {start}, step = {step} needs frame "
            f"{start + (n_frames - 1) * step}, but {VIDEO_FILE} has frames 0..{total - 1} "
            f"(at most {available} frames for this start and step)"
        )
    frames = raw[start : start + n_frames * step : step].astype(dt)
    frames /= dt.type(255)
    return frames


def video_matrix(frames: npt.ArrayLike) -> tuple[np.ndarray, tuple[int, int]]:
    """The (h*w, t) data matrix of t frames (pixels x frames) and the frame shape (h, w).

    Column j is frame j flattened row-major, ``m[:, j] == frames[j].reshape(-1)``: the data
    matrix of robust matrix completion (low-rank background plus sparse foreground). Undo it
    with ``m.T.reshape(-1, *shape)``.

    Args:
        frames: array-like of shape (t, h, w).

    Returns:
        ``(m, (h, w))``: a new C-contiguous ``(h * w, t)`` array of the same dtype, and the frame
        shape.

    Raises:
        ValueError: ``frames`` is not 3-dimensional.

    Example:
        >>> import numpy as np
        >>> from rproxjax.datasets import video_matrix
        >>> frames = np.arange(12.0).reshape(3, 2, 2)
        >>> m, shape = video_matrix(frames)
        >>> m
        array([[ 0.,  4.,  8.],
               [ 1.,  5.,  9.],
               [ 2.,  6., 10.],
               [ 3.,  7., 11.]])
        >>> bool(np.array_equal(m.T.reshape(-1, *shape), frames))
        True
    """
    frames = np.asarray(frames)
    if frames.ndim != 3:
        raise ValueError(f"frames must have shape (t, h, w), got shape {frames.shape}")
    t, h, w = frames.shape
    return np.ascontiguousarray(frames.reshape(t, h * w).T), (h, w)
