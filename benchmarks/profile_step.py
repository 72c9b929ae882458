"""Profile: where the time of one float64 R-ProxSGD iteration goes, piece by piece.

Run from the repository root (about 1-2 minutes; ``solvers.py`` runs it at the end
point of its timed R-ProxSGD run unless ``--no-profile``)::

    python benchmarks/profile_step.py [--repeats 5]

Instance: ``_spca_instance.py`` (d = 784, r = 10, b = 100, n = 10,000, l1 mu = MU),
R-ProxSGD with eta_t = ETA0 / sqrt(t + 1), gamma = 1 / L, the subproblem rule and
relative tolerance those of the stochastic optimizers (``SSN = rproxjax.SSN.stochastic()``:
the adaptive rule, ``rtol = SSN_RTOL``), passed explicitly so that the pieces below solve
what the iteration solves. Standalone, X and the optimizer state come from
``rproxjax.fit`` (2 epochs of 200 steps from a random Stiefel point).

Profiling needs the pieces separately, which ``rproxjax.fit`` (one compiled epoch)
does not expose, so this script keeps its own step function: the minibatch gradient
(``jax.grad`` of the mean per-sample loss over b samples gathered by index), the
optimizer's ``update`` with the state that ``fit`` returned, and
``optax.apply_updates``, as ``fit`` does per step (without its per-step history).
Each piece is timed inside a compiled ``fori_loop`` (``_timing.time_per_iteration``,
50 calls, fastest of the repeats: the least load-disturbed sample):

* the whole iteration; the minibatch gradient; the update + apply_updates;
* the subproblem alone (``rproxjax.tangent_prox`` with the optimizer's rule and
  tolerances), warm-started as the optimizers do, from the subgradient of h of a solve at
  the same point with another minibatch (the optimizer state's own is not read); with
  ``max_steps=0`` (setup and the first evaluation of E), hence the cost per Newton step;
* the polar retraction (one pass of an r x r eigh; two where cond^2 > 100) of the
  resulting step; "the rest" is update minus subproblem minus retraction.

Measured alternatives (the library is not modified): the polar factor through eigh of
the r x r Gram, the QR retraction, the gradient on a contiguous slice instead of a
gather and written by hand, the subproblem with conjugate gradients, the pieces vmapped
over 8 lanes with the same mu (how a sweep's cost scales when no lane waits for another;
on CPU the vmapped subproblem runs its lanes one after another), the K tensor of a dense
Newton step over all r^2 or the r(r+1)/2 symmetric column pairs, and the full gradient
of an R-ProxSPB refresh computed four ways (as ``fit`` computes it: chunks of 2048 read
by ``dynamic_slice`` in a ``fori_loop``; a ``lax.scan`` over the reshaped chunks;
unchunked; and for this quadratic loss through the precomputed covariance).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

import rproxjax
from rproxjax import stiefel

try:  # run as a script: benchmarks/ is on sys.path
    import _flops
    import _timing
    from _spca_instance import LIPSCHITZ, MU, B, D, N, R, make_data, per_sample_loss
except ImportError:  # run as `python -m benchmarks.profile_step`
    from benchmarks import _flops, _timing
    from benchmarks._spca_instance import LIPSCHITZ, MU, B, D, N, R, make_data, per_sample_loss

jax.config.update("jax_enable_x64", True)

ETA0 = 1.0
GAMMA = 1.0 / LIPSCHITZ
#: The subproblem settings of the iteration (the stochastic optimizers' default).
SSN = rproxjax.SSN.stochastic()
CHUNK = 2048
N_LOOP = 50
LANES = 8

def batch_loss(x, batch):
    return jnp.mean(jax.vmap(per_sample_loss, in_axes=(None, 0))(x, batch))

batch_grad = jax.grad(batch_loss)

def make_opt(mu, eta0=ETA0, gamma=GAMMA):
    return rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(eta0), gamma, rproxjax.l1(mu),
                               ssn=SSN)

def ssn(warm, x, g, gamma, mu, max_steps=100, linear_solver="auto"):
    """The iteration's subproblem, warm-started as the optimizers do: from a previous
    solution's subgradient of h (``warm``, d x r)."""
    return rproxjax.tangent_prox(x, g, gamma, rproxjax.l1(mu), subgradient=warm,
                                 ssn=SSN.replace(max_steps=max_steps,
                                                 linear_solver=linear_solver))

