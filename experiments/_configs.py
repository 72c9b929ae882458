"""The named experiment configurations, at the paper's size and at a tiny size for CI."""

from __future__ import annotations

import dataclasses

# The paper's step-size grid {5e-5, 1e-4, 5e-4, ..., 1}.
PAPER_ETAS = (5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1, 1.0)


@dataclasses.dataclass(frozen=True)
class SPCAConfig:
    """Online sparse PCA, the paper's Figures 1-3 (R-ProxSPB, R-ProxSGD, R-Subgrad, ManPG).

    Attributes:
      dataset: "mnist" or "fashion_mnist" (the stand-in for COIL-100).
      n: samples (a seeded subset; None for every shipped sample).
      r: components.
      mus: the l1 weights mu, one panel each.
      budget: IFO/n of the reported runs, and of the tuning's final local search.
      grid_budget: IFO/n of the tuning's screen of the whole grid.
      etas: the step-size grid (eta0 of R-ProxSGD and R-Subgrad, eta of R-ProxSPB),
        extended past an edge where the best value sits there.
      tuning_gammas: the proximal step's grid, tuned with eta for the proximal methods.
      max_extensions: how many times the screen may extend each edge of each axis.
      max_moves: moves of the local search at the reported budget.
      tuning_lanes: the tuning programs' lanes (runs vmapped in one call; one compilation).
      batch_size: |S| of R-ProxSGD and R-Subgrad, |S2| of R-ProxSPB.
      q: R-ProxSPB's refresh period (|S1| = n).
      gamma: the proximal step gamma where it is not tuned (the stationarity measure of
        R-Subgrad and ManPG, the variance runs' default).
      ssn_tol: the subproblem tolerance on ||E||_F of R-ProxSGD and R-ProxSPB (ManPG keeps
        the reference code's). 1e-6 instead of the library default 1e-10: far below the
        noise of a minibatch gradient. Measured on Fashion-MNIST, r = 10, mu = 0.2: a run with
        the default averaged 31 (R-ProxSPB) and 43 (R-ProxSGD) Newton steps per call, the
        saved runs with 1e-6 average 10 and 16 (``mean_ssn_steps`` in results/*.json; up to
        52 at r = 15). On such subproblems (columns of Y with fewer nonzeros than r, a
        singular Newton matrix, entries at the threshold) the residual stalls near 4e-8 and
        the 1e-10 default runs to the step limit.
      linear_solver: the Newton systems of the subproblem ("dense" here: at r = 15 the
        dense r(r+1)/2 system is faster than the library's "auto" choice, CG, with
        identical iterates; benchmarks/scale.py times both).
      points_per_ifo: curve points per IFO/n for the minibatch methods.
      block_points: steps between curve points of the block methods (R-ProxSPB,
        R-ProxSVRG, R-ProxSARAH): points inside their blocks; must divide q.
      variance_steps: iterations of the gradient-estimate variance runs.
      dtype: "float64" (as the paper's MATLAB code) or "float32".
      seed: seeds the data subset (the same data for every seed below).
      seeds: the reported seeds: each gives X0 and the sampling of every method.
      tuning_seeds: the seeds of the step-size tuning (at least two), disjoint from
        ``seeds``: the chosen steps are not selected on the runs that are reported.
      mu_fractions: panels at mu = fraction x mu_deg, with mu_deg the smallest mu at which
        the one-pixel-per-column point (the r pixels of largest variance) is stationary,
        computed from the data (``setup`` in the results); ``mus`` (the paper's nominal
        values) are extra panels, marked where the runs' solutions are degenerate.
      gammas: the gamma sensitivity panel (R-ProxSPB and R-ProxSGD, steps re-tuned for
        each gamma) at mu = ``gamma_mu_fraction`` x mu_deg.
    """

    dataset: str
    r: int
    mus: tuple
    n: int | None = None
    budget: float = 6.0
    grid_budget: float = 1.0
    etas: tuple = PAPER_ETAS
    tuning_gammas: tuple = (0.01, 0.03, 0.1, 0.3, 1.0)
    max_extensions: int = 3
    max_moves: int = 4
    tuning_lanes: int = 32
    batch_size: int = 100
    q: int = 100
    gamma: float = 0.1
    ssn_tol: float = 1e-6
    linear_solver: str = "dense"
    points_per_ifo: int = 4
    block_points: int = 10
    variance_steps: int = 200
    dtype: str = "float64"
    seed: int = 0
    seeds: tuple = (0, 1, 2, 3, 4)
    tuning_seeds: tuple = (100, 101)
    mu_fractions: tuple = (0.25, 0.5)
    gammas: tuple = (0.01, 0.1, 1.0)
    gamma_mu_fraction: float = 0.5
    kind: str = "spca"


