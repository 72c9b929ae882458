"""Parameter blocks: the geometry and regularizer of each leaf of a parameter pytree.

The optimizers act on a pytree of parameters whose leaves may live on
different spaces, e.g. robust matrix completion's U on a Grassmann manifold
and S in Euclidean space with an l1 penalty::

    blocks = {"U": rproxjax.Grassmann(), "S": rproxjax.Euclidean(rproxjax.l1(0.1))}
    opt = rproxjax.r_prox_sgd(0.5, 0.1, blocks=blocks)

Each geometry is a small class (a pytree: its regularizer, whose strengths
are arrays, and its step scale are children, so they can be traced and
vmapped over; the retraction is static) implementing projection onto the
tangent space, retraction, vector transport, feasibility and its proximal
step:

* :class:`Stiefel`: the tangent-space subproblem solved by semi-smooth Newton
  (:func:`rproxjax.tangent_prox`; the only block that owns one);
* :class:`Grassmann`: h = 0, the closed form zeta = -gamma P_U(V);
* :class:`Euclidean`: the proximal gradient step prox_{gamma h}(X - gamma V) - X.
"""

from __future__ import annotations

from typing import Any, Self

import jax
import jax.numpy as jnp

from rproxjax import _checks, grassmann, stiefel
from rproxjax._ssn.config import SSN
from rproxjax._ssn.solve import SubproblemInfo, next_warm_start, tangent_prox
from rproxjax._typing import Array, ArrayLike, ProxRegularizer, Regularizer

__all__ = [
    "Block", "Euclidean", "Grassmann", "Stiefel", "as_blocks", "is_block", "map_blocks",
    "total_sq_norm",
]


