"""What the figures and ``results/README.md`` share: the methods' colours, the data sets'
names, and new matplotlib figures (``matplotlib.figure.Figure``: no pyplot, no backend
switch). Imports no other module of :mod:`experiments`, so that the figures
(:mod:`experiments._plots`) and the sections of each experiment
(``_peers_report``, ``_rmc_report``) can all use it."""

from __future__ import annotations

COLORS = {"R-ProxSPB": "C0", "R-ProxSGD": "C1", "R-Subgrad": "C2", "ManPG": "C3",
          "SPAMS": "C4", "MiniBatchSparsePCA": "C5", "R-ProxSVRG": "C6", "R-ProxSARAH": "C7",
          "R-Subgrad-1": "C8"}
STAND_INS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST (stand-in for the paper's COIL-100)",
}
VIDEO = "surveillance video (stand-in for the paper's Hall/Airport videos)"


def figure(**kwargs):
    """A new ``matplotlib.figure.Figure(**kwargs)``: drawn and saved without pyplot, so that
    matplotlib's global backend and pyplot's figure registry are left alone (notebooks with
    the inline backend still display a returned figure)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)
