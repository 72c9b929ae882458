"""The captured subproblems of ``experiments/data/subproblems_mnist.npz``, under the tests'
name.

A re-export of :func:`experiments.subproblems.load_subproblems` (documented there)::

    from tests.subproblem_instances import load_instances
    for inst in load_instances(10, np.float64):
        zeta, info = rproxjax.tangent_prox(inst["x"], inst["g"], inst["t"],
                                           rproxjax.l1(inst["mu"]), lam=inst["lam_prev"])
"""

from experiments.subproblems import load_subproblems as load_instances

__all__ = ["load_instances"]
