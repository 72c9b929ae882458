"""The package's metadata says what is true: one version, the floors CI installs, the files
the wheel ships, the citation.

CI (``.ci/run``) installs the lowest versions of ``.ci/lowest.txt`` and runs tests with them;
these tests keep that file, ``pyproject.toml`` and ``CITATION.cff`` in step.
"""

import pathlib
import re
import tomllib

from packaging.requirements import Requirement  # packaging: a dependency of pytest
from packaging.version import Version

import rproxjax
from rproxjax import datasets

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _floors(requirements) -> dict[str, str]:
    """{name: floor} of requirements written ``name>=floor`` (extras' self-references and
    exact pins left out)."""
    floors = {}
    for text in requirements:
        req = Requirement(text)
        lower = [s.version for s in req.specifier if s.operator == ">="]
        if lower:
            floors[req.name.lower()] = lower[0]
    return floors


def _pins(path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def test_the_lowest_versions_ci_installs_are_the_floors():
    pins = _pins(ROOT / ".ci" / "lowest.txt")
    runtime = _floors(PYPROJECT["project"]["dependencies"])
    assert set(runtime) <= set(pins), "every runtime dependency has a lowest pin"
    test = _floors(PYPROJECT["project"]["optional-dependencies"]["test"])
    floors = dict(test, **runtime)
    for name, version in pins.items():
        assert name in floors and Version(floors[name]) == Version(version), (name, version)


def test_one_version_and_the_python_floor_everywhere():
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^version: (\S+)$", citation, flags=re.M).group(1) == rproxjax.__version__
    assert PYPROJECT["project"]["dynamic"] == ["version"]  # read from rproxjax.__version__
    python = re.fullmatch(r">=3\.(\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{python}"
    assert f"Programming Language :: Python :: 3.{python}" in PYPROJECT["project"]["classifiers"]


def test_the_citation_names_the_paper():
    citation = (ROOT / "CITATION.cff").read_text()
    paper = citation.split("preferred-citation:", 1)[1]
    for field in ("title:", "journal:", "year:", "authors:", "url:"):
        assert field in paper, field
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    head = (ROOT / "LICENSE").read_text()[:200]
    assert "Apache License" in head and "Version 2.0" in head


def test_the_wheel_ships_every_data_file_and_the_type_marker():
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["rproxjax"]
    package = ROOT / "rproxjax"
    shipped = {p.relative_to(package) for g in globs for p in package.glob(g)}
    data = {p.relative_to(package) for p in datasets.default_data_dir().iterdir()
            if p.is_file()}
    assert pathlib.Path("py.typed") in shipped
    # the data sets a user loads, and nothing else (no test or benchmark fixtures)
    assert data == shipped - {pathlib.Path("py.typed")} == {
        pathlib.Path("_data") / name
        for name in (datasets.MNIST_FILE, datasets.FASHION_MNIST_FILE, datasets.VIDEO_FILE)}


def test_the_wheel_ships_the_library_and_not_the_lab():
    """The packages setuptools finds with pyproject's rule are rproxjax's alone: the lab
    (experiments/), benchmarks and tests stay in the repository."""
    import setuptools

    rule = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    found = setuptools.find_packages(str(ROOT), include=rule["include"],
                                     exclude=rule.get("exclude", ()))
    assert "rproxjax" in found and "rproxjax._ssn" in found
    assert all(name == "rproxjax" or name.startswith("rproxjax.") for name in found), found
    assert (ROOT / "experiments" / "__init__.py").exists()  # the lab is a package, not found


def test_the_package_index_page_has_only_absolute_links_and_the_readmes_quickstart():
    """The wheel's description (``readme``) is a page of its own for a package index, where
    the README's relative links would break: every link absolute, its Python blocks the
    README's first two (which tests/test_readme.py runs), every extra it names declared."""
    assert PYPROJECT["project"]["readme"] == "README_PACKAGE.md"
    page = (ROOT / "README_PACKAGE.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", page)
    assert links and all(link.startswith("https://") for link in links), links
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    readme = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks == readme[:2]
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    assert set(re.findall(r"rproxjax\[(\w+)\]", page)) <= extras
    assert len(page.splitlines()) <= 80
