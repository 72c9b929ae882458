"""Nonsmooth regularizers h with cheap proximal maps.

A regularizer is a small pytree (a NamedTuple) whose leaves are its strengths,
so it can be traced, passed through ``jax.jit`` and mapped over with
``jax.vmap`` (e.g. one run per value of mu). Besides its value and proximal
map it provides what the semi-smooth Newton method of
:func:`rproxjax.tangent_prox` needs: an element of the generalized (Clarke)
Jacobian of the proximal map, applied to a direction (matrix-free path) and
as a Gram matrix in an orthonormal basis of symmetric r x r matrices (dense
path).

The protocol is :class:`rproxjax._typing.Regularizer` (a typed ``Protocol``, documented
method by method there), with two optional capabilities, each a protocol of its own:
:class:`rproxjax._typing.JacobiDiagonal` and :class:`rproxjax._typing.EntrywiseBreakpoints`.
Each regularizer's module holds its Newton hooks: :mod:`rproxjax._regularizers.l1` (with the
coordinate secant shift, :mod:`rproxjax._regularizers.l1_secant`) and
:mod:`rproxjax._regularizers.l21`. In short, for a regularizer ``reg`` acting on d x r
matrices:

* ``reg.value(x)``: h(X).
* ``reg.prox(v, t)``: prox_{t h}(V) = argmin_Y h(Y) + ||Y - V||^2 / (2t).
* ``reg.subgradient(x)``: an element of the subdifferential of h at X.
* ``reg.prox_jacobian(v, t)``: ``(prox_{t h}(V), jac)``; ``jac`` is a pytree
  describing a generalized Jacobian D of the prox at V.
* ``reg.jacobian_apply(jac, w)``: D[W].
* ``reg.jacobian_gram(x, jac, basis)``: the m x m matrix of
  <X B_p, D[X B_q]> for the orthonormal basis of symmetric matrices
  B_p = s_p (E_jl + E_lj), given as ``basis = (rows, cols, scale)`` (index
  arrays j, l with j <= l and the weights s_p, each of length m = r(r+1)/2).
* ``reg.jacobian_gram_diagonal(x, jac)`` (optional): the diagonal of that matrix as an
  r x r symmetric matrix (entry (j, l) holds G_pp for (j, l) = (rows[p], cols[p])), for
  the Jacobi steps of loose solves (:func:`rproxjax._ssn.linear.jacobi_direction`); a
  regularizer without it gets full Newton steps.
* ``reg.secant_shift(w, x, e, t, passes)``: an r x r symmetric, non-negative
  matrix R raising the Newton matrix's diagonal in the symmetric basis where
  the generalized Jacobian underestimates the curvature of the dual along a
  basis direction (see :mod:`rproxjax._regularizers.l1_secant`); zeros where unknown.
* ``reg.thresholds(t, w)`` and ``reg.first_breakpoint(w, p, active, t)`` (optional,
  regularizers whose generalized Jacobian is an entrywise 0/1 mask ``jac``: l1): the
  thresholds t mu_c per column and the first tau > 0 at which an entry of W + tau P crosses
  one, for the path steps of tight solves (:mod:`rproxjax._ssn.path`).
* ``reg.check(shape)``: raises ``ValueError`` if the strengths do not fit
  d x r matrices of the given shape.
"""

from __future__ import annotations

from rproxjax._regularizers._common import Basis, _pair_products
from rproxjax._regularizers.l1 import L1, l1
from rproxjax._regularizers.l21 import L21, l21

__all__ = ("L1", "L21", "Basis", "_pair_products", "l1", "l21")
