"""Sphinx configuration of the rproxjax documentation site.

Why Sphinx rather than MkDocs: the JAX ecosystem's main projects (jax, optax, flax, chex)
build their documentation with Sphinx: ``sphinx.ext.autodoc`` with ``sphinx.ext.napoleon``
reads Google-style docstrings (the ``Args:`` / ``Returns:`` / ``Raises:`` / ``Example:``
sections this library's docstrings use), and MyST (``myst-nb``, which includes
``myst-parser``) reads the Markdown pages of ``docs/`` and the notebooks of ``notebooks/``.
The site then reads like its neighbours' and cross-references the same way.

Build (as ``.ci/run`` does; warnings are errors)::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Nothing is fetched at build time (CI reaches only package registries): no intersphinx, and
the notebooks, all executed, run on the shipped data and the saved results of ``results/``.
MathJax is loaded by the reader's browser.
"""

from __future__ import annotations

import filecmp
import os
import pathlib
import re
import shutil
import sys
import tempfile

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # autodoc imports the checkout's rproxjax, installed or not

import rproxjax  # noqa: E402

project = "rproxjax"
author = "The rproxjax developers"
copyright = "The rproxjax developers"
release = rproxjax.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",  # Markdown pages (myst-parser) and notebooks
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
# _build is the output (docs/notebooks/ is generated too: see the notebooks below).
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# -- autodoc / napoleon ------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # signatures show SSN.stochastic(), not its repr
# The signatures name the type aliases of rproxjax/_typing.py (ArrayLike, PyTree, ...), as the
# source does, instead of their expansions (ArrayLike alone is a union of eight types).
autodoc_type_aliases = {name: name for name in (
    "Array", "ArrayLike", "DTypeLike", "PRNGKey", "PyTree", "Regularizer", "ScalarOrSchedule",
    "npt.ArrayLike", "npt.DTypeLike")}
_ALIAS_REPR = re.compile(r"TypeAliasForwardRef\('([^']*)'\)")


def _alias_names(app, what, name, obj, options, signature, return_annotation):
    """Sphinx 9 writes an alias inside a union or a generic (``PyTree | None``,
    ``tuple[Array, ...]``) as the repr of its placeholder, ``TypeAliasForwardRef('PyTree')``;
    the signatures show the alias's name, as elsewhere."""
    def plain(text):
        return None if text is None else _ALIAS_REPR.sub(r"\1", text)

    return plain(signature), plain(return_annotation)
autosummary_generate = False  # the summary tables link to the entries on the same page
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_param = False  # an entry naming several arguments stays one entry
napoleon_use_ivar = False  # Attributes: sections document each field as an attribute
napoleon_attr_annotations = False  # the fields' types are in the class signature above them


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    """The results and states are NamedTuples whose fields the class docstring documents
    (its ``Attributes:`` section); autodoc would add each field again as a member with the
    docstring "Alias for field number N" (a duplicate object description)."""
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number"):
        return True
    return None


# The docstrings are written for help() as well: their formulas are plain text (|X_ij|,
# |S1|, ||E||_F). reST would read |X_ij| as a substitution reference; such bars are escaped
# (outside literals, roles, math blocks, literal blocks and doctests) so that they show as
# written.
_SUBSTITUTION = re.compile(r"(?<![\w|\\`])\|(?=[^\s|])([^|`\n]*?[^\s|\\])\|(?![\w|])")
_LITERAL_DIRECTIVES = (".. math::", ".. code-block::", ".. code::", ".. sourcecode::")


def _plain_text_bars(app, what, name, obj, options, lines):
    block = None  # the indentation of a math or literal block's opening line; -1: a doctest
    for i, line in enumerate(lines):
        indent, text = len(line) - len(line.lstrip()), line.strip()
        if block == -1 and text:
            continue  # a doctest block runs to the next blank line
        if block is not None and block >= 0 and (not text or indent > block):
            continue
        block = None
        if text.startswith(">>>"):
            block = -1
            continue
        if text.startswith(_LITERAL_DIRECTIVES):
            block = indent
            continue
        if text.endswith("::"):
            block = indent
        lines[i] = _SUBSTITUTION.sub(r"\|\1\|", line)


# napoleon reads an ``Args:`` entry's names from its first line; an entry that names several
# arguments over several lines (``a, b,`` then ``c: as in fit``) is joined into one.
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Other Parameters):\s*$")


def _joined_argument_lists(app, what, name, obj, options, lines):
    i, entry = 0, None
    while i < len(lines):
        line = lines[i]
        if _SECTION.match(line):
            entry = None
        elif line.strip() and entry is None and i > 0 and _SECTION.match(lines[i - 1]):
            entry = len(line) - len(line.lstrip())  # the entries' indentation
        elif line.strip() and entry is not None and len(line) - len(line.lstrip()) < entry:
            entry = None  # the section ended
        if (entry is not None and len(line) - len(line.lstrip()) == entry
                and line.rstrip().endswith(",") and ":" not in line
                and i + 1 < len(lines) and lines[i + 1].strip()):
            lines[i] = line.rstrip() + " " + lines[i + 1].strip()
            del lines[i + 1]
            continue
        i += 1


