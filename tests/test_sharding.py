"""Data-parallel runs (``sharding=``): argument errors here, and the 4-device tests of
test_sharding_devices.py in a subprocess with forced host devices (so that this
process keeps its single device)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import rproxjax
from rproxjax.problems import spca_loss
from tests.sharding_reference import reference_plain

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow  # 60-90 s: the 4-device tests in a subprocess of their own
def test_four_device_runs_in_a_subprocess():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_sharding_devices.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed and int(passed.group(1)) >= 11 and "skipped" not in out.stdout, out.stdout


@pytest.fixture(scope="module")
def problem():
    z = jax.random.normal(jax.random.key(0), (32, 8), jnp.float64)
    x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2, jnp.float64)
    return z, x0, rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))


def _one_device(*spec):
    return NamedSharding(jax.make_mesh((1,), ("data",)), P(*spec))


def test_a_one_device_mesh_runs_the_sharded_sampler(problem):
    z, x0, opt = problem
    res = rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(2), batch_size=4,
                       num_epochs=1, sharding=_one_device("data"))
    ref = reference_plain(opt, x0, z, jax.random.key(2), 4, 1, 1)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("sharding, error, match", [
    (jax.make_mesh((1,), ("data",)), TypeError, "sharding must be a jax.sharding.NamedSharding"),
    (_one_device(), ValueError, "must split the leading"),
    (_one_device(None, "data"), ValueError, "must split the leading"),
])
def test_bad_shardings_are_errors(problem, sharding, error, match):
    z, x0, opt = problem
    with pytest.raises(error, match=match):
        rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(0), batch_size=4,
                     num_epochs=1, sharding=sharding)


@pytest.mark.parametrize("kwargs, match", [
    (dict(mesh="data"), "mesh must be a jax.sharding.Mesh"),
    (dict(data_axis="data"), "data_axis needs mesh="),
    (dict(mesh=jax.make_mesh((1,), ("data",)), data_axis="model"), "not an axis of the mesh"),
])
def test_bad_former_mesh_keywords_are_errors(problem, kwargs, match):
    z, x0, opt = problem
    with pytest.warns(DeprecationWarning, match="removed in rproxjax 0.5"), \
            pytest.raises(ValueError, match=match):
        rproxjax.fit(opt, spca_loss, x0, z, key=jax.random.key(0), batch_size=4,
                     num_epochs=1, **kwargs)


def test_a_stream_is_not_sharded(problem):
    z, x0, opt = problem
    stream = iter([z[:4]] * 3)
    with pytest.raises(ValueError, match="online stream is not sharded"):
        rproxjax.fit(opt, spca_loss, x0, stream, key=jax.random.key(0), batch_size=4,
                     num_steps=2, sharding=_one_device("data"))


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _checksums(stdout):
    return re.findall(r"process (\d+)/(\d+) devices 2: F ([-\d.]+) checksum ([-\d.]+)", stdout)


def test_two_processes_match_one_process_of_two_devices():
    """examples/multihost.py: jax.distributed with 2 CPU processes (gloo) gives the point
    that one process with 2 devices gives (the same per-shard samples)."""
    script = str(ROOT / "examples" / "multihost.py")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    two = subprocess.run([sys.executable, script, "--local", "2", "--coordinator",
                          f"localhost:{_free_port()}"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    one = subprocess.run([sys.executable, script],
                         env=dict(env, XLA_FLAGS="--xla_force_host_platform_device_count=2"),
                         capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    multi, single = _checksums(two.stdout), _checksums(one.stdout)
    assert sorted(p for p, *_ in multi) == ["0", "1"] and len(single) == 1
    f1, c1 = map(float, single[0][2:])
    for _, count, f, c in multi:
        assert count == "2"
        assert abs(float(f) - f1) <= 1e-4 * abs(f1) and abs(float(c) - c1) <= 1e-3 * abs(c1)