def polar_eigh(y):
    """Polar factor Y (Y^T Y)^{-1/2} through an r x r eigendecomposition."""
    w, v = jnp.linalg.eigh(y.T @ y)
    return y @ ((v / jnp.sqrt(w)) @ v.T)

def full_grad_fori(x, data):
    """The full gradient as fit computes it: chunks read by dynamic_slice in a fori_loop."""
    n = data.shape[0]
    full = n // CHUNK

    def body(i, acc):
        return acc + CHUNK * batch_grad(x, lax.dynamic_slice_in_dim(data, i * CHUNK, CHUNK))

    total = lax.fori_loop(0, full, body, jnp.zeros_like(x))
    if n % CHUNK:
        total = total + (n % CHUNK) * batch_grad(x, data[full * CHUNK:])
    return total / n

def full_grad_scan(x, data):
    """The full gradient by a lax.scan over the reshaped chunks (fit's former way)."""
    n = data.shape[0]
    full = n // CHUNK
    head = data[: full * CHUNK].reshape(full, CHUNK, data.shape[1])
    total, _ = lax.scan(lambda acc, c: (acc + CHUNK * batch_grad(x, c), None),
                        jnp.zeros_like(x), head)
    if n % CHUNK:
        total = total + (n % CHUNK) * batch_grad(x, data[full * CHUNK:])
    return total / n

def setup(x, steps_done, data, *, mu, eta0, gamma, seed=0):
    """The profiled step's inputs at X: batch, gradient, warm start, step, solution."""
    rng = np.random.default_rng(seed)
    ib, ib_other = (jnp.asarray(rng.permutation(N)[:B], jnp.int32) for _ in range(2))
    dtype = x.dtype
    mu, gamma = jnp.asarray(mu, dtype), jnp.asarray(gamma, dtype)
    g = batch_grad(x, data[ib])
    # The warm start: the subgradient of h of a solve at the same point with another
    # minibatch (in place of the previous step's, held by the state).
    _, info_prev = ssn(jnp.zeros_like(x), x, batch_grad(x, data[ib_other]), gamma, mu)
    warm = info_prev.subgradient
    zeta, info = ssn(warm, x, g, gamma, mu)
    eta = jnp.asarray(eta0 / np.sqrt(steps_done + 1.0), dtype)
    return {"ib": ib, "g": g, "warm": warm, "zeta": zeta, "eta": eta, "mu": mu,
            "gamma": gamma, "steps": int(info.num_steps), "evals": int(info.num_evaluations)}

def tpi(fn, *args, repeats, n=N_LOOP):
    """Seconds per call inside a compiled fori_loop, fastest of ``repeats``."""
    return _timing.time_per_iteration(fn, *args, n=n, repeats=repeats, reduce=min)

def time_pieces(c, x, state, data, opt, repeats):
    """The iteration and its pieces (seconds per call)."""
    gamma = c["gamma"]

    def iteration(x_, st_, ib_, data_):
        updates, _ = opt.update(batch_grad(x_, data_[ib_]), st_, x_)
        return optax.apply_updates(x_, updates)

    def update_only(g_, x_, st_):
        updates, _ = opt.update(g_, st_, x_)
        return optax.apply_updates(x_, updates)

    out = {"instance_newton_steps": c["steps"], "instance_evaluations": c["evals"]}
    out["iteration_s"] = tpi(iteration, x, state, c["ib"], data, repeats=repeats)
    out["gradient_s"] = tpi(lambda x_, d_, i_: batch_grad(x_, d_[i_]), x, data, c["ib"],
                            repeats=repeats)
    out["update_s"] = tpi(update_only, c["g"], x, state, repeats=repeats)
    # X is the carried argument: work on X alone must not be hoisted out of the timing loop
    # (an optimizer's X changes at every step).
    out["ssn_s"] = tpi(lambda x_, warm, g_, mu_: ssn(warm, x_, g_, gamma, mu_),
                       x, c["warm"], c["g"], c["mu"], repeats=repeats)
    out["ssn_fixed_s"] = tpi(lambda x_, warm, g_, mu_: ssn(warm, x_, g_, gamma, mu_, 0),
                             x, c["warm"], c["g"], c["mu"], repeats=repeats)
    out["retraction_s"] = tpi(lambda z, x_, e: stiefel.retract(x_, e * z), c["zeta"], x,
                              c["eta"], repeats=repeats)
    out["rest_s"] = out["update_s"] - out["ssn_s"] - out["retraction_s"]
    out["per_newton_step_s"] = (out["ssn_s"] - out["ssn_fixed_s"]) / max(c["steps"], 1)
    return out

