"""The shipped real data (data/) and its loaders in rproxjax.datasets."""

import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from rproxjax import datasets

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "rproxjax" / "_data"
SHIPPED = {
    datasets.MNIST_FILE: (70000, 784),
    datasets.FASHION_MNIST_FILE: (10000, 784),
    datasets.VIDEO_FILE: (795, 72, 96),
}


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)


@pytest.fixture(scope="module")
def mnist_all():
    """All 70,000 digits with the default preprocessing (loaded once)."""
    return datasets.load_mnist()


@pytest.fixture(scope="module")
def video():
    return datasets.load_video_frames()


# ----------------------------------------------------------------------------- shipped files


def test_data_folder_is_the_default_and_lean():
    assert datasets.default_data_dir() == DATA
    sizes = {name: (DATA / name).stat().st_size for name in SHIPPED}
    assert sum(p.stat().st_size for p in DATA.iterdir() if p.is_file()) < 20e6, sizes


def test_readme_sha256_match_shipped_files():
    text = (ROOT / "data" / "README.md").read_text()
    pattern = r"^\| `([\w.]+\.xz)` \| `([0-9a-f]{64})` \| `([0-9a-f]{64})` \|$"
    rows = {name: (f, a) for name, f, a in re.findall(pattern, text, flags=re.M)}
    assert set(rows) == set(SHIPPED)
    for name, (file_sha, array_sha) in rows.items():
        path = DATA / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == file_sha, name
        array = datasets._read(name, DATA)  # the loaders' (cached) decompressed array
        assert array.dtype == np.uint8 and array.shape == SHIPPED[name], name
        assert hashlib.sha256(array.tobytes()).hexdigest() == array_sha, name


# ----------------------------------------------------------------------------- MNIST


def test_mnist_all_rows_default_preprocessing(mnist_all):
    assert mnist_all.shape == (70000, 784)
    assert mnist_all.dtype == np.float32
    assert mnist_all.flags.writeable
    np.testing.assert_allclose(mnist_all.mean(axis=0, dtype=np.float64), 0.0, atol=1e-6)
    # scaled to [0, 1] before centring: every column spans at most 1
    span = mnist_all.max(axis=0) - mnist_all.min(axis=0)
    assert span.max() <= 1.0 + 1e-6 and span.max() > 0.99


def test_mnist_mean_image_is_a_digit_blob():
    x = datasets.load_mnist(5000, seed=0, center=False)
    assert x.min() == 0.0 and x.max() == 1.0
    mean = x.mean(axis=0).reshape(28, 28)
    centre = mean[10:18, 10:18].mean()
    corners = [mean[:4, :4], mean[:4, -4:], mean[-4:, :4], mean[-4:, -4:]]
    assert centre > 0.3
    assert max(c.max() for c in corners) < 0.01