#: Constants re-exported by rproxjax/__init__.py, by the module whose ``#:`` comment
#: documents them (autodoc reads such comments only in the module it documents).
_CONSTANTS = {"rproxjax.SSN_RTOL": "rproxjax._ssn.config"}


def _constant_docs(app, what, name, obj, options, lines):
    """A re-exported float would otherwise show float's own docstring."""
    if what == "data" and name in _CONSTANTS:
        from sphinx.pycode import ModuleAnalyzer

        comments = ModuleAnalyzer.for_module(_CONSTANTS[name]).find_attr_docs()
        lines[:] = list(comments[("", name.rsplit(".", 1)[1])])


# -- Links to the repository outside docs/ --------------------------------------------------
_RELATIVE_LINK = re.compile(r"\[([^\]]*)\]\((\.\./[^)\s#]*)\)")


def _repository_links(app, docname, source):
    """The pages link to repository files outside docs/ (``../README.md``,
    ``../results/README.md``, ``../examples/rmc_video.py``, ``../examples/``), which work on
    GitHub and in a clone but are not pages of this site. A link to such a file becomes a
    MyST ``path:`` link: Sphinx copies the file into the site (``_downloads/``) and the link
    opens it as it is in the repository (Markdown as text). A link to a folder cannot be
    copied; it keeps its text, without the link. Links between the pages are untouched."""
    here = (DOCS / docname).parent

    def rewrite(match):
        text, target = match.groups()
        path = (here / target).resolve()
        if path.is_relative_to(DOCS) or not path.exists():
            return match.group(0)  # a page of the site, or a broken link Sphinx reports
        return f"[{text}](path:{target})" if path.is_file() else text

    source[0] = _RELATIVE_LINK.sub(rewrite, source[0])


# -- MyST and notebooks ------------------------------------------------------------------
myst_enable_extensions = ["dollarmath"]  # the notebooks' $...$
# The pages link to each other's sections by GitHub's heading slugs (usage.md#scaling-out).
myst_heading_anchors = 4

# The notebooks live in notebooks/ (outside this source tree); they are copied into
# docs/notebooks/ (generated, ignored by git) when the site is built, and notebooks.md lists
# them. None has outputs committed: each is executed at build time, in its small version,
# so the outputs shown are those of the build. Executions are cached (jupyter-cache) in a
# folder named by a hash of everything a notebook reads besides its own cells (the library,
# the lab, the results, the shipped data): a rebuild executes only the notebooks whose cells
# changed, and a change to the library or the results executes them all again, so a cached
# output is never stale. A fresh clone (CI) has no cache and executes every notebook. The
# tour runs small pieces on the shipped data; the experiment notebooks draw the saved
# paper-size results of results/ (RPROXJAX_RESULTS) and rerun a tiny version of one
# configuration into a folder of this build (RPROXJAX_SMALL_RESULTS). peers_table needs
# SPAMS and scikit-learn (the docs extra).
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
os.environ.setdefault("RPROXJAX_RESULTS", str(ROOT / "results"))
os.environ.setdefault("RPROXJAX_SMALL_RESULTS", tempfile.mkdtemp(prefix="rproxjax-docs-"))
def _inputs_hash() -> str:
    """A hash of the files the notebooks read besides their cells: the library's and the
    lab's sources, the results and the shipped data."""
    import hashlib

    digest = hashlib.sha256()
    for pattern in ("rproxjax/**/*.py", "rproxjax/_data/*", "experiments/**/*.py",
                    "results/*.json"):
        for path in sorted(ROOT.glob(pattern)):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


nb_execution_mode = "cache"
_CACHES = DOCS / "_build" / ".jupyter_cache"
nb_execution_cache_path = str(_CACHES / _inputs_hash())
for _old in (_CACHES.iterdir() if _CACHES.is_dir() else ()):  # caches of earlier inputs
    if _old.is_dir() and str(_old) != nb_execution_cache_path:
        shutil.rmtree(_old, ignore_errors=True)
nb_execution_timeout = 600
nb_execution_raise_on_error = True  # a notebook that fails fails the build
nb_execution_in_temp = True  # the figures the notebooks save land in a temporary folder
nb_merge_streams = True


def _copy_notebooks():
    target = DOCS / "notebooks"
    target.mkdir(exist_ok=True)
    for old in target.glob("*.ipynb"):
        if not (ROOT / "notebooks" / old.name).exists():
            old.unlink()
    for src in NOTEBOOKS:
        dst = target / src.name
        if not dst.exists() or not filecmp.cmp(src, dst, shallow=False):
            shutil.copy2(src, dst)


_copy_notebooks()

# -- HTML ----------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"rproxjax {release}"
html_static_path: list[str] = []


def setup(app):
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    app.connect("autodoc-process-signature", _alias_names)
    app.connect("autodoc-process-docstring", _joined_argument_lists, priority=400)  # napoleon: 500
    app.connect("autodoc-process-docstring", _plain_text_bars, priority=600)
    app.connect("autodoc-process-docstring", _constant_docs)
    app.connect("source-read", _repository_links)
