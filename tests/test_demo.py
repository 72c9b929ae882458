"""The README's main demonstration, in a short version (CI runs this)."""

import json

import jax
import numpy as np
import pytest

from rproxjax import _demo
from tests.compilations import count_compilations
from tests.subprocess_env import subprocess_env


def test_demo_runs_and_reports(tmp_path, capsys):
    results = _demo.run(n=3000, budget=5.0, q=10, out_dir=tmp_path, plot=True)
    out = capsys.readouterr().out
    assert "R-ProxSPB" in out and "expl. var." in out
    assert (tmp_path / "demo_loss.png").stat().st_size > 1000
    assert (tmp_path / "demo_components.png").stat().st_size > 1000
    for name, s in results.items():
        assert s["feasibility"] < 1e-4, name  # float32 data
        assert s["curve_loss"][-1] < s["curve_loss"][0], name
        assert s["ifo_over_n"] <= 5.0 + 1e-9, name  # equal budgets, never more
        assert 0.0 < s["explained_variance"] < 1.0
    # R-ProxSPB's curve has a point every step here (q = 10): inside its blocks, with the
    # refreshes' jumps in IFOs every q steps.
    jumps = np.diff(results["R-ProxSPB"]["curve_ifo"]) * 3000
    assert len(jumps) % 10 == 0 and len(jumps) > 10
    np.testing.assert_allclose(jumps[::10], 3000 + 0 * jumps[::10])
    np.testing.assert_allclose(np.delete(jumps, np.s_[::10]), 200.0)
    # Sparse components: entries above the paper's threshold 1e-3.
    assert results["R-ProxSPB"]["nonzeros"] < 0.5 * 784 * 10
    assert np.all(np.isfinite(results["R-ProxSPB"]["params"]))
    # The lab's record (python -m experiments --demo): the printed numbers, the settings and
    # where they were computed.
    from experiments import _demo as record

    run = {"n": 3000, "r": 10, "mu": 0.2, "budget": 5.0, "q": 10, "batch_size": 100, "seed": 0}
    path = record.save(results, record.settings(results, **run), tmp_path / "demo.json")
    doc = json.loads(path.read_text())
    assert doc["kind"] == "demo" and doc["settings"]["n"] == 3000
    assert (doc["settings"]["d"], doc["settings"]["dtype"]) == (784, "float32")
    assert doc["settings"]["steps"] == _demo.STEPS
    assert set(doc["machine"]) >= {"rproxjax", "jax", "commit", "tree_clean", "solver_defaults"}
    for name, s in results.items():
        assert doc["results"][name] == {k: s[k] for k in record.FIELDS}, name
    table = record.table(doc)
    rows = [line for line in table if line.startswith("| R-")]
    assert [row.split(" | ")[0] for row in rows] == ["| R-ProxSPB", "| R-ProxSGD", "| R-Subgrad"]
    spb = results["R-ProxSPB"]
    assert f"| {spb['loss']:.4f} | {spb['explained_variance']:.4f} | {spb['nonzeros']} |" in rows[0]


def test_the_lab_records_the_demo_in_a_command_of_its_own(capsys):
    """``python -m experiments --demo`` runs the demonstration as ``python -m rproxjax``
    does (float32); with experiments to run (float64) it is a usage error."""
    from experiments import __main__ as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--demo", "spca-mnist-r10", "--size", "tiny"])
    assert exit_info.value.code == 2
    assert "--demo runs without NAMEs" in capsys.readouterr().err


def test_the_library_demo_writes_no_results_file():
    """The demonstration in the package prints and plots; the README's record of it is the
    lab's (``experiments/_demo.py``)."""
    with pytest.raises(SystemExit):
        _demo.parse_args(["--json", "demo.json"])
    assert not hasattr(_demo, "save") and not hasattr(_demo, "table")


def test_the_demo_compiles_its_runs_and_little_else(tmp_path):
    """The demonstration's programs are its three methods' runs (an epoch program each,
    the one that evaluates F and draws the next epoch's samples, the optimizer's init) and
    its start: no program per indexing of a result or per split of a key. A second run
    compiles nothing."""
    def run():
        _demo.run(n=2000, budget=3.0, q=10, out_dir=tmp_path, plot=False, seed=3)

    first, second = count_compilations(run), count_compilations(run)
    assert first <= 14 and second == 0, (first, second)  # 14 in a new process; 31 once


