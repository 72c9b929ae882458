"""The captured subproblems (``experiments/data/subproblems_mnist.npz``), a fixture of the
subproblem solver's tests and benchmarks, and their loader in the lab."""

import shutil

import numpy as np
import pytest

from experiments import subproblems

SUBPROBLEM_KEYS = {"x", "g", "t", "mu", "lam_prev", "lam_h_prev", "lam_s", "lam0", "method",
                   "step", "eta"}


@pytest.mark.parametrize("r", [10, 15])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_subproblems_shapes_dtypes_and_orthonormal_points(r, dtype):
    insts = subproblems.load_subproblems(r, dtype)
    assert len(insts) == 32
    eye = np.eye(r)
    for inst in insts:
        assert set(inst) == SUBPROBLEM_KEYS
        assert inst["x"].shape == inst["g"].shape == (784, r)
        for key in ("x", "g", "lam_prev", "lam_h_prev", "lam_s", "lam0"):
            assert inst[key].dtype == dtype, key
        for key in ("lam_prev", "lam_h_prev", "lam_s", "lam0"):
            assert inst[key].shape == (r, r), key
        x = inst["x"].astype(np.float64)
        # re-orthonormalized in float64 on load: only the cast to dtype is left
        atol = 1e-13 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(x.T @ x, eye, atol=atol)
        xtg = inst["x"].T @ inst["g"]
        np.testing.assert_allclose(inst["lam0"], (xtg + xtg.T) / 4 + inst["lam_s"],
                                   rtol=1e-5, atol=1e-6)
        assert inst["method"] in ("R-ProxSGD", "R-ProxSPB")
        assert inst["t"] == 0.1 and inst["mu"] in (0.05, 0.2, 0.4, 0.8)
        assert isinstance(inst["step"], int) and isinstance(inst["eta"], float)
    # 4 mu x 2 methods x 4 iterations
    assert {(i["mu"], i["method"], i["step"]) for i in insts} == {
        (mu, m, k) for mu in (0.05, 0.2, 0.4, 0.8) for m in ("R-ProxSGD", "R-ProxSPB")
        for k in (60, 140, 220, 299)}


def test_subproblems_are_fresh_copies_and_bad_arguments_are_errors(tmp_path):
    first = subproblems.load_subproblems(10)
    first[0]["x"][:] = 0.0
    assert np.any(subproblems.load_subproblems(10)[0]["x"] != 0.0)
    with pytest.raises(ValueError, match=r"no instances of rank 12 .*ranks: \[10, 15\]"):
        subproblems.load_subproblems(12)
    for r in (0, 10.0, True):
        with pytest.raises(ValueError, match="r must be an int >= 1"):
            subproblems.load_subproblems(r)
    with pytest.raises(ValueError, match="floating dtype"):
        subproblems.load_subproblems(10, np.int64)
    with pytest.raises(ValueError, match="floating dtype"):
        subproblems.load_subproblems(10, "no such dtype")
    with pytest.raises(FileNotFoundError, match=subproblems.SUBPROBLEMS_FILE):
        subproblems.load_subproblems(10, data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        subproblems.load_subproblems(10, data_dir=tmp_path / "absent")
    name = subproblems.SUBPROBLEMS_FILE
    shutil.copy(subproblems.DATA_DIR / name, tmp_path / name)
    np.testing.assert_array_equal(subproblems.load_subproblems(15, data_dir=tmp_path)[3]["g"],
                                  subproblems.load_subproblems(15)[3]["g"])


def test_the_fixture_is_not_in_the_package():
    import rproxjax
    from rproxjax import datasets

    assert not hasattr(datasets, "load_subproblems")
    package = rproxjax.datasets.default_data_dir()
    assert not (package / subproblems.SUBPROBLEMS_FILE).exists()
    assert (subproblems.DATA_DIR / subproblems.SUBPROBLEMS_FILE).is_file()
