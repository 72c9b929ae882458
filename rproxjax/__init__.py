"""rproxjax: nonsmooth stochastic optimization on the Stiefel manifold, in JAX.

Public surface:

* :mod:`rproxjax.stiefel`, :mod:`rproxjax.grassmann`: manifold geometry.
* :func:`l1`, :func:`l21`: regularizers (pytrees, vmappable over mu).
* :func:`tangent_prox`: the tangent-space proximal subproblem (semi-smooth
  Newton), with :class:`SubproblemInfo` and :class:`Status`.

The library never changes JAX's global configuration: it computes in the
dtype of the arrays it is given (enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``).
"""

from rproxjax import datasets, grassmann, problems, stiefel
from rproxjax._blocks import Block, Euclidean, Grassmann, Stiefel
from rproxjax._optimizers import (
    ManPGState,
    ProxSGDState,
    ProxSPBState,
    SubgradState,
    inverse_sqrt_schedule,
    manpg,
    r_prox_sgd,
    r_prox_spb,
    r_spider_boost,
    r_subgrad,
)
from rproxjax._regularizers import L1, L21, l1, l21
from rproxjax._results import Status, describe
from rproxjax._runner import FitResult, History, fit
from rproxjax._subproblem import SubproblemInfo, default_tol, tangent_prox
from rproxjax._sweep import sweep

__version__ = "0.1.0"

__all__ = [
    "Block",
    "Euclidean",
    "Grassmann",
    "L1",
    "L21",
    "ManPGState",
    "ProxSGDState",
    "ProxSPBState",
    "Stiefel",
    "SubgradState",
    "inverse_sqrt_schedule",
    "manpg",
    "problems",
    "r_prox_sgd",
    "r_prox_spb",
    "r_spider_boost",
    "r_subgrad",
    "Status",
    "SubproblemInfo",
    "datasets",
    "default_tol",
    "FitResult",
    "History",
    "describe",
    "fit",
    "grassmann",
    "l1",
    "l21",
    "stiefel",
    "sweep",
    "tangent_prox",
]
