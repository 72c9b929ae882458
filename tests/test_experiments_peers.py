"""The peers comparison (Table added_exp) end to end at its tiny size."""

import pytest

from tests.experiment_checks import check_file, run_tiny


@pytest.mark.parametrize("name", ["peers-mnist", "peers-fashion"])
def test_peers_configuration_end_to_end(name, tiny_results):
    result = run_tiny(name, tiny_results)
    check_file(result, tiny_results)
    table = result["summary"]["table"]
    ours = [row for row in table if row["method"] == "R-ProxSPB"]
    budget = ours[0]["ifo"]
    assert {row["method"] for row in table} == {"R-ProxSPB", "SPAMS", "MiniBatchSparsePCA"}
    for row in table:
        assert 0 <= row["explained_variance"] <= 1 and 0 <= row["adjusted_variance"] <= 1
        assert row["wall_time"] > 0
    for row in ours:
        assert row["orthonormality"] < 1e-10 and row["ifo"] == budget
    # more mu, sparser loadings
    assert ours[-1]["nonzeros"] <= ours[0]["nonzeros"]
