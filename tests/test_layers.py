"""The import graph of ``rproxjax`` points one way: each module imports only from its own
layer or those below it (every import statement counts, those inside functions too), and
nothing in the package imports the repository's lab (``experiments/``), benchmarks or tests,
which the wheel does not ship."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "rproxjax"

#: Layers, lowest first: a module is in the layer of its longest listed prefix.
LAYERS = (
    ("_typing", "_linalg", "_checks", "_results", "_jit", "_foreign", "_cache"),  # base
    ("stiefel", "grassmann"),                                      # geometry
    ("_ssn",),                                                     # the Newton kernel
    ("_regularizers", "problems", "_contract"),                    # models, the contract
    ("_blocks", "_transforms", "_estimators", "_manpg", "_optimizers"),  # optimizers
    ("_run",),                                                     # the runner
    ("_tasks", "datasets"),                                        # the tasks
    ("", "__main__", "_demo"),                                     # the package, the demo
)

#: Top-level packages of the repository outside the library: ``rproxjax`` never imports them.
OUTSIDE = ("experiments", "benchmarks", "tests")


def layer(module: str) -> int:
    """The layer of ``module`` (dotted, relative to the package: "" is the package)."""
    best = None
    for level, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                    best is None or len(name) > len(best[1])):
                best = (level, name)
    if best is None:
        raise AssertionError(f"rproxjax.{module} is in no layer of tests/test_layers.py")
    return best[0]


def imports() -> list[tuple[str, str]]:
    """(importer, imported) pairs inside the package, relative names."""
    edges = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "rproxjax":  # modules only (not a name like __version__)
                    targets = [a.name for a in node.names if (ROOT / f"{a.name}.py").exists()
                               or (ROOT / a.name).is_dir()]
                elif node.module.startswith("rproxjax."):
                    targets = [node.module[len("rproxjax."):]]
            elif isinstance(node, ast.Import):
                targets = [a.name[len("rproxjax."):] for a in node.names
                           if a.name.startswith("rproxjax.")]
            edges += [(module, t) for t in targets]
    return edges


def outside_imports(sources) -> list[str]:
    """``module:line imports name`` for every import of a package of :data:`OUTSIDE` in
    ``sources`` ({dotted module: source text}), at module level or inside functions."""
    found = []
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"rproxjax.{module}:{node.lineno} imports {name}" for name in names
                      if name.split(".")[0] in OUTSIDE]
    return found


def sources() -> dict[str, str]:
    """{module relative to the package: source} for every module of the package."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


def violations(edges) -> list[str]:
    return [f"rproxjax.{a} (layer {layer(a)}) imports rproxjax.{b} (layer {layer(b)})"
            for a, b in edges if layer(b) > layer(a)]


def test_the_import_graph_points_down():
    edges = imports()
    assert len(edges) > 100  # the walk found the package's imports
    assert violations(edges) == []


@pytest.mark.parametrize("edge", [("_ssn.solve", "_run.compile"), ("_ssn.steps", "_blocks"),
                                  ("stiefel", "_ssn.solve"), ("_run.fit", "_tasks.spca")])
def test_an_upward_edge_fails(edge):
    assert violations([edge])


def test_the_package_imports_nothing_outside_the_library():
    found = sources()
    assert "_demo" in found and len(found) > 40  # the walk found the package's modules
    assert outside_imports(found) == []


@pytest.mark.parametrize("source, line, name", [
    ("from experiments._store import machine", 1, "experiments._store"),
    ("def f():\n    import experiments", 2, "experiments"),
    ("import experiments._report as report", 1, "experiments._report"),
    ("from benchmarks import _timing", 1, "benchmarks"),
    ("from tests.reference import manpg", 1, "tests.reference"),
])
def test_an_import_of_the_lab_fails(source, line, name):
    assert outside_imports({"_demo": source}) == [f"rproxjax._demo:{line} imports {name}"]
    assert outside_imports({"_demo": "import rproxjax.experiments_like\nimport json"}) == []
