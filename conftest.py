"""Root conftest: the tests and doctests run with float64 enabled, and compile with JAX's
``jax_disable_most_optimizations`` (the same HLO programs, with LLVM's optimizations off:
about 20% less time over the suite, which is mostly compilation). ``RPROXJAX_TEST_OPTIMIZED=1``
compiles them as users' programs are compiled. Only the test process is configured: the
library itself never changes JAX's configuration."""

import os

import jax

jax.config.update("jax_enable_x64", True)
if os.environ.get("RPROXJAX_TEST_OPTIMIZED") != "1":
    jax.config.update("jax_disable_most_optimizations", True)
