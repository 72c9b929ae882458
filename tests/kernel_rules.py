"""Pinning the subproblem kernel's rule of loose solves (shared by tests and benchmarks).

Captured subproblem instances come from optimizer runs whose solves use the kernel's rule;
capturing them with a fixed former rule keeps them from moving with the rule under test
(up to floating-point rounding: the compiled programs differ).
"""

from __future__ import annotations

import contextlib

import jax

from rproxjax import _blocks, _ssn_steps

#: The module constants of ``rproxjax._ssn_steps`` that make up the rule of loose solves.
RULE_CONSTANTS = ("LOOSE_RHO_SCALE", "LOOSE_SECANT_SHIFT", "UNIT_ACCEPT")
#: The first rule: regularization 1e-4 min(||E||, 0.1) with the secant shift, and a line
#: search at every step.
FIRST_LOOSE_RULE = (1e-4, True, 0.0)
#: The optimizers' first warm start (``rproxjax._blocks.WARM_START``): the previous
#: multiplier's regularizer part.
FIRST_WARM_START = "lam_h"


@contextlib.contextmanager
def loose_rule(rule):
    """Sets the rule of loose solves to ``rule`` (values of RULE_CONSTANTS, read when a
    solve is traced; caches cleared on entry and exit); ``None`` keeps the present one."""
    old = [getattr(_ssn_steps, name) for name in RULE_CONSTANTS]
    for name, value in zip(RULE_CONSTANTS, rule or old, strict=True):
        setattr(_ssn_steps, name, value)
    jax.clear_caches()
    try:
        yield
    finally:
        for name, value in zip(RULE_CONSTANTS, old, strict=True):
            setattr(_ssn_steps, name, value)
        jax.clear_caches()


@contextlib.contextmanager
def warm_start(name):
    """Sets the optimizers' warm start (``rproxjax._blocks.WARM_START``, read when an update
    is traced; caches cleared on entry and exit)."""
    old = _blocks.WARM_START
    _blocks.WARM_START = name
    jax.clear_caches()
    try:
        yield
    finally:
        _blocks.WARM_START = old
        jax.clear_caches()
