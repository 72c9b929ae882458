"""The README's Python examples run as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    exec(compile("\n".join(blocks), str(README), "exec"), namespace)  # noqa: S102
    # The examples' own results are sane.
    assert bool(namespace["info"].converged)
    assert float(namespace["rproxjax"].stiefel.feasibility(namespace["x"])) < 1e-10
    assert namespace["params"].shape == (4, 784, 10)
