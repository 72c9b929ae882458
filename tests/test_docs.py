"""The documentation site's pages: docs/getting_started.md's Python blocks run as written
(in order, in one namespace) and compute what the page says; the API reference covers every
public name.

The site itself is built by ``.ci/run`` (``python -m sphinx -W ...``), not here.
"""

import pathlib
import re

import numpy as np
import pytest

import rproxjax

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_blocks(page):
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


@pytest.fixture(scope="module")
def getting_started():
    ns: dict = {}
    code = "\n".join(python_blocks("docs/getting_started.md"))
    exec(compile(code, str(ROOT / "docs/getting_started.md"), "exec"), ns)  # noqa: S102
    return ns


def test_getting_started_sparse_pca(getting_started):
    spca, fixed = getting_started["spca"], getting_started["fixed"]
    assert abs(spca.nonzeros - 100) <= 5  # the target, within the path's tolerance
    x = np.asarray(spca.loadings, np.float64)
    assert x.shape == (784, 5) and np.linalg.norm(x.T @ x - np.eye(5)) < 1e-4
    assert getting_started["scores"].shape == (1000, 5)
    assert len(spca.path.mu) > 1
    counts = np.asarray(spca.path.nonzeros)
    assert abs(fixed.nonzeros - counts[getting_started["near"]]) <= 10  # "about that count"


def test_getting_started_optax_loop(getting_started):
    ns = getting_started
    assert float(rproxjax.stiefel.feasibility(ns["x"])) < 1e-4
    assert not bool(ns["info"].halted)
    loss = np.asarray(ns["res"].epoch_loss)
    assert loss.shape == (3,) and loss[-1] < loss[0]
    assert int(ns["res"].epoch_ifo[-1]) > 0


def test_getting_started_early_stopping(getting_started):
    ns = getting_started
    epochs = len(ns["seen"])
    assert 1 < epochs < 100 and ns["res_stopped"].epoch_loss.shape == (epochs + 1,)
    np.testing.assert_array_equal(ns["res_stopped"].epoch_loss[1:], np.asarray(ns["seen"]))


def test_getting_started_sweep(getting_started):
    params, losses = getting_started["params"], getting_started["losses"]
    assert params.shape == (4, 100, 5) and losses.shape == (4, 2)
    assert np.all(np.asarray(losses[:, -1]) < np.asarray(losses[:, 0]))
    # A larger mu gives a sparser point.
    assert int(rproxjax.problems.nonzeros(params[-1])) < int(rproxjax.problems.nonzeros(params[0]))


def test_getting_started_rmc(getting_started):
    ns = getting_started
    rmc = ns["rmc"]
    assert ns["background"].shape == ns["shape"] == (72, 96)
    assert float(rmc.objective) < float(rmc.initial_objective)
    assert np.all(np.asarray(rmc.outliers)[~ns["mask"]] == 0)


def test_api_reference_covers_the_public_names():
    """Every name of ``rproxjax.__all__`` has an autodoc entry (or, for the submodules, an
    ``automodule``) in docs/api/."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "docs" / "api").glob("*.rst")))
    documented = set(re.findall(r"^\.\. auto(?:function|class|data):: (\w+)", text, flags=re.M))
    documented |= set(re.findall(r"^\.\. automodule:: rproxjax\.(\w+)", text, flags=re.M))
    assert documented == set(rproxjax.__all__)


def test_the_performance_page_is_generated_from_the_current_benchmark_tables():
    """docs/performance.md is docs/make_performance.py's output for the committed
    benchmarks/results/: a benchmark rerun without the page regenerated fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_performance",
                                                  ROOT / "docs" / "make_performance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    current = (ROOT / "docs" / "performance.md").read_text()
    assert current == module.page(), "run: python docs/make_performance.py"


def test_the_troubleshooting_page_quotes_messages_the_library_raises():
    """Every message quoted in the first column of docs/troubleshooting.md's error tables
    (its pieces between "...") is in the library's source, so the page cannot drift from
    the errors it explains; the status table lists every Status code with its name."""
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    source = "\n".join(p.read_text() for p in (ROOT / "rproxjax").rglob("*.py"))
    source = re.sub(r'"\s*\n\s*(?:f|rf)?"', "", source)  # join implicitly concatenated strings
    quoted = [q for row in re.findall(r"^\| `([^|]*)` \|", page, flags=re.M)
              for q in re.findall(r"[^`]+", row) if q.strip(" /,")]
    assert len(quoted) >= 15, quoted
    for message in quoted:
        for piece in message.split("..."):
            piece = piece.strip()
            if len(piece) > 3:
                assert piece in source, message
    names = re.findall(r"^\| (\d) \| `(\w+)` \|", page, flags=re.M)
    assert [(int(c), n) for c, n in names] == [(int(s), s.name) for s in rproxjax.Status]