def time_alternatives(c, x, data, repeats):
    """Measured alternatives to the retraction, the gather and the linear solver."""
    zeta, eta, gamma = c["zeta"], c["eta"], c["gamma"]
    out = {}
    out["retraction_eigh_s"] = tpi(lambda z, x_, e: polar_eigh(x_ + e * z), zeta, x, eta,
                                   repeats=repeats)
    out["retraction_eigh_max_diff"] = float(jnp.max(jnp.abs(
        polar_eigh(x + eta * zeta) - stiefel.retract(x, eta * zeta))))
    out["retraction_qr_s"] = tpi(lambda z, x_, e: stiefel.retract(x_, e * z, "qr"), zeta, x,
                                 eta, repeats=repeats)
    out["gradient_slice_s"] = tpi(
        lambda x_, d_, s: batch_grad(x_, lax.dynamic_slice_in_dim(d_, s, B)), x, data,
        jnp.int32(1234), repeats=repeats)
    out["gradient_explicit_s"] = tpi(
        lambda x_, d_, i_: (-2.0 / B) * (d_[i_].T @ (d_[i_] @ x_)), x, data, c["ib"],
        repeats=repeats)
    out["gather_s"] = tpi(lambda i_, d_: d_[i_], c["ib"], data, repeats=repeats)

    def ssn_cg(warm, x_, g_, mu_):
        return ssn(warm, x_, g_, gamma, mu_, linear_solver="cg")

    out["ssn_cg_s"] = tpi(lambda x_, warm, g_, mu_: ssn_cg(warm, x_, g_, mu_), x, c["warm"],
                          c["g"], c["mu"], repeats=repeats)
    info_cg = ssn_cg(c["warm"], x, c["g"], c["mu"])[1]
    out["ssn_cg_counts"] = (int(info_cg.num_steps), int(info_cg.num_linear_steps),
                            int(info_cg.num_evaluations))
    return out

def time_vmapped(c, x, data, repeats):
    """The pieces vmapped over LANES lanes with the same mu, and the K tensor."""
    gamma = c["gamma"]
    bcast = lambda a: jnp.broadcast_to(a, (LANES,) + jnp.shape(a))  # noqa: E731
    out = {}
    out["vmap8_ssn_s"] = tpi(jax.vmap(lambda warm, x_, g_, mu_: ssn(warm, x_, g_, gamma, mu_)),
                             bcast(c["warm"]), bcast(x), bcast(c["g"]), bcast(c["mu"]),
                             repeats=repeats, n=10)
    out["vmap8_gradient_s"] = tpi(
        jax.vmap(lambda x_, d_, i_: batch_grad(x_, d_[i_]), in_axes=(0, None, None)),
        bcast(x), data, c["ib"], repeats=repeats, n=10)
    out["vmap8_retraction_s"] = tpi(
        jax.vmap(lambda z, x_, e: stiefel.retract(x_, e * z), in_axes=(0, 0, None)),
        bcast(c["zeta"]), bcast(x), c["eta"], repeats=repeats, n=10)
    # The K tensor of a dense Newton step (K_i = X^T diag(mask_i) X), over all r^2
    # products and over the r(r+1)/2 symmetric pairs only.
    mask = (jnp.abs(x + c["zeta"]) > 0).astype(x.dtype)
    rows, cols = np.triu_indices(R)

    def k_full(m, x_):
        return m.T @ (x_[:, :, None] * x_[:, None, :]).reshape(D, R * R)

    # X carried (the first argument): its products are not hoisted out of the timing loop.
    out["k_tensor_s"] = tpi(lambda x_, m: k_full(m, x_), x, mask, repeats=repeats)
    out["k_tensor_sym_s"] = tpi(lambda x_, m: m.T @ (x_[:, rows] * x_[:, cols]), x, mask,
                                repeats=repeats)

    def pair_slices(x_):
        # The pairs as the library's dense Newton step forms them: from r static column
        # slices (XLA's CPU gather with constant indices is slower).
        return jnp.concatenate([x_[:, j:j + 1] * x_[:, j:] for j in range(R)], axis=1)

    out["k_tensor_sym_slices_s"] = tpi(lambda x_, m: m.T @ pair_slices(x_), x, mask,
                                       repeats=repeats)
    out["vmap8_k_tensor_s"] = tpi(jax.vmap(lambda x_, m: k_full(m, x_)), bcast(x),
                                  bcast(mask), repeats=repeats, n=10)
    return out

