"""What the figures and ``results/README.md`` share: the methods' colours, the data sets'
names, and matplotlib's pyplot with a non-interactive backend. Imports no other module of
:mod:`rproxjax.experiments`, so that the figures (:mod:`rproxjax.experiments._plots`) and the
sections of each experiment (``_peers_report``, ``_rmc_report``) can all use it."""

from __future__ import annotations

COLORS = {"R-ProxSPB": "C0", "R-ProxSGD": "C1", "R-Subgrad": "C2", "ManPG": "C3",
          "SPAMS": "C4", "MiniBatchSparsePCA": "C5", "R-ProxSVRG": "C6", "R-ProxSARAH": "C7"}
STAND_INS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST (stand-in for the paper's COIL-100)",
}
VIDEO = "surveillance video (stand-in for the paper's Hall/Airport videos)"


def pyplot():
    """matplotlib.pyplot, on the Agg backend unless Agg or the notebooks' inline backend
    is already in use."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
