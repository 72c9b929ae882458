"""The synthetic online sparse PCA instance of ``solvers.py`` and ``profile_step.py``.

d = 784, r = 10, minibatch b = 100, n = 10,000 samples (the paper's MNIST size, no
download): 10 strong directions, low-frequency 2-D cosine patterns under a centred
Gaussian window on the 28 x 28 pixel grid (like MNIST's leading eigen-digits) with
variances 30 exp(-k / 4), k = 0..9, plus a background with the power-law spectrum
j^-1.2 in a random orthonormal basis. Columns are centred and the whole matrix is
scaled so that the top eigenvalue of the sample covariance A = Z^T Z / n is 1 (so
L = 2 lambda_max(A) = 2). Per-sample loss f(X; z) = ||z||^2 - ||X^T z||^2, regularizer
``rproxjax.l1(MU)``; MU gives sparse but non-empty iterates.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

D, R, N, B = 784, 10, 10_000, 100
SIDE = 28
MU = 0.01
LIPSCHITZ = 2.0


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The n x d data matrix (float64) and the top eigenvalues of its covariance."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE] / (SIDE - 1)
    window = np.exp(-((yy - 0.5) ** 2 + (xx - 0.5) ** 2) / (2 * 0.22**2))
    freqs = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (0, 2), (2, 1), (1, 2), (3, 0), (0, 3)]
    patterns = [
        (window * np.cos(np.pi * fy * yy) * np.cos(np.pi * fx * xx)).ravel() for fy, fx in freqs
    ]
    strong, _ = np.linalg.qr(np.array(patterns).T)
    variances = 30.0 * np.exp(-np.arange(len(freqs)) / 4.0)
    latent = rng.standard_normal((N, len(freqs))) * np.sqrt(variances)
    basis, _ = np.linalg.qr(rng.standard_normal((D, D)))
    spectrum = 1.0 / np.arange(1, D + 1) ** 1.2
    z = latent @ strong.T + (rng.standard_normal((N, D)) * np.sqrt(spectrum)) @ basis.T
    z -= z.mean(axis=0)
    eig = np.linalg.eigvalsh(z.T @ z / N)[::-1]
    z /= np.sqrt(eig[0])
    return z, eig / eig[0]


def per_sample_loss(x, z):
    """f(X; z) = ||z||^2 - ||X^T z||^2 (the loss ``rproxjax.fit`` is given)."""
    return jnp.sum(z * z) - jnp.sum((x.T @ z) ** 2)


def nonzeros(x, threshold: float = 1e-3) -> int:
    """Entries with |X_ij| > threshold."""
    return int(np.count_nonzero(np.abs(np.asarray(x)) > threshold))
