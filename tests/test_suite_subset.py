"""The default run's subset (tests/conftest.py) names tests that exist: a renamed test would
otherwise leave its entry without effect."""

import pathlib

import pytest

from tests import conftest

TESTS = pathlib.Path(__file__).resolve().parent


@pytest.mark.parametrize("group", ["ONE_VARIANT", "SLOW", "KEPT"])
def test_every_listed_test_exists(group):
    missing = []
    for name in getattr(conftest, group):
        path, function = name.split("::")
        if f"def {function}(" not in (TESTS / path).read_text():
            missing.append(name)
    assert not missing, f"{group} names tests that do not exist: {missing}"


def test_the_groups_do_not_overlap():
    assert not conftest.SLOW & conftest.KEPT
    assert not conftest.ONE_VARIANT & conftest.KEPT
    assert not conftest.SLOW & conftest.ONE_VARIANT
