"""Writes docs/performance.md: the current benchmark tables of benchmarks/results/.

    python docs/make_performance.py           # rewrite docs/performance.md
    python docs/make_performance.py --check   # exit 1 if docs/performance.md is out of date

Each section copies one results file (written by a script of benchmarks/) under its own
heading: its tables and their explanations, with the machine's description reduced to one
line (no dates, host names or load averages). benchmarks/results/ holds one current table
per script (and per device, ``*_gpu.md``); every one has a section here.
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
    ("subproblem_real.md", "Newton steps on real subproblems, CPU",
     "`benchmarks/subproblem_real.py`: the subproblems captured from MNIST runs "
     "(`experiments/data/subproblems_mnist.npz`), by rule, linear solver and stopping test."),
    ("subproblem_real_gpu.md", "Newton steps on real subproblems, GPU",
     "`benchmarks/subproblem_real.py` on a GPU."),
    ("scale.md", "Accelerator sizes on CPU: (784, 10, 100)",
     "`benchmarks/scale.py`: synthetic sparse PCA, per-step cost and sweeps over mu."),
    ("scale_gpu.md", "Accelerator sizes on a GPU", "`benchmarks/scale.py` on a GPU."),
    ("compile_time.md", "Compilation against running",
     "`benchmarks/compile_time.py`: the README's quickstart, a first fit, the demonstration "
     "and a loop over mu, each in a fresh process, and again in a second process with the "
     "persistent compilation cache; a new mu compiles nothing; the first answer's goals as "
     "ratios to scikit-learn's first MiniBatchSparsePCA fit on the same data."),
    ("streaming.md", "Online runs", "`benchmarks/streaming.py`: memory and throughput of "
     "R-ProxSGD over a generated stream."),
    ("peers_quickstart.md", "Sparse PCA against SPAMS and scikit-learn",
     "`benchmarks/peers_quickstart.py`: `sparse_pca` at its defaults against SPAMS and "
     "scikit-learn's MiniBatchSparsePCA at matched nonzeros, on MNIST and Fashion-MNIST."),
    ("peers_quickstart_full.md", "Sparse PCA against SPAMS and scikit-learn, all 70,000 images",
     "`benchmarks/peers_quickstart.py --full DATA_DIR`: the same on all 70,000 MNIST and "
     "Fashion-MNIST images, with the variance of the loadings' span beside the adjusted "
     "variance."),
    ("peers_quickstart_full_r5_20.md",
     "Sparse PCA against SPAMS and scikit-learn, all 70,000 images, r = 5 and 20",
     "`benchmarks/peers_quickstart.py --full DATA_DIR --r 5 20`."),
    ("rmc_peers.md", "Robust matrix completion against tensorly and a NumPy reference",
     "`benchmarks/rmc_peers.py`: `robust_matrix_completion` at its defaults on planted "
     "problems and the shipped video."),
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
