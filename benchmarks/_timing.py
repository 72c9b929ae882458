"""Timing and reporting helpers shared by the benchmarks in this folder.

Everything here is generic (nothing depends on rproxjax):

* :func:`time_fn` / :func:`time_samples`: wall time of a compiled JAX call,
  after warm-up, synchronized with ``jax.block_until_ready``; :func:`round_robin`: several
  calls timed in turn, round by round.
* :func:`precompile` (:func:`precompile_reported`) / :func:`compile_count`: compile
  a benchmark's programs concurrently before timing them, and count the compilations
  that follow.
* :func:`machine_info`, :func:`markdown_table`, :func:`save_results`:
  describing the machine and writing JSON + Markdown under
  ``benchmarks/results/``.

Enable float64 (``jax.config.update("jax_enable_x64", True)``) in the calling
script before creating arrays if float64 numbers are wanted.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = [
    "RESULTS_DIR",
    "compile_count",
    "machine_info",
    "markdown_table",
    "precompile",
    "precompile_reported",
    "print_table",
    "round_robin",
    "save_results",
    "time_fn",
    "time_samples",
]

#: Default folder for :func:`save_results`.
RESULTS_DIR = Path(__file__).resolve().parent / "results"

_COMPILES = [0, 0.0]  # count, seconds
_COMPILES_LOCK = threading.Lock()


def _count_compile(event: str, duration: float, **_kwargs: Any) -> None:
    if event.endswith("backend_compile_duration"):
        with _COMPILES_LOCK:
            _COMPILES[0] += 1
            _COMPILES[1] += duration


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def compile_count() -> tuple[int, float]:
    """XLA compilations in this process so far and their total seconds (JAX's
    ``backend_compile`` events; eager operations on arrays compile small programs too)."""
    with _COMPILES_LOCK:
        return _COMPILES[0], _COMPILES[1]


def precompile(jobs: Sequence[tuple[Any, Callable, tuple]], workers: int | None = None,
               ) -> dict[Any, float]:
    """Compiles ``jobs``, ``(label, jitted function, args)``, concurrently before timing.

    Each function is lowered here, one after another (tracing holds the GIL), and the
    lowerings are compiled in a thread pool (XLA releases the GIL while it compiles): a
    benchmark of many programs waits for about the slowest compile per core rather than
    for their sum. The later calls with the same argument types find the executables in
    ``jax.jit``'s cache: :func:`compile_count` before and after the timed part says so.
    Returns the seconds each compile took, measured in its thread (under contention).

    On GPUs XLA's autotuner times candidate kernels on the device while it compiles, so
    concurrent compiles contend for it ("delay kernel timed out" warnings) and could pick
    other kernels than serial compiles would. On an H200 the per-step times of
    ``step_cost.py`` compiled this way matched those of an earlier serially compiled run
    (R-Subgrad 493-517 us against 474-496 us); keep groups small there (``scale.py``
    compiles one size and dtype at a time).
    """
    from concurrent.futures import ThreadPoolExecutor

    lowered = [(label, fn.lower(*args)) for label, fn, args in jobs]

    def compile_one(item):
        label, low = item
        tic = time.perf_counter()
        low.compile()
        return label, time.perf_counter() - tic

    workers = workers or max(1, min(len(lowered), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(compile_one, lowered))


def precompile_reported(jobs: Sequence[tuple[Any, Callable, tuple]], what: str,
                        ) -> dict[Any, float]:
    """:func:`precompile` that prints what it compiled and how long it took; if it fails,
    prints why and returns ``{}`` (each program then compiles at its first call, outside
    the timed rounds of the benchmarks here, which call every program once untimed)."""
    import traceback

    tic, before = time.perf_counter(), compile_count()
    try:
        seconds = precompile(jobs)
    except Exception:  # noqa: BLE001 - reported; the benchmark goes on
        print(f"{what}: precompile failed, compiling at first calls:\n"
              f"{traceback.format_exc()}", flush=True)
        return {}
    print(f"{what}: {len(jobs)} programs precompiled concurrently "
          f"({compile_count()[0] - before[0]} XLA compiles) in "
          f"{time.perf_counter() - tic:.0f} s", flush=True)
    return seconds


def round_robin(calls: dict[Any, tuple[Callable, tuple]], repeats: int) -> dict[Any, list[float]]:
    """Wall times (seconds) of each ``fn(*args)`` of ``calls`` (label -> (fn, args)): one
    untimed call each (compilation, warm-up), then ``repeats`` rounds that call each once in
    turn, so that every label sees the same load. Each call is synchronized on its outputs."""
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    samples: dict[Any, list[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, (fn, args) in calls.items():
            tic = time.perf_counter()
            jax.block_until_ready(fn(*args))
            samples[label].append(time.perf_counter() - tic)
    return samples


def time_samples(
    fn: Callable,
    *args,
    repeats: int = 5,
    warmup: int = 1,
    max_seconds: float | None = None,
    min_repeats: int = 1,
) -> list[float]:
    """Wall times (seconds) of ``fn(*args)``, each synchronized on its outputs.

    ``warmup`` untimed calls come first (the first call of a ``jax.jit``
    function compiles it). Then up to ``repeats`` timed calls; if
    ``max_seconds`` is given, timing stops once that much time was spent and
    at least ``min_repeats`` samples exist (for slow calls).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples: list[float] = []
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - t0)
        if (
            max_seconds is not None
            and len(samples) >= min_repeats
            and time.perf_counter() - start >= max_seconds
        ):
            break
    return samples