def test_the_command_keeps_its_compiled_programs_in_a_persistent_cache(tmp_path):
    """``python -m rproxjax`` turns JAX's persistent cache on for its own process (in
    $RPROXJAX_CACHE_DIR here)."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = subprocess_env(RPROXJAX_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "rproxjax", "--quick", "--no-plot", "--budget", "2",
           "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    assert len(list(cache.iterdir())) >= 3  # the runs' programs, among others


def test_the_cache_folder_follows_the_environment(monkeypatch):
    from rproxjax._cache import default_cache_dir as cache_dir

    monkeypatch.setenv("RPROXJAX_CACHE_DIR", "/somewhere")
    assert cache_dir() == "/somewhere"
    monkeypatch.delenv("RPROXJAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache_dir() == "/xdg/rproxjax/xla"


def test_enable_compilation_cache_is_opt_in_and_fills_the_folder(tmp_path):
    """Importing rproxjax leaves JAX's cache off; ``enable_compilation_cache(path)`` turns
    it on for the calling process (a subprocess here: it is global), and a computation then
    writes its program there; a bad path is a TypeError before JAX is touched."""
    import subprocess
    import sys

    import rproxjax

    assert not jax.config.jax_compilation_cache_dir
    with pytest.raises(TypeError, match="path must be"):
        rproxjax.enable_compilation_cache(3)
    assert not jax.config.jax_compilation_cache_dir
    code = ("import jax, jax.numpy as jnp, rproxjax\n"
            "assert not jax.config.jax_compilation_cache_dir\n"
            f"print(rproxjax.enable_compilation_cache({str(tmp_path / 'c')!r}))\n"
            "assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0\n"
            "jax.jit(lambda x: jnp.sin(x) * 2)(jnp.ones(3)).block_until_ready()\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=subprocess_env())
    assert out.stdout.strip() == str(tmp_path / "c")
    assert len(list((tmp_path / "c").iterdir())) >= 1


def test_the_demo_takes_the_reproductions_tuned_steps():
    """One source: the demonstration's step sizes are the ones the reproduction tuned for
    its panel (MNIST, r = 10, mu = 0.2) in the committed results."""
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "results" / "spca-mnist-r10.json"
    if not path.exists():
        pytest.skip("no results/ folder (an installed copy)")
    from experiments._report import summarize

    best = summarize(json.loads(path.read_text()))["best_eta"]
    for name, steps in _demo.STEPS.items():
        tuned = best[f"{name}/mu=0.2"]
        assert steps["eta"] == tuned["chosen"], name
        if "gamma" in steps:
            assert steps["gamma"] == tuned["gamma"], name


@pytest.mark.parametrize("argv, message", [
    (["--quick", "--n", "0"], "n must be an int >= 100, got 0"),
    (["--quick", "--budget", "-1"], "budget > 0"),
    (["--seed", "-1"], "seed must be an int >= 0"),
    (["--n", "70001"], "at most the 70000 MNIST images"),
    (["--quick", "--n", "1000"], "one R-ProxSPB block"),
])
def test_the_command_refuses_bad_settings_with_a_usage_error(argv, message, capsys):
    """Every setting is checked before anything runs, with argparse's usage error (exit
    status 2) instead of a traceback; --quick never hides a given --n (it replaced it)."""
    with pytest.raises(SystemExit) as exit_info:
        _demo.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_quick_sets_defaults_not_given_values():
    quick = _demo.parse_args(["--quick"])
    assert (quick.n, quick.q, quick.budget) == (5000, 20, 4.0)
    given = _demo.parse_args(["--quick", "--n", "3000", "--q", "10", "--budget", "5"])
    assert (given.n, given.q, given.budget) == (3000, 10, 5.0)
    assert (_demo.parse_args([]).n, _demo.parse_args([]).q) == (20000, 100)
