"""The environment of the tests' subprocesses: the test process's own compilation setting.

The root ``conftest.py`` compiles the test process's programs with JAX's
``jax_disable_most_optimizations`` (unless ``RPROXJAX_TEST_OPTIMIZED=1``); a subprocess that
runs the library gets the same setting through JAX's environment variable, so that it
compiles as fast as the tests around it. The setting is fixed before the subprocess imports
anything: checks of what the library changes compare its configuration before and after.
"""

import os


def subprocess_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with ``extra`` and, unless ``RPROXJAX_TEST_OPTIMIZED=1``,
    ``JAX_DISABLE_MOST_OPTIMIZATIONS=1``."""
    env = dict(os.environ, **extra)
    if os.environ.get("RPROXJAX_TEST_OPTIMIZED") != "1":
        env["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    return env
