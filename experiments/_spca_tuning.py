"""The sparse PCA experiment's step sizes, tuned the same way for every method.

Every choice is made on ``cfg.tuning_seeds`` (at least two, disjoint from the reported seeds)
by the mean final loss F over them, with the step eta (eta0 of the decaying schedules) and,
for the proximal methods, the proximal step gamma tuned together:

1. **Screen.** Every eta of ``cfg.etas`` times every gamma of ``cfg.tuning_gammas`` runs
   ``grid_budget`` IFO/n (or one block of the block methods, if that is more). Where a
   panel's best value sits at the edge of an axis, the axis is extended past that edge by a
   factor of :data:`EXTEND` and the new values screened, at most ``cfg.max_extensions``
   times per edge.
2. **At the reported budget.** From the screen's best pair of each panel, a local search:
   the pair and its neighbours on each axis (extended past the edge where needed) run the
   reported ``budget``, the best becomes the centre, until the centre is the best (at most
   ``cfg.max_moves`` moves). The choice is the best pair run at the budget; it is marked
   unconverged where the moves ran out before it was the best of its neighbours.

Each stage's runs are one ``jax.jit(jax.vmap(...))`` program over ``cfg.tuning_lanes``
(mu, eta, gamma) lanes of :func:`rproxjax.pure_fit` (compiled once, called on chunks of the
lanes to run, once per tuning seed). Where the screen's budget equals the reported one, one
program serves both stages. The records keep every
evaluated pair, so that the report can show the grid around each choice.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import rproxjax
from experiments._spca_protocol import BLOCK_METHODS
from rproxjax import problems
from rproxjax._contract import block_cost

#: The factor by which an axis extends past its edge.
EXTEND = 2.0
#: eta's upper bound where the method clips it (R-ProxSARAH's averaging weight is min(eta, 1)).
ETA_CAP = {"R-ProxSARAH": 1.0}


class Axis:
    """The sorted values of one hyperparameter, extended past either edge on demand."""

    def __init__(self, values, cap=None):
        self.values = sorted(float(v) for v in values)
        self.cap = cap

    def neighbours(self, value: float) -> list[float]:
        """The values next to ``value`` (extending the axis where ``value`` is an edge)."""
        i = self.values.index(value)
        lower = self.extend(-1) if i == 0 else self.values[i - 1]
        upper = self.extend(+1) if value == self.values[-1] else self.values[
            self.values.index(value) + 1]
        return [v for v in (lower, upper) if v is not None]

    def extend(self, side: int):
        """Adds the value past the lower (``side`` -1) or upper (+1) edge; returns it (None
        where the cap forbids)."""
        if side > 0:
            new = self.values[-1] * EXTEND
            if self.cap is not None and new > self.cap:
                return None
            self.values.append(new)
        else:
            new = self.values[0] / EXTEND
            self.values.insert(0, new)
        return new

    def at_edge(self, value: float) -> int:
        """-1 at the lower edge, +1 at the upper one (0 inside, or at a capped top)."""
        if value == self.values[0] and len(self.values) > 1:
            return -1
        if value == self.values[-1] and len(self.values) > 1:
            capped = self.cap is not None and value * EXTEND > self.cap
            return 0 if capped else 1
        return 0


def _program(method, cfg, d, dtype, steps, optimizer, batch_size):
    """F after ``steps`` steps for lanes of (mu, eta, gamma): one compiled vmapped program,
    the data an argument (not a constant folded into the program)."""

    def one(mu, eta, gamma, seed_key, data):
        x0 = rproxjax.stiefel.random_point(seed_key[0], d, cfg.r, dtype)
        opt = optimizer(method, eta, mu, cfg, gamma=gamma)
        res = rproxjax.pure_fit(opt, problems.spca_loss, x0, data, key=seed_key[1],
                                batch_size=batch_size, num_epochs=1,
                                sampling=rproxjax.Sampling(steps_per_epoch=steps))
        return res.epoch_loss[-1], res.epoch_ifo[-1]

    return jax.jit(jax.vmap(one, (0, 0, 0, None, None)))


class Evaluator:
    """Mean final F over the tuning seeds of (panel, eta, gamma) lanes after a fixed number
    of steps, each lane run once (a cache), recorded in ``records``. With a ``checkpoint``
    (:class:`~experiments._store.Checkpoint`) each chunk's outputs are saved as it
    finishes, and a chunk saved before (the same stage, steps and lanes) is read back
    instead of run: a resumed tuning forms the same chunks in the same order, so it
    reproduces the interrupted one bit for bit."""

    def __init__(self, method, cfg, data, mus, steps, seed_keys, optimizer, batch_size,
                 stage, checkpoint=None, lanes=None):
        self.mus, self.seed_keys, self.stage, self.data = list(mus), seed_keys, stage, data
        self.lanes = cfg.tuning_lanes if lanes is None else lanes
        self.steps, self.checkpoint = steps, checkpoint
        self.program = _program(method, cfg, data.shape[1], data.dtype, steps, optimizer,
                                batch_size)
        self.n, self.dtype = data.shape[0], data.dtype
        self.cache, self.records, self.wall_time = {}, [], 0.0

    def __call__(self, lanes) -> None:
        """Runs the lanes (panel index, eta, gamma) not yet run."""
        todo = sorted({lane for lane in lanes if lane not in self.cache})
        if not todo:
            return
        start = time.perf_counter()
        per_seed, ifo = [], None
        for k in range(0, len(todo), self.lanes):  # fixed-size chunks: one compilation
            chunk = todo[k:k + self.lanes]
            chunk = chunk + [chunk[-1]] * (self.lanes - len(chunk))
            losses, ifo = self._chunk(chunk)
            per_seed.append(losses)
        self.wall_time += time.perf_counter() - start
        per_seed = np.concatenate(per_seed)[:len(todo)]
        for lane, losses in zip(todo, per_seed, strict=True):
            finite = np.all(np.isfinite(losses))
            mean = float(np.mean(losses)) if finite else math.inf
            self.cache[lane] = mean
            self.records.append({"stage": self.stage, "panel": lane[0], "eta": lane[1],
                                 "gamma": lane[2], "loss": mean,
                                 "loss_per_seed": [float(v) for v in losses],
                                 "ifo_over_n": ifo})

    def _chunk(self, chunk):
        """(final F per lane and tuning seed, IFO/n) of one chunk of lanes: run, or read
        from the checkpoint."""
        piece = f"{self.stage}/steps={self.steps}/{chunk!r}"
        saved = None if self.checkpoint is None else self.checkpoint.get(piece)
        if saved is not None:
            return np.array([[float(v) for v in row] for row in saved["losses"]]), \
                saved["ifo_over_n"]
        lanes = [jnp.asarray(v, self.dtype) for v in zip(*[(self.mus[i], e, g)
                                                            for i, e, g in chunk],
                                                          strict=True)]
        outs = [jax.block_until_ready(self.program(*lanes, key, self.data))
                for key in self.seed_keys]
        losses = np.stack([np.asarray(o[0], dtype=float) for o in outs], axis=1)
        ifo = float(np.asarray(outs[0][1]).ravel()[0]) / self.n
        if self.checkpoint is not None:
            self.checkpoint.put(piece, {"losses": losses, "ifo_over_n": ifo})
        return losses, ifo

    def best(self, panel, candidates):
        """The candidate (eta, gamma) of least mean F (None if every one diverged)."""
        scored = [(self.cache[(panel, e, g)], e, g) for e, g in candidates]
        finite = [s for s in scored if math.isfinite(s[0])]
        return min(finite)[1:] if finite else None


def _screen(ev: Evaluator, etas: Axis, gammas: Axis, max_extensions: int) -> list:
    """The screen over the (extended) grid; returns each panel's best (eta, gamma)."""
    panels = range(len(ev.mus))
    extended = {("eta", -1): 0, ("eta", 1): 0, ("gamma", -1): 0, ("gamma", 1): 0}
    while True:
        ev([(p, e, g) for p in panels for e in etas.values for g in gammas.values])
        pairs = [(e, g) for e in etas.values for g in gammas.values]
        best = [ev.best(p, pairs) for p in panels]
        if any(b is None for b in best):
            raise ValueError(f"every step of the grid {etas.values} x {gammas.values} "
                             "diverged on a panel: widen the grid.")
        grew = False
        for name, axis, index in (("eta", etas, 0), ("gamma", gammas, 1)):
            for side in (-1, 1):
                edge = any(axis.at_edge(b[index]) == side for b in best)
                if edge and extended[(name, side)] < max_extensions:
                    if axis.extend(side) is not None:
                        extended[(name, side)] += 1
                        grew = True
        if not grew:
            return best