def time_full_gradient(x, data):
    """The full gradient of an R-ProxSPB refresh, four ways (seconds per call)."""
    out = {}
    for name, fn in (("full_grad_fori_s", full_grad_fori), ("full_grad_scan_s", full_grad_scan),
                     ("full_grad_unchunked_s", batch_grad)):
        out[name] = _timing.time_fn(jax.jit(fn), x, data, repeats=3, reduce=min)
    cov = data.T @ data / data.shape[0]
    out["full_grad_covariance_s"] = tpi(lambda x_, a: -2.0 * (a @ x_), x, cov, repeats=3)
    return out

def _us(seconds):
    return f"{1e6 * seconds:,.0f} us"

def _share(out, key):
    return f"{100 * out[key] / out['iteration_s']:.0f}%"

def piece_lines(out, peak, repeats):
    steps, evals = out["instance_newton_steps"], out["instance_evaluations"]
    grad_flops = _flops.grad_flops(B, D, R)
    return [
        "\n## Profile: one float64 R-ProxSGD iteration",
        "",
        f"Pieces timed inside a compiled fori_loop ({N_LOOP} calls, fastest of {repeats}) at "
        f"the end point of a fit run (subproblem: method={SSN.method!r}, rtol="
        f"{SSN.rtol}; Newton steps {steps}, evaluations {evals} on this instance). matmul "
        f"peak {peak / 1e9:.1f} GFLOP/s.",
        "",
        f"- whole iteration (gradient + update + apply_updates): {_us(out['iteration_s'])}",
        f"- minibatch gradient (gather + jax.grad): {_us(out['gradient_s'])} "
        f"({_share(out, 'gradient_s')}, {grad_flops / out['gradient_s'] / 1e9:.1f} GFLOP/s; "
        f"bound {_us(grad_flops / peak)}); gather of the {B} x {D} batch alone "
        f"{_us(out['gather_s'])}",
        f"- optimizer update + apply_updates: {_us(out['update_s'])}",
        f"  - tangent_prox (SSN): {_us(out['ssn_s'])} ({_share(out, 'ssn_s')}; bound "
        f"{_us(_flops.ssn_flops(steps, evals, D, R) / peak)}); with max_steps=0 (setup + "
        f"first E): {_us(out['ssn_fixed_s'])}; so per Newton step "
        f"{_us(out['per_newton_step_s'])} (dense reference step's bound "
        f"{_us(_flops.ssn_flops(1, evals / max(steps, 1), D, R) / peak)})",
        f"  - polar retraction (r x r eigh, one pass): {_us(out['retraction_s'])} "
        f"({_share(out, 'retraction_s')}; bound {_us(_flops.retraction_flops(D, R) / peak)})",
        f"  - the rest (schedule, guards, finiteness checks, norms, apply_updates): "
        f"{_us(out['rest_s'])} (pieces timed separately on a shared machine need not add up)",
    ]

