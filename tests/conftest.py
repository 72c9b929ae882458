"""Test configuration: the tests (not the library) enable float64."""

import jax

jax.config.update("jax_enable_x64", True)
