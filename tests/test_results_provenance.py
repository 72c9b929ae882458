"""Results files record where they come from (commit, clean tree, the solver's default
settings) and say when they no longer describe the library (stale solver defaults)."""

import dataclasses
import pathlib
import re

import pytest

import rproxjax
from rproxjax.experiments import _store

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_machine_records_the_commit_and_the_solver_defaults():
    m = _store.machine()
    if (ROOT / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}", m["commit"])
        assert isinstance(m["tree_clean"], bool)
    else:  # an installed copy: no git history to name
        assert m["commit"] is None and m["tree_clean"] is None
    assert m["solver_defaults"]["SSN.stochastic()"] == _store.to_json(
        dataclasses.asdict(rproxjax.SSN.stochastic()))
    assert m["solver_defaults"]["SSN()"]["rtol"] == rproxjax.SSN().rtol


def test_fresh_results_are_not_stale():
    assert _store.staleness({"machine": {"solver_defaults": _store.solver_defaults()}}) is None


def test_a_changed_default_names_the_setting():
    recorded = _store.solver_defaults()
    recorded["SSN.stochastic()"] = dict(recorded["SSN.stochastic()"], rtol=0.01)
    reason = _store.staleness({"machine": {"solver_defaults": recorded}})
    assert reason is not None and "SSN.stochastic().rtol was 0.01" in reason
    assert "SSN()." not in reason  # only what changed


def test_results_without_recorded_settings_are_stale():
    reason = _store.staleness({"machine": {"rproxjax": "0.2.0.dev0"}})
    assert reason is not None and "not recorded" in reason and "0.2.0.dev0" in reason


@pytest.mark.parametrize("removed", ["SSN()", "SSN.stochastic()"])
def test_a_setting_that_no_longer_exists_is_stale(removed):
    recorded = _store.solver_defaults()
    recorded[removed] = dict(recorded[removed], old_knob=1)
    assert "old_knob is no longer a setting" in _store.staleness(
        {"machine": {"solver_defaults": recorded}})
