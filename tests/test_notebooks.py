"""The notebooks run top to bottom in their small versions (as CI executes them)."""

import json
import os
import pathlib

import matplotlib
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)  # figures the notebook saves land here
    cells = json.loads(path.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    namespace = {"__name__": "__notebook__"}
    exec(compile(code, str(path), "exec"), namespace)  # noqa: S102
    assert namespace.get("SMALL", True)
    assert os.listdir(tmp_path)  # it produced its figures