def alternative_lines(out, peak):
    ratio = lambda a, b: f"{out[a] / out[b]:.1f}x"  # noqa: E731
    return [
        "",
        "Measured alternatives:",
        "",
        f"- polar factor through eigh of the r x r Gram Y^T Y instead of a thin SVD: "
        f"{_us(out['retraction_eigh_s'])} vs {_us(out['retraction_s'])} (max |diff| "
        f"{out['retraction_eigh_max_diff']:.1e}); QR retraction: {_us(out['retraction_qr_s'])}",
        f"- gradient on a contiguous slice (pre-shuffled data, dynamic_slice) instead of a "
        f"gather: {_us(out['gradient_slice_s'])}; written as -2/b Z^T (Z X) by hand: "
        f"{_us(out['gradient_explicit_s'])}",
        f"- SSN with linear_solver='cg' at r = {R}: {_us(out['ssn_cg_s'])} (Newton steps, CG "
        f"iterations, evaluations = {out['ssn_cg_counts']})",
        f"- the same pieces vmapped over {LANES} lanes with the same mu (equal work per lane): "
        f"SSN {_us(out['vmap8_ssn_s'])} ({ratio('vmap8_ssn_s', 'ssn_s')} one lane), gradient "
        f"{_us(out['vmap8_gradient_s'])} ({ratio('vmap8_gradient_s', 'gradient_s')}), "
        f"retraction {_us(out['vmap8_retraction_s'])} "
        f"({ratio('vmap8_retraction_s', 'retraction_s')}), the K tensor of a Newton step "
        f"{_us(out['vmap8_k_tensor_s'])} ({ratio('vmap8_k_tensor_s', 'k_tensor_s')})",
        f"- K tensor of a Newton step: {_us(out['k_tensor_s'])} over all r^2 = {R * R} column "
        f"products (bound {_us(2.0 * D * R**3 / peak)}), {_us(out['k_tensor_sym_s'])} over "
        f"the r(r+1)/2 = {R * (R + 1) // 2} symmetric pairs gathered by index, "
        f"{_us(out['k_tensor_sym_slices_s'])} with the pairs formed from static column "
        f"slices (the library's jacobian_gram)",
        f"- R-ProxSPB refresh, the full gradient over n = {N}: as fit computes it (chunks of "
        f"{CHUNK} read by dynamic_slice in a fori_loop) {_us(out['full_grad_fori_s'])}; a "
        f"lax.scan over the reshaped chunks {_us(out['full_grad_scan_s'])}; unchunked "
        f"{_us(out['full_grad_unchunked_s'])} (bound "
        f"{_us(_flops.grad_flops(N, D, R) / peak)}); for this quadratic loss, -2 A X with "
        f"A = Z^T Z / n precomputed once: {_us(out['full_grad_covariance_s'])}",
    ]

def profile_sgd(x, opt_state, steps_done, data, peak, repeats, *, mu=MU, eta0=ETA0,
                gamma=GAMMA) -> dict:
    """All pieces at X with the optimizer state ``opt_state`` after ``steps_done`` steps;
    prints the summary and returns the numbers with it under "text"."""
    opt = make_opt(mu, eta0, gamma)
    c = setup(x, steps_done, data, mu=mu, eta0=eta0, gamma=gamma)
    out = time_pieces(c, x, opt_state, data, opt, repeats)
    out.update(time_alternatives(c, x, data, repeats))
    out.update(time_vmapped(c, x, data, repeats))
    out.update(time_full_gradient(x, data))
    text = "\n".join(piece_lines(out, peak, repeats) + alternative_lines(out, peak))
    print(text, flush=True)
    out["text"] = text
    return out

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per piece")
    repeats = parser.parse_args(argv).repeats
    z, _ = make_data()
    data = jnp.asarray(z)
    x0 = stiefel.random_point(jax.random.key(0), D, R, jnp.float64)
    steps, epochs = 200, 2
    res = rproxjax.fit(make_opt(MU), per_sample_loss, x0, data, key=jax.random.key(1),
                       batch_size=B, num_epochs=epochs, steps_per_epoch=steps)
    peak = _timing.matmul_flops("float64", n=2000, repeats=3)
    profile_sgd(res.params, res.opt_state, steps * epochs, data, peak, repeats)

if __name__ == "__main__":
    main()
