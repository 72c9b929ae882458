"""Solver outcomes as data: integer status codes with readable messages."""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any

import jax
import numpy as np

from rproxjax._typing import ArrayLike

__all__ = ["Status", "describe"]


class Status(enum.IntEnum):
    """Outcome of an iterative solve, stored as an int32 array in info records.

    An ``enum.IntEnum``: the codes compare with the stored arrays (e.g.
    ``info.status == Status.SUCCESSFUL``); the runner's history reports the largest code
    over blocks (``History.ssn_status``). ``Status(code).message`` (or :func:`describe`)
    gives a readable message.

    The codes (each member is documented below too):

    * ``SUCCESSFUL`` (0): converged, the residual met the tolerance.
    * ``MAX_STEPS_REACHED`` (1): not converged within ``max_steps``.
    * ``NONFINITE`` (2): a non-finite value (NaN or inf) appeared; zeta = 0.
    * ``COLLAPSED`` (3): not converged and the prox zeroed a whole column of X + zeta;
      zeta = 0.
    * ``INVALID`` (4): a traced argument is invalid (t <= 0, mu < 0, or a bad tolerance);
      zeta = 0.

    Example:
        >>> from rproxjax import Status
        >>> Status(1).name, int(Status.COLLAPSED)
        ('MAX_STEPS_REACHED', 3)
        >>> Status.NONFINITE.message.split(":")[0]
        'stopped'
    """

    SUCCESSFUL = 0
    MAX_STEPS_REACHED = 1
    NONFINITE = 2
    COLLAPSED = 3
    INVALID = 4

    @property
    def message(self) -> str:
        return _MESSAGES[self]


_MESSAGES = MappingProxyType({
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
        "not solved: a traced argument is invalid (t <= 0, mu < 0, tol not finite and "
        "> 0 or rtol not finite and >= 0; concrete values are rejected with a ValueError "
        "instead): zeta = 0 is returned"
    ),
})


def describe(status: ArrayLike) -> str | list[Any]:
    """Readable message(s) for a status code or an array of codes (a nested list for an
    array, of its shape). Runs on the host: inside ``jax.jit`` return the codes instead.

    Args:
      status: a :class:`Status`, an int code, or an integer array of codes (NumPy or a
        concrete JAX array, e.g. ``info.status`` or ``history.ssn_status``).

    Returns:
      The message (a str) for a single code; for an array, a nested list of messages with
      the array's shape.

    Raises:
      TypeError: for a traced ``status`` (inside ``jax.jit`` or ``jax.vmap``) or codes of a
        non-integer dtype (bool included).
      ValueError: for an integer that is not a :class:`Status` code.

    Example:
        >>> import numpy as np
        >>> from rproxjax import Status, describe
        >>> describe(Status.SUCCESSFUL)
        'converged: the residual is below the tolerance'
        >>> [m.split(":")[0] for m in describe(np.array([0, 1]))]
        ['converged', 'not converged']
    """
    if isinstance(status, jax.core.Tracer):
        raise TypeError("describe reads status codes on the host; inside jax.jit or "
                        "jax.vmap return info.status and describe it outside.")
    codes = np.asarray(status)
    if codes.dtype == np.bool_ or not np.issubdtype(codes.dtype, np.integer):
        raise TypeError(f"describe takes integer status codes, got dtype {codes.dtype}.")
    if codes.ndim == 0:
        return Status(int(codes)).message
    return [describe(c) for c in codes]
