"""What the figures and ``results/README.md`` share: the methods' colours, the font sizes, the
data sets' names, and new matplotlib figures (``matplotlib.figure.Figure``: no pyplot, no
backend switch, no change to matplotlib's global configuration: sizes are set per artist).
Imports no other module of :mod:`experiments`, so that the figures
(:mod:`experiments._plots`) and the sections of each experiment
(``_peers_report``, ``_rmc_report``) can all use it."""

from __future__ import annotations

#: One colour per method, in every figure (matplotlib's tab10 colours, written out so that
#: no style's colour cycle can change them).
COLORS = {"R-ProxSPB": "#1f77b4", "R-ProxSGD": "#ff7f0e", "R-Subgrad": "#2ca02c",
          "ManPG": "#d62728", "SPAMS": "#9467bd", "MiniBatchSparsePCA": "#8c564b",
          "R-ProxSVRG": "#e377c2", "R-ProxSARAH": "#7f7f7f", "R-Subgrad-1": "#bcbd22"}
#: Font sizes (points) of the figures' texts: none below ``LEGEND``.
LEGEND, LABEL, TITLE, TICK, SUPTITLE = 8.5, 9.0, 9.0, 8.5, 11.0
STAND_INS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST (stand-in for the paper's COIL-100)",
}
VIDEO = "surveillance video (stand-in for the paper's Hall/Airport videos)"


def color(method: str) -> str:
    """The colour of ``method`` (a KeyError for a method without one: no figure falls back
    to a colour cycle)."""
    return COLORS[method]


def figure(**kwargs):
    """A new ``matplotlib.figure.Figure(**kwargs)``: drawn and saved without pyplot, so that
    matplotlib's global backend and pyplot's figure registry are left alone (notebooks with
    the inline backend still display a returned figure)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def axes_text(ax, title=None, xlabel=None, ylabel=None) -> None:
    """Sets an axes' title, labels and tick labels at the figures' sizes, and its grid."""
    if title is not None:
        ax.set_title(title, fontsize=TITLE)
    if xlabel is not None:
        ax.set_xlabel(xlabel, fontsize=LABEL)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=LABEL)
    ax.tick_params(labelsize=TICK)
    ax.grid(alpha=0.3)