def _local_search(ev: Evaluator, start, etas: Axis, gammas: Axis, max_moves: int,
                  tune_gamma: bool) -> list[dict]:
    """From each panel's ``start`` pair, the local search at the budget (see the module)."""
    centres = list(start)
    moves = [0] * len(centres)
    done = [False] * len(centres)
    converged = [False] * len(centres)
    while not all(done):
        plus = {}
        for p, (e, g) in enumerate(centres):
            if done[p]:
                continue
            cand = [(e, g)] + [(v, g) for v in etas.neighbours(e)]
            if tune_gamma:
                cand += [(e, v) for v in gammas.neighbours(g)]
            plus[p] = cand
        ev([(p, e, g) for p, cand in plus.items() for e, g in cand])
        for p, cand in plus.items():
            best = ev.best(p, cand)
            if best is None:
                raise ValueError(f"every step near eta = {centres[p][0]:g} diverged at the "
                                 "reported budget: widen the grid.")
            if best == centres[p]:
                done[p] = converged[p] = True
            else:  # the best pair run so far; the search stops after max_moves moves
                centres[p], moves[p] = best, moves[p] + 1
                done[p] = moves[p] >= max_moves
    return [{"eta": e, "gamma": g, "loss": ev.cache[(p, e, g)], "moves": moves[p],
             "converged": converged[p]} for p, (e, g) in enumerate(centres)]


