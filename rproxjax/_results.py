"""Solver outcomes as data: integer status codes with readable messages."""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["Status", "describe"]


class Status(enum.IntEnum):
    """Outcome of an iterative solve, stored as an int32 array in info records."""

    SUCCESSFUL = 0
    MAX_STEPS_REACHED = 1
    NONFINITE = 2
    COLLAPSED = 3
    INVALID = 4

    @property
    def message(self) -> str:
        return _MESSAGES[self]


_MESSAGES = {
    Status.SUCCESSFUL: "converged: the residual is below the tolerance",
    Status.MAX_STEPS_REACHED: (
        "not converged: max_steps reached before the residual fell below the "
        "tolerance; raise max_steps or loosen tol"
    ),
    Status.NONFINITE: (
        "stopped: a non-finite value (NaN or inf) appeared; the last finite "
        "iterate is returned. Check the inputs for NaN/inf or extreme scales"
    ),
    Status.COLLAPSED: (
        "not converged, and the prox zeroed a whole column of Y = X + zeta (t * mu very "
        "large): zeta = 0 is returned so that a step cannot leave the manifold; raise "
        "max_steps or lower t * mu"
    ),
    Status.INVALID: (
        "not solved: a traced argument is invalid (t <= 0 or mu < 0; concrete values are "
        "rejected with a ValueError instead): zeta = 0 is returned"
    ),
}


def describe(status) -> str | list:
    """Readable message(s) for a status code or an array of codes.

    Example:
        >>> from rproxjax import Status, describe
        >>> describe(Status.SUCCESSFUL)
        'converged: the residual is below the tolerance'
    """
    codes = np.asarray(status)
    if codes.ndim == 0:
        return Status(int(codes)).message
    return [Status(int(c)).message for c in codes.ravel()]