def test_mnist_raw_scale_and_centering_are_as_documented():
    raw = datasets.load_mnist(300, seed=5, center=False, scale=False, dtype=np.float64)
    assert np.array_equal(raw, np.round(raw)) and raw.min() == 0 and raw.max() == 255
    scaled = datasets.load_mnist(300, seed=5, center=False, dtype=np.float64)
    np.testing.assert_allclose(scaled, raw / 255, rtol=0, atol=1e-15)
    centred = datasets.load_mnist(300, seed=5, dtype=np.float64)
    np.testing.assert_allclose(centred, scaled - scaled.mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(centred.mean(axis=0), 0.0, atol=1e-14)


def test_mnist_subsets_are_seeded():
    a = datasets.load_mnist(200, seed=1)
    b = datasets.load_mnist(200, seed=1)
    c = datasets.load_mnist(200, seed=2)
    assert a.shape == (200, 784)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # the result is a fresh array: changing it does not change the next load
    a[:] = 7.0
    np.testing.assert_array_equal(datasets.load_mnist(200, seed=1), b)


# ----------------------------------------------------------------------------- Fashion-MNIST


def test_fashion_mnist_shapes_and_subset_recipe():
    full = datasets.load_fashion_mnist(center=False)
    assert full.shape == (10000, 784) and full.dtype == np.float32
    assert full.min() == 0.0 and full.max() == 1.0
    sub = datasets.load_fashion_mnist(50, seed=3, center=False)
    idx = np.sort(np.random.default_rng(3).choice(10000, size=50, replace=False))
    np.testing.assert_array_equal(sub, full[idx])
    centred = datasets.load_fashion_mnist(50, seed=3, dtype=np.float64)
    np.testing.assert_allclose(centred.mean(axis=0), 0.0, atol=1e-14)
    assert not np.array_equal(sub, datasets.load_fashion_mnist(50, seed=4, center=False))


def test_fashion_mnist_more_than_shipped_is_a_value_error():
    with pytest.raises(ValueError, match="10000"):
        datasets.load_fashion_mnist(10001)


# ----------------------------------------------------------------------------- video


def test_video_frames_shape_and_range(video):
    assert video.shape == (795, 72, 96) and video.dtype == np.float32
    assert video.min() >= 0.0 and video.max() <= 1.0 and video.max() > 0.9
    sub = datasets.load_video_frames(10, start=100, step=3, dtype=np.float64)
    assert sub.shape == (10, 72, 96) and sub.dtype == np.float64
    np.testing.assert_allclose(sub, video[100:130:3], atol=1e-7)
    tail = datasets.load_video_frames(start=790, step=2)
    np.testing.assert_array_equal(tail, video[[790, 792, 794]])


def test_video_has_a_fixed_background_and_moving_foreground(video):
    median = np.median(video, axis=0)
    dev = np.abs(video - median)
    close = (dev < 0.05).mean(axis=(1, 2))  # fraction of pixels at the background value
    assert np.quantile(close, 0.05) > 0.9, close.min()
    assert close.min() > 0.8
    # but not a still image: pedestrians move, so each frame departs somewhere
    assert np.quantile(dev.max(axis=(1, 2)), 0.5) > 0.3
    # consecutive frames (10 fps) are much closer than frames far apart
    near = np.abs(video[1:] - video[:-1]).mean()
    far = np.abs(video[400:] - video[:395]).mean()
    assert near < far


def test_video_matrix_columns_are_frames(video):
    frames = video[:25]
    m, shape = datasets.video_matrix(frames)
    assert m.shape == (72 * 96, 25) and shape == (72, 96) and m.dtype == frames.dtype
    assert m.flags.c_contiguous
    np.testing.assert_array_equal(m[:, 7], frames[7].reshape(-1))
    np.testing.assert_array_equal(m.T.reshape(-1, *shape), frames)
    with pytest.raises(ValueError, match="shape"):
        datasets.video_matrix(frames[0])


# ----------------------------------------------------------------------------- location


def test_missing_file_names_the_file_and_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        datasets.load_mnist(10, data_dir=tmp_path)
    msg = str(err.value)
    assert datasets.MNIST_FILE in msg and str(tmp_path) in msg
    assert "data_dir" in msg and datasets.DATA_DIR_ENV in msg
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="does not exist") as err:
        datasets.load_video_frames(data_dir=missing)
    assert datasets.VIDEO_FILE in str(err.value) and str(missing) in str(err.value)


def test_data_dir_argument_and_environment_variable(tmp_path, monkeypatch):
    shutil.copy(DATA / datasets.VIDEO_FILE, tmp_path / datasets.VIDEO_FILE)
    ref = datasets.load_video_frames(3)
    np.testing.assert_array_equal(datasets.load_video_frames(3, data_dir=tmp_path), ref)
    np.testing.assert_array_equal(datasets.load_video_frames(3, data_dir=str(tmp_path)), ref)
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path))
    np.testing.assert_array_equal(datasets.load_video_frames(3), ref)
    # the environment folder is the only one searched: no silent fall-back to data/
    with pytest.raises(FileNotFoundError, match=datasets.DATA_DIR_ENV) as err:
        datasets.load_mnist(10)
    assert str(tmp_path / datasets.MNIST_FILE) in str(err.value)
    # an explicit data_dir wins over the environment
    assert datasets.load_mnist(10, data_dir=DATA).shape == (10, 784)


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"n": -5}, "n must be >= 1"),
        ({"n": 2.5}, "n must be an int"),
        ({"n": True}, "n must be an int"),
        ({"n": 70001}, "exceeds the 70000"),
        ({"n": 10, "seed": -1}, "seed must be >= 0"),
        ({"n": 10, "seed": None}, "seed must be an int"),
        ({"n": 10, "dtype": np.int32}, "floating dtype"),
        ({"n": 10, "dtype": "not a dtype"}, "floating dtype"),
    ],
)
def test_mnist_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        datasets.load_mnist(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_frames": 0}, "n_frames must be >= 1"),
        ({"n_frames": 796}, "frames 0..794"),
        ({"n_frames": 100, "start": 700}, "at most 95 frames"),
        ({"n_frames": 400, "step": 2}, "at most 398 frames"),
        ({"start": 795}, "past the last frame"),
        ({"start": -1}, "start must be >= 0"),
        ({"step": 0}, "step must be >= 1"),
        ({"n_frames": 3.0}, "n_frames must be an int"),
        ({"dtype": np.uint8}, "floating dtype"),
    ],
)
def test_video_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        datasets.load_video_frames(**kwargs)


def test_the_namespace_lists_its_public_names_only():
    names = dir(datasets)
    assert names == sorted(datasets.__all__)
    assert not {"np", "lzma", "functools", "os"} & set(names)
