"""Adversarial inputs across the public API (issue 12): no silent wrong answers, no obscure errors.

Every case asserts one exact outcome, of three kinds:

* ``returns(check)``: the call succeeds and ``check(result)`` holds: the right answer against an
  independent reference (NumPy/SciPy formulas, a dense solve, cvxpy + Clarabel for the
  subproblem), or a flag in the state/history (``step_info(state).halted``,
  ``history.halted``, ``SubproblemInfo.status``) with X unchanged and on the manifold;
* ``raises(Error, "arg")``: a ``ValueError``/``TypeError`` whose message names the argument
  (a regular expression), raised *deliberately by rproxjax* (the innermost frame is a ``raise``
  statement in the package: an error thrown deep inside JAX, NumPy or optax whose text happens
  to contain the word does not count);
* ``cli_error("--flag")``: a command line exits with status 2 and an argparse-style message
  naming the flag, without a traceback.

Cases where today's library does the wrong thing assert the right outcome and carry
``xfail(strict=True, reason="issue 12: ...")``: remove the marker with the fix.

The cases are grouped by public function into parametrized tables of (name, call, expected),
so ``pytest --collect-only -q tests/test_adversarial.py`` counts them. Problem sizes are tiny
(d <= 12, n <= 60; n = 200 for the demo's fake data; a few steps).
"""

from __future__ import annotations

import functools
import linecache
import pathlib
import re
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

import rproxjax
from experiments import __main__ as experiments_cli
from rproxjax import SSN, grassmann, problems, stiefel
from rproxjax import _demo as demo

PKG = pathlib.Path(rproxjax.__file__).resolve().parent
F16, BF16 = jnp.float16, jnp.bfloat16
D, R, N, B = 8, 2, 60, 20  # fit problems: d, r, samples, batch size
S = rproxjax.Status


# ----------------------------------------------------------------------------- expectations


def _deliberate(exc) -> tuple[bool, str]:
    """(raised by a ``raise`` statement inside rproxjax, where it was raised)."""
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = pathlib.Path(tb.tb_frame.f_code.co_filename).resolve()
    line = linecache.getline(str(path), tb.tb_lineno).strip()
    return PKG in path.parents and line.startswith("raise"), f"{path}:{tb.tb_lineno}: {line}"


def raises(exc, arg: str):
    """A clear error: ``exc`` (a type or tuple), message matching ``arg``, raised by rproxjax."""

    def check(fn):
        with pytest.raises(exc, match=arg) as info:
            fn()
        ok, where = _deliberate(info.value)
        assert ok, f"{type(info.value).__name__} not raised by an rproxjax check but at {where}"

    return check


def returns(predicate):
    """The call returns, and ``predicate(result)`` asserts what the right result is."""

    def check(fn):
        predicate(fn())

    return check


def case(name, fn, expected, xfail: str | None = None):
    marks = () if xfail is None else pytest.mark.xfail(strict=True, reason=f"issue 12: {xfail}")
    return pytest.param(fn, expected, id=name, marks=marks)


def run_case(fn, expected):
    expected(fn)


# ----------------------------------------------------------------------------- shared data


def _concrete_cache(fn):
    """functools.cache computed eagerly even when first asked for inside a jax.jit trace
    (``_pure_fit`` asks inside one): a cached tracer leaked into the worker's later tests."""
    @functools.cache
    @functools.wraps(fn)
    def cached(*args, **kwargs):
        with jax.ensure_compile_time_eval():
            return fn(*args, **kwargs)
    return cached


@_concrete_cache
def _pt(d=6, r=2, seed=0):
    return stiefel.random_point(jax.random.key(seed), d, r)


@_concrete_cache
def _gm(d=6, r=2, seed=1):
    return jax.random.normal(jax.random.key(seed), (d, r))


def _tan(d=6, r=2):
    return stiefel.project(_pt(d, r), 0.3 * _gm(d, r))


@_concrete_cache
def _data():
    return jax.random.normal(jax.random.key(3), (N, D))


@_concrete_cache
def _x0():
    return stiefel.random_point(jax.random.key(4), D, R)


K = jax.random.key(1)
L1 = rproxjax.l1(0.1)
loss = problems.spca_loss


def _sgd(**kw):
    return rproxjax.r_prox_sgd(0.1, 0.1, L1, **kw)


def _opt():
    """The runner cases' optimizer: R-Subgrad compiles fastest (no Newton loop)."""
    return rproxjax.r_subgrad(0.1, L1)


def _boost(q=3):
    """A variance-reduced method without a Newton loop (h = 0): R-SpiderBoost."""
    return rproxjax.r_spider_boost(0.1, 0.1, q=q)


def _fit(opt=None, data=None, **kw):
    kw = {"key": K, "batch_size": B, "num_epochs": 1} | kw
    return rproxjax.fit(_opt() if opt is None else opt, kw.pop("loss_fn", loss),
                        kw.pop("params", _x0()), _data() if data is None else data, **kw)


def _pure_fit(opt=None, data=None, **kw):
    """pure_fit as meant to be used: inside jax.jit (errors are raised while tracing)."""
    kw = {"key": K, "batch_size": B, "num_epochs": 1} | kw
    return jax.jit(lambda: rproxjax.pure_fit(
        _opt() if opt is None else opt, kw.pop("loss_fn", loss), kw.pop("params", _x0()),
        _data() if data is None else data, **kw))()


def _stream(count, d=D):
    data = np.asarray(_data())[:, :d]
    return iter([data[(i * B) % N:(i * B) % N + B] for i in range(count)])


def _feas(x):
    return float(np.linalg.norm(np.asarray(x).T @ np.asarray(x) - np.eye(np.shape(x)[-1])))


def _close(ref, rtol=1e-10, atol=1e-12):
    """Result (or its first element) equal to ``ref()`` (NumPy) within the tolerances."""

    def check(result):
        out = result[0] if isinstance(result, tuple) else result
        np.testing.assert_allclose(np.asarray(out, np.float64), ref(), rtol=rtol, atol=atol)

    return check


def _equal_to(value):
    def check(result):
        assert result == value, result

    return check


def _same_as(other):
    """Same result as the call ``other()`` (bit for bit)."""

    def check(result):
        np.testing.assert_array_equal(np.asarray(result), np.asarray(other()))

    return check


# ----------------------------------------------------------------------------- NumPy references


def _np(a):
    return np.asarray(a, np.float64)


def _ref_project(x, u):
    x, u = _np(x), _np(u)
    s = x.T @ u
    return u - x @ (0.5 * (s + s.T))


def _ref_polar(x, v):
    u, _, vt = np.linalg.svd(_np(x) + _np(v), full_matrices=False)
    return u @ vt


def _ref_qr(x, v):
    q, r = np.linalg.qr(_np(x) + _np(v))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _ref_exp(x, v):
    """The geodesic of the canonical metric (as documented): expm(W) X with the d x d
    generator W = P V X^T - X V^T P, P = I - X X^T / 2 (W X = V for tangent V), a dense
    exponential instead of the library's 2r x 2r one (Edelman, Arias and Smith 1998, 2.4)."""
    x, v = _np(x), _np(v)
    p = np.eye(x.shape[0]) - 0.5 * x @ x.T
    return scipy.linalg.expm(p @ v @ x.T - x @ v.T @ p) @ x


def _ref_cayley(x, v):
    """The dense Cayley transform (I - W/2)^{-1} (I + W/2) X."""
    x, v = _np(x), _np(v)
    d = x.shape[0]
    p = np.eye(d) - 0.5 * x @ x.T
    w = p @ v @ x.T - x @ v.T @ p
    return np.linalg.solve(np.eye(d) - 0.5 * w, (np.eye(d) + 0.5 * w) @ x)


def _ref_soft(v, thr):
    v = _np(v)
    return np.sign(v) * np.maximum(np.abs(v) - thr, 0.0)


def _ref_prox(x, g, t, mu, kind="l1"):
    """The subproblem argmin_{zeta in T_X} <G, zeta> + ||zeta||^2 / (2t) + h(X + zeta), by
    cvxpy + Clarabel (nothing taken from rproxjax)."""
    cp = pytest.importorskip("cvxpy")
    x, g = _np(x), _np(g)
    d, r = x.shape
    z = cp.Variable((d, r))
    if kind == "l1":
        h = cp.sum(cp.multiply(np.broadcast_to(np.asarray(mu, float), (d, r)), cp.abs(x + z)))
    else:
        h = mu * cp.sum(cp.norm(x + z, 2, axis=1))
    objective = cp.sum(cp.multiply(g, z)) + cp.sum_squares(z) / (2 * t) + h
    problem = cp.Problem(cp.Minimize(objective), [x.T @ z + z.T @ x == 0])
    with warnings.catch_warnings():  # l21's cones end 'optimal_inaccurate' (~1e-7 here)
        warnings.simplefilter("ignore", UserWarning)
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return z.value


def _solves(x, g, t, mu, kind="l1", rtol=1e-5):
    """tangent_prox's (zeta, info): converged, and zeta equal to the cvxpy step."""

    def check(result):
        zeta, info = result
        assert int(info.status) == S.SUCCESSFUL and bool(info.converged)
        ref = _ref_prox(x, g, t, mu, kind)
        err = np.linalg.norm(_np(zeta) - ref) / max(1.0, np.linalg.norm(ref))
        assert err < rtol, err

    return check


def _solved_or_collapsed(x, g, t, mu):
    """The degenerate subproblem (t mu above every entry of X - tG): either the right answer
    (converged, equal to cvxpy's) or zeta = 0 flagged COLLAPSED; never an unflagged step."""

    def check(result):
        zeta, info = result
        if int(info.status) == S.SUCCESSFUL:
            _solves(x, g, t, mu)(result)
        else:
            assert int(info.status) == S.COLLAPSED and not bool(info.converged)
            np.testing.assert_array_equal(zeta, 0.0)

    return check


def _flagged_zero(status=S.NONFINITE):
    def check(result):
        zeta, info = result
        assert int(info.status) == status and not bool(info.converged)
        np.testing.assert_array_equal(zeta, 0.0)

    return check


# ============================================================================ geometry

def _random_points_ok(points):
    col, square = points
    assert (col.shape, col.dtype, square.shape, square.dtype) == (
        (5, 1), jnp.float32, (5, 5), jnp.float64)
    assert _feas(col) < 1e-6 and _feas(square) < 1e-13


def _principal_angles_ref():
    u, w = _pt(6, 2, 0), _pt(6, 2, 5)
    return np.sort(scipy.linalg.subspace_angles(_np(u), _np(w)))


