"""FLOP model of one iteration of each solver, for the FLOP-bound times of ``solvers.py``.

2 FLOPs per multiply-add; X is d x r, the minibatch has b samples, the data set n,
and ``m = r (r + 1) / 2`` is the number of symmetric coordinates of the multiplier:

* minibatch gradient of the sparse PCA loss: 4 b d r (Z X and Z^T (Z X)); full
  gradient: 4 n d r;
* semi-smooth Newton (SSN): per evaluation of E(Lambda) 4 d r^2 (X Lambda and X^T Y;
  the library forms X D once per Newton step instead of X Lambda per evaluation,
  which this model slightly over-counts); per dense Newton step 2 d r^3 (the K
  tensor) + r^3 m + r^2 m^2 + (2/3) m^3 (Gram and LU solve). This is the dense step
  of the reference rule; the secant and adaptive rules' steps do the same dense
  algebra plus element-wise work (a Cholesky instead of an LU: (1/3) m^3);
* polar retraction as ``stiefel.retract`` computes it on CPU after an optimizer's step,
  one pass of A (A^T A)^{-1/2}: 2 d r^2 for the Gram, about 9 r^3 for its symmetric
  eigendecomposition (Golub and Van Loan), 2 r^3 for the scaled V V^T and 2 d r^2 for
  the product: 4 d r^2 + 11 r^3 (a second pass, as much again, runs only where
  cond(A)^2 > 100 (for every lane of a ``jax.vmap`` where one lane needs it), and always
  on accelerators: not counted, the bound stays a lower bound);
* tangent projection (R-Subgrad, the SARAH transport): 4 d r^2;
* one iteration: R-ProxSGD = minibatch gradient + SSN + retraction; R-ProxSPB SARAH
  step = two minibatch gradients (at X_t and X_{t-1}) + projection + SSN +
  retraction; its refresh = full gradient + SSN + retraction, amortized over a block
  as ((q - 1) SARAH + 1 refresh) / q; R-Subgrad = minibatch gradient + projection +
  retraction; ManPG = full gradient + SSN + (2 + backtracks) objective evaluations
  of 2 n d r (Z X) and as many retractions.

Element-wise work (soft-thresholding, masks, the ||z||^2 term, guards) is not counted,
so the model's FLOP-bound time (FLOPs / a measured large-matmul throughput) is a lower
bound. Where the number of E evaluations is unknown, ``evals = steps + 1`` per solve
(one initial evaluation and one per Newton step, every line search accepting its first
trial) is the least possible, which keeps the bound a lower bound.
"""

from __future__ import annotations

__all__ = [
    "grad_flops",
    "iteration_flops",
    "projection_flops",
    "retraction_flops",
    "spb_flops",
    "ssn_flops",
    "sym_size",
]


def sym_size(r: int) -> int:
    """m = r (r + 1) / 2, the symmetric coordinates of an r x r multiplier."""
    return r * (r + 1) // 2


def grad_flops(batch: float, d: int, r: int) -> float:
    """Gradient of the sparse PCA loss over ``batch`` samples: Z X and Z^T (Z X)."""
    return 4.0 * batch * d * r


def ssn_flops(steps: float, evals: float, d: int, r: int) -> float:
    """A subproblem solve of ``steps`` dense Newton steps and ``evals`` evaluations of E."""
    m = sym_size(r)
    newton = 2.0 * d * r**3 + r**3 * m + r**2 * m**2 + (2.0 / 3.0) * m**3
    return evals * 4.0 * d * r**2 + steps * newton


def retraction_flops(d: int, r: int) -> float:
    """Polar retraction by one pass of A (A^T A)^{-1/2} through r x r eigh."""
    return 4.0 * d * r**2 + 11.0 * r**3


def projection_flops(d: int, r: int) -> float:
    """Tangent projection U - X sym(X^T U)."""
    return 4.0 * d * r**2


def iteration_flops(solver: str, steps: float, evals: float | None = None,
                    backtracks: float = 0.0, *, d: int, r: int, b: int, n: int) -> float:
    """FLOPs of one iteration of ``solver`` ("sgd", "sarah", "refresh", "subgrad", "manpg").

    ``steps``: Newton steps of its subproblem; ``evals``: evaluations of E (default
    ``steps + 1``, the least possible); ``backtracks``: ManPG's Armijo halvings.
    """
    evals = steps + 1.0 if evals is None else evals
    ssn = ssn_flops(steps, evals, d, r)
    retraction = retraction_flops(d, r)
    if solver == "sgd":
        return grad_flops(b, d, r) + ssn + retraction
    if solver == "sarah":
        return 2 * grad_flops(b, d, r) + projection_flops(d, r) + ssn + retraction
    if solver == "refresh":
        return grad_flops(n, d, r) + ssn + retraction
    if solver == "subgrad":
        return grad_flops(b, d, r) + projection_flops(d, r) + retraction
    if solver == "manpg":
        trials = 2.0 + backtracks
        return grad_flops(n, d, r) + ssn + trials * (2.0 * n * d * r + retraction)
    raise ValueError(f"unknown solver {solver!r}")


def spb_flops(sarah_steps: float, refresh_steps: float, q: int, *, d: int, r: int, b: int,
              n: int, sarah_evals: float | None = None,
              refresh_evals: float | None = None) -> float:
    """R-ProxSPB per step, amortized over a block: ((q - 1) SARAH + 1 refresh) / q."""
    shape = {"d": d, "r": r, "b": b, "n": n}
    sarah = iteration_flops("sarah", sarah_steps, sarah_evals, **shape)
    refresh = iteration_flops("refresh", refresh_steps, refresh_evals, **shape)
    return ((q - 1) * sarah + refresh) / q
