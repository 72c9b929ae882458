"""Pinning the subproblem kernel's rule of loose solves (shared by tests and benchmarks).

Captured subproblem instances come from optimizer runs whose solves use the kernel's rule;
capturing them with a fixed former rule keeps them from moving with the rule under test
(up to floating-point rounding: the compiled programs differ).
"""

from __future__ import annotations

import contextlib

import jax

from rproxjax import _blocks

#: The module constants of ``rproxjax._ssn.steps`` that make up the rule of loose solves.
from rproxjax._ssn import steps as _ssn_steps
RULE_CONSTANTS = ("LOOSE_RHO_SCALE", "LOOSE_SECANT_SHIFT", "UNIT_ACCEPT", "JACOBI_FIRST")
#: The first rule: regularization 1e-4 min(||E||, 0.1) with the secant shift, a line
#: search at every step, and no Jacobi steps.
FIRST_LOOSE_RULE = (1e-4, True, 0.0, False)
#: The optimizers' first warm start (``rproxjax._blocks.WARM_START``): the previous
#: multiplier's regularizer part.
FIRST_WARM_START = "lam_h"


@contextlib.contextmanager
def _pinned(module, names, values):
    """Sets ``module``'s constants ``names`` to ``values`` (read when a program is traced),
    clearing JAX's caches on entry and exit so that no program traced with other values
    is reused."""
    old = [getattr(module, name) for name in names]
    for name, value in zip(names, values, strict=True):
        setattr(module, name, value)
    jax.clear_caches()
    try:
        yield
    finally:
        for name, value in zip(names, old, strict=True):
            setattr(module, name, value)
        jax.clear_caches()


def loose_rule(rule):
    """Sets the rule of loose solves to ``rule`` (values of RULE_CONSTANTS, read when a
    solve is traced; caches cleared on entry and exit); ``None`` keeps the present one."""
    if rule is None:
        rule = [getattr(_ssn_steps, name) for name in RULE_CONSTANTS]
    return _pinned(_ssn_steps, RULE_CONSTANTS, rule)


def warm_start(name):
    """Sets the optimizers' warm start (``rproxjax._blocks.WARM_START``, read when an update
    is traced; caches cleared on entry and exit)."""
    return _pinned(_blocks, ("WARM_START",), (name,))