GEOMETRY = [
    # right answers (independent formulas)
    case("stiefel.project", lambda: stiefel.project(_pt(), _gm()),
         returns(_close(lambda: _ref_project(_pt(), _gm())))),
    case("stiefel.project r=d (skew part)", lambda: stiefel.project(_pt(4, 4), _gm(4, 4)),
         returns(_close(lambda: _ref_project(_pt(4, 4), _gm(4, 4))))),
    case("stiefel.retract polar", lambda: stiefel.retract(_pt(), _tan(), retraction="polar"),
         returns(_close(lambda: _ref_polar(_pt(), _tan())))),
    case("stiefel.retract qr", lambda: stiefel.retract(_pt(), _tan(), retraction="qr"),
         returns(_close(lambda: _ref_qr(_pt(), _tan())))),
    case("stiefel.retract exp (canonical geodesic)",
         lambda: stiefel.retract(_pt(), _tan(), retraction="exp"),
         returns(_close(lambda: _ref_exp(_pt(), _tan()), rtol=1e-9))),
    case("stiefel.retract cayley (dense)",
         lambda: stiefel.retract(_pt(), _tan(), retraction="cayley"),
         returns(_close(lambda: _ref_cayley(_pt(), _tan()), rtol=1e-9))),
    case("stiefel.retract polar r=1", lambda: stiefel.retract(_pt(6, 1), _tan(6, 1)),
         returns(_close(lambda: _ref_polar(_pt(6, 1), _tan(6, 1))))),
    case("stiefel.retract qr r=d", lambda: stiefel.retract(_pt(4, 4), _tan(4, 4), retraction="qr"),
         returns(_close(lambda: _ref_qr(_pt(4, 4), _tan(4, 4))))),
    case("stiefel.transport", lambda: stiefel.transport(_pt(), _pt(6, 2, 5), _tan()),
         returns(_close(lambda: _ref_project(_pt(6, 2, 5), _tan())))),
    case("stiefel.feasibility (batched)",
         lambda: stiefel.feasibility(jnp.stack([_pt(), 2.0 * _pt()])),
         returns(_close(lambda: np.array([_feas(_pt()), _feas(2.0 * _pt())]), atol=1e-12))),
    case("stiefel.random_point r=1 (float32) and r=d",
         lambda: (stiefel.random_point(K, 5, 1, jnp.float32), stiefel.random_point(K, 5, 5)),
         returns(_random_points_ok)),
    case("stiefel.random_point legacy uint32 key = typed key",
         lambda: stiefel.random_point(jax.random.PRNGKey(7), 6, 2),
         returns(_same_as(lambda: stiefel.random_point(jax.random.key(7), 6, 2)))),
    # float16 / bfloat16
    case("stiefel.project float16", lambda: stiefel.project(_pt().astype(F16), _gm().astype(F16)),
         raises(ValueError, r"\bx\b.*float16")),
    case("stiefel.project bfloat16",
         lambda: stiefel.project(_pt().astype(BF16), _gm().astype(BF16)),
         raises(ValueError, r"\bx\b.*bfloat16")),
    case("stiefel.retract polar float16",
         lambda: stiefel.retract(_pt().astype(F16), _tan().astype(F16)),
         raises(ValueError, r"\bx\b.*float16")),
    case("stiefel.retract qr bfloat16",
         lambda: stiefel.retract(_pt().astype(BF16), _tan().astype(BF16), retraction="qr"),
         raises(ValueError, r"\bx\b.*bfloat16")),
    case("stiefel.retract exp float16",
         lambda: stiefel.retract(_pt().astype(F16), _tan().astype(F16), retraction="exp"),
         raises(ValueError, r"\bx\b.*float16")),
    case("stiefel.retract cayley bfloat16",
         lambda: stiefel.retract(_pt().astype(BF16), _tan().astype(BF16), retraction="cayley"),
         raises(ValueError, r"\bx\b.*bfloat16")),
    case("stiefel.transport float16",
         lambda: stiefel.transport(*(a.astype(F16) for a in (_pt(), _pt(), _tan()))),
         raises(ValueError, "float16")),
    case("stiefel.feasibility bfloat16", lambda: stiefel.feasibility(_pt().astype(BF16)),
         raises(ValueError, r"\bx\b.*bfloat16")),
    case("stiefel.random_point dtype=float16", lambda: stiefel.random_point(K, 6, 2, F16),
         raises(ValueError, "dtype.*float16")),
    # mixed dtypes, shapes, names
    case("stiefel.retract float32 x, float64 v",
         lambda: stiefel.retract(_pt().astype(jnp.float32), _tan()),
         raises(ValueError, r"\bx\b and \bv\b.*same dtype")),
    case("stiefel.retract v of another shape", lambda: stiefel.retract(_pt(), _tan()[:5]),
         raises(ValueError, r"\bv\b.*shape")),
    case("stiefel.retract unknown method", lambda: stiefel.retract(_pt(), _tan(), retraction="svd"),
         raises(ValueError, "retraction method 'svd'")),
    case("stiefel.retract int32", lambda: stiefel.retract(jnp.eye(3, 2, dtype=jnp.int32),
                                                          jnp.zeros((3, 2), jnp.int32)),
         raises(ValueError, r"\bx\b.*int32")),
    case("stiefel.project r > d", lambda: stiefel.project(_pt().T, _gm().T),
         raises(ValueError, r"\bx\b.*r <= d")),
    case("stiefel.feasibility 1-d", lambda: stiefel.feasibility(jnp.ones(3)),
         raises(ValueError, r"\bx\b must be a d x r matrix")),
    case("stiefel.transport shapes", lambda: stiefel.transport(_pt(), _pt()[:5], _tan()),
         raises(ValueError, r"\by\b.*shape")),
    case("stiefel.retract nested lists",
         lambda: stiefel.retract(np.asarray(_pt()).tolist(), np.asarray(_tan()).tolist()),
         raises((ValueError, TypeError), r"\bx\b")),
    case("stiefel.random_point r > d", lambda: stiefel.random_point(K, 2, 3),
         raises(ValueError, r"1 <= r <= d.*r=3")),
    case("stiefel.random_point r=0", lambda: stiefel.random_point(K, 4, 0),
         raises(ValueError, r"1 <= r <= d.*r=0")),
    case("stiefel.random_point d=True (bool as int)", lambda: stiefel.random_point(K, True, 1),
         raises(ValueError, r"\bd\b")),
    case("stiefel.random_point d=np.int64(6)",
         lambda: stiefel.random_point(K, np.int64(6), np.int64(2)),
         returns(_same_as(lambda: stiefel.random_point(K, 6, 2)))),
    case("stiefel.random_point key=0", lambda: stiefel.random_point(0, 6, 2),
         raises((ValueError, TypeError), r"\bkey\b")),
    case("stiefel.random_point key=None", lambda: stiefel.random_point(None, 6, 2),
         raises((ValueError, TypeError), r"\bkey\b")),
    # Grassmann
    case("grassmann.project", lambda: grassmann.project(_pt(), _gm()),
         returns(_close(lambda: _np(_gm()) - _np(_pt()) @ (_np(_pt()).T @ _np(_gm()))))),
    case("grassmann.principal_angles vs scipy, ascending",
         lambda: grassmann.principal_angles(_pt(6, 2, 0), _pt(6, 2, 5)),
         returns(_close(_principal_angles_ref, rtol=1e-8, atol=1e-10))),
    case("grassmann.retract exp (not a Grassmann retraction)",
         lambda: grassmann.retract(_pt(), _tan(), retraction="exp"),
         raises(ValueError, "Grassmann retraction 'exp'")),
    case("grassmann.project float16",
         lambda: grassmann.project(_pt().astype(F16), _gm().astype(F16)),
         raises(ValueError, r"\bu\b.*float16")),
    case("grassmann.retract bfloat16",
         lambda: grassmann.retract(_pt().astype(BF16), _tan().astype(BF16)),
         raises(ValueError, r"\bu\b.*bfloat16")),
    case("grassmann.principal_angles float16",
         lambda: grassmann.principal_angles(_pt().astype(F16), _pt().astype(F16)),
         raises(ValueError, r"\bu\b.*float16")),
    case("grassmann.principal_angles shapes",
         lambda: grassmann.principal_angles(_pt(), _pt()[:5]),
         raises(ValueError, r"\bw\b.*shape")),
    case("grassmann.transport float32 z on float64 bases",
         lambda: grassmann.transport(_pt(), _pt(), _tan().astype(jnp.float32)),
         raises(ValueError, r"\bz\b.*same dtype")),
    case("grassmann.random_point r > d", lambda: grassmann.random_point(K, 2, 3),
         raises(ValueError, "r <= d")),
]


@pytest.mark.parametrize("fn, expected", GEOMETRY)
def test_geometry(fn, expected):
    run_case(fn, expected)


# ============================================================================ regularizers

def _l1_value_subgradient_ok(out):
    value, sub = out
    np.testing.assert_allclose(float(value), 0.5 * np.abs(_np(_gm())).sum(), rtol=1e-12)
    np.testing.assert_array_equal(sub, 0.5 * np.sign(_np(_gm())))


