"""Writes docs/performance.md: the current benchmark tables of benchmarks/results/.

    python docs/make_performance.py           # rewrite docs/performance.md
    python docs/make_performance.py --check   # exit 1 if docs/performance.md is out of date

Each section copies one results file (written by a script of benchmarks/) under its own
heading: its tables and their explanations, with the machine's description reduced to one
line (no dates, host names or load averages). Files that are not the current measurement of
the library are left out: dated copies (``*_YYYY-MM-DD.md``), comparisons with earlier
versions (``jacobi_ab.md``), results whose text names a former
default (``inexact.md``) and the older single-call scripts' tables
(``subproblem.md``, ``solvers.md``, ``linear_solver.md``).
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"

#: (results file, heading, the benchmark script and what the section shows), in page order.
SECTIONS = [
    ("step_cost.md", "One step against one R-Subgrad step, CPU",
     "`benchmarks/step_cost.py`: the cost of a step of each method on MNIST sparse PCA, and "
     "`jax.vmap` of whole runs over 8 values of mu."),
    ("step_cost_gpu.md", "One step against one R-Subgrad step, GPU",
     "`benchmarks/step_cost.py` on a GPU (`benchmarks/gpu_checks.sh`)."),
    ("gpu_profile.md", "Where a step's time goes on a GPU, by kernel",
     "`benchmarks/gpu_profile.py` on a GPU: each step's device kernels, the custom calls in "
     "its program, and the retraction's and the Newton system's forms alone."),
    ("sweep_floor.md", "What a sweep's lanes cost without the subproblem",
     "`benchmarks/sweep_floor.py`: 8 vmapped lanes against one, for the parts of a step every "
     "method takes."),
    ("loss_form.md", "How the form of a loss sets its gradient's cost",
     "`benchmarks/loss_form.py`: the minibatch gradient of one loss written three ways, in "
     "the patterns the optimizers and sweeps run."),
    ("sweep_profile.md", "Where a sweep's time goes, by XLA operation",
     "`benchmarks/sweep_profile.py`: a CPU profile of the compiled sweeps of R-ProxSGD and "
     "R-Subgrad, grouped by the JAX operation each XLA instruction comes from."),
    ("subproblem_real.md", "Newton steps on real subproblems, CPU",
     "`benchmarks/subproblem_real.py`: the subproblems captured from MNIST runs "
     "(`rproxjax/_data/subproblems_mnist.npz`), by rule, linear solver and stopping test."),
    ("subproblem_real_gpu.md", "Newton steps on real subproblems, GPU",
     "`benchmarks/subproblem_real.py` on a GPU."),
    ("hard_subproblems.md", "Degenerate subproblems at r = 32",
     "`benchmarks/hard_subproblems.py`: subproblems captured from R-ProxSPB at d = 4096, whose "
     "solutions have columns with fewer than r nonzeros."),
    ("linear_solver_runs.md", "Dense against CG Newton systems inside runs",
     "`benchmarks/linear_solver_runs.py`: R-ProxSGD steps at (d, r, b) = (4096, 32, 500)."),
    ("inexact_loose.md", "Loose subproblem solves: the loss against IFOs",
     "`benchmarks/inexact.py`: whole runs over 5 seeds at relative subproblem tolerances up "
     "to 0.5, against exact solves."),
    ("inexact_noise.md", "Loose subproblem solves: the error against the minibatch noise",
     "`benchmarks/inexact_noise.py`: the solve error a relative tolerance leaves in zeta, "
     "against the noise the minibatch itself puts into zeta."),
    ("scale_cpu.md", "Accelerator sizes on CPU: (784, 10, 100)",
     "`benchmarks/scale.py`: synthetic sparse PCA, per-step cost and sweeps over mu."),
    ("scale_cpu_d4096.md", "Accelerator sizes on CPU: (4096, 32, 500)", "`benchmarks/scale.py`."),
    ("scale_cpu_d16384.md", "Accelerator sizes on CPU: (16384, 64, 2000)",
     "`benchmarks/scale.py`."),
    ("scale_gpu.md", "Accelerator sizes on a GPU", "`benchmarks/scale.py` on a GPU."),
    ("compile_time_after.md", "Compilation against running",
     "`benchmarks/compile_time.py`: the README's quickstart, a first fit, the demonstration "
     "and a loop over mu, each in a fresh process, and again in a second process with the "
     "persistent compilation cache; a new mu compiles nothing."),
    ("path_rounds_after.md", "The rounds of a sparsity target's path",
     "`benchmarks/path_rounds.py`: `sparse_pca(nonzeros=k)` on the quickstart's data, its "
     "rounds, compiled time and result per target, against the library before the refit's "
     "early stop."),
    ("lapack_threads.md", "LAPACK's threads on the CPU",
     "`benchmarks/lapack_threads.py`: a tall LAPACK QR between XLA products, with OpenBLAS's "
     "threads on and off, and `sparse_pca`'s compiled fit."),
    ("streaming.md", "Online runs", "`benchmarks/streaming.py`: memory and throughput of "
     "R-ProxSGD over a generated stream."),
]

_META = re.compile(r"^- (\w+): (.*)$")


def _machine(meta: dict) -> str:
    """One line from a results file's machine description."""
    parts = []
    if meta.get("cpu_model"):
        parts.append(f"{meta['cpu_model']}, {meta.get('cpu_count', '?')} CPU cores")
    devices = meta.get("devices")
    if devices:
        parts.append("devices " + ", ".join(devices))
    if meta.get("jax"):
        parts.append(f"JAX {meta['jax']}")
    if "jax_enable_x64" in meta:
        parts.append("float64 enabled" if meta["jax_enable_x64"] else "float64 not enabled")
    return "Machine: " + "; ".join(parts) + "." if parts else ""


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def section(name: str, heading: str, what: str) -> str:
    """The page section of one results file."""
    lines = (RESULTS / name).read_text().splitlines()
    meta, body, head = {}, [], True
    for line in lines:
        if head and (line.startswith("# ") or not line.strip()):
            continue  # the file's own title and the blank lines around its machine block
        match = _META.match(line) if head else None
        if match:
            meta[match.group(1)] = _value(match.group(2))
            continue
        head = False
        if line.startswith("machine: {"):
            meta.update(ast.literal_eval(line[len("machine: "):]))
            continue
        if line.startswith("Total benchmark time"):
            if "partial" in line:
                body.append("Partial results: the run stopped at its time limit.")
            continue
        line = re.sub(r" \((before|after), rproxjax [^)]*\)", "", line)
        body.append("#" + line if line.startswith("## ") else line)
    while body and not body[-1].strip():
        body.pop()
    machine = _machine(meta)
    out = [f"## {heading}", "", what + f" From `benchmarks/results/{name}`."]
    if machine:
        out += ["", machine]
    return "\n".join(out + [""] + body) + "\n"


def page() -> str:
    intro = [
        "<!-- Generated by docs/make_performance.py from benchmarks/results/: do not edit. -->",
        "",
        "# Performance",
        "",
        "The current benchmark tables, one section per results file of `benchmarks/results/`",
        "(the scripts are described in [benchmarks/README.md](../benchmarks/README.md)). Times",
        "are from the machine each section names, on shared machines: compare the ratios within",
        "a table (measured side by side, in the same rounds), not times across tables.",
        "",
        "Contents:",
        "",
    ]
    anchors = [f"- [{h}](#{_anchor(h)})" for _, h, _ in SECTIONS]
    return "\n".join(intro + anchors) + "\n\n" + "\n".join(section(*s) for s in SECTIONS)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = page()
    if "--check" in argv:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is out of date: run python docs/make_performance.py")
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
