"""Root conftest: doctests run with float64 enabled, like the test suite."""

import jax

jax.config.update("jax_enable_x64", True)
