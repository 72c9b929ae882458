"""The real subproblem instances for the benchmarks: ``load_instances(r, dtype)``; and
``loose_rule`` / ``FIRST_LOOSE_RULE`` and ``warm_start`` / ``FIRST_WARM_START``
(``tests/kernel_rules.py``), which pin the kernel's rule of loose solves and the optimizers'
warm start while instances are captured from runs.

A re-export of :func:`tests.subproblem_instances.load_instances` (one implementation, shared
with the tests); it puts the repository root on ``sys.path`` so that it also works when a
benchmark is run as a script (``python benchmarks/x.py`` from the repository root, where only
``benchmarks/`` is on the path). See ``data/README.md`` for the file
``data/subproblems_mnist.npz`` and ``benchmarks/capture_subproblems.py`` for how it was made.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.kernel_rules import (  # noqa: E402
    FIRST_LOOSE_RULE,
    FIRST_WARM_START,
    loose_rule,
    warm_start,
)
from tests.subproblem_instances import PATH, load_instances  # noqa: E402

__all__ = ["FIRST_LOOSE_RULE", "FIRST_WARM_START", "PATH", "load_instances", "loose_rule",
           "warm_start"]