class Block:
    """Base class of the parameter geometries: a regularizer, a step scale, a retraction.

    ``step_scale`` multiplies the optimizer's proximal step gamma (the
    subgradient step for :func:`rproxjax.r_subgrad`) for this block alone:
    blocks with different curvature can take different steps. Use the subclasses
    :class:`Stiefel`, :class:`Grassmann` and :class:`Euclidean`; a block is a pytree
    (its regularizer and step scale are children, its retraction is static).

    Args:
      reg: the block's regularizer h (e.g. ``rproxjax.l1(mu)``), or None for h = 0.
      retraction: the retraction's name, one of the class's ``retractions``.
      step_scale: factor (> 0) on the optimizer's step for this block.

    Attributes:
      reg: the regularizer, or None.
      retraction: the retraction's name.
      step_scale: the step factor.
      retractions: (class attribute) the retraction names the geometry accepts.

    Raises:
      ValueError: for a retraction not in ``retractions``, a ``reg`` without a ``prox``
        method, or a concrete ``step_scale`` that is not finite and > 0.
      TypeError: for a ``step_scale`` that is not a number.

    Example:
        >>> import rproxjax
        >>> block = rproxjax.Euclidean(rproxjax.l1(0.1), step_scale=0.5)
        >>> isinstance(block, rproxjax.Block), block.step_scale, block.retraction
        (True, 0.5, 'polar')
        >>> rproxjax.Grassmann.retractions
        ('qr', 'polar')
    """

    retractions: tuple[str, ...] = ("polar",)

    def __init__(self, reg: Regularizer | None = None, retraction: str = "polar",
                 step_scale: ArrayLike = 1.0) -> None:
        if retraction not in self.retractions:
            raise ValueError(
                f"unknown retraction {retraction!r} for a {type(self).__name__} block; "
                f"expected one of {self.retractions}."
            )
        if reg is not None and not isinstance(reg, ProxRegularizer):
            raise ValueError(f"reg must be a regularizer (rproxjax.l1, rproxjax.l21), got {reg!r}.")
        _checks.check_positive("step_scale", step_scale)
        self.reg = reg
        self.retraction = retraction
        self.step_scale = step_scale

    def tree_flatten(self) -> tuple[tuple[Regularizer | None, ArrayLike], str]:
        return (self.reg, self.step_scale), self.retraction

    @classmethod
    def tree_unflatten(cls, retraction: str, children: tuple[Any, ...]) -> Self:
        obj = object.__new__(cls)
        obj.retraction = retraction
        obj.reg, obj.step_scale = children
        return obj

    def __repr__(self):
        return (f"{type(self).__name__}(reg={self.reg!r}, retraction={self.retraction!r}, "
                f"step_scale={self.step_scale!r})")

    # -- geometry (overridden by the manifolds) --------------------------------

    def check(self, name: str, x: ArrayLike) -> None:
        if not hasattr(x, "shape"):
            raise TypeError(f"{name} must be an array, got {type(x).__name__}.")
        self._check_point(name, x)
        if self.reg is not None:
            self.reg.check(x.shape)

    def _check_point(self, name, x):
        _checks.check_float(name, x)

    def project(self, x: Array, u: Array) -> Array:
        return u

    def retract(self, x: Array, v: Array) -> Array:
        return x + v

    def transport(self, x_old: Array, x_new: Array, u: Array) -> Array:
        return u

    def feasibility(self, x: Array) -> Array:
        return jnp.zeros((), jnp.result_type(x))

    def proximal_direction(self, x: Array, v: Array, gamma: Array, info: SubproblemInfo,
                           ssn: SSN) -> tuple[Array, SubproblemInfo]:
        """(zeta, info): the tangent step zeta of the proximal step with gradient ``v``."""
        target = x - gamma * v
        return (target if self.reg is None else self.reg.prox(target, gamma)) - x, info

    # -- shared pieces ---------------------------------------------------------

    def empty_info(self, x: Array) -> SubproblemInfo:
        r = x.shape[-1] if isinstance(self, Stiefel) else 1
        zero = jnp.zeros((), jnp.int32)
        lam = jnp.zeros((r, r), jnp.result_type(x))
        # A (d, r) subgradient for Stiefel blocks (the next solve's warm start); the other
        # blocks have closed forms and keep a placeholder, not a copy of their params' size.
        sub = jnp.zeros(x.shape if isinstance(self, Stiefel) else (1, 1), jnp.result_type(x))
        return SubproblemInfo.make(lam=lam, residual=jnp.zeros((), jnp.result_type(x)),
                                   converged=jnp.bool_(True), status=zero, subgradient=sub)

    def value(self, x: Array) -> Array:
        return jnp.zeros((), jnp.result_type(x)) if self.reg is None else self.reg.value(x)

    def scaled(self, step: Array | float, x: Array) -> Array:
        return step * jnp.asarray(self.step_scale, jnp.result_type(x))

    def prox_step(self, x: Array, v: Array, gamma: Array, info: SubproblemInfo,
                  ssn: SSN) -> tuple[Array, SubproblemInfo]:
        """(zeta, info) with the block's proximal step ``gamma * step_scale``.

        ``ssn`` holds the subproblem solver's settings (used by Stiefel blocks).
        """
        return self.proximal_direction(x, v, self.scaled(gamma, x), info, ssn)

    def subgradient_direction(self, x: Array, g: Array) -> Array:
        """-P_X(g + s), s in the subdifferential of h at X (unscaled)."""
        sub = g if self.reg is None else g + self.reg.subgradient(x).astype(jnp.result_type(x))
        return -self.project(x, sub)


class _Manifold(Block):
    def _check_point(self, name, x):
        if len(x.shape) != 2:
            raise ValueError(
                f"{name} is a point of a {type(self).__name__} manifold and must be a d x r "
                f"matrix, got shape {x.shape}."
            )
        _checks.check_point(name, x)
        if not isinstance(x, jax.core.Tracer):  # concrete points: on the manifold
            feas = _checks.host_feasibility(x)  # NumPy: nothing to compile
            tol = 1e-6 if jnp.result_type(x) == jnp.float64 else 1e-3
            if not feas <= tol:
                raise ValueError(
                    f"{name} is not on the {type(self).__name__} manifold: ||X^T X - I||_F = "
                    f"{feas:.3e} > {tol:g}. Start from an orthonormal X0 (e.g. "
                    "stiefel.random_point or a QR factor).")

    def feasibility(self, x: Array) -> Array:
        return stiefel.feasibility(x)




