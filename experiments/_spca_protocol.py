"""The sparse PCA experiment's methods, the paper's Table best_eta and the mu panels: shared
by the runner (:mod:`experiments._spca`) and its summary
(:mod:`experiments._spca_summary`), which imports nothing from the runner."""

from __future__ import annotations

#: R-Subgrad with the paper's single-sample update (|S| = 1): an extra row beside R-Subgrad
#: at the minibatch size of the other methods.
SINGLE_SAMPLE = "R-Subgrad-1"
#: The paper's methods, then R-ProxSVRG and R-ProxSARAH (the cells its Table 1 leaves empty)
#: and R-Subgrad-1.
METHODS = ("R-ProxSPB", "R-ProxSGD", "R-Subgrad", "ManPG", "R-ProxSVRG", "R-ProxSARAH",
           SINGLE_SAMPLE)
BLOCK_METHODS = ("R-ProxSPB", "R-ProxSVRG", "R-ProxSARAH")  # a refresh every q steps
VARIANCE_METHODS = ("R-ProxSPB", "R-ProxSGD")  # the paper's variance figure compares these
GAMMA_METHODS = ("R-ProxSPB", "R-ProxSGD")
# The paper's Table best_eta (MATLAB, its own data scaling; "coil" = COIL-100).
PAPER_BEST_ETA = {
    "mnist": {0.2: {"R-Subgrad": 0.01, "R-ProxSGD": 0.005, "R-ProxSPB": 0.005},
              0.4: {"R-Subgrad": 0.01, "R-ProxSGD": 0.01, "R-ProxSPB": 0.005}},
    "fashion_mnist": {0.2: {"R-Subgrad": 0.005, "R-ProxSGD": 0.01, "R-ProxSPB": 0.005},
                      0.4: {"R-Subgrad": 0.01, "R-ProxSGD": 0.01, "R-ProxSPB": 0.005}},
}
STOCHASTIC = tuple(m for m in METHODS if m != "ManPG")


def panel_mus(mu_fractions, mus, mu_deg: float) -> list[dict]:
    """The panels: fractions of mu_deg, then the paper's nominal values ``mus``."""
    panels = [{"key": f"{f:g}mu_deg", "mu": f * mu_deg, "label": f"mu = {f:g} mu_deg = "
               f"{f * mu_deg:.3g}", "nominal": False} for f in mu_fractions]
    panels += [{"key": f"{mu:g}", "mu": float(mu), "label": f"mu = {mu:g} (the paper's)",
                "nominal": True} for mu in mus]
    return panels

#: The ratio of the eta axis on which the paper's baseline (R-Subgrad-1) is tuned again at
#: the budget around its choices at the paper's nominal panels
#: (:func:`experiments._spca_tuning.refine`): the proximal methods' 2-D grids place their
#: step eta gamma within a factor of 2 of its neighbours; the paper's eta grid leaves gaps of 5.
BASELINE_REFINE = 2.0


def refined_key(method: str) -> str:
    """The unit of ``method``'s refined tuning."""
    return f"refine/{method}"


def choices(units: dict, method: str) -> list[dict]:
    """``method``'s step choices per panel: its tuning's, with the refined ones (``refined``
    True, the tuning's eta as ``tuned_eta``) where :data:`BASELINE_REFINE` refined them."""
    out = [dict(c) for c in units[f"tuning/{method}"]["choices"]]
    refined = units.get(refined_key(method))
    if refined is not None:
        for i, c in zip(refined["panels"], refined["choices"], strict=True):
            out[i] = dict(out[i], **c, refined=True)
    return out