REGULARIZERS = [
    case("l1 mu < 0", lambda: rproxjax.l1(-1.0), raises(ValueError, "l1: mu.*>= 0")),
    case("l1 mu nan", lambda: rproxjax.l1(jnp.nan), raises(ValueError, "l1: mu.*finite")),
    case("l1 mu inf", lambda: rproxjax.l1(np.inf), raises(ValueError, "l1: mu.*finite")),
    case("l1 mu str", lambda: rproxjax.l1("0.1"), raises(TypeError, "l1: mu must be numeric")),
    case("l1 mu None", lambda: rproxjax.l1(None), raises(TypeError, "l1: mu must be numeric")),
    case("l1 mu bool", lambda: rproxjax.l1(True), raises(TypeError, "l1: mu must be numeric")),
    case("l1 mu complex", lambda: rproxjax.l1(1j), raises(TypeError, "l1: mu.*real")),
    case("l1 mu 2-d", lambda: rproxjax.l1(jnp.ones((2, 2))), raises(ValueError, "l1: mu.*shape")),
    case("l21 mu < 0", lambda: rproxjax.l21(-1.0), raises(ValueError, "l21: mu.*>= 0")),
    case("l21 vector mu", lambda: rproxjax.l21(jnp.ones(2)),
         raises(ValueError, "l21: mu must be a scalar")),  # was accepted (a vector value)
    case("L21 vector mu, at use",
         lambda: rproxjax.tangent_prox(_pt(), _gm(), 0.5, rproxjax.L21(jnp.ones(2))),
         raises(ValueError, "l21: mu must be a scalar")),
    # bfloat16 strengths are numbers (NumPy's issubdtype said no: "must be numeric")
    case("l1 mu bfloat16", lambda: rproxjax.l1(jnp.bfloat16(0.25)).prox(_gm(), 2.0),
         returns(_close(lambda: _ref_soft(_gm(), 0.5)))),
    case("l21 mu bfloat16 < 0", lambda: rproxjax.l21(jnp.bfloat16(-1.0)),
         raises(ValueError, "l21: mu.*>= 0")),
    case("l1 mu of the wrong length, at use",
         lambda: rproxjax.tangent_prox(_pt(), _gm(), 0.5, rproxjax.l1(jnp.ones(3))),
         raises(ValueError, r"l1: mu.*\(2,\)")),
    case("l1 prox, per-column mu from a NumPy array",
         lambda: rproxjax.l1(np.array([0.1, 0.3])).prox(_gm(), 2.0),
         returns(_close(lambda: _ref_soft(_gm(), 2.0 * np.array([0.1, 0.3]))))),
    case("l1 per-column mu from a list", lambda: rproxjax.l1([0.1, 0.3]),
         raises(TypeError, r"\bmu\b must be numeric")),
    case("l1 value and subgradient",
         lambda: (rproxjax.l1(0.5).value(_gm()), rproxjax.l1(0.5).subgradient(_gm())),
         returns(_l1_value_subgradient_ok)),
    case("l21 prox (row shrinkage)", lambda: rproxjax.l21(0.4).prox(_gm(), 2.0),
         returns(_close(lambda: _np(_gm()) * np.maximum(
             1 - 0.8 / np.linalg.norm(_np(_gm()), axis=1, keepdims=True), 0.0)))),
    # NaN kept, as the formula sign(v) max(|v| - t mu, 0) does (a mask selection had
    # turned it into 0); t = inf still shrinks every finite entry to 0
    case("l1 prox, a NaN entry", lambda: rproxjax.l1(0.5).prox(jnp.array([[jnp.nan, 1.0]]), 1.0),
         returns(lambda y: np.testing.assert_array_equal(y, [[np.nan, 0.5]]))),
    case("l1 prox, t NaN", lambda: rproxjax.l1(0.5).prox(jnp.array([[0.1, 1.0]]), jnp.nan),
         returns(lambda y: np.testing.assert_array_equal(y, [[np.nan, np.nan]]))),
    case("l1 prox, t inf", lambda: rproxjax.l1(0.5).prox(jnp.array([[0.1, -1.0]]), jnp.inf),
         returns(lambda y: np.testing.assert_array_equal(y, [[0.0, 0.0]]))),
    # rows the prox keeps whose cubed norm underflows: the Jacobian was inf, the solve
    # NONFINITE (float32 rows of 1e-13 and below)
    case("l21 tangent_prox, float32 rows of 1e-22 over t mu = 5e-31",
         lambda: rproxjax.tangent_prox(jnp.eye(6, 2, dtype=jnp.float32),
                                       jnp.full((6, 2), 1e-22, jnp.float32).at[:2].set(0.3),
                                       0.5, rproxjax.l21(1e-30)),
         returns(lambda out: (np.testing.assert_equal(int(out[1].status), 0),
                              np.testing.assert_allclose(out[0][2:], -0.5e-22, rtol=1e-5)))),
    # row norms at extreme float32 scales (squares overflow / underflow unscaled)
    case("l21 prox, float32 rows of 3e19 under t mu = 5e19",
         lambda: rproxjax.l21(5e19).prox(jnp.full((2, 2), 3e19, jnp.float32), 1.0),
         returns(lambda y: np.testing.assert_array_equal(y, np.zeros((2, 2))))),
    case("l21 prox, float32 rows of 1e-23 over t mu = 1e-30",
         lambda: rproxjax.l21(1e-30).prox(jnp.full((2, 2), 1e-23, jnp.float32), 1.0),
         returns(_close(lambda: np.full((2, 2), 1e-23), rtol=1e-6, atol=0.0))),
    case("l21 value, rows of no entries", lambda: rproxjax.l21(1.0).value(jnp.zeros((3, 0))),
         returns(lambda v: np.testing.assert_equal(float(v), 0.0))),
    case("l21 value, an infinite row", lambda: rproxjax.l21(1.0).value(jnp.array([[jnp.inf, 1.0]])),
         returns(lambda v: np.testing.assert_equal(float(v), np.inf))),
    case("l21 value, a NaN row", lambda: rproxjax.l21(1.0).value(jnp.array([[jnp.nan, 1.0]])),
         returns(lambda v: np.testing.assert_equal(float(v), np.nan))),
    case("l21 value", lambda: rproxjax.l21(0.4).value(_gm()),
         returns(_close(lambda: 0.4 * np.linalg.norm(_np(_gm()), axis=1).sum()))),
]


@pytest.mark.parametrize("fn, expected", REGULARIZERS)
def test_regularizers(fn, expected):
    run_case(fn, expected)


# ============================================================================ tangent_prox

tp = rproxjax.tangent_prox
LAM_SKEW = jnp.array([[0.3, 2.0], [-1.0, 0.1]])  # a non-symmetric warm start


def _traced_t(reg):
    return jax.jit(lambda t: tp(_pt(), _gm(), t, reg))(-1.0)


def _not_converged_finite(result):
    zeta, info = result
    assert int(info.status) != S.SUCCESSFUL and not bool(info.converged)
    assert bool(jnp.all(jnp.isfinite(zeta)))


TANGENT_PROX = [
    case("float16", lambda: tp(_pt().astype(F16), _gm().astype(F16), 0.5, L1),
         raises(ValueError, r"\bx\b.*float16")),
    case("bfloat16", lambda: tp(_pt().astype(BF16), _gm().astype(BF16), 0.5, L1),
         raises(ValueError, r"\bx\b.*bfloat16")),
    case("float32 x, float64 g", lambda: tp(_pt().astype(jnp.float32), _gm(), 0.5, L1),
         raises(ValueError, r"\bg\b.*same dtype")),
    case("reg a bare number", lambda: tp(_pt(), _gm(), 0.5, 0.1),
         raises((ValueError, TypeError), r"\breg\b")),
    case("t = 0", lambda: tp(_pt(), _gm(), 0.0, L1), raises(ValueError, r"\bt\b.*> 0")),
    case("t < 0", lambda: tp(_pt(), _gm(), -1.0, L1), raises(ValueError, r"\bt\b.*> 0")),
    case("t nan", lambda: tp(_pt(), _gm(), np.nan, L1), raises(ValueError, r"\bt\b.*finite")),
    case("t inf", lambda: tp(_pt(), _gm(), jnp.inf, L1), raises(ValueError, r"\bt\b.*finite")),
    case("t a vector", lambda: tp(_pt(), _gm(), jnp.ones(2), L1),
         raises(ValueError, r"\bt\b must be a scalar")),
    case("max_steps=True (bool as int)", lambda: tp(_pt(), _gm(), 0.5, None,
                                                    ssn=rproxjax.SSN(max_steps=True)),
         raises(ValueError, "max_steps")),
    case("max_steps < 0", lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(max_steps=-1)),
         raises(ValueError, "max_steps")),
    case("max_steps float", lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(max_steps=5.0)),
         raises(ValueError, "max_steps")),
    case("max_steps np.int64 accepted",
         lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(max_steps=np.int64(100))),
         returns(lambda out: np.testing.assert_array_equal(
             out[0], tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(max_steps=100))[0]))),
    case("tol = 0", lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(tol=0.0)),
         raises(ValueError, r"\btol\b")),
    case("rtol < 0", lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(rtol=-1.0)),
         raises(ValueError, r"\brtol\b")),
    case("lam and lam_h", lambda: tp(_pt(), _gm(), 0.5, L1, lam=jnp.zeros((2, 2)),
                                     lam_h=jnp.zeros((2, 2))),
         raises(ValueError, r"\blam\b.*\blam_h\b")),
    case("lam of the wrong shape", lambda: tp(_pt(), _gm(), 0.5, L1, lam=jnp.zeros((3, 3))),
         raises(ValueError, r"\blam\b must have shape \(2, 2\)")),
    case("unknown linear_solver", lambda: tp(_pt(), _gm(), 0.5, L1,
                                             ssn=rproxjax.SSN(linear_solver="lu")),
         raises(ValueError, "linear_solver")),
    case("unknown method", lambda: tp(_pt(), _gm(), 0.5, L1, ssn=rproxjax.SSN(rule="newton")),
         raises(ValueError, r"SSN\.rule must be one of")),
    case("a batch of points", lambda: tp(_pt()[None], _gm()[None], 0.5, L1),
         raises(ValueError, r"\bx\b of shape \(1, 6, 2\).*vmap")),
    case("nested lists", lambda: tp(np.asarray(_pt()).tolist(), np.asarray(_gm()).tolist(), 0.5,
                                    L1),
         raises((ValueError, TypeError), r"\bx\b")),
    # non-finite inputs: flagged, zeta = 0
    case("g with a NaN", lambda: tp(_pt(), _gm().at[0, 0].set(jnp.nan), 0.5, L1),
         returns(_flagged_zero())),
    case("g with a NaN, h = 0", lambda: tp(_pt(), _gm().at[0, 0].set(jnp.nan), 0.5, None),
         returns(_flagged_zero())),
    case("lam NaN", lambda: tp(_pt(), _gm(), 0.5, L1, lam=jnp.full((2, 2), jnp.nan)),
         returns(_flagged_zero())),
    # right answers
    case("h = 0 closed form", lambda: tp(_pt(), _gm(), 0.7, None),
         returns(_close(lambda: -0.7 * _ref_project(_pt(), _gm())))),
    case("l1, r = 1", lambda: tp(_pt(6, 1), _gm(6, 1), 0.5, rproxjax.l1(0.2)),
         returns(_solves(_pt(6, 1), _gm(6, 1), 0.5, 0.2))),
    case("l1, r = d", lambda: tp(_pt(4, 4), _gm(4, 4), 0.5, rproxjax.l1(0.2)),
         returns(_solves(_pt(4, 4), _gm(4, 4), 0.5, 0.2))),
    case("l21", lambda: tp(_pt(), _gm(), 0.5, rproxjax.l21(0.5)),
         returns(_solves(_pt(), _gm(), 0.5, 0.5, kind="l21"))),
    case("non-symmetric lam (secant)", lambda: tp(_pt(), _gm(), 0.5, L1, lam=LAM_SKEW),
         returns(_solves(_pt(), _gm(), 0.5, 0.1))),
    case("non-symmetric lam (reference)",
         lambda: tp(_pt(), _gm(), 0.5, L1, lam=LAM_SKEW, ssn=rproxjax.SSN(rule="reference")),
         returns(_solves(_pt(), _gm(), 0.5, 0.1))),
    case("non-symmetric lam_h", lambda: tp(_pt(), _gm(), 0.5, L1, lam_h=LAM_SKEW),
         returns(_solves(_pt(), _gm(), 0.5, 0.1))),
    # t mu above every entry of X - tG: Y(0) = 0
    case("t mu above every entry (secant)", lambda: tp(_pt(), _gm(), 1.0, rproxjax.l1(100.0)),
         returns(_solved_or_collapsed(_pt(), _gm(), 1.0, 100.0))),
    case("t mu above every entry (reference)",
         lambda: tp(_pt(), _gm(), 1.0, rproxjax.l1(100.0), ssn=rproxjax.SSN(rule="reference")),
         returns(_solved_or_collapsed(_pt(), _gm(), 1.0, 100.0))),
    case("per-column mu collapsing one column",
         lambda: tp(_pt(), _gm(), 1.0, rproxjax.l1(jnp.array([100.0, 0.01]))),
         returns(_solved_or_collapsed(_pt(), _gm(), 1.0, np.array([100.0, 0.01])))),
    # traced hyperparameters (never inspected under jit): flagged, never converged
    case("traced t < 0, l1", lambda: _traced_t(L1), returns(_not_converged_finite)),
    case("traced t < 0, h = 0", lambda: _traced_t(None), returns(_not_converged_finite)),
    case("default_tol(float16)", lambda: rproxjax.default_tol(F16),
         raises(ValueError, "float16")),
    case("default_tol(int32)", lambda: rproxjax.default_tol(jnp.int32),
         raises(ValueError, "int32")),
    case("t bfloat16", lambda: tp(_pt(), _gm(), jnp.bfloat16(0.5), L1),
         returns(_solves(_pt(), _gm(), 0.5, 0.1))),
    case("default_tol(None)", lambda: rproxjax.default_tol(None), raises(ValueError, "None")),
]