@jax.tree_util.register_pytree_node_class
class Stiefel(_Manifold):
    """A block on St(d, r) with regularizer ``reg`` (or None): the Newton subproblem.

    Its proximal step solves the tangent-space subproblem with
    :func:`rproxjax.tangent_prox`. ``r_prox_sgd(eta, gamma, reg, retraction=...)`` is
    ``r_prox_sgd(eta, gamma, blocks=Stiefel(reg, retraction))``.

    Args:
      reg: the regularizer h (e.g. ``rproxjax.l1(mu)``), or None for h = 0.
      retraction: ``"qr"``, ``"polar"`` (default), ``"exp"`` or ``"cayley"``.
      step_scale: factor (> 0) on the optimizer's step for this block.

    Attributes:
      reg, retraction, step_scale: as given (see :class:`Block`).

    Raises:
      ValueError: for an unknown retraction, a ``reg`` without the ``prox`` and
        ``prox_jacobian`` methods the subproblem's Newton steps use, or a concrete
        ``step_scale`` that is not finite and > 0.
      TypeError: for a ``step_scale`` that is not a number.

    Example:
        >>> import rproxjax
        >>> block = rproxjax.Stiefel(rproxjax.l1(0.1), retraction="qr")
        >>> block.retraction, rproxjax.Stiefel.retractions
        ('qr', ('qr', 'polar', 'exp', 'cayley'))
        >>> opt = rproxjax.r_prox_sgd(0.5, 0.1, blocks=block)
    """

    retractions = stiefel.RETRACTIONS

    def __init__(self, reg: Regularizer | None = None, retraction: str = "polar",
                 step_scale: ArrayLike = 1.0) -> None:
        if isinstance(reg, ProxRegularizer) and not isinstance(reg, Regularizer):
            raise ValueError(
                "a Stiefel block's reg must be a regularizer with prox and prox_jacobian "
                f"(rproxjax.l1, rproxjax.l21: the subproblem's Newton steps), got {reg!r}.")
        super().__init__(reg, retraction, step_scale)

    def project(self, x: Array, u: Array) -> Array:
        return stiefel.project(x, u)

    def retract(self, x: Array, v: Array) -> Array:
        # self.retraction is one of self.retractions (checked by Block.__init__).
        return stiefel.retract(x, v, retraction=self.retraction)  # type: ignore[arg-type]

    def transport(self, x_old: Array, x_new: Array, u: Array) -> Array:
        return stiefel.transport(x_old, x_new, u)

    def proximal_direction(self, x: Array, v: Array, gamma: Array, info: SubproblemInfo,
                           ssn: SSN) -> tuple[Array, SubproblemInfo]:
        return tangent_prox(x, v, gamma, self.reg, ssn=ssn, **next_warm_start(info, ssn))


@jax.tree_util.register_pytree_node_class
class Grassmann(_Manifold):
    """A block on Gr(m, r), represented by orthonormal bases; h = 0.

    Its proximal step is the closed form zeta = -gamma P_U(V) (no regularizer, no
    subproblem).

    Args:
      retraction: ``"qr"`` or ``"polar"`` (default).
      step_scale: factor (> 0) on the optimizer's step for this block.

    Attributes:
      retraction, step_scale: as given; ``reg`` is None (see :class:`Block`).

    Raises:
      ValueError: for a retraction that is not a string (e.g. a regularizer passed as the
        first argument) or not one of the two, or a concrete ``step_scale`` that is not
        finite and > 0.
      TypeError: for a ``step_scale`` that is not a number.

    Example:
        >>> import jax, jax.numpy as jnp, rproxjax
        >>> blocks = {"U": rproxjax.Grassmann(), "S": rproxjax.Euclidean(rproxjax.l1(0.1))}
        >>> opt = rproxjax.r_prox_sgd(0.5, 0.1, blocks=blocks)
        >>> params = {"U": rproxjax.grassmann.random_point(jax.random.key(0), 6, 2),
        ...           "S": jnp.ones(4)}
        >>> grads = {"U": jnp.ones((6, 2)), "S": jnp.ones(4)}
        >>> updates, state = opt.update(grads, opt.init(params), params)
        >>> jax.tree.map(jnp.shape, updates)
        {'S': (4,), 'U': (6, 2)}
    """

    retractions = grassmann.RETRACTIONS

    def __init__(self, retraction: str = "polar", step_scale: ArrayLike = 1.0) -> None:
        if not isinstance(retraction, str):
            raise ValueError("a Grassmann block has no regularizer (h = 0); its first argument "
                             f"is the retraction, got {retraction!r}.")
        super().__init__(None, retraction, step_scale)

    def project(self, x: Array, u: Array) -> Array:
        return grassmann.project(x, u)

    def retract(self, x: Array, v: Array) -> Array:
        # self.retraction is one of self.retractions (checked by Block.__init__).
        return grassmann.retract(x, v, retraction=self.retraction)  # type: ignore[arg-type]

    def transport(self, x_old: Array, x_new: Array, u: Array) -> Array:
        return grassmann.transport(x_old, x_new, u)

    def proximal_direction(self, x: Array, v: Array, gamma: Array, info: SubproblemInfo,
                           ssn: SSN) -> tuple[Array, SubproblemInfo]:
        return -gamma * grassmann.project(x, v), info


