"""Static checks of imports, read with ``ast`` (nothing is imported or run).

* The modules of :mod:`rproxjax` and of the repository's lab (``experiments/``) import one
  another without a cycle, counting the imports inside functions too: a cycle that works
  today through a late import breaks when someone moves that import to the top.
* No file under ``tests/``, ``benchmarks/`` or ``experiments/`` sets (or deletes) an
  attribute of an rproxjax
  module, or of an object reached from one (a class, a constant, a module it imported):
  such a patch changes the library for every later caller in the process and is undone only
  if the test remembers to. Environment variables (``monkeypatch.setenv``) are fine.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from tests.subprocess_env import subprocess_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "rproxjax"
#: The packages whose import graph is checked: the library and the lab.
PACKAGES = (PACKAGE, "experiments")


# --------------------------------------------------------------------------------------
# The package's import graph
# --------------------------------------------------------------------------------------


def _modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of :data:`PACKAGES` (``__init__`` files
    under the package's own name)."""
    out = {}
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules) -> str | None:
    """The longest prefix of the dotted ``name`` that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: str, source: str, modules, *, is_package=False) -> list[tuple[str, int]]:
    """(imported module of the package, line) for every import statement of ``module``'s
    source, at module level or inside functions and classes. ``from P import n`` counts as
    an import of the submodule ``P.n`` when that is one, else of ``P``; relative imports
    are resolved against the module's package (itself for an ``__init__``)."""
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target:
                    out.append((target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[:-(node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules else _resolve(base, modules)
                if target:
                    out.append((target, node.lineno))
    return sorted(out, key=lambda edge: edge[1])


def _edges(imports) -> dict[str, int]:
    """{imported module: first line importing it}."""
    edges = {}
    for target, line in imports:
        edges.setdefault(target, line)
    return edges


def _graph() -> tuple[dict[str, dict[str, int]], dict[str, pathlib.Path]]:
    """module -> {imported module: first line importing it}."""
    modules = _modules()
    graph = {module: _edges(_imports(module, path.read_text(), modules,
                                     is_package=path.name == "__init__.py"))
             for module, path in modules.items()}
    return graph, modules


def _cycles(graph) -> list[list[str]]:
    """One cycle [a, b, ..., a] through each strongly connected component with more than one
    module (or a module importing itself); Tarjan's algorithm, then a path back round."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v):  # recursion depth is bounded by the number of modules (~60)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    cycles = []
    for component in components:
        members = set(component)
        start = min(component)
        if len(component) == 1 and start not in graph[start]:
            continue
        # Breadth-first from start's successors inside the component, back to start.
        parent = {w: start for w in sorted(graph[start]) if w in members}
        frontier = list(parent)
        while start not in parent:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v]):
                    if w in members and w not in parent:
                        parent[w] = v
                        nxt.append(w)
            frontier = nxt
        path, v = [start], parent[start]
        while v != start:
            path.append(v)
            v = parent[v]
        cycles.append([start] + path[1:][::-1] + [start])
    return cycles


def _describe(cycle, graph, modules) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:], strict=False):
        where = modules[a].relative_to(ROOT)
        steps.append(f"{a} imports {b} ({where}:{graph[a][b]})")
    return " -> ".join(cycle) + "\n    " + "\n    ".join(steps)


def test_the_package_has_no_import_cycle():
    graph, modules = _graph()
    assert "experiments._plots" in graph and f"{PACKAGE}._ssn.solve" in graph
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        _describe(c, graph, modules) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    """The check above can fail: a cycle through a late import, one through ``from P import
    submodule`` and a relative import, and a self-import are found; a chain is not."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 1}, "e": {"e": 1}}
    assert sorted(map(tuple, _cycles(graph))) == [("a", "b", "c", "a"), ("e", "e")]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []

    modules = {f"{PACKAGE}.p", f"{PACKAGE}.p.one", f"{PACKAGE}.p.two", f"{PACKAGE}.q"}
    one = "import rproxjax.q\nfrom rproxjax.p import two\n"
    two = "def late():\n    from . import one\n    from .one import x\n    from .. import q\n"
    init = "from .one import y\n"
    assert _imports(f"{PACKAGE}.p.one", one, modules) == [(f"{PACKAGE}.q", 1),
                                                          (f"{PACKAGE}.p.two", 2)]
    assert _imports(f"{PACKAGE}.p.two", two, modules) == [
        (f"{PACKAGE}.p.one", 2), (f"{PACKAGE}.p.one", 3), (f"{PACKAGE}.q", 4)]
    assert _imports(f"{PACKAGE}.p", init, modules, is_package=True) == [(f"{PACKAGE}.p.one", 1)]
    graph = {f"{PACKAGE}.p.one": _edges(_imports(f"{PACKAGE}.p.one", one, modules)),
             f"{PACKAGE}.p.two": _edges(_imports(f"{PACKAGE}.p.two", two, modules)),
             f"{PACKAGE}.q": {}}
    assert _cycles(graph) == [[f"{PACKAGE}.p.one", f"{PACKAGE}.p.two", f"{PACKAGE}.p.one"]]


# --------------------------------------------------------------------------------------
# No test or benchmark patches the library
# --------------------------------------------------------------------------------------

_SETTERS = {"setattr", "delattr"}


def _dotted(node) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Patches:
    """The patches of rproxjax in one file's syntax tree.

    A name is *rooted* in rproxjax when it is bound by an import from rproxjax (``import
    rproxjax...``, ``from rproxjax... import n``, ``importlib.import_module("rproxjax...")``),
    by an assignment of a rooted expression, or, as a function's parameter, by a call in the
    same file that passes a rooted expression (``_pinned(_ssn_steps, ...)``). An expression
    is rooted when its innermost name is (through attributes, subscripts and ``getattr``),
    not through other calls: a new instance belongs to the caller. The names are per file,
    not per scope (a name rooted anywhere is rooted everywhere in the file).
    """

    def __init__(self, tree):
        self.tree = tree
        self.rooted: set[str] = set()
        self.functions: dict[str, list[ast.arguments]] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node.args)
        while self._grow():
            pass

    def is_rooted(self, node) -> bool:
        while True:
            if isinstance(node, ast.Name):
                return node.id in self.rooted
            if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
                node = node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "getattr" and node.args):
                node = node.args[0]
            else:
                return False

    @staticmethod
    def _names(target):
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                yield from _Patches._names(elt)

    def _grow(self) -> bool:
        before = len(self.rooted)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        self.rooted.add(alias.asname or PACKAGE)
            elif isinstance(node, ast.ImportFrom):
                if not node.level and (node.module or "").split(".")[0] == PACKAGE:
                    self.rooted.update(a.asname or a.name for a in node.names)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if value is not None and (self.is_rooted(value) or _imports_package(value)):
                    for target in targets:
                        self.rooted.update(self._names(target))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                for args in self.functions.get(node.func.id, []):
                    params = [*args.posonlyargs, *args.args]
                    for param, arg in zip(params, node.args, strict=False):
                        if self.is_rooted(arg):
                            self.rooted.add(param.arg)
                    names = {p.arg for p in [*params, *args.kwonlyargs]}
                    for kw in node.keywords:
                        if kw.arg in names and self.is_rooted(kw.value):
                            self.rooted.add(kw.arg)
        return len(self.rooted) > before

    def found(self) -> list[tuple[int, str]]:
        """(line, code) of every patch."""
        out = []
        for node in ast.walk(self.tree):
            targets = []
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else (
                    func.attr if isinstance(func, ast.Attribute) else None)
                if name in _SETTERS and node.args:
                    first = node.args[0]
                    if (isinstance(first, ast.Constant) and isinstance(first.value, str)
                            and first.value.split(".")[0] == PACKAGE):
                        out.append((node.lineno, ast.unparse(node)))  # monkeypatch's "a.b.c"
                    elif self.is_rooted(first):
                        out.append((node.lineno, ast.unparse(node)))
                elif name == "patch" or (name == "object" and isinstance(func, ast.Attribute)
                                         and _dotted(func.value) in ("patch", "mock.patch",
                                                                     "unittest.mock.patch")):
                    first = node.args[0] if node.args else None
                    if first is not None and (self.is_rooted(first) or (
                            isinstance(first, ast.Constant) and isinstance(first.value, str)
                            and first.value.split(".")[0] == PACKAGE)):
                        out.append((node.lineno, ast.unparse(node)))
            elif isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for target in targets:
                for leaf in _leaves(target):
                    if isinstance(leaf, ast.Attribute) and self.is_rooted(leaf.value):
                        out.append((node.lineno, ast.unparse(node).splitlines()[0]))
        return sorted(set(out))


def _leaves(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _leaves(elt)
    elif isinstance(target, ast.Starred):
        yield from _leaves(target.value)
    else:
        yield target


def _imports_package(value) -> bool:
    """``importlib.import_module("rproxjax...")`` or ``__import__("rproxjax...")``."""
    return (isinstance(value, ast.Call) and _dotted(value.func) in (
        "importlib.import_module", "import_module", "__import__") and bool(value.args)
        and isinstance(value.args[0], ast.Constant) and isinstance(value.args[0].value, str)
        and value.args[0].value.split(".")[0] == PACKAGE)


def patches(source: str) -> list[tuple[int, str]]:
    return _Patches(ast.parse(source)).found()


def _files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for folder in ("tests", "benchmarks", "experiments")
                  for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("name", _files())
def test_no_test_or_benchmark_patches_the_library(name):
    found = patches((ROOT / name).read_text())
    assert not found, f"{name} patches rproxjax:\n" + "\n".join(
        f"  {name}:{line}: {code}" for line, code in found)


def test_the_patch_finder_finds_patches():
    """The check above can fail: each form of patch is found, and what is not a patch of
    the library (environment variables, the test's own objects, new instances) is not."""
    found = patches('''
import importlib
import rproxjax
import rproxjax._ssn.steps
from rproxjax import stiefel
from rproxjax._run import program as _program
from rproxjax._ssn import solve as _solve

steps = importlib.import_module("rproxjax._ssn.steps")
alias = _solve

def test(monkeypatch):
    monkeypatch.setattr(_solve, "SEQUENTIAL_LANES", False)          # 13
    monkeypatch.setattr("rproxjax._ssn.solve.SEQUENTIAL_LANES", 1)  # 14
    monkeypatch.setattr(stiefel.jax, "default_backend", None)       # 15
    with monkeypatch.context() as m:
        m.setattr(_program.EpochProgram, "_grad_point", None)       # 17
    setattr(steps, "PATH_STEPS", False)                             # 18
    rproxjax._ssn.steps.PATH_STEPS = False                          # 19
    alias.SEQUENTIAL_LANES, x = None, 1                             # 20
    del _solve.SEQUENTIAL_LANES                                     # 21
    _pin(_solve)                                                    # 22
    monkeypatch.delattr(rproxjax, "fit")                            # 23

def _pin(module):
    setattr(module, "X", 1)                                         # 26
''')
    assert [line for line, _ in found] == [13, 14, 15, 17, 18, 19, 20, 21, 23, 26]
    assert patches('''
import types
import rproxjax

class Mine:
    pass

def test(monkeypatch):
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    setattr(Mine, "prox", rproxjax.L1.prox)
    ssn = rproxjax.SSN()
    ssn.tol = 1e-8
    ns = types.SimpleNamespace()
    ns.fit = rproxjax.fit
    monkeypatch.setattr(ns, "fit", None)
''') == []


def test_the_library_leaves_global_configuration_alone():
    """No module of the package switches matplotlib's backend, uses pyplot (its global figure
    registry) or updates JAX's configuration: figures are ``matplotlib.figure.Figure``
    objects, and computations follow their inputs' dtype. Command-line programs
    (``__main__.py``: ``python -m experiments`` runs in float64) own their process and may
    configure it. The repository's lab (``experiments/``) is held to the same rule. The
    one exception is asked for by name: :func:`rproxjax.enable_compilation_cache` sets the
    persistent cache's two keys, and nothing else, when a user calls it."""
    offenders = []
    cache = ROOT / "rproxjax" / "_cache.py"
    keys = [ast.literal_eval(node.args[0]) for node in ast.walk(ast.parse(cache.read_text()))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "jax.config.update"]
    assert keys == ["jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs"]
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        if path.name == "__main__.py" or path == cache:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n.startswith("matplotlib.pyplot") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports pyplot")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = ast.unparse(node.func.value)
                if (owner, node.func.attr) in {("matplotlib", "use"), ("jax.config", "update"),
                                               ("config", "update")}:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} calls "
                                     f"{owner}.{node.func.attr}")
    assert not offenders, offenders


RUNTIME_CHECK = r"""
import logging, sys, tempfile
import jax, matplotlib
before = {k: repr(v) for k, v in jax.config.values.items()}
backend, rc = matplotlib.get_backend(), dict(matplotlib.rcParams)
handlers = list(logging.getLogger().handlers)
import numpy as np
import rproxjax
from rproxjax import _demo
rng = np.random.default_rng(0)
data = rng.standard_normal((300, 12)).astype(np.float32)
rproxjax.sparse_pca(data, 2, nonzeros=8, passes=2)
rproxjax.fit(rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.1)), rproxjax.problems.spca_loss,
             np.linalg.qr(rng.standard_normal((12, 2)))[0].astype(np.float32), data,
             key=jax.random.key(0), batch_size=30, num_epochs=2,
             recording=rproxjax.Recording(progress=True))
with tempfile.TemporaryDirectory() as out:
    _demo.run(n=1000, budget=2.0, q=5, out_dir=out, plot=True)
after = {k: repr(v) for k, v in jax.config.values.items()}
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
assert not changed, changed
assert matplotlib.get_backend() == backend, (backend, matplotlib.get_backend())
assert dict(matplotlib.rcParams) == rc
assert logging.getLogger().handlers == handlers
assert logging.getLogger("rproxjax").handlers == []
print("unchanged", len(before))
"""


def test_running_the_library_changes_no_global_configuration():
    """In a fresh process: JAX's configuration (every option), matplotlib's backend and
    rcParams and the logging handlers are the same after importing rproxjax and running a
    fit with a progress bar, a sparse PCA path and the demonstration with its figures."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", RUNTIME_CHECK], capture_output=True,
                          text=True, cwd=ROOT, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1].startswith("unchanged")  # after the demo's table
