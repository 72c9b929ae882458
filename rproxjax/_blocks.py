"""Parameter blocks: the geometry and regularizer of each leaf of a parameter pytree.

The optimizers act on a pytree of parameters whose leaves may live on
different spaces, e.g. robust matrix completion's U on a Grassmann manifold
and S in Euclidean space with an l1 penalty::

    blocks = {"U": rproxjax.Grassmann(), "S": rproxjax.Euclidean(rproxjax.l1(0.1))}
    opt = rproxjax.r_prox_sgd(0.5, 0.1, blocks)

A block is a pytree: its regularizer (whose strengths are arrays) is a child,
so it can be traced and vmapped over; the manifold and the retraction are
static. Each block knows its proximal step (design notes section 3 on the
Stiefel manifold; the closed form zeta = -gamma P_U(V) on the Grassmann
manifold; the Euclidean proximal gradient step prox_{gamma h}(X - gamma V) - X),
its vector transport (projection; the identity in Euclidean space), its
subgradient direction and its feasibility measure.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rproxjax import _checks, grassmann, stiefel
from rproxjax._subproblem import SubproblemInfo, tangent_prox

__all__ = [
    "Block", "Euclidean", "Grassmann", "Stiefel", "as_blocks", "is_block", "map_blocks",
    "total_sq_norm",
]

MANIFOLDS = ("stiefel", "grassmann", "euclidean")


@jax.tree_util.register_pytree_node_class
class Block:
    """The geometry (static) and regularizer (traced) of one parameter leaf."""

    def __init__(self, manifold: str, reg: Any = None, retraction: str = "polar",
                 step_scale: Any = 1.0):
        if manifold not in MANIFOLDS:
            raise ValueError(f"unknown manifold {manifold!r}; expected one of {MANIFOLDS}.")
        allowed = {"stiefel": stiefel.RETRACTIONS, "grassmann": grassmann.RETRACTIONS,
                   "euclidean": ("polar",)}[manifold]
        if retraction not in allowed:
            raise ValueError(
                f"unknown retraction {retraction!r} for the {manifold} manifold; expected one "
                f"of {allowed}."
            )
        if manifold == "grassmann" and reg is not None:
            raise ValueError("a regularizer on a Grassmann block is not supported (h must be 0).")
        _checks.check_positive("step_scale", step_scale)
        self.manifold = manifold
        self.reg = reg
        self.retraction = retraction
        self.step_scale = step_scale

    def tree_flatten(self):
        return (self.reg, self.step_scale), (self.manifold, self.retraction)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.manifold, obj.retraction = aux
        obj.reg, obj.step_scale = children
        return obj

    def __repr__(self):
        return (f"Block({self.manifold!r}, reg={self.reg!r}, retraction={self.retraction!r}, "
                f"step_scale={self.step_scale!r})")

    # -- checks ---------------------------------------------------------------

    def check(self, name, x):
        if not hasattr(x, "shape"):
            raise ValueError(f"{name} must be an array, got {type(x).__name__}.")
        if self.manifold == "euclidean":
            _checks.check_float(name, x)
        else:
            if len(x.shape) != 2:
                raise ValueError(
                    f"{name} is a point of the {self.manifold} manifold and must be a d x r "
                    f"matrix, got shape {x.shape}."
                )
            _checks.check_point(name, x)
        if self.reg is not None and hasattr(self.reg, "check"):
            self.reg.check(x.shape)

    # -- pieces used by the optimizers -----------------------------------------

    def empty_info(self, x):
        r = x.shape[-1] if self.manifold == "stiefel" else 1
        zero = jnp.zeros((), jnp.int32)
        lam = jnp.zeros((r, r), x.dtype)
        return SubproblemInfo(lam, zero, jnp.zeros((), x.dtype), jnp.bool_(True), zero, zero,
                              zero, lam)

    def value(self, x):
        return jnp.zeros((), x.dtype) if self.reg is None else self.reg.value(x)

    def retract(self, x, v):
        if self.manifold == "stiefel":
            return stiefel.retract(x, v, method=self.retraction)
        if self.manifold == "grassmann":
            return grassmann.retract(x, v, method=self.retraction)
        return x + v

    def prox_step(self, x, v, gamma, eta, info, *, tol, max_steps, linear_solver, rtol=0.0,
                  method="secant"):
        """(X_new, zeta, info) of one proximal step with gradient (estimate) v.

        The block's proximal step is ``gamma * step_scale``. The subproblem is
        warm-started from the regularizer part ``info.lam_h`` of the previous
        multiplier (plus the new gradient's part sym(X^T V) / 2); the
        ``"reference"`` rule from the previous multiplier ``info.lam``.
        """
        gamma = gamma * jnp.asarray(self.step_scale, x.dtype)
        if self.manifold == "stiefel":
            # The reference rule warm-starts from the previous multiplier, as its code does.
            warm = {"lam": info.lam} if method == "reference" else {"lam_h": info.lam_h}
            zeta, info = tangent_prox(x, v, gamma, self.reg, tol=tol, rtol=rtol,
                                      max_steps=max_steps, linear_solver=linear_solver,
                                      method=method, **warm)
        elif self.manifold == "grassmann":
            zeta = -gamma * grassmann.project(x, v)
        else:
            target = x - gamma * v
            zeta = (target if self.reg is None else self.reg.prox(target, gamma)) - x
        return self.retract(x, eta * zeta), zeta, info

    def transport(self, x_old, x_new, u):
        if self.manifold == "stiefel":
            return stiefel.transport(x_old, x_new, u)
        if self.manifold == "grassmann":
            return grassmann.transport(x_old, x_new, u)
        return u

    def subgradient_step(self, x, g, eta):
        """(X_new, direction): the (Riemannian) subgradient step of length ``eta * step_scale``."""
        eta = eta * jnp.asarray(self.step_scale, x.dtype)
        sub = g if self.reg is None else g + self.reg.subgradient(x).astype(x.dtype)
        if self.manifold == "stiefel":
            direction = -stiefel.project(x, sub)
        elif self.manifold == "grassmann":
            direction = -grassmann.project(x, sub)
        else:
            direction = -sub
        return self.retract(x, eta * direction), direction

    def feasibility(self, x):
        if self.manifold == "euclidean":
            return jnp.zeros((), x.dtype)
        return stiefel.feasibility(x)


def Stiefel(reg=None, retraction: str = "polar", step_scale=1.0) -> Block:  # noqa: N802
    """A block on St(d, r) with regularizer ``reg`` (or None).

    ``step_scale`` multiplies the optimizer's proximal step gamma (the
    subgradient step for :func:`rproxjax.r_subgrad`) for this block alone:
    blocks with different curvature can take different steps.
    """
    return Block("stiefel", reg, retraction, step_scale)


def Grassmann(retraction: str = "polar", step_scale=1.0) -> Block:  # noqa: N802
    """A block on Gr(m, r), represented by orthonormal bases; h = 0."""
    return Block("grassmann", None, retraction, step_scale)


def Euclidean(reg=None, step_scale=1.0) -> Block:  # noqa: N802
    """An unconstrained block with regularizer ``reg`` (or None)."""
    return Block("euclidean", reg, "polar", step_scale)


def is_block(node) -> bool:
    return isinstance(node, Block)


def as_blocks(reg, retraction: str = "polar"):
    """Normalizes an optimizer's ``reg`` argument to a pytree of blocks.

    ``None`` or a regularizer means one Stiefel block (the params are a single
    d x r matrix); a :class:`Block` or a pytree of blocks is taken as is.
    """
    if reg is None or hasattr(reg, "prox_jacobian"):
        return Block("stiefel", reg, retraction)
    leaves = jax.tree.leaves(reg, is_leaf=is_block)
    if not leaves or not all(is_block(leaf) for leaf in leaves):
        raise ValueError(
            "reg must be None, a regularizer (rproxjax.l1, rproxjax.l21), a block "
            "(rproxjax.Stiefel/Grassmann/Euclidean) or a pytree of blocks matching params; "
            f"got {reg!r}."
        )
    return reg


def map_blocks(fn, blocks, *trees):
    """``jax.tree.map`` over blocks and matching trees; returns a tuple of trees."""
    treedef = jax.tree.structure(blocks, is_leaf=is_block)
    block_leaves = treedef.flatten_up_to(blocks)
    flat = []
    for i, tree in enumerate(trees):
        try:
            flat.append(treedef.flatten_up_to(tree))
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"argument {i} does not match the structure of the blocks {treedef}: {err}"
            ) from None
    outs = [fn(b, *args) for b, *args in zip(block_leaves, *flat, strict=True)]
    if outs and type(outs[0]) is tuple:  # several outputs (not a NamedTuple result)
        return tuple(treedef.unflatten(list(parts)) for parts in zip(*outs, strict=True))
    return treedef.unflatten(outs)


def total_sq_norm(tree):
    return sum(jnp.sum(leaf * leaf) for leaf in jax.tree.leaves(tree))

