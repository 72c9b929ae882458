"""Regenerate the shipped data files in this folder from the team's ``../shared/data``.

This documents exactly how the files were made; the tests and the library never run it.

Usage (from the repository root)::

    python data/make_data.py                      # reads ../shared/data, writes data/
    python data/make_data.py --src DIR --out DIR

Sources (uint8 pixels, 0-255; see data/README.md for provenance and licences):

* ``mnist70k.npz``, array ``X`` (70000, 784): all MNIST digits, train then test.
* ``fashion_mnist70k.npz``, array ``X`` (70000, 784): all Fashion-MNIST images, train then test.
* ``vtest_144x192.npz``, array ``frames`` (795, 144, 192): every frame of OpenCV's ``vtest.avi``.

Outputs: each file is one ``.npy`` file (format version 1.0, C order, uint8) compressed as an
``.xz`` stream by Python's ``lzma`` module with ``preset=9 | lzma.PRESET_EXTREME`` (lossless;
``xz -dk FILE.npy.xz`` gives back the ``.npy``):

* ``mnist70k.npy.xz``: (70000, 784), all of ``X``, unchanged.
* ``fashion_mnist10k.npy.xz``: (10000, 784), ``X[:10000]`` (the first 10,000 training images).
* ``vtest_72x96.npy.xz``: (795, 72, 96), every frame reduced 2x2 by block averaging with the
  sum rounded half up: ``(a + b + c + d + 2) // 4`` over each 2x2 block (in uint16).

The compressed bytes depend on the liblzma version; the decompressed arrays do not. The script
prints both sha256 values for data/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = HERE.parent.parent / "shared" / "data"
PRESET = 9 | lzma.PRESET_EXTREME


def reduce_2x2(frames: np.ndarray) -> np.ndarray:
    """2x2 block means of uint8 frames (t, h, w), rounded half up, as uint8 (t, h/2, w/2)."""
    t, h, w = frames.shape
    blocks = frames.reshape(t, h // 2, 2, w // 2, 2).astype(np.uint16)
    return ((blocks.sum(axis=(2, 4)) + 2) // 4).astype(np.uint8)


def derive(src: Path) -> dict[str, np.ndarray]:
    """The shipped arrays, by output file name."""
    mnist = np.load(src / "mnist70k.npz")["X"]
    fashion = np.load(src / "fashion_mnist70k.npz")["X"]
    video = np.load(src / "vtest_144x192.npz")["frames"]
    assert mnist.shape == (70000, 784) and mnist.dtype == np.uint8
    assert fashion.shape == (70000, 784) and fashion.dtype == np.uint8
    assert video.shape == (795, 144, 192) and video.dtype == np.uint8
    return {
        "mnist70k.npy.xz": np.ascontiguousarray(mnist),
        "fashion_mnist10k.npy.xz": np.ascontiguousarray(fashion[:10000]),
        "vtest_72x96.npy.xz": reduce_2x2(video),
    }


def write_npy_xz(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as a .npy (version 1.0) inside an .xz stream."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with lzma.open(tmp, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=PRESET) as f:
        np.lib.format.write_array(f, array, version=(1, 0), allow_pickle=False)
    tmp.replace(path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="folder of the .npz sources")
    parser.add_argument("--out", type=Path, default=HERE.parent / "rproxjax" / "_data",
                        help="output folder (default: the package's rproxjax/_data)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, array in derive(args.src).items():
        path = args.out / name
        write_npy_xz(path, array)
        with lzma.open(path, "rb") as f:
            back = np.lib.format.read_array(f, allow_pickle=False)
        assert back.dtype == array.dtype and np.array_equal(back, array), name
        print(
            f"{name}: shape {array.shape}, {path.stat().st_size} bytes\n"
            f"  file sha256  {sha256(path.read_bytes())}\n"
            f"  array sha256 {sha256(array.tobytes())}"
        )


if __name__ == "__main__":
    main()