@pytest.mark.parametrize("fn, expected", TANGENT_PROX)
def test_tangent_prox(fn, expected):
    run_case(fn, expected)


# ============================================================================ factories

sgd, spb, svrg, sarah = (rproxjax.r_prox_sgd, rproxjax.r_prox_spb, rproxjax.r_prox_svrg,
                         rproxjax.r_prox_sarah)


def _same_optimizer(reference):
    """Built, with the same state (structure, static needs, values) as ``reference()``."""

    def check(opt):
        x = _pt()
        state, ref = opt.init(x), reference().init(x)
        assert jax.tree.structure(state) == jax.tree.structure(ref)
        for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(ref), strict=True):
            np.testing.assert_array_equal(a, b)

    return check


FACTORIES = [
    case("r_prox_sgd learning_rate < 0", lambda: sgd(-1.0, 0.1, L1),
         raises(ValueError, "learning_rate.*> 0")),
    case("r_prox_sgd learning_rate = 0", lambda: sgd(0.0, 0.1, L1),
         raises(ValueError, "learning_rate.*> 0")),
    case("r_prox_sgd gamma nan", lambda: sgd(0.1, jnp.nan, L1), raises(ValueError, "gamma")),
    case("r_prox_sgd learning_rate a vector", lambda: sgd(jnp.ones(2), 0.1, L1),
         raises(ValueError, "learning_rate must be a scalar")),
    case("r_prox_sgd learning_rate str", lambda: sgd("0.1", 0.1, L1),
         raises(TypeError, "learning_rate must be a real number")),
    case("r_prox_sgd learning_rate bool", lambda: sgd(True, 0.1, L1),
         raises(TypeError, "learning_rate must be a real number")),
    case("r_prox_sgd reg a bare number", lambda: sgd(0.1, 0.1, 0.1),
         raises(ValueError, r"\breg\b must be None or a regularizer")),
    case("r_prox_sgd unknown retraction", lambda: sgd(0.1, 0.1, L1, retraction="svd"),
         raises(ValueError, "retraction 'svd'")),
    case("SSN unknown rule", lambda: sgd(0.1, 0.1, L1, ssn=SSN.stochastic(rule="x")),
         raises(ValueError, "SSN.rule")),
    case("SSN max_steps < 0", lambda: sgd(0.1, 0.1, L1, ssn=SSN.stochastic(max_steps=-1)),
         raises(ValueError, "SSN.max_steps")),
    case("SSN max_steps=True", lambda: sgd(0.1, 0.1, L1, ssn=SSN.stochastic(max_steps=True)),
         raises(ValueError, "SSN.max_steps")),
    case("SSN max_steps np.int64", lambda: sgd(0.1, 0.1, L1,
                                               ssn=SSN.stochastic(max_steps=np.int64(5))),
         returns(_same_optimizer(lambda: sgd(0.1, 0.1, L1,
                                             ssn=SSN.stochastic(max_steps=5))))),
    case("SSN tol < 0", lambda: sgd(0.1, 0.1, L1, ssn=SSN.stochastic(tol=-1.0)),
         raises(ValueError, r"\btol\b")),
    case("SSN rtol < 0", lambda: sgd(0.1, 0.1, L1, ssn=SSN.stochastic(rtol=-1.0)),
         raises(ValueError, r"\brtol\b")),
    case("SSN unknown linear_solver", lambda: sgd(0.1, 0.1, L1,
                                                  ssn=SSN.stochastic(linear_solver="lu")),
         raises(ValueError, "linear_solver")),
    case("Secant rho_scale < 0", lambda: rproxjax.Secant(rho_scale=-1.0),
         raises(ValueError, "rho_scale")),
    case("Adaptive escalate NaN", lambda: rproxjax.Adaptive(escalate=float("nan")),
         raises(ValueError, "escalate")),
    case("Secant path a string", lambda: rproxjax.Secant(path="yes"),
         raises(ValueError, "Secant.path")),
    case("SSN rule a linear solver", lambda: SSN(rule=rproxjax.CG()),
         raises(ValueError, "SSN.rule")),
    case("SSN sequential_lanes a string", lambda: SSN(sequential_lanes="cpu"),
         raises(ValueError, "sequential_lanes")),
    case("SSN unknown warm_start", lambda: SSN(warm_start="lam"),
         raises(ValueError, "warm_start")),
    case("r_prox_sgd ssn not an SSN", lambda: sgd(0.1, 0.1, L1, ssn={"tol": 1e-3}),
         raises(TypeError, "ssn must be an rproxjax.SSN")),
    case("r_prox_sgd unknown keyword", lambda: sgd(0.1, 0.1, L1, ssn_rho=1.0),
         raises(TypeError, "ssn_rho")),
    case("r_prox_sgd reg and blocks", lambda: sgd(0.1, 0.1, L1, blocks=rproxjax.Stiefel()),
         raises(ValueError, r"\breg\b.*\bblocks\b")),
    case("r_prox_sgd blocks not blocks", lambda: sgd(0.1, 0.1, blocks={"a": 1}),
         raises(ValueError, r"\bblocks\b must be")),
    case("r_prox_spb q=True", lambda: spb(0.1, 0.1, L1, q=True), raises(ValueError, r"\bq\b")),
    case("r_prox_spb q=0", lambda: spb(0.1, 0.1, L1, q=0), raises(ValueError, r"\bq\b")),
    case("r_prox_spb q=2.0", lambda: spb(0.1, 0.1, L1, q=2.0), raises(ValueError, r"\bq\b")),
    case("r_prox_spb q=np.int64(5)", lambda: spb(0.1, 0.1, L1, q=np.int64(5)),
         returns(_same_optimizer(lambda: spb(0.1, 0.1, L1, q=5)))),
    case("r_prox_svrg m=True", lambda: svrg(0.1, 0.1, L1, m=True), raises(ValueError, r"\bm\b")),
    case("r_prox_svrg m=0", lambda: svrg(0.1, 0.1, L1, m=0), raises(ValueError, r"\bm\b")),
    case("r_prox_sarah alpha > 1", lambda: sarah(0.1, 2.0, L1, q=5),
         raises(ValueError, r"\balpha\b")),
    case("r_prox_sarah alpha = 0", lambda: sarah(0.1, 0.0, L1, q=5),
         raises(ValueError, r"\balpha\b")),
    case("r_spider_boost q=True", lambda: rproxjax.r_spider_boost(0.1, 0.1, q=True),
         raises(ValueError, r"\bq\b")),
    case("r_subgrad learning_rate < 0", lambda: rproxjax.r_subgrad(-1.0, L1),
         raises(ValueError, "learning_rate")),
    case("r_subgrad reg a bare number", lambda: rproxjax.r_subgrad(0.1, 0.1),
         raises(ValueError, r"\breg\b")),
    case("manpg tol = 0", lambda: rproxjax.manpg(0.1, L1, tol=0.0),
         raises(ValueError, r"\btol\b")),
    case("manpg gamma < 0", lambda: rproxjax.manpg(-0.1, L1, tol=1e-8),
         raises(ValueError, r"\bgamma\b")),
    case("manpg gamma a schedule", lambda: rproxjax.manpg(lambda c: 0.1, L1, tol=1e-8),
         raises(ValueError, "scalar gamma")),
    case("manpg reg a bare number", lambda: rproxjax.manpg(0.1, 0.1, tol=1e-8),
         raises(ValueError, r"\breg\b")),
    case("manpg max_backtracks < 0", lambda: rproxjax.manpg(0.1, L1, tol=1e-8,
                                                            max_backtracks=-1),
         raises(ValueError, "max_backtracks")),
    case("manpg max_backtracks=True", lambda: rproxjax.manpg(0.1, L1, tol=1e-8,
                                                             max_backtracks=True),
         raises(ValueError, "max_backtracks")),
    case("manpg max_backtracks=2.5", lambda: rproxjax.manpg(0.1, L1, tol=1e-8,
                                                            max_backtracks=2.5),
         raises(ValueError, "max_backtracks")),
    case("manpg ssn max_steps < 0", lambda: rproxjax.manpg(0.1, L1, tol=1e-8,
                                                            ssn=SSN(max_steps=-1)),
         raises(ValueError, "SSN.max_steps")),
    case("inverse_sqrt_schedule init_value < 0", lambda: rproxjax.inverse_sqrt_schedule(-1.0),
         raises(ValueError, "init_value")),
    case("inverse_sqrt_schedule offset = 0",
         lambda: rproxjax.inverse_sqrt_schedule(1.0, offset=0),
         raises(ValueError, r"\boffset\b")),
    case("proximal_step reg a bare number", lambda: rproxjax.proximal_step(0.1, 0.1),
         raises(ValueError, r"\breg\b")),
    case("proximal_step gamma = 0", lambda: rproxjax.proximal_step(0.0, L1),
         raises(ValueError, r"\bgamma\b")),
    case("subgradient_direction reg a bare number",
         lambda: rproxjax.subgradient_direction(0.1), raises(ValueError, r"\breg\b")),
    case("retract learning_rate < 0", lambda: rproxjax.retract(-0.5),
         raises(ValueError, "learning_rate")),
    case("retract unknown method", lambda: rproxjax.retract(0.5, retraction="svd"),
         raises(ValueError, "retraction 'svd'")),
    case("SSN max_steps < 0", lambda: rproxjax.SSN(max_steps=-1),
         raises(ValueError, "max_steps")),
    case("SSN max_steps=True", lambda: rproxjax.SSN(max_steps=True),
         raises(ValueError, "max_steps")),
    case("SSN unknown linear_solver", lambda: rproxjax.SSN(linear_solver="lu"),
         raises(ValueError, "linear_solver")),
    case("sarah_estimator q=True", lambda: rproxjax.sarah_estimator(True),
         raises(ValueError, r"\bq\b")),
    case("svrg_estimator m=np.int64(3)", lambda: rproxjax.svrg_estimator(np.int64(3)),
         returns(_same_optimizer(lambda: rproxjax.svrg_estimator(3)))),
    case("Stiefel block reg a bare number", lambda: rproxjax.Stiefel(0.1),
         raises(ValueError, r"\breg\b")),
    case("Stiefel block unknown retraction", lambda: rproxjax.Stiefel(L1, retraction="svd"),
         raises(ValueError, "retraction 'svd'")),
    case("Stiefel block step_scale < 0", lambda: rproxjax.Stiefel(L1, step_scale=-1.0),
         raises(ValueError, "step_scale")),
    case("Grassmann block given a regularizer", lambda: rproxjax.Grassmann(L1),
         raises(ValueError, "no regularizer")),
    case("Euclidean block reg a bare number", lambda: rproxjax.Euclidean(0.1),
         raises(ValueError, r"\breg\b")),
]