def tune(method, cfg, data, mus, *, optimizer, schedule, seed_keys, gammas=None,
         checkpoint=None) -> dict:
    """The step (and gamma) of ``method`` for each mu of ``mus`` (see the module).

    Args:
      method: a stochastic method of the experiment.
      cfg: the :class:`~experiments._configs.SPCAConfig`.
      data: the centred data, n x d.
      mus: the panels' l1 weights.
      optimizer: ``optimizer(method, eta, mu, cfg, gamma=)`` (arrays allowed).
      schedule: ``schedule(method, budget, n, cfg)`` -> ``batch_size``, ``num_epochs`` and
        ``sampling`` (a :class:`rproxjax.Sampling` with ``steps_per_epoch``): the reported
        runs' schedule.
      seed_keys: one stacked (X0 key, sampling key) per tuning seed.
      gammas: the gamma axis (default ``cfg.tuning_gammas`` for the proximal methods,
        tuned; a single value is held fixed).
      checkpoint: a :class:`~experiments._store.Checkpoint` that keeps each
        chunk of runs as it finishes (see :class:`Evaluator`), or None.

    Returns:
      ``{"choices": [{"eta", "gamma", "loss", "moves", "converged"} per mu], "records":
      [every evaluated lane], "etas"/"gammas": the extended axes ("screen_etas"/
      "screen_gammas": after the screen, before the local search), "screen_steps",
      "budget_steps", "screen_ifo_over_n", "budget_ifo_over_n", "wall_time"}``
      (``wall_time``: the seconds of the chunks run in this call; a chunk read from the
      checkpoint counts none).
    """
    n = data.shape[0]
    proximal = not method.startswith("R-Subgrad")  # R-Subgrad, R-Subgrad-1: no gamma
    if gammas is None:
        gammas = cfg.tuning_gammas if proximal else (cfg.gamma,)
    tune_gamma = proximal and len(gammas) > 1
    eta_axis = Axis(cfg.etas, ETA_CAP.get(method))
    gamma_axis = Axis(gammas if tune_gamma else gammas[:1])
    budget = schedule(method, cfg.budget, n, cfg)
    screen_budget = max(cfg.grid_budget, _block_ifo(method, cfg, n))
    screen = schedule(method, screen_budget, n, cfg)
    steps = {name: s["sampling"].steps_per_epoch * s["num_epochs"]
             for name, s in (("screen", screen), ("budget", budget))}
    # where the screen runs at the budget, one evaluator's runs serve both stages (recorded
    # as "budget")
    stages = ("budget",) if steps["screen"] == steps["budget"] else ("screen", "budget")
    evs = {name: Evaluator(method, cfg, data, mus, steps[name], seed_keys, optimizer,
                           budget["batch_size"], name, checkpoint) for name in stages}
    evs.setdefault("screen", evs["budget"])
    start = _screen(evs["screen"], eta_axis, gamma_axis, cfg.max_extensions)
    screened = {"screen_etas": list(eta_axis.values), "screen_gammas": list(gamma_axis.values)}
    choices = _local_search(evs["budget"], start, eta_axis, gamma_axis, cfg.max_moves,
                            tune_gamma)
    for c, s in zip(choices, start, strict=True):
        c["screen_eta"], c["screen_gamma"] = s
    records = evs["screen"].records + (evs["budget"].records
                                       if evs["budget"] is not evs["screen"] else [])
    return {"choices": choices, "records": records, **screened, "etas": eta_axis.values,
            "gammas": gamma_axis.values,
            "tuned_gamma": tune_gamma,
            "screen_steps": steps["screen"], "budget_steps": steps["budget"],
            "screen_ifo_over_n": _ifo(records, evs["screen"].stage),
            "budget_ifo_over_n": _ifo(records, "budget"),
            "wall_time": sum(ev.wall_time for ev in {id(e): e for e in evs.values()}.values())}


