"""The tangent-space proximal subproblem's semi-smooth Newton kernel.

* :mod:`.config`: :class:`SSN`, the solver's settings as one value;
* :mod:`.solve`: :func:`tangent_prox` (validation, the loop driver, vmap lanes, the finish);
* :mod:`.steps`: the Newton rules on a named iterate;
* :mod:`.linear`: dense, conjugate-gradient and Jacobi Newton directions;
* :mod:`.path`: homotopy (path) steps for tight l1 solves;
* :mod:`.secant`: the secant shift of the l1 Newton matrix;
* :mod:`.implicit`: derivatives of the solution map.
"""
