"""Test configuration: the tests (not the library) enable float64."""

import jax

jax.config.update("jax_enable_x64", True)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_results(tmp_path_factory):
    """One folder per session for the experiments' tiny results (shared with the notebooks)."""
    return tmp_path_factory.mktemp("tiny_results")