@jax.tree_util.register_pytree_node_class
class Euclidean(Block):
    """An unconstrained block with regularizer ``reg`` (or None).

    Its proximal step is the proximal gradient step zeta = prox_{gamma h}(X - gamma V) - X,
    and its retraction the sum X + zeta. The parameter may have any shape that ``reg``
    accepts (float32 or float64).

    Args:
      reg: the regularizer h (e.g. ``rproxjax.l1(mu)``), or None for h = 0.
      step_scale: factor (> 0) on the optimizer's step for this block.

    Attributes:
      reg, step_scale: as given; ``retraction`` is ``"polar"``, unused (see :class:`Block`).

    Raises:
      ValueError: for a ``reg`` without a ``prox`` method, or a concrete ``step_scale``
        that is not finite and > 0.
      TypeError: for a ``step_scale`` that is not a number.

    Example:
        >>> import jax.numpy as jnp, rproxjax
        >>> x = jnp.array([0.5, -2.0, 3.0])
        >>> step = rproxjax.proximal_step(0.5, blocks=rproxjax.Euclidean(rproxjax.l1(1.0)))
        >>> zeta, _ = step.update(jnp.zeros(3), step.init(x), x)
        >>> (x + zeta).tolist()  # soft-thresholding by gamma mu = 0.5
        [0.0, -1.5, 2.5]
    """

    def __init__(self, reg: Regularizer | None = None, step_scale: ArrayLike = 1.0) -> None:
        super().__init__(reg, "polar", step_scale)


def is_block(node) -> bool:
    return isinstance(node, Block)


def as_blocks(reg=None, blocks=None, retraction: str = "polar"):
    """The pytree of blocks of an optimizer from its ``reg`` and ``blocks`` arguments.

    ``reg`` (a regularizer or None) means one Stiefel block: the params are a
    single d x r matrix. ``blocks`` (a block or a pytree of blocks matching
    the params) gives each leaf its own geometry and regularizer.
    """
    if blocks is None:
        if reg is not None and not isinstance(reg, Regularizer):
            hint = (" (a pytree of blocks now goes through blocks=)"
                    if jax.tree.leaves(reg, is_leaf=is_block) and
                    all(is_block(b) for b in jax.tree.leaves(reg, is_leaf=is_block)) else "")
            raise ValueError(
                f"reg must be None or a regularizer (rproxjax.l1, rproxjax.l21); got {reg!r}"
                f"{hint}."
            )
        return Stiefel(reg, retraction)
    if reg is not None:
        raise ValueError("give reg (one Stiefel block) or blocks, not both.")
    leaves = jax.tree.leaves(blocks, is_leaf=is_block)
    if not leaves or not all(is_block(leaf) for leaf in leaves):
        raise ValueError(
            "blocks must be a block (rproxjax.Stiefel/Grassmann/Euclidean) or a pytree of "
            f"blocks matching params; got {blocks!r}."
        )
    return blocks


def map_blocks(fn, blocks, *trees):
    """``jax.tree.map`` over blocks and matching trees; returns a tuple of trees."""
    treedef = jax.tree.structure(blocks, is_leaf=is_block)
    block_leaves = treedef.flatten_up_to(blocks)
    flat = []
    for i, tree in enumerate(trees):
        try:
            flat.append(treedef.flatten_up_to(tree))
        except (ValueError, TypeError) as err:
            what = "params" if i == 0 else f"argument {i} (shaped like params)"
            raise ValueError(
                f"{what} does not match the structure of the blocks {treedef}: {err}"
            ) from None
    outs = [fn(b, *args) for b, *args in zip(block_leaves, *flat, strict=True)]
    if outs and type(outs[0]) is tuple:  # several outputs (not a NamedTuple result)
        return tuple(treedef.unflatten(list(parts)) for parts in zip(*outs, strict=True))
    return treedef.unflatten(outs)


def total_sq_norm(tree):
    return sum(jnp.sum(leaf * leaf) for leaf in jax.tree.leaves(tree))
