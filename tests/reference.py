"""The portable sparse-PCA reference problem of design.md section 7.

Inputs come from the Park-Miller generator x <- 16807 x mod (2^31 - 1),
u = x / (2^31 - 1), seed 42, filled column-major, so the reference values
produced by the public MATLAB ManPG code can be reproduced exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

MODULUS = 2**31 - 1


def park_miller(seed: int, n: int) -> np.ndarray:
    out = np.empty(n)
    x = seed
    for i in range(n):
        x = (16807 * x) % MODULUS
        out[i] = x / MODULUS
    return out


class ReferenceProblem(NamedTuple):
    B: np.ndarray
    A: np.ndarray
    X0: np.ndarray
    mu: float
    L: float
    t: float

    def f(self, x):
        return -np.trace(x.T @ self.A @ x)

    def grad(self, x):
        return -2.0 * self.A @ x

    def F(self, x):
        return self.f(x) + self.mu * np.abs(x).sum()


def manpg_reference_problem(m: int = 50, n: int = 100, r: int = 5, mu: float = 0.8):
    u = park_miller(42, m * n + n * r)
    b = u[: m * n].reshape(n, m).T - 0.5  # column-major fill
    b = b - b.mean(axis=0)
    b = b / np.linalg.norm(b, axis=0)
    c = u[m * n:].reshape(r, n).T - 0.5
    w, v = np.linalg.eigh(c.T @ c)
    x0 = c @ (v @ np.diag(w**-0.5) @ v.T)
    big_l = 2.0 * np.linalg.svd(b, compute_uv=False)[0] ** 2
    return ReferenceProblem(b, b.T @ b, x0, mu, big_l, 1.0 / big_l)