def time_fn(
    fn: Callable,
    *args,
    repeats: int = 5,
    warmup: int = 1,
    max_seconds: float | None = None,
    min_repeats: int = 1,
    reduce: Callable[[list[float]], float] = statistics.median,
) -> float:
    """Median wall time (seconds) of a compiled call ``fn(*args)`` after warm-up.

    ``fn`` is typically a ``jax.jit`` function; the warm-up call(s) compile it,
    so the result excludes compilation but includes Python dispatch (tens of
    microseconds). See :func:`time_samples` for the arguments; ``reduce=min``
    gives the least load-disturbed sample instead of the median (useful for
    micro-benchmarks on a shared machine).
    """
    return reduce(
        time_samples(
            fn, *args, repeats=repeats, warmup=warmup,
            max_seconds=max_seconds, min_repeats=min_repeats,
        )
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """The machine and software a result was measured on (JSON-serializable)."""
    uname = platform.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    import jaxlib

    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "processor": platform.processor() or uname.machine,
        "cpu_model": _cpu_model(),
        "uname": f"{uname.system} {uname.release} {uname.version} {uname.machine}",
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "loadavg_1_5_15min": load,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "devices": [str(dev) for dev in jax.devices()],
        "jax_enable_x64": bool(jax.config.read("jax_enable_x64")),
    }


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table; cells are ``str()``-ed, numbers right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    for row in cells:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells, expected {len(headers)}.")
    widths = [max([len(h)] + [len(row[j]) for row in cells]) for j, h in enumerate(headers)]
    numeric = [
        bool(rows) and all(isinstance(row[j], (int, float, np.number)) for row in rows)
        for j in range(len(headers))
    ]

    def fmt(row):
        padded = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        "-" * (w + 1) + ":" if num else "-" * (w + 2)
        for w, num in zip(widths, numeric, strict=True)
    ) + "|"
    return "\n".join([fmt(list(headers)), rule] + [fmt(row) for row in cells])


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Prints :func:`markdown_table` and returns it."""
    table = markdown_table(headers, rows)
    print(table, flush=True)
    return table


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.generic, jax.Array)) and np.ndim(obj) == 0:
        return np.asarray(obj).item()
    if isinstance(obj, (np.ndarray, jax.Array)):
        return np.asarray(obj).tolist()
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    return obj


def save_results(
    name: str,
    results: dict[str, Any],
    markdown: str,
    *,
    machine: dict[str, Any] | None = None,
    directory: str | Path | None = None,
) -> tuple[Path, Path]:
    """Writes ``<directory>/<name>.json`` and ``<directory>/<name>.md``.

    The JSON holds ``{"benchmark": name, "machine": ..., "results": ...}``;
    the Markdown file holds a machine summary followed by ``markdown`` (the
    printed tables). ``machine`` defaults to :func:`machine_info` now.
    ``directory`` defaults to :data:`RESULTS_DIR`. Existing files are
    overwritten. Returns the two paths.
    """
    directory = Path(directory) if directory is not None else RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    machine = machine if machine is not None else machine_info()
    json_path = directory / f"{name}.json"
    md_path = directory / f"{name}.md"
    payload = {"benchmark": name, "machine": machine, "results": results}
    json_path.write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
    lines = [f"# Benchmark `{name}`", ""]
    lines += [f"- {key}: {value}" for key, value in machine.items()]
    lines += ["", markdown.rstrip(), ""]
    md_path.write_text("\n".join(lines))
    return json_path, md_path