@pytest.mark.parametrize("fn, expected", FACTORIES)
def test_factories(fn, expected):
    run_case(fn, expected)


# ============================================================================ init / update

OFF = 2.0 * _pt()  # ||X^T X - I|| = 3 sqrt(2)


def _manpg():
    return rproxjax.manpg(0.1, L1, tol=1e-12)


def _value(x):
    return -jnp.sum(x * x)


def _halted_zero_update(out):
    updates, state = out
    np.testing.assert_array_equal(updates, 0.0)
    assert bool(rproxjax.step_info(state).halted)


def _sgd_nan_then_finite():
    opt = _sgd(ssn=SSN.stochastic(rule="secant"))
    state = opt.init(_pt())
    _, state = opt.update(_gm().at[0, 0].set(jnp.nan), state, _pt())
    return opt.update(_gm(), state, _pt())  # sticky: still halted, still zero


def _manpg_nan_grad():
    opt = _manpg()
    return opt.update(_gm().at[0, 0].set(jnp.nan), opt.init(_pt()), _pt(), value_fn=_value)


def _manpg_flagged(out):
    updates, state = out
    np.testing.assert_array_equal(updates, 0.0)
    assert bool(rproxjax.step_info(state).halted) and not bool(state.converged)


def _manpg_nan_value():
    opt = _manpg()
    return opt.update(_gm(), opt.init(_pt()), _pt(),
                      value_fn=lambda x: _value(x) + jnp.nan)


def _collapsed_step():
    opt = rproxjax.r_prox_sgd(1.0, 1.0, rproxjax.l1(100.0),
                              ssn=rproxjax.SSN.stochastic(rule="reference"))
    x = _pt()
    updates, state = opt.update(_gm(), opt.init(x), x)
    return optax.apply_updates(x, updates), state


def _collapsed_step_ok(out):
    x_new, state = out
    info = rproxjax.step_info(state)
    assert int(info.ssn.status) == S.COLLAPSED
    np.testing.assert_array_equal(x_new, _pt())  # no step taken: X unchanged, on the manifold


def _retract_mixed():
    opt = rproxjax.retract(0.5)
    x = _pt()
    updates, _ = opt.update(_tan().astype(jnp.float32), opt.init(x), x)
    return optax.apply_updates(x, updates)


def _describe_unknown(fn):
    """Raised by the Status enum (not an rproxjax raise), but it names the status."""
    with pytest.raises(ValueError, match="9 is not a valid Status"):
        fn()