@dataclasses.dataclass(frozen=True)
class PeersConfig:
    """Table added_exp: R-ProxSPB against SPAMS and scikit-learn's MiniBatchSparsePCA.

    R-ProxSPB runs ``iterations`` iterations (|S1| = n every q, |S2| = batch_size), and its
    IFO count is the budget of the peers. SPAMS gets the same batch size and exactly that
    budget; MiniBatchSparsePCA's batches are ``batch_size`` features (its API), and its PCA
    warm start, final readout and whole passes over the data stay within the budget. Each
    method sweeps its own sparsity parameter; R-ProxSPB's eta is chosen per mu from ``etas``
    and its operating point (the mu giving about ``target_nonzeros``) is found on
    ``tuning_seeds``, disjoint from the reported ``seeds``.

    Attributes:
      dataset, n, r, batch_size, q, gamma, ssn_tol, dtype: as in :class:`SPCAConfig`.
      iterations: R-ProxSPB iterations (the paper: 1000, batch size 100).
      etas: R-ProxSPB's step grid (the upper part of the paper's grid), chosen per mu by the
        mean final F over the tuning seeds.
      max_extensions: how many times the eta grid of a mu may widen past an edge that its
        choice lies on (one point past it, at the ratio of the two outermost points).
      mus: R-ProxSPB's l1 weights (its front).
      target_nonzeros: the paper's operating point (its Table: 18 nonzeros on mnist, 22 on
        coil100).
      bisection_steps: geometric bisections of mu (on the tuning seeds) after the grid.
      comparable: "comparable explained variance" means at least this fraction of the
        peer's (the paper's own Table calls 0.0120 against 0.0132, a ratio of 0.91,
        comparable).
      spams_penalties: SPAMS's gamma1 (||d||_2^2 + gamma1 ||d||_1 <= 1).
      spams_lambda2s: SPAMS's ridge weight on the codes (mode 2, lambda1 = 0), its other
        parameter: SPAMS runs over the grid of both, and its front is every run.
      sklearn_penalties: MiniBatchSparsePCA's alpha.
      seeds: the reported seeds (X0 and sampling of R-ProxSPB, the peers' own randomness).
      tuning_seeds: the seeds of every choice (eta, the operating mu, the peers' matched
        penalties); disjoint from ``seeds``.
      data_seed: the seeded subset of the data (the same for every run).
    """

    dataset: str
    r: int = 10
    n: int | None = None
    iterations: int = 1000
    batch_size: int = 100
    q: int = 100
    gamma: float = 0.1
    ssn_tol: float = 1e-6
    etas: tuple = (0.05, 0.1, 0.5, 1.0)
    max_extensions: int = 3
    mus: tuple = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
    target_nonzeros: int = 20
    bisection_steps: int = 4
    comparable: float = 0.9
    spams_penalties: tuple = (0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0)
    spams_lambda2s: tuple = (0.01, 0.1, 1.0)
    sklearn_penalties: tuple = (1.0, 7.0, 15.0, 25.0, 33.0, 40.0)
    seeds: tuple = (0, 1, 2, 3, 4)
    tuning_seeds: tuple = (100, 101, 102)
    data_seed: int = 0
    dtype: str = "float64"
    kind: str = "peers"

    def __post_init__(self):
        if set(self.seeds) & set(self.tuning_seeds):
            raise ValueError(f"tuning seeds {self.tuning_seeds} overlap the reported seeds "
                             f"{self.seeds}.")


@dataclasses.dataclass(frozen=True)
class RMCConfig:
    """Robust low-rank matrix completion on the surveillance video (the paper's rmc figure).

    Attributes:
      n_frames, frame_step, rows, cols: the frames (every ``frame_step``-th) and the crop
        (``(start, stop, step)`` triples) of the 72 x 96 video.
      rank: r of U in Gr(m, r).
      observed: fraction of entries observed (Omega).
      outliers: fraction of entries with an added outlier of magnitude U(0.5, 1).
      reg_weight: the l1 weight gamma of ||P_Omega(S)||_1, chosen for the model before any
        method comparison, by the background error (against the temporal median) of a
        converged full-batch solution, rank 2: for gamma = 0.01 / 0.03 / 0.05 / 0.1 / 0.2 it
        was 0.031 / 0.030 / 0.031 / 0.038 / 0.054 on a 24 x 32 crop (120 frames) and 0.015 /
        0.016 / 0.021 / 0.035 / 0.067 on a 12 x 16 crop (60 frames); on the whole video
        0.0133 / 0.0134 / 0.0151 for 0.01 / 0.03 / 0.05. 0.03 is in the flat middle (and
        converges faster than 0.01). The earlier gamma = 0.3 made the minimizer of F a poor
        background (0.067 on the 24 x 32 crop, 0.105 on the 12 x 16 one): it leaves the
        pedestrians, of contrast below 0.3, in the low-rank part.
      reference_epochs: steps of the converged full-batch reference run (the model's
        minimizer, to which the budgeted runs are compared).
      lam: the weight lambda of the unobserved entries.
      budget: stochastic gradients, in units of |Omega| (R-ProxSPB: whole blocks within it).
      batch_fraction: minibatch size / |Omega| (R-ProxSGD, R-Subgrad, R-ProxSPB's |S2|).
      q: R-ProxSPB's refresh period (|S1| = |Omega|).
      etas: step grid, in units of 1/|Omega| (the paper: 10^-j / |Omega|, j = 0..4; here
        extended past its edge, where every method's best was).
      step_scales: the S block's step relative to U's, in units of |Omega|.
      max_extensions: how many times tuning may widen the grid (``etas`` x ``step_scales``)
        past an edge that a method's choice lies on (one point past it, at the ratio of the
        two outermost points; every method is then tuned again on the wider grid).
      seeds: the reported seeds, one run per seed and method (mask, outliers, sampling).
      tuning_seeds: the seeds on which each method's step is chosen (its least mean final F
        over them), disjoint from ``seeds``.
      points_per_pass: curve points per pass over Omega (R-ProxSGD, R-Subgrad; R-ProxSPB
        records one after every block).
    """

    n_frames: int = 200
    frame_step: int = 1
    rows: tuple = (0, 72, 1)
    cols: tuple = (0, 96, 1)
    rank: int = 2
    observed: float = 0.5
    outliers: float = 0.1
    reg_weight: float = 0.03
    lam: float = 1e-3
    budget: float = 4.0
    batch_fraction: float = 0.1
    q: int = 5
    # The paper's grid is 10^-j / |Omega|, j = 0..4: on this video every method's best was
    # its edge, eta = 1, so the grid extends to 2 and 0.5; the S scales bracket the best ones.
    etas: tuple = (2.0, 1.0, 0.5, 1e-1, 1e-2)
    step_scales: tuple = (0.03, 0.1, 0.3, 1.0)
    max_extensions: int = 3
    seeds: tuple = (0, 1, 2, 3, 4)
    tuning_seeds: tuple = (100, 101)
    points_per_pass: int = 5
    reference_epochs: int = 300
    dtype: str = "float64"
    kind: str = "rmc"