class RatioAxis:
    """An eta axis of constant ``ratio`` through any value: the neighbours of v are
    v / ratio and v * ratio (no edge), each taken as a ``known`` value where it equals one
    to rounding (the key that value already has in an evaluator's cache)."""

    def __init__(self, ratio: float, known=()):
        self.ratio, self.known = float(ratio), sorted(known)

    def neighbours(self, value: float) -> list[float]:
        return [next((k for k in self.known if _same(k, v)), v)
                for v in (value / self.ratio, value * self.ratio)]


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def refine(method, cfg, data, mus, tuned, panels, *, ratio, optimizer, schedule,
           seed_keys) -> dict:
    """The local search at the reported budget of a one-axis tuning (``tuned``, from
    :func:`tune`), redone on an eta axis of constant ``ratio`` around its choices at the
    panels ``panels`` (indices into ``mus``): a grid as fine as the proximal methods' 2-D
    ones, where the paper's grid leaves gaps of 5 between neighbours.

    The pairs ``tuned`` ran at the budget are reused (the same seeds, steps and program;
    the replay tests show the library computes what it computed then); the others run one
    at a time (a program of one lane: no padding lanes). The search moves at most ``cfg.max_moves``
    times per panel, as :func:`tune`'s.

    Returns:
      ``{"ratio", "panels", "max_moves", "choices": [{"eta", "gamma", "loss", "moves", "converged",
      "tuned_eta"} per refined panel], "records": [each pair run here], "reused": [each
      pair read from ``tuned``], "budget_ifo_over_n", "wall_time"}``.
    """
    if tuned["tuned_gamma"]:
        raise ValueError(f"refine: {method} tunes gamma too; refine searches eta alone.")
    n = data.shape[0]
    budget = schedule(method, cfg.budget, n, cfg)
    steps = budget["sampling"].steps_per_epoch * budget["num_epochs"]
    if steps != tuned["budget_steps"]:
        raise ValueError(f"refine: the budget's {steps} steps are not the tuning's "
                         f"{tuned['budget_steps']}.")
    ev = Evaluator(method, cfg, data, [mus[i] for i in panels], steps, seed_keys, optimizer,
                   budget["batch_size"], "budget", lanes=1)
    found, reused = refine_search(ev, tuned, panels, ratio, cfg.max_moves)
    records = [dict(r, panel=panels[r["panel"]]) for r in ev.records]
    return {"ratio": float(ratio), "panels": list(panels), "max_moves": cfg.max_moves,
            "choices": found,
            "records": records, "reused": reused, "budget_steps": steps,
            "budget_ifo_over_n": tuned["budget_ifo_over_n"], "wall_time": ev.wall_time}


def refine_search(ev, tuned, panels, ratio, max_moves) -> tuple[list, list]:
    """:func:`refine`'s search on the evaluator ``ev`` (whose panel j is ``panels[j]``):
    its cache seeded with ``tuned``'s pairs at the budget, then :func:`_local_search` from
    ``tuned``'s choices on a :class:`RatioAxis`, a neighbour equal to a reused eta (to
    rounding) taken as that eta. Returns (the choices, the reused records)."""
    reused = []
    for j, i in enumerate(panels):
        for rec in tuned["records"]:
            if rec["stage"] == "budget" and rec["panel"] == i:
                ev.cache[(j, rec["eta"], rec["gamma"])] = rec["loss"]
                reused.append(dict(rec))
    axis = RatioAxis(ratio, known={e for (_, e, _) in ev.cache})
    gamma = tuned["choices"][panels[0]]["gamma"] if panels else None
    start = [(tuned["choices"][i]["eta"], gamma) for i in panels]
    found = _local_search(ev, start, axis, None, max_moves, tune_gamma=False)
    for c, i in zip(found, panels, strict=True):
        c["tuned_eta"] = tuned["choices"][i]["eta"]
    return found, reused


def _ifo(records, stage):
    return next(r["ifo_over_n"] for r in records if r["stage"] == stage)


def _block_ifo(method, cfg, n):
    """One block's IFO/n for the block methods, else 0."""
    return block_cost(cfg.q, cfg.batch_size, n) / n if method in BLOCK_METHODS else 0.0
