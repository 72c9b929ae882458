"""step_cost.py with constants of the subproblem kernel set, for A/B runs of a kernel rule.

Each constant is read when a solve is traced, so setting it before step_cost compiles
anything gives the rule of the run; run the two arms in separate processes, alternating,
on a quiet machine::

    python benchmarks/step_cost_ab.py JACOBI_FIRST=False -- --mus 0.2 --no-sweep --no-save
    python benchmarks/step_cost_ab.py JACOBI_FIRST=True -- --mus 0.2 --no-sweep --no-save

``NAME=VALUE`` pairs name module constants of ``rproxjax._ssn.steps`` (VALUE a Python
literal); the arguments after ``--`` go to ``step_cost.py``. Results: ``results/jacobi_ab.md``.
"""

from __future__ import annotations

import ast
import sys

from rproxjax._ssn import steps as _ssn_steps

try:  # run as a script: benchmarks/ is on sys.path
    import step_cost
except ImportError:  # run as `python -m benchmarks.step_cost_ab`
    from benchmarks import step_cost


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    for pair in argv[:split]:
        name, value = pair.split("=", 1)
        if not hasattr(_ssn_steps, name):
            raise SystemExit(f"rproxjax._ssn.steps has no constant {name!r}")
        setattr(_ssn_steps, name, ast.literal_eval(value))
        print(f"rproxjax._ssn.steps.{name} = {getattr(_ssn_steps, name)!r}", flush=True)
    step_cost.main(argv[split + 1:])


if __name__ == "__main__":
    main()
