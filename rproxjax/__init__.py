"""rproxjax: nonsmooth stochastic optimization on the Stiefel manifold, in JAX.

Public surface:

* :mod:`rproxjax.stiefel`, :mod:`rproxjax.grassmann`: manifold geometry.
* :func:`l1`, :func:`l21`: regularizers (pytrees, vmappable over mu).
* :func:`tangent_prox`: the tangent-space proximal subproblem (semi-smooth
  Newton), with :class:`SubproblemInfo` and :class:`Status`.
* :func:`sparse_pca`, :func:`robust_matrix_completion`: the paper's applications on
  your own data in one call.

The library never changes JAX's global configuration unless asked: it computes in the
dtype of the arrays it is given (enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``); :func:`enable_compilation_cache` turns on
JAX's persistent compilation cache when you call it.
"""

from rproxjax import datasets, grassmann, problems, stiefel
from rproxjax._blocks import Block, Euclidean, Grassmann, Stiefel
from rproxjax._cache import enable_compilation_cache
from rproxjax._contract import Needs, StepInfo, step_info
from rproxjax._estimators import SarahState, SvrgState, sarah_estimator, svrg_estimator
from rproxjax._manpg import ManPGState, manpg
from rproxjax._optimizers import (
    inverse_sqrt_schedule,
    r_prox_sarah,
    r_prox_sgd,
    r_prox_spb,
    r_prox_svrg,
    r_spider_boost,
    r_subgrad,
)
from rproxjax._regularizers import L1, L21, l1, l21
from rproxjax._results import Status, describe
from rproxjax._run.fit import FitResult, History, fit, pure_fit
from rproxjax._run.monitor import EpochInfo
from rproxjax._run.options import Recording, Sampling
from rproxjax._run.sweep import sweep
from rproxjax._ssn.config import (
    CG,
    SSN,
    SSN_RTOL,
    Adaptive,
    AutoLinearSolver,
    Dense,
    PathSteps,
    Reference,
    Secant,
)
from rproxjax._ssn.solve import SubproblemInfo, default_tol, tangent_prox
from rproxjax._tasks.rmc import RMCResult, robust_matrix_completion
from rproxjax._tasks.spca import SparsePCAPath, SparsePCAResult, sparse_pca
from rproxjax._transforms import (
    ProximalStepState,
    RetractionState,
    SubgradientState,
    proximal_step,
    retract,
    subgradient_direction,
)

__version__ = "0.3.0.dev0"

__all__ = [
    # geometry and regularizers
    "Block", "Euclidean", "Grassmann", "Stiefel", "L1", "L21", "l1", "l21",
    "grassmann", "stiefel",
    # the subproblem
    "SSN", "Status", "SubproblemInfo", "default_tol", "describe", "tangent_prox",
    "Adaptive", "AutoLinearSolver", "CG", "Dense", "PathSteps", "Reference", "Secant",
    # transformations and their states
    "Needs", "ProximalStepState", "RetractionState", "SarahState", "StepInfo",
    "SubgradientState", "SvrgState", "proximal_step", "retract", "sarah_estimator",
    "step_info", "subgradient_direction", "svrg_estimator",
    # named optimizers
    "ManPGState", "SSN_RTOL", "inverse_sqrt_schedule", "manpg", "r_prox_sarah", "r_prox_sgd",
    "r_prox_spb", "r_prox_svrg", "r_spider_boost", "r_subgrad",
    # running
    "EpochInfo", "FitResult", "History", "Recording", "Sampling", "enable_compilation_cache",
    "fit", "pure_fit", "sweep",
    # tasks: the applications on your own data in one call
    "RMCResult", "SparsePCA", "SparsePCAPath", "SparsePCAResult", "robust_matrix_completion",
    "sparse_pca",
    # applications
    "datasets", "problems",
]


def __getattr__(name):
    """:class:`SparsePCA` (a scikit-learn estimator) is imported on first use, so that
    scikit-learn stays an optional dependency (``pip install "rproxjax[sklearn]"``)."""
    if name == "SparsePCA":
        try:
            from rproxjax._tasks.estimator import SparsePCA
        except ImportError as err:  # pragma: no cover - scikit-learn is a test dependency
            raise ImportError("rproxjax.SparsePCA needs scikit-learn: pip install "
                              "\"rproxjax[sklearn]\".") from err
        return SparsePCA
    raise AttributeError(f"module 'rproxjax' has no attribute {name!r}")