# A seeded subset of the 70,000 shipped digits keeps a configuration within ~15 minutes on
# 2 CPU cores (``dataclasses.replace(get_config(name), n=None)`` runs all of them). The
# shipped Fashion-MNIST holds 10,000 images, all used.
MNIST_N = 20000

CONFIGS = {
    "spca-mnist-r10": SPCAConfig("mnist", r=10, mus=(0.2, 0.4), n=MNIST_N),
    "spca-fashion-r10": SPCAConfig("fashion_mnist", r=10, mus=(0.2, 0.4)),
    "spca-mnist-r15": SPCAConfig("mnist", r=15, mus=(0.2, 0.4, 0.8), n=MNIST_N),
    "spca-fashion-r15": SPCAConfig("fashion_mnist", r=15, mus=(0.2, 0.4, 0.8)),
    "peers-mnist": PeersConfig("mnist", n=MNIST_N),
    # scikit-learn's alpha scales like sqrt(n): the MNIST grid times sqrt(10000 / 20000)
    "peers-fashion": PeersConfig("fashion_mnist", sklearn_penalties=(0.7, 5.0, 10.0, 18.0, 23.0,
                                                                     28.0)),
    "rmc-video": RMCConfig(),
}

# CI-sized versions: every code path, seconds of arithmetic (compilation dominates).
_TINY = {
    "spca": dict(n=400, r=2, budget=1.0, grid_budget=1.0, etas=(5e-3, 5e-2), batch_size=20,
                 tuning_gammas=(0.1, 1.0), max_extensions=1, max_moves=1, tuning_lanes=8,
                 q=5, points_per_ifo=2, block_points=1, variance_steps=10, seeds=(0, 1),
                 tuning_seeds=(100, 101), mu_fractions=(0.5,), gammas=(0.1, 1.0)),
    # budget 2 (200 + 49 * 40) = 21.6 n: room for MiniBatchSparsePCA's 17 n of overheads
    "peers": dict(n=200, r=2, iterations=100, batch_size=20, q=50, etas=(0.1, 1.0),
                  max_extensions=1,
                  mus=(0.05, 0.3, 1.0), target_nonzeros=4, bisection_steps=1,
                  spams_penalties=(0.0, 2.0), spams_lambda2s=(0.1, 1.0),
                  sklearn_penalties=(1.0,), seeds=(0, 1),
                  tuning_seeds=(100,)),
    "rmc": dict(n_frames=12, frame_step=10, rows=(20, 44, 3), cols=(30, 62, 3),
                etas=(1.0, 0.1), step_scales=(0.3,), max_extensions=1, seeds=(0, 1),
                tuning_seeds=(5,),
                points_per_pass=2, reference_epochs=40),
}


def get_config(name: str, size: str = "paper"):
    """The configuration ``name`` at ``size`` ("paper" or "tiny")."""
    if name not in CONFIGS:
        raise ValueError(f"unknown experiment {name!r}; choose from {sorted(CONFIGS)}.")
    if size not in ("paper", "tiny"):
        raise ValueError(f"size must be 'paper' or 'tiny', got {size!r}.")
    config = CONFIGS[name]
    if size == "tiny":
        tiny = dict(_TINY[config.kind])
        if config.kind == "spca":
            tiny["mus"] = config.mus[:1]
        config = dataclasses.replace(config, **tiny)
    return config
