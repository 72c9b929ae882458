"""Results files: ``<out>/<name>.json`` with every number, the machine, and resumable units.

An experiment is a list of *units* (one grid search, one run of one method at one mu, ...).
Each finished unit is written to the file at once, so an interrupted run resumes from the
units already saved instead of recomputing them. A file whose configuration differs from
the requested one is not reused (the caller asks for ``force=True`` to overwrite it).
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import functools
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import warnings

import jax
import numpy as np


def machine() -> dict:
    """Where and with what a result was computed."""
    import optax

    from rproxjax import __version__

    dev = jax.devices()[0]
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "optax": optax.__version__,
        "rproxjax": __version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "device": f"{dev.platform}: {dev.device_kind}",
        "x64": bool(jax.config.jax_enable_x64),
        # other work on the machine slows the timed curves: the 1/5/15-minute load averages
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        **source(),  # a copy of the cached dict's items
        "solver_defaults": solver_defaults(),
    }


@functools.cache
def source() -> dict:
    """The git commit of the checkout holding this lab and the library it imported, and
    whether its tracked files (outside ``results/``) had uncommitted changes; None for both
    outside a git checkout, or when ``rproxjax`` was imported from elsewhere (an installed
    wheel: the checkout's commit would not name the library that ran). Read once per
    process (the code a run imported), not at every saved unit."""
    import rproxjax

    root = pathlib.Path(__file__).resolve().parents[1]
    if not pathlib.Path(rproxjax.__file__).resolve().is_relative_to(root):
        return {"commit": None, "tree_clean": None}

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()

    try:
        if not (root / ".git").exists():
            raise FileNotFoundError(root / ".git")
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                    ":(exclude)results")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "tree_clean": None}
    return {"commit": commit, "tree_clean": not dirty}


def describe_ssn(ssn) -> dict:
    """An :class:`rproxjax.SSN` value as plain JSON: its fields, its rule and its linear
    solver each as a dict of its name and knobs."""
    def value(v):
        if dataclasses.is_dataclass(v):
            return {"name": getattr(v, "name", type(v).__name__),
                    **{f.name: value(getattr(v, f.name)) for f in dataclasses.fields(v)}}
        return to_json(v)

    return {f.name: value(getattr(ssn, f.name)) for f in dataclasses.fields(ssn)}


def solver_defaults() -> dict:
    """The subproblem solver's default settings, ``SSN()`` and ``SSN.stochastic()``, as
    plain JSON (:func:`describe_ssn`): what an experiment's solver is, apart from the
    overrides its configuration records (``ssn_tol``, ``linear_solver``)."""
    from rproxjax import SSN

    return {"SSN()": describe_ssn(SSN()), "SSN.stochastic()": describe_ssn(SSN.stochastic())}


def _as_current(fields: dict) -> tuple[dict, list[str]]:
    """A recorded description in the current form, and the recorded fields that are no
    longer settings. A record of rproxjax 0.3 (flat knobs and ``method``) is the solver that
    ``SSN(**knobs)`` builds today: SSN's former flat fields map each knob to its place."""
    if "method" not in fields:
        return fields, []
    import inspect

    from rproxjax import SSN
    from rproxjax._ssn.config import _FLAT

    known = set(inspect.signature(SSN).parameters) | set(_FLAT) | {"method"}
    gone = [k for k in fields if k not in known]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ssn = SSN(**{k: v for k, v in fields.items() if k in known})
    return describe_ssn(ssn), gone


def _dotted(fields: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in fields.items():
        if isinstance(value, dict):
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def staleness(result: dict) -> str | None:
    """Why a results file no longer describes the library: its solver defaults were not
    recorded or differ from the present ones (each difference named); None when fresh."""
    recorded = result.get("machine", {}).get("solver_defaults")
    if recorded is None:
        return ("its solver settings were not recorded (made by rproxjax "
                f"{result.get('machine', {}).get('rproxjax')}, before they were)")
    diffs = []
    for name, fields in solver_defaults().items():
        then, gone = _as_current(recorded.get(name, {}))
        then, now = _dotted(then), _dotted(fields)
        diffs += [f"{name}.{field} was {then.get(field, 'unset')!r}, now {value!r}"
                  for field, value in now.items() if then.get(field, "unset") != value]
        diffs += [f"{name}.{field} is no longer a setting"
                  for field in [*gone, *(f for f in then if f not in now)]]
    return "solver defaults changed: " + "; ".join(diffs) if diffs else None


def say(progress: bool, msg: str) -> None:
    """A progress line on stderr (between units of work, never inside compiled code)."""
    if progress:
        print(f"[experiments] {msg}", file=sys.stderr, flush=True)


def check_dtype(dtype) -> np.dtype:
    """The configuration's dtype; float64 needs x64, which the library never enables."""
    dtype = np.dtype(dtype)
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError("this configuration runs in float64: enable x64 first "
                         "(jax.config.update('jax_enable_x64', True)), as the CLI does.")
    return dtype


def to_json(value):
    """NumPy/JAX scalars and arrays as plain JSON (lists, floats; NaN/inf as strings)."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        value = np.asarray(value)
        if value.ndim:
            return [to_json(v) for v in value.tolist()]
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)  # "nan", "inf": valid JSON; float() reads them back
    return value


class Store:
    """The results file of one experiment, written after every unit."""

    def __init__(self, out_dir, name: str, config: dict, *, force: bool = False):
        self.path = pathlib.Path(out_dir) / f"{name}.json"
        self.config = to_json(config)
        self.data = None
        if self.path.exists() and not force:
            data = json.loads(self.path.read_text())
            if data.get("config") != self.config:
                raise ValueError(
                    f"{self.path} holds results of another configuration of {name!r}; "
                    "pass force=True (--force) to overwrite it, or another output folder."
                )
            self.data = data
        if self.data is None:
            self.data = {"name": name, "config": self.config, "machine": machine(),
                         "units": {}, "machines": {}, "complete": False}

    def has(self, key: str) -> bool:
        return key in self.data["units"]

    def get(self, key: str):
        return self.data["units"][key]

    def put(self, key: str, value) -> None:
        """Saves a finished unit, with the machine state it was computed in (a resumed
        file holds units of several sessions)."""
        self.data["units"][key] = to_json(value)
        self.data["machine"] = machine()
        self.data.setdefault("machines", {})[key] = self.data["machine"]
        self.write()

    def checkpoint(self, key: str) -> Checkpoint:
        """The :class:`Checkpoint` of the unit ``key`` (its pieces saved so far, if any)."""
        return Checkpoint(self, key)

    def finish(self, summary: dict) -> dict:
        self.data.pop("checkpoints", None)
        self.data["summary"] = to_json(summary)
        self.data["complete"] = True
        self.write()
        return self.data

    def write(self) -> None:
        _write(self.path, self.data)


def _write(path: pathlib.Path, data: dict) -> None:
    """Writes a results file atomically: an interrupted write never corrupts it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".json.tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def drop_units(out_dir, name: str, patterns) -> list[str]:
    """Removes from ``<out_dir>/<name>.json`` the units whose key matches one of
    ``patterns`` (:func:`fnmatch.fnmatchcase`), with their machines, and marks the file
    incomplete, so that resuming the experiment computes them again; returns their keys.

    Raises:
      FileNotFoundError: there is no such file.
      ValueError: a pattern matches no unit (a typo would otherwise rerun nothing).
    """
    path = pathlib.Path(out_dir) / f"{name}.json"
    data = load(path)
    keys = []
    for pattern in patterns:
        hit = [k for k in data["units"] if fnmatch.fnmatchcase(k, pattern)]
        if not hit:
            raise ValueError(f"{path}: no unit matches {pattern!r}.")
        keys += [k for k in hit if k not in keys]
    for k in keys:
        del data["units"][k]
        data.get("machines", {}).pop(k, None)
    data["complete"] = False
    data.pop("summary", None)
    _write(path, data)
    return keys


def load(path) -> dict:
    """Reads a results file written by :func:`experiments.run`."""
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"no results file {path}: run `python -m experiments {path.stem}` first."
        )
    return json.loads(path.read_text())


class Checkpoint:
    """The finished pieces of one long unit (a tuning's chunks of runs), saved as each
    finishes, so that an interrupted unit resumes from them instead of from its start.

    The pieces live in the file's ``checkpoints`` (never among its ``units``, so summaries
    and provenance never see them), with the source they were computed by
    (:func:`source`). They are reused only by the same source on a clean tree, where a
    piece recomputed would be bit-identical: a resume at another commit (or with
    uncommitted changes) starts the unit afresh. :meth:`close` drops them once the unit is
    saved (:meth:`Store.put`); :meth:`Store.finish` drops any left.
    """

    def __init__(self, store: Store, key: str, here: dict | None = None):
        self.store, self.key = store, key
        self.reused = 0
        here = source() if here is None else here  # {"commit", "tree_clean"}
        saved = store.data.get("checkpoints", {}).get(key)
        fresh = here["tree_clean"] is True and saved is not None and \
            saved.get("source") == here
        self.pieces = dict(saved["pieces"]) if fresh else {}
        self.source = here

    def get(self, piece: str):
        """The saved value of ``piece``, or None."""
        value = self.pieces.get(piece)
        self.reused += value is not None
        return value

    def put(self, piece: str, value) -> None:
        """Saves ``piece`` (the whole file is rewritten, atomically)."""
        self.pieces[piece] = to_json(value)
        self.store.data.setdefault("checkpoints", {})[self.key] = {
            "source": self.source, "pieces": self.pieces}
        self.store.write()

    def close(self) -> None:
        """Drops the pieces (call once the unit itself is saved)."""
        checkpoints = self.store.data.get("checkpoints", {})
        if checkpoints.pop(self.key, None) is not None:
            if not checkpoints:
                self.store.data.pop("checkpoints")
            self.store.write()
