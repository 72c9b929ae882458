"""The program caches (``rproxjax._run.compile.PROGRAMS`` behind ``compile_once``, and
``sparse_pca``'s compiled runs) are bounded, safe to share between threads, and keyed on
everything that changes the program: an entry is reused only for the same computation with
the same argument shapes, dtypes and placements, the same JAX settings (x64 among them) and
the same devices. Counted by the caches' statistics and JAX's compile events, never timed."""

from __future__ import annotations

import subprocess
import sys
import threading

import jax
import numpy as np
import pytest

import rproxjax
from rproxjax._run import compile as _compile
from rproxjax._tasks import spca as spca_task
from tests.subprocess_env import subprocess_env


@pytest.fixture
def compilations():
    """The XLA compilations (backend compile events) during a test, as a list."""
    events = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield events
    jax.monitoring.unregister_event_duration_listener(listener)


def test_the_cache_keeps_the_most_recently_used_entries_and_counts_its_builds():
    cache = _compile.ProgramCache(max_entries=2)
    built = []

    def build(key):
        return lambda: built.append(key) or key.upper()

    assert [cache.get(k, build(k)) for k in "aab"] == ["A", "A", "B"]
    assert cache.get("a", build("a")) == "A"  # a is now the most recent; b the oldest
    cache.get("c", build("c"))  # evicts b
    assert list(cache.entries) == ["a", "c"] and built == ["a", "b", "c"]
    cache.get("b", build("b"))
    assert built == ["a", "b", "c", "b"]
    assert cache.cache_info() == _compile.CacheInfo(hits=2, misses=4, maxsize=2, currsize=2)
    assert cache.cache_parameters() == {"maxsize": 2}
    cache.clear()
    assert cache.cache_info() == _compile.CacheInfo(0, 0, 2, 0)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (2.0, TypeError),
                                        (True, TypeError), (None, TypeError)])
def test_a_bound_that_is_not_a_positive_int_is_refused(bad, error):
    with pytest.raises(error, match="max_entries"):
        _compile.ProgramCache(max_entries=bad)


def test_the_cache_stays_consistent_under_threads():
    """Eight threads asking for ten keys in turn: every answer is its own key's value, the
    bound holds, and every request is counted once."""
    cache = _compile.ProgramCache(max_entries=4)
    wrong, calls = [], 300

    def work(offset):
        for i in range(calls):
            key = (i + offset) % 10
            if cache.get(key, lambda key=key: ("value", key)) != ("value", key):
                wrong.append(key)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    info = cache.cache_info()
    assert not wrong
    assert info.hits + info.misses == 8 * calls
    assert info.currsize == len(cache.entries) <= 4


def _scaled(x):
    return x * 2.0 + 1.0


def test_compile_once_reuses_an_entry_only_for_the_same_dtypes_and_x64(compilations):
    """The same function of float32 arguments compiles once; float64 arguments are a new
    entry; so is the float32 call under x64 switched off (the same jaxpr and avals: only the
    setting differs), and each entry is reused afterwards."""
    _compile.clear_cache()
    x32, x64 = np.arange(3, dtype=np.float32), np.arange(3, dtype=np.float64)

    def misses():
        return _compile.PROGRAMS.cache_info().misses

    _compile.compile_once(_scaled, x32)
    assert (misses(), len(compilations)) == (1, 1)
    out = _compile.compile_once(_scaled, x32)(x32)
    assert (misses(), len(compilations)) == (1, 1)
    assert out.dtype == np.float32
    _compile.compile_once(_scaled, x64)
    assert (misses(), len(compilations)) == (2, 2)
    with jax.enable_x64(False):
        out = _compile.compile_once(_scaled, x32)(x32)
        assert (misses(), len(compilations)) == (3, 3)
        _compile.compile_once(_scaled, x32)
    assert (misses(), len(compilations)) == (3, 3)
    np.testing.assert_array_equal(out, [1.0, 3.0, 5.0])
    _compile.compile_once(_scaled, x32)
    assert (misses(), len(compilations)) == (3, 3)


def test_the_key_holds_the_settings_and_devices():
    env = _compile.environment()
    with jax.enable_x64(not jax.config.jax_enable_x64):
        assert _compile.environment() != env
    with jax.default_device(jax.devices()[0]):
        assert _compile.environment() != env
    assert env[1] == jax.default_backend()
    assert env[2] == tuple(d.id for d in jax.devices())
    key32 = _compile.arguments_key((np.ones(2, np.float32), 1.0))
    assert key32 != _compile.arguments_key((np.ones(2, np.float64), 1.0))
    assert key32 != _compile.arguments_key((np.ones(3, np.float32), 1.0))
    assert key32 != _compile.arguments_key([np.ones(2, np.float32), 1.0])
    assert key32 == _compile.arguments_key((np.zeros(2, np.float32), 2.0))


_DEVICES = """
import jax, numpy as np
from rproxjax._run import compile as c
f = lambda x: x + 1.0
x = np.ones(2, np.float32)
first = c.compile_once(f, x)(x)
with jax.default_device(jax.devices()[1]):
    second = c.compile_once(f, x)(x)
assert c.PROGRAMS.cache_info().misses == 2, c.PROGRAMS.cache_info()
assert first.devices() == {jax.devices()[0]}, first.devices()
assert second.devices() == {jax.devices()[1]}, second.devices()
"""


def test_an_executable_is_not_reused_on_another_default_device():
    """Two CPU devices: the same program of NumPy arguments under another default device
    compiles again and runs there (reusing the first executable would run on device 0)."""
    env = subprocess_env(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run([sys.executable, "-c", _DEVICES], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_sparse_pca_compiles_its_run_again_for_x64_and_reuses_it_otherwise():
    """sparse_pca's compiled runs: float32 data under x64 off, the same float32 data under
    x64 on (only the setting differs) and float64 data are three entries; a second call of
    each reuses its entry."""
    data = np.random.default_rng(0).standard_normal((60, 6)) * np.linspace(2.0, 0.5, 6)
    spca_task._cached_program.cache_clear()

    def run(values):
        return rproxjax.sparse_pca(values, 2, mu=0.05, passes=1, refit=False)

    def misses():
        return spca_task._cached_program.cache_info().misses

    with jax.enable_x64(False):
        off = run(data.astype(np.float32))
    assert misses() == 1 and off.loadings.dtype == np.float32
    on = run(data.astype(np.float32))
    assert misses() == 2 and on.loadings.dtype == np.float32
    high = run(data)
    assert misses() == 3 and high.loadings.dtype == np.float64
    again = run(data)
    with jax.enable_x64(False):
        run(data.astype(np.float32))
    run(data.astype(np.float32))
    assert misses() == 3
    np.testing.assert_array_equal(again.loadings, high.loadings)
    for low in (off, on):  # the same run in float32, up to the columns' signs
        np.testing.assert_allclose(np.abs(low.loadings), np.abs(high.loadings), atol=1e-4)
    assert spca_task._cached_program.cache_parameters()["maxsize"] == 32
