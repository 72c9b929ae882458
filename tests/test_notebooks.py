"""The notebooks run top to bottom in their small versions (as the documentation build does).

The experiment notebooks draw the saved paper-size results in ``results/`` and rerun a tiny
version into the session's ``tiny_results`` folder, where tests/test_experiments.py has
usually left them already (they then resume instead of recomputing).
"""

import json
import os
import pathlib

import matplotlib
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


# The documentation build (CI, sphinx -W, docs/conf.py) executes every notebook; here they
# run with -m slow (tests/conftest.py), with the session's tiny results.
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path, monkeypatch, tiny_results):
    if path.name == "peers_table.ipynb":
        pytest.importorskip("spams")
        pytest.importorskip("sklearn")
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)  # figures the notebook saves land here
    monkeypatch.setenv("RPROXJAX_RESULTS", str(ROOT / "results"))
    monkeypatch.setenv("RPROXJAX_SMALL_RESULTS", str(tiny_results))
    cells = json.loads(path.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    namespace = {"__name__": "__notebook__"}
    exec(compile(code, str(path), "exec"), namespace)  # noqa: S102
    assert namespace.get("SMALL", True)
    assert os.listdir(tmp_path)  # it produced its figures