INIT_UPDATE = [
    case("r_prox_sgd init, X off the manifold", lambda: _sgd().init(OFF),
         raises(ValueError, r"\bparams\b.*manifold")),
    case("r_prox_sgd update, X off the manifold",
         lambda: sgd(0.1, 0.1).update(_gm(), sgd(0.1, 0.1).init(_pt()), OFF),
         raises(ValueError, r"\bparams\b.*manifold")),
    case("manpg init, X off the manifold", lambda: _manpg().init(OFF),
         raises(ValueError, r"\bparams\b.*manifold")),
    case("r_subgrad update, X off the manifold",
         lambda: rproxjax.r_subgrad(0.1, L1).update(_gm(), rproxjax.r_subgrad(0.1, L1).init(
             _pt()), OFF),
         raises(ValueError, r"\bparams\b.*manifold")),
    case("retract(exp) init, X off the manifold",
         lambda: rproxjax.retract(0.5, retraction="exp").init(OFF),
         raises(ValueError, r"\bparams\b.*manifold")),
    case("r_prox_sgd init float16", lambda: _sgd().init(_pt().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("manpg init bfloat16", lambda: _manpg().init(_pt().astype(BF16)),
         raises(ValueError, r"\bparams\b.*bfloat16")),
    case("r_prox_spb init float16", lambda: spb(0.1, 0.1, L1, q=3).init(_pt().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("r_prox_svrg init bfloat16", lambda: svrg(0.1, 0.1, L1, m=3).init(_pt().astype(BF16)),
         raises(ValueError, r"\bparams\b.*bfloat16")),
    case("r_prox_sarah init float16", lambda: sarah(0.1, 0.5, L1, q=3).init(_pt().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("r_subgrad init float16", lambda: rproxjax.r_subgrad(0.1, L1).init(_pt().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("retract init bfloat16", lambda: rproxjax.retract(0.5).init(_pt().astype(BF16)),
         raises(ValueError, r"\bparams\b.*bfloat16")),
    case("proximal_step update float16",
         lambda: rproxjax.proximal_step(0.1, L1).update(
             _gm().astype(F16), rproxjax.proximal_step(0.1, L1).init(_pt()), _pt().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("init with a list", lambda: _sgd().init(np.asarray(_pt()).tolist()),
         raises(TypeError, r"\bparams\b must be an array")),
    case("init with a batch of points", lambda: _sgd().init(_pt()[None]),
         raises(ValueError, r"\bparams\b.*d x r matrix")),
    case("init r > d", lambda: _sgd().init(_pt().T), raises(ValueError, r"\bparams\b.*r <= d")),
    case("update without params", lambda: _sgd().update(_gm(), _sgd().init(_pt())),
         raises(ValueError, r"\bparams\b")),
    case("update, grads of another shape", lambda: _sgd().update(_gm()[:5], _sgd().init(_pt()),
                                                                 _pt()),
         raises(ValueError, r"\bgrads\b.*shape")),
    case("update, float32 grads on float64 params",
         lambda: _sgd().update(_gm().astype(jnp.float32), _sgd().init(_pt()), _pt()),
         raises(ValueError, r"\bgrads\b.*dtype")),
    case("r_prox_sgd update with a manpg state",
         lambda: _sgd().update(_gm(), _manpg().init(_pt()), _pt()),
         raises((ValueError, TypeError), r"\bstate\b")),
    case("r_prox_spb update with an r_prox_sgd state",
         lambda: spb(0.1, 0.1, None, q=3).update(_gm(), _sgd().init(_pt()), _pt()),
         raises((ValueError, TypeError), r"\bstate\b")),
    case("r_prox_spb non-refresh update without grad_fn",
         lambda: spb(0.1, 0.1, None, q=3).update(_gm(), spb(0.1, 0.1, None, q=3).update(
             _gm(), spb(0.1, 0.1, None, q=3).init(_pt()), _pt())[1], _pt()),
         raises(ValueError, "grad_fn")),
    case("manpg update without value_fn", lambda: _manpg().update(_gm(), _manpg().init(_pt()),
                                                                  _pt()),
         raises(ValueError, "value_fn")),
    case("r_prox_sgd NaN gradient: halted, zero updates, sticky", _sgd_nan_then_finite,
         returns(_halted_zero_update)),
    case("r_subgrad inf gradient: halted, zero update",
         lambda: rproxjax.r_subgrad(0.1, L1).update(_gm().at[0, 0].set(jnp.inf),
                                                    rproxjax.r_subgrad(0.1, L1).init(_pt()),
                                                    _pt()),
         returns(_halted_zero_update)),
    case("manpg NaN gradient: halted, not converged", _manpg_nan_grad, returns(_manpg_flagged)),
    case("manpg value_fn NaN: halted, zero update", _manpg_nan_value, returns(_manpg_flagged)),
    case("one step on a collapsed subproblem (reference rule)", _collapsed_step,
         returns(_collapsed_step_ok)),
    case("retract transform: float32 updates on float64 params", _retract_mixed,
         raises(ValueError, r"\b(grads|updates)\b.*dtype")),
    case("blocks: params missing a key",
         lambda: rproxjax.r_prox_sgd(0.1, 0.1, blocks={
             "U": rproxjax.Grassmann(), "S": rproxjax.Euclidean(L1)}).init({"U": _pt()}),
         raises(ValueError, r"\bparams\b")),
    case("blocks: a float16 Euclidean leaf",
         lambda: rproxjax.r_prox_sgd(0.1, 0.1, blocks={
             "U": rproxjax.Grassmann(), "S": rproxjax.Euclidean(L1)}).init(
                 {"U": _pt(), "S": jnp.ones(3, F16)}),
         raises(ValueError, r"\bparams\b.*float16")),
    case("step_info of a chain with two proximal steps",
         lambda: rproxjax.step_info(optax.chain(rproxjax.proximal_step(0.1, L1),
                                                rproxjax.proximal_step(0.1, L1)).init(_pt())),
         raises(ValueError, "several step records")),
    case("describe an unknown status", lambda: rproxjax.describe(9), _describe_unknown),
    case("describe an array of codes", lambda: rproxjax.describe(jnp.array([0, 3])),
         returns(_equal_to([S.SUCCESSFUL.message, S.COLLAPSED.message]))),
]


@pytest.mark.parametrize("fn, expected", INIT_UPDATE)
def test_init_update(fn, expected):
    run_case(fn, expected)


# ============================================================================ fit / pure_fit


def _steps(count, ifo_last):
    """Exactly ``count`` steps were run and counted: history of that length, IFOs to match."""

    def check(res):
        assert res.history.ifo.shape == (count,), res.history.ifo
        assert int(res.history.ifo[-1]) == ifo_last and int(res.epoch_ifo[-1]) == ifo_last

    return check


def _ifo_history(expected):
    def check(res):
        np.testing.assert_array_equal(res.history.ifo, expected)

    return check


def _same_fit(other):
    """The same iterates as the run ``other()`` (e.g. with Python ints instead of NumPy's)."""

    def check(res):
        ref = other()
        np.testing.assert_array_equal(res.params, ref.params)
        np.testing.assert_array_equal(res.history.ifo, ref.history.ifo)

    return check


def _halted_at_x0(res):
    assert bool(res.history.halted[-1])
    np.testing.assert_array_equal(res.params, _x0())


def _manpg_halted_at_x0(res):
    _halted_at_x0(res)
    assert bool(rproxjax.step_info(res.opt_state).halted) and not bool(res.opt_state.converged)


def _on_manifold_throughout(res):
    assert bool(jnp.all(jnp.isfinite(res.params)))
    assert float(jnp.max(res.history.feasibility)) < 1e-10 and _feas(res.params) < 1e-10


def _collapse_fit(retraction, method, mu=100.0):
    opt = rproxjax.r_prox_sgd(1.0, 1.0, rproxjax.l1(mu), retraction=retraction,
                              ssn=rproxjax.SSN.stochastic(rule=method))
    return _fit(opt, num_epochs=2)


def _unconverged_flagged_in_history(res):
    """Every step whose subproblem ran to ssn_max_steps is flagged in the history."""
    status = getattr(res.history, "ssn_status", None)
    assert status is not None, "History records no per-step subproblem status"
    capped = np.asarray(res.history.ssn_steps) == 100
    assert capped.any() and np.all(np.asarray(status)[capped] != S.SUCCESSFUL)


def _resumed():
    """A resumed run told the IFOs already spent (fit(initial_ifo=...)); without it a
    resumed run counts its own IFOs from 0, as documented."""
    opt = _opt()
    first = _fit(opt)
    return _fit(opt, params=first.params, key=first.key, opt_state=first.opt_state,
                initial_ifo=int(first.epoch_ifo[-1]))


def _ifo_continues(res):
    full = _fit(_opt(), num_epochs=2)
    np.testing.assert_array_equal(res.epoch_ifo, full.epoch_ifo[1:])
    np.testing.assert_array_equal(res.history.ifo, full.history.ifo[3:])


def _traced_negative(make):
    """pure_fit under jit with a hyperparameter traced at -0.5 (never inspected eagerly)."""
    return jax.jit(lambda v: rproxjax.pure_fit(make(v), loss, _x0(), _data(), key=K,
                                               batch_size=B, num_epochs=1))(-0.5)


def _negative_schedule(**kw):
    """A learning-rate schedule whose values are < 0: traced inside the compiled epochs."""
    return _fit(rproxjax.r_subgrad(lambda count: -0.5 + 0.0 * count, L1), **kw)


def _checked_run_raises(fn):
    """throw=True (the checked mode): a RuntimeError, with the halted run attached."""
    with pytest.raises(RuntimeError, match="halted") as info:
        fn()
    _halted_at_x0(info.value.result)


def _legacy_key_fit():
    return _fit(key=jax.random.PRNGKey(1))


def _legacy_key_ok(fn):
    """jax.random.PRNGKey(1) is a valid (legacy) JAX key: either fit accepts it and gives the
    run of jax.random.key(1), or it rejects it with a TypeError naming key and the fix."""
    try:
        res = fn()
    except TypeError as err:
        assert re.search(r"\bkey\b.*jax\.random\.key", str(err)), err
        assert _deliberate(err)[0], _deliberate(err)[1]
    else:
        _same_fit(lambda: _fit(key=jax.random.key(1)))(res)


def _spb_stream(num_steps):
    return _fit(_boost(), data=_stream(100), num_epochs=None,
                num_steps=num_steps, sampling=rproxjax.Sampling(refresh_batch_size=2 * B))


NAN_ROW = _concrete_cache(lambda: _data().at[5].set(jnp.nan))

FIT = [
    # bool / NumPy integers where an int is expected (a bool is a TypeError)
    case("batch_size=True", lambda: _fit(batch_size=True), raises(TypeError, "batch_size")),
    case("num_epochs=True", lambda: _fit(num_epochs=True), raises(TypeError, "num_epochs")),
    case("steps_per_epoch=True", lambda: _fit(sampling=rproxjax.Sampling(steps_per_epoch=True)),
         raises(TypeError, "steps_per_epoch")),
    case("chunk_size=True", lambda: _fit(sampling=rproxjax.Sampling(chunk_size=True)),
         raises(TypeError, "chunk_size")),
    case("num_steps=True", lambda: _fit(num_epochs=None, num_steps=True),
         raises(TypeError, "num_steps")),
    case("refresh_batch_size=True", lambda: _fit(
        _boost(), batch_size=10, sampling=rproxjax.Sampling(refresh_batch_size=True)),
         raises(TypeError, "refresh_batch_size")),
    case("batch_size=np.int64(20)", lambda: _fit(batch_size=np.int64(20)),
         returns(_same_fit(lambda: _fit(batch_size=20)))),
    case("num_epochs=np.int64(1)", lambda: _fit(num_epochs=np.int64(1)),
         returns(_same_fit(lambda: _fit(num_epochs=1)))),
    case("steps_per_epoch=np.int64(2)",
         lambda: _fit(sampling=rproxjax.Sampling(steps_per_epoch=np.int64(2))),
         returns(_same_fit(lambda: _fit(sampling=rproxjax.Sampling(steps_per_epoch=2))))),
    case("pure_fit batch_size=np.int64(20)", lambda: _pure_fit(batch_size=np.int64(20)),
         returns(_same_fit(lambda: _fit(batch_size=20)))),  # pure_fit = fit, documented
    case("online num_steps=np.int64(2)",
         lambda: _fit(data=_stream(10), num_epochs=None, num_steps=np.int64(2),
                      sampling=rproxjax.Sampling(chunk_size=B)),
         returns(_steps(2, 2 * B))),
    # chunk_size
    case("chunk_size=0", lambda: _fit(sampling=rproxjax.Sampling(chunk_size=0)),
         raises(ValueError, "chunk_size")),
    case("chunk_size < 0", lambda: _fit(sampling=rproxjax.Sampling(chunk_size=-5)),
         raises(ValueError, "chunk_size")),
    case("pure_fit chunk_size=0", lambda: _pure_fit(sampling=rproxjax.Sampling(chunk_size=0)),
         raises(ValueError, "chunk_size")),
    case("online chunk_size=0",
         lambda: _fit(data=_stream(10), num_epochs=None, num_steps=2,
                      sampling=rproxjax.Sampling(chunk_size=0)),
         raises(ValueError, "chunk_size")),
    # num_steps
    case("num_steps=0", lambda: _fit(num_epochs=None, num_steps=0),
         raises(ValueError, "num_steps")),
    case("num_steps < 0", lambda: _fit(num_epochs=None, num_steps=-1),
         raises(ValueError, "num_steps")),
    # key
    case("key=0", lambda: _fit(key=0), raises((ValueError, TypeError), r"\bkey\b")),
    case("key=None", lambda: _fit(key=None), raises((ValueError, TypeError), r"\bkey\b")),
    case("pure_fit key=0", lambda: _pure_fit(key=0), raises((ValueError, TypeError), r"\bkey\b")),
    case("legacy uint32 key: same run as the typed key, or a clear error",
         _legacy_key_fit, _legacy_key_ok),
    # data
    case("data as nested lists", lambda: _fit(data=np.asarray(_data()).tolist()),
         raises(TypeError, r"\bdata\b must be an array")),
    case("pure_fit data as nested lists", lambda: _pure_fit(data=np.asarray(_data()).tolist()),
         raises(TypeError, r"\bdata\b must be an array")),
    case("data a scalar", lambda: _fit(data=jnp.ones(())),
         raises(ValueError, r"\bdata\b.*leading sample axis")),
    case("data with no sample", lambda: _fit(data=jnp.ones((0, D))),
         raises(ValueError, r"\bdata\b|n = 0")),
    case("data feature dimension != d", lambda: _fit(data=_data()[:, :5]),
         raises(ValueError, r"\bdata\b")),
    case("pure_fit feature dimension != d", lambda: _pure_fit(data=_data()[:, :5]),
         raises(ValueError, r"\bdata\b")),
    case("online batches with feature dimension != d",
         lambda: _fit(data=_stream(10, d=5), num_epochs=None, num_steps=2,
                      sampling=rproxjax.Sampling(chunk_size=B)),
         raises(ValueError, r"\bdata\b")),
    case("float16 data, float64 X: computed in float64",
         lambda: _fit(data=_data().astype(F16)),
         returns(_same_fit(lambda: _fit(data=_data().astype(F16).astype(jnp.float64))))),
    case("float16 X0", lambda: _fit(params=_x0().astype(F16)),
         raises(ValueError, r"\bparams\b.*float16")),
    case("pure_fit bfloat16 X0", lambda: _pure_fit(params=_x0().astype(BF16)),
         raises(ValueError, r"\bparams\b.*bfloat16")),
    case("X0 off the manifold", lambda: _fit(params=2.0 * _x0()),
         raises(ValueError, r"\bparams\b is not on the Stiefel manifold")),
    # loss_fn, optimizer, opt_state
    case("loss_fn returns a vector", lambda: _fit(loss_fn=lambda x, z: (x.T @ z) ** 2),
         raises(ValueError, "loss_fn")),
    case("pure_fit loss_fn returns a vector",
         lambda: _pure_fit(loss_fn=lambda x, z: (x.T @ z) ** 2), raises(ValueError, "loss_fn")),
    case("online loss_fn returns a vector",
         lambda: _fit(loss_fn=lambda x, z: (x.T @ z) ** 2, data=_stream(10), num_epochs=None,
                      num_steps=2, sampling=rproxjax.Sampling(chunk_size=B)),
         raises(ValueError, "loss_fn")),
    case("batched_loss returns a vector",
         lambda: _fit(loss_fn=lambda x, z: jnp.sum((z @ x) ** 2, axis=1), batched_loss=True),
         raises(ValueError, "loss_fn")),
    case("loss_fn returns a list", lambda: _fit(loss_fn=lambda x, z: [loss(x, z)]),
         raises((ValueError, TypeError), "loss_fn")),
    case("loss_fn not callable", lambda: _fit(loss_fn=3),
         raises((ValueError, TypeError), "loss_fn")),
    case("optimizer not an optimizer", lambda: _fit(opt=3),
         raises((ValueError, TypeError), "optimizer")),
    case("optimizer without a Riemannian step (optax.adam)", lambda: _fit(opt=optax.adam(0.1)),
         raises(ValueError, "optimizer")),
    case("opt_state of manpg given to r_prox_sgd",
         lambda: _fit(opt_state=_manpg().init(_x0())), raises(ValueError, "opt_state")),
    case("opt_state of r_prox_sgd given to manpg",
         lambda: _fit(opt=_manpg(), opt_state=_sgd().init(_x0()), batch_size=None),
         raises(ValueError, "opt_state")),
    case("opt_state of r_prox_svrg given to r_spider_boost",
         lambda: _fit(opt=_boost(), batch_size=10,
                      opt_state=svrg(0.1, 0.1, None, m=3).init(_x0())),
         raises(ValueError, "opt_state")),
    # structural errors that are clear today
    case("record_variance online", lambda: _fit(
        data=_stream(10), num_epochs=None, num_steps=2,
        recording=rproxjax.Recording(variance=True)),
         raises(ValueError, r"Recording\(variance=True\) needs the full gradient")),
    case("pure_fit of a stream", lambda: _pure_fit(data=_stream(10)),
         raises(ValueError, "needs a data set")),
    case("fit under jit", lambda: jax.jit(lambda x: _fit(params=x).params)(_x0()),
         raises(ValueError, "pure_fit")),
    case("batch_size > n", lambda: _fit(batch_size=N + 1), raises(ValueError, "batch_size")),
    case("manpg with batch_size < n", lambda: _fit(opt=_manpg(), batch_size=10),
         raises(ValueError, "batch_size must be n")),
    case("manpg on a stream", lambda: _fit(opt=_manpg(), data=_stream(10), num_epochs=None,
                                           num_steps=2),
         raises(ValueError, "full-batch method")),
    case("q=1 in the runner", lambda: _fit(opt=_boost(q=1), batch_size=10),
         raises(ValueError, r"refresh period q must be >= 2")),
    case("two refresh periods in one chain",
         lambda: _fit(opt=optax.chain(rproxjax.sarah_estimator(3), _boost(q=4)),
                      batch_size=10),
         raises(ValueError, "different refresh periods")),
    case("online batch of the wrong size",
         lambda: _fit(data=iter([np.ones((3, D))] * 5), num_epochs=None, num_steps=2),
         raises(ValueError, "expected batch_size = 20")),
    case("online stream shorter than num_steps",
         lambda: _fit(data=_stream(2), num_epochs=None, num_steps=5,
                      sampling=rproxjax.Sampling(chunk_size=B)),
         raises(ValueError, "before num_steps")),
    # online step counts and IFO budgets
    case("online num_steps=1 runs one step", lambda: _fit(data=_stream(200), num_epochs=None,
                                                          num_steps=1),
         returns(_steps(1, B))),
    case("online num_steps=3 with 2-step chunks",
         lambda: _fit(data=_stream(10), num_epochs=None, num_steps=3,
                      sampling=rproxjax.Sampling(chunk_size=2 * B)),
         returns(_steps(3, 3 * B))),
    case("online stream holding exactly num_steps batches",
         lambda: _fit(data=_stream(3), num_epochs=None, num_steps=3,
                      sampling=rproxjax.Sampling(chunk_size=2 * B)),
         returns(_steps(3, 3 * B))),
    case("online stream holding exactly num_steps batches, whole chunks",
         lambda: _fit(data=_stream(4), num_epochs=None, num_steps=4,
                      sampling=rproxjax.Sampling(chunk_size=2 * B)),
         returns(_steps(4, 4 * B))),
    case("online R-SpiderBoost num_steps=4 with q=3",
         lambda: _spb_stream(4), returns(_ifo_history([40, 80, 120, 160]))),
    # non-finite data and values
    case("full-batch R-Subgrad, a NaN data row: halted at X0",
         lambda: _fit(data=NAN_ROW(), batch_size=N), returns(_halted_at_x0)),
    case("manpg, a NaN data row: halted at X0, not converged",
         lambda: _fit(opt=_manpg(), data=NAN_ROW(), batch_size=None, num_epochs=2),
         returns(_manpg_halted_at_x0)),
    # resume
    case("IFO counters continue on resume (initial_ifo)", _resumed, returns(_ifo_continues)),
    # t mu above every entry over a whole fit, eta = 1
    case("collapse, eta=1, polar", lambda: _collapse_fit("polar", "adaptive"),
         returns(_on_manifold_throughout)),
    case("collapse, eta=1, qr", lambda: _collapse_fit("qr", "adaptive"),
         returns(_on_manifold_throughout)),
    case("collapse, eta=1, polar, reference rule", lambda: _collapse_fit("polar", "reference"),
         returns(_on_manifold_throughout)),
    case("unconverged subproblems flagged in the history (reference rule)",
         lambda: _collapse_fit("polar", "reference"), returns(_unconverged_flagged_in_history)),
    # traced hyperparameters
    case("traced learning_rate < 0 under jit: halted at X0",
         lambda: _traced_negative(lambda lr: rproxjax.r_subgrad(lr, L1)),
         returns(_halted_at_x0)),
    case("traced mu < 0 under jit: halted at X0",
         lambda: _traced_negative(lambda mu: rproxjax.r_subgrad(0.1, rproxjax.l1(mu))),
         returns(_halted_at_x0)),
    case("traced gamma < 0 under jit: halted at X0",
         lambda: _traced_negative(lambda gamma: rproxjax.r_prox_sgd(0.1, gamma)),
         returns(_halted_at_x0)),
    case("learning-rate schedule < 0: halted at X0", _negative_schedule,
         returns(_halted_at_x0)),
    case("learning-rate schedule < 0, checked mode (throw=True)",
         lambda: _negative_schedule(throw=True), _checked_run_raises),
]


@pytest.mark.parametrize("fn, expected", FIT)
def test_fit(fn, expected):
    run_case(fn, expected)


# ============================================================================ sweep


def _double(a):
    return 2.0 * a


def _sweep_equals_loop(lanes):
    ts = jnp.array([0.05, 0.2, 1.0])

    def check(out):
        ref = np.stack([-t * _ref_project(_pt(), _gm()) for t in np.asarray(ts)])
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)

    return (lambda: jax.jit(lambda t: rproxjax.sweep(lambda v: tp(_pt(), _gm(), v, None)[0], t,
                                                     lanes=lanes))(ts)), returns(check)


SWEEP = [
    case("sweep lanes='vmap' = loop", *_sweep_equals_loop("vmap")),
    case("sweep lanes='map' = loop", *_sweep_equals_loop("map")),
    case("sweep unknown lanes", lambda: rproxjax.sweep(_double, jnp.ones(3), lanes="pmap"),
         raises(ValueError, r"\blanes\b")),
    case("sweep without arguments", lambda: rproxjax.sweep(_double),
         raises(ValueError, "at least one argument")),
    case("sweep batch_size < 0",
         lambda: rproxjax.sweep(_double, jnp.ones(3), lanes="map", batch_size=-1),
         raises(ValueError, "batch_size")),
    case("sweep arguments of different lengths",
         lambda: rproxjax.sweep(jnp.add, jnp.ones(3), jnp.ones(4), lanes="map"),
         raises(ValueError, r"\bargs\b|leading ax")),
    case("sweep over a scalar", lambda: rproxjax.sweep(_double, jnp.ones(()), lanes="map"),
         raises(ValueError, "leading axis")),
    case("sweep fn not callable", lambda: rproxjax.sweep(3, jnp.ones(3), lanes="map"),
         raises(TypeError, r"\bfn\b")),
]


@pytest.mark.parametrize("fn, expected", SWEEP)
def test_sweep(fn, expected):
    run_case(fn, expected)


# ============================================================================ problems


def _rmc_small():
    rng = np.random.default_rng(0)
    return problems.rmc_problem(rng.normal(size=(5, 4)), rng.random((5, 4)) < 0.8, lam=0.1)


Z = _concrete_cache(lambda: jax.random.normal(jax.random.key(9), (10, 6)))

PROBLEMS = [
    case("spca_loss", lambda: problems.spca_loss(_pt(), Z()[0]),
         returns(_close(lambda: np.sum(
             (_np(Z()[0]) - _np(_pt()) @ (_np(_pt()).T @ _np(Z()[0]))) ** 2)))),
    case("spca_grad = jax.grad(spca_loss)", lambda: problems.spca_grad(_pt(), Z()[0]),
         returns(_close(lambda: -2.0 * np.outer(_np(Z()[0]), _np(Z()[0]) @ _np(_pt()))))),
    case("spca_objective in chunks", lambda: problems.spca_objective(_pt(), Z(), 0.3,
                                                                     chunk_size=3),
         returns(_close(lambda: np.mean(np.sum(
             (_np(Z()) - _np(Z()) @ _np(_pt()) @ _np(_pt()).T) ** 2, axis=1))
             + 0.3 * np.abs(_np(_pt())).sum()))),
    case("explained_variance normalized", lambda: problems.explained_variance(_pt(), Z(), True),
         returns(_close(lambda: np.sum((_np(Z()) @ _np(_pt())) ** 2) / 2.0
                        / np.sum(_np(Z()) ** 2)))),
    case("nonzeros", lambda: problems.nonzeros(jnp.array([[1e-4, -0.5], [0.002, 0.0]])),
         returns(_equal_to(2))),
    case("spca_objective feature dimension != d",
         lambda: problems.spca_objective(_pt(), Z()[:, :5], 0.1),
         raises(ValueError, r"\bdata\b")),
    case("spca_objective chunk_size=0", lambda: problems.spca_objective(_pt(), Z(), 0.1,
                                                                        chunk_size=0),
         raises(ValueError, "chunk_size")),
    case("stationarity reg a bare number",
         lambda: problems.stationarity(_pt(), _gm(), 0.1, 0.1),
         raises((ValueError, TypeError), r"\breg\b")),
    case("stationarity gamma = 0", lambda: problems.stationarity(_pt(), _gm(), 0.0, L1),
         raises(ValueError, r"\bgamma\b")),
    case("stationarity unknown retraction",
         lambda: problems.stationarity(_pt(), _gm(), 0.1, L1, retraction="svd"),
         raises(ValueError, "retraction")),
    case("rmc_problem lam = 0",
         lambda: problems.rmc_problem(np.ones((3, 4)), np.ones((3, 4), bool), lam=0.0),
         raises(ValueError, r"\blam\b")),
    case("rmc_problem lam nan",
         lambda: problems.rmc_problem(np.ones((3, 4)), np.ones((3, 4), bool), lam=np.nan),
         raises(ValueError, r"\blam\b")),
    case("rmc_problem mask of another shape",
         lambda: problems.rmc_problem(np.ones((3, 4)), np.ones((3, 3), bool)),
         raises(ValueError, r"\bmask\b")),
    case("rmc_problem integer matrix",
         lambda: problems.rmc_problem(np.ones((3, 4), int), np.ones((3, 4), bool)),
         raises(ValueError, r"\bmatrix\b must be floating")),
    case("rmc_problem empty mask",
         lambda: problems.rmc_problem(np.ones((3, 4)), np.zeros((3, 4), bool)),
         raises(ValueError, r"\bmask\b observes no entry")),
    case("rmc_problem float16 matrix",
         lambda: problems.rmc_problem(np.ones((3, 4), np.float16), np.ones((3, 4), bool)),
         raises(ValueError, r"\bmatrix\b.*float16")),
    case("rmc_background U with too few rows",
         lambda: problems.rmc_background({"U": _pt(5, 2)[:3], "S": jnp.zeros(
             _rmc_small().values.shape[0])}, _rmc_small()),
         raises(ValueError, r"\bU\b")),
    case("rmc_v S of the wrong length",
         lambda: problems.rmc_v(_pt(5, 2), jnp.zeros(3), _rmc_small()),
         raises(ValueError, r"\bs\b|\bS\b")),
    case("rmc_background float16 U",
         lambda: problems.rmc_background({"U": _pt(5, 2).astype(F16), "S": jnp.zeros(
             _rmc_small().values.shape[0])}, _rmc_small()),
         raises(ValueError, r"\bU\b.*float16")),
]


@pytest.mark.parametrize("fn, expected", PROBLEMS)
def test_problems(fn, expected):
    run_case(fn, expected)


# ============================================================================ command lines


def _smooth_methods(q):
    """The demo's three methods as their h = 0 variants (same estimators, refresh blocks and
    IFO accounting, no Newton loop to compile: the budget arithmetic is under test here, the
    solvers everywhere else)."""
    return {
        "R-ProxSPB": (rproxjax.r_spider_boost(0.5, 0.1, q=q), True),
        "R-ProxSGD": (rproxjax.r_prox_sgd(rproxjax.inverse_sqrt_schedule(1.0), 0.1), False),
        "R-Subgrad": (rproxjax.r_subgrad(rproxjax.inverse_sqrt_schedule(0.05)), False),
    }


def _usage_error(stderr, name):
    """argparse's 'prog: error: ...' line names ``name`` (the usage line above it lists every
    flag, so it does not count); no traceback."""
    lines = [line for line in stderr.splitlines() if ": error: " in line]
    assert lines and re.search(rf"(?<!\w){re.escape(name)}\b", lines[-1]), stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]


def cli_error(name):
    """main(argv) exits with status 2 and a usage error naming the option ``name``."""

    def check(fn, capsys):
        with pytest.raises(SystemExit) as info:
            fn()
        assert info.value.code == 2
        _usage_error(capsys.readouterr().err, name)

    return check


def cli_ok(*needles):
    def check(fn, capsys):
        code = fn()
        out = capsys.readouterr().out
        assert code in (None, 0) and all(s in out for s in needles), out

    return check


def subprocess_error(name):
    """The command line exits with status 2 and a usage error naming ``name``."""

    def check(args, capsys):
        del capsys
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=120, cwd=PKG.parent)
        assert proc.returncode == 2, proc.stderr[-2000:]
        _usage_error(proc.stderr, name)

    return check


# n >= the demo's batch size 100; one R-ProxSPB block costs (n + 2 (q - 1) 100) / n = 5 IFO/n
DEMO = ["--n", "200", "--r", "2", "--mu", "0.2", "--q", "5", "--budget", "6", "--no-plot"]


def _demo(*extra):
    argv = list(DEMO)
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        argv[argv.index(flag) + 1] = value
    return lambda: demo.main(argv)


CLI = [
    pytest.param(_demo(), cli_ok("R-ProxSPB", "R-ProxSGD", "R-Subgrad"), id="demo, tiny valid run",
                 marks=pytest.mark.slow),  # test_demo.py runs the demo
    case("demo --q abc", _demo("--q", "abc"), cli_error("q")),
    case("demo --q 1 (subprocess)",
         ["-m", "rproxjax", "--n", "200", "--r", "2", "--q", "1", "--no-plot"],
         subprocess_error("q")),
    case("demo --budget -1", _demo("--budget", "-1"), cli_error("budget")),
    case("demo --budget 0", _demo("--budget", "0"), cli_error("budget")),
    case("demo --budget 2, below one R-ProxSPB block", _demo("--budget", "2"),
         cli_error("budget")),
    case("demo --mu -1", _demo("--mu", "-1"), cli_error("mu")),
    case("demo --r 0", _demo("--r", "0"), cli_error("r")),
    case("demo --n 0", _demo("--n", "0"), cli_error("n")),
    case("experiments --size huge", lambda: experiments_cli.main(["x", "--size", "huge"]),
         cli_error("size")),
    case("experiments --list", lambda: experiments_cli.main(["--list"]),
         cli_ok("spca-mnist-r10", "rmc-video")),
    case("experiments unknown name (subprocess)",
         ["-m", "experiments", "no-such-experiment", "--size", "tiny", "--no-plot"],
         subprocess_error("no-such-experiment")),
]


@pytest.mark.parametrize("fn, expected", CLI)
def test_cli(fn, expected, capsys):
    expected(fn, capsys)


def test_demo_budgets_are_equal():
    """Equal IFO budgets: every method spends at most the budget and less than one of its
    epochs (R-ProxSPB: a block, 5 IFO/n here) below it."""
    results = demo.run(n=200, r=2, q=5, budget=6.0, plot=False, methods=_smooth_methods(5))
    epoch = {"R-ProxSPB": 5.0, "R-ProxSGD": 1.0, "R-Subgrad": 1.0}
    spent = {name: s["ifo_over_n"] for name, s in results.items()}
    assert all(6.0 - epoch[m] < v <= 6.0 + 1e-9 for m, v in spent.items()), spent


# ============================================================================ extreme scales


def _scales(rng, count):
    """mu and t over 10 decades (1e-5 .. 1e5), gradients up to 1e30."""
    return (10.0 ** rng.uniform(-5, 5, count), 10.0 ** rng.uniform(-5, 5, count),
            10.0 ** rng.uniform(-5, 30, count))


def _prox_and_step(x, g, t, mu, eta):
    """tangent_prox at (X, G, t, mu), and one R-ProxSGD step (gamma = t) from X."""
    zeta, info = tp(x, g, t, rproxjax.l1(mu), ssn=rproxjax.SSN(max_steps=30))
    opt = rproxjax.r_prox_sgd(eta, t, rproxjax.l1(mu), ssn=rproxjax.SSN.stochastic(max_steps=30))
    updates, state = opt.update(g, opt.init(x), x)
    step = rproxjax.step_info(state)
    return zeta, info, optax.apply_updates(x, updates), step.halted, step.ssn.status


@pytest.mark.parametrize("r", [1, 6])
def test_extreme_scales(r):
    """A seeded randomized sweep over extreme scales (mu, t = gamma and eta over 10 decades,
    gradients up to 1e30), d = 6 and r = 1 or r = d, of tangent_prox and of one R-ProxSGD
    step: never NaN, never off the manifold without a flag."""
    d, count = 6, 96
    rng = np.random.default_rng(100 + r)
    mus, ts, scales = _scales(rng, count)
    etas = 10.0 ** rng.uniform(-5, 5, count)
    xs = stiefel.random_point(jax.random.key(r), d, r, shape=(count,))
    gs = jax.random.normal(jax.random.key(50 + r), (count, d, r)) * scales[:, None, None]
    zetas, infos, x_new, halted, step_status = jax.jit(
        lambda *a: jax.lax.map(lambda b: _prox_and_step(*b), a))(xs, gs, ts, mus, etas)

    # tangent_prox: zeta and Lambda finite; converged <=> SUCCESSFUL; Retr_X(zeta) feasible
    # unless flagged
    assert bool(jnp.all(jnp.isfinite(zetas))) and bool(jnp.all(jnp.isfinite(infos.lam)))
    status = np.asarray(infos.status)
    assert np.all(np.isin(status, [S.SUCCESSFUL, S.MAX_STEPS_REACHED, S.COLLAPSED]))
    assert np.all(np.asarray(infos.converged) == (status == S.SUCCESSFUL))
    assert np.mean(status == S.SUCCESSFUL) > 0.1  # the sweep is not all flags
    feas = np.asarray(stiefel.feasibility(jax.vmap(stiefel.retract)(xs, zetas)))
    assert np.all(np.isfinite(feas))
    assert np.all((feas < 1e-10) | (status != S.SUCCESSFUL)), feas[status == S.SUCCESSFUL].max()

    # one step: X_{t+1} finite, on the manifold unless halted or its subproblem is flagged;
    # a halted step leaves X where it was
    halted = np.asarray(halted)
    flagged = halted | (np.asarray(step_status) != S.SUCCESSFUL)
    assert bool(jnp.all(jnp.isfinite(x_new))) and np.mean(flagged) < 0.9
    feas = np.asarray(stiefel.feasibility(x_new))
    assert np.all((feas < 1e-10) | flagged), feas[~flagged].max()
    np.testing.assert_array_equal(np.asarray(x_new)[halted], np.asarray(xs)[halted])
