"""Switching ``jax_enable_x64`` on in a process that already ran the library in float32:
the float64 runs that follow equal those of a process that had x64 on from the start.

Run in subprocesses (the test suite itself runs with x64 on)."""

import subprocess
import sys

from tests.subprocess_env import subprocess_env

_RUN = """
import sys
import jax, numpy as np, rproxjax
switch = sys.argv[1] == "switch"
if not switch:
    jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(0)
data = rng.standard_normal((200, 20))
low = rng.standard_normal((40, 2)) @ rng.standard_normal((2, 30))
mask = rng.random(low.shape) < 0.7
if switch:  # float32 first, then x64 on
    rproxjax.sparse_pca(data.astype(np.float32), 2, mu=0.1, passes=2)
    rproxjax.robust_matrix_completion(low.astype(np.float32), mask, 2)
    jax.config.update("jax_enable_x64", True)
spca = rproxjax.sparse_pca(data, 2, mu=0.1, passes=2)
rmc = rproxjax.robust_matrix_completion(low, mask, 2)
assert spca.loadings.dtype == rmc.low_rank.dtype == np.float64
print(np.asarray(spca.loadings).tobytes().hex()[:4000])
print(np.asarray(rmc.low_rank).tobytes().hex()[:4000])
"""


def _run(mode):
    proc = subprocess.run([sys.executable, "-c", _RUN, mode], capture_output=True, text=True,
                          timeout=600, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_x64_switched_on_after_float32_runs_gives_the_fresh_results():
    """It raised ``TypeError: lax.add requires arguments to have the same dtypes, got int32,
    int64`` in the Newton system's index arithmetic (now int32 indices)."""
    assert _run("switch") == _run("fresh")
