"""Every matrix product the library issues asks for full precision.

GPUs and TPUs run float32 products at TF32/bf16 precision unless an op asks
for ``Precision.HIGHEST``. These tests lower public float32 functions to
StableHLO text and check that every ``stablehlo.dot_general`` /
``stablehlo.dot`` / ``stablehlo.convolution`` carries HIGHEST for both
operands. The pretty form is ``precision = [HIGHEST, HIGHEST]`` (dot ops);
convolutions (and generic-form ops) print
``precision_config = [#stablehlo<precision HIGHEST>, ...]``; an op with neither
counts as DEFAULT.

Tracing is platform independent but some lowerings are not (TPU's SVD is a
QDWH iteration written with matrix products), so each case is also lowered
for CUDA and TPU, which needs no such device. The LAPACK/cuSOLVER/TPU custom
calls (QR, eigh, SVD, LU) are opaque here: what precision they use inside is
theirs.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import grassmann, problems, stiefel
from rproxjax._linalg import mm

F32 = jnp.float32
D, R = 8, 3
PLATFORMS = ("cpu", "cuda", "tpu")

_DOT_OP = re.compile(r"\bstablehlo\.(dot_general|dot|convolution)\b")
_PRETTY = re.compile(r"\bprecision = \[([^\]]*)\]")
_GENERIC = re.compile(r"#stablehlo<precision (\w+)>")


def dot_ops(text):
    """The lines of StableHLO ``text`` holding a dot_general, dot or convolution op."""
    return [line.strip() for line in text.splitlines() if _DOT_OP.search(line)]


def operand_precisions(op_line):
    """The precision of each operand of one op line; [] when none is printed (DEFAULT)."""
    pretty = _PRETTY.search(op_line)
    if pretty:
        return [p.strip() for p in pretty.group(1).split(",") if p.strip()]
    return _GENERIC.findall(op_line)


def imprecise_ops(text):
    """The dot/convolution ops of ``text`` not at HIGHEST precision for every operand."""
    bad = []
    for op in dot_ops(text):
        precs = operand_precisions(op)
        if not precs or any(p != "HIGHEST" for p in precs):
            bad.append(op)
    return bad


def lower(fn, *args, platform="cpu"):
    """StableHLO text of ``jax.jit(fn)`` at ``args``, lowered for ``platform``."""
    jitted = jax.jit(fn)
    if platform == "cpu":
        return jitted.lower(*args).as_text()
    if not hasattr(jitted, "trace"):  # pragma: no cover - older JAX
        pytest.skip(f"this JAX cannot lower for {platform} without the device")
    traced = jitted.trace(*args)
    try:
        lowered = traced.lower(lowering_platforms=(platform,))
    except TypeError:  # pragma: no cover - older JAX: no lowering_platforms
        pytest.skip(f"this JAX cannot lower for {platform} without the device")
    return lowered.as_text()


def assert_highest(text, expect_dots=True):
    ops = dot_ops(text)
    if expect_dots:
        assert ops, "no dot_general/dot/convolution op: the check would pass vacuously"
        assert any("f32>" in op for op in ops), "no float32 product: inputs were not float32"
    bad = imprecise_ops(text)
    assert not bad, "products below HIGHEST precision:\n" + "\n".join(bad)


# ----------------------------------------------------------------------- inputs


def _point(seed=0, d=D, r=R):
    return stiefel.random_point(jax.random.key(seed), d, r, dtype=F32)


def _tangent(x, seed=1):
    u = jax.random.normal(jax.random.key(seed), x.shape, F32)
    return 0.1 * stiefel.project(x, u)


def _data(n=20, d=D):
    return jax.random.normal(jax.random.key(2), (n, d), F32)


def _rmc():
    rng = np.random.default_rng(0)
    m, n = 7, 6
    matrix = rng.standard_normal((m, n)).astype(np.float32)
    mask = rng.random((m, n)) < 0.7
    problem = problems.rmc_problem(matrix, mask, 1e-3)
    u = _point(3, m, 2)
    params = {"U": u, "S": jnp.zeros(problem.values.shape, F32)}
    return problem, params


def _spca_f(data):
    return lambda x: problems.spca_objective(x, data, 0.0)


# ------------------------------------------------------------------- the checker


def test_checker_finds_a_default_precision_product():
    a = jnp.ones((4, 4), F32)
    text = lower(lambda p, q: p @ q, a, a)
    assert len(dot_ops(text)) == 1
    assert imprecise_ops(text) == dot_ops(text)
    with pytest.raises(AssertionError, match="below HIGHEST"):
        assert_highest(text)
    # ... and accepts the same product through the library's helper.
    assert_highest(lower(mm, a, a))


def test_checker_reads_convolutions_and_rejects_vacuous_passes():
    a, k = jnp.ones((8,), F32), jnp.ones((3,), F32)
    assert len(imprecise_ops(lower(jnp.convolve, a, k))) == 1
    assert_highest(lower(lambda p, q: jnp.convolve(p, q, precision="highest"), a, k))
    with pytest.raises(AssertionError, match="vacuously"):
        assert_highest(lower(lambda p: p + 1.0, a))


# ----------------------------------------------------------------------- cases


def _geometry_cases():
    x, u = _point(), jax.random.normal(jax.random.key(1), (D, R), F32)
    v = _tangent(x)
    y = _point(4)
    cases = {
        "stiefel.project": (stiefel.project, (x, u)),
        "stiefel.project[batched]": (stiefel.project, (jnp.stack([x, y]), jnp.stack([u, u]))),
        "stiefel.transport": (stiefel.transport, (x, y, v)),
        "stiefel.feasibility": (stiefel.feasibility, (x,)),
        "grassmann.project": (grassmann.project, (x, u)),
        "grassmann.transport": (grassmann.transport, (x, y, v)),
        "grassmann.principal_angles": (grassmann.principal_angles, (x, y)),
    }
    for method in stiefel.RETRACTIONS:
        cases[f"stiefel.retract[{method}]"] = (
            lambda a, b, m=method: stiefel.retract(a, b, retraction=m), (x, v))
        cases[f"stiefel.retract[{method},batched]"] = (
            lambda a, b, m=method: stiefel.retract(a, b, retraction=m),
            (jnp.stack([x, x]), jnp.stack([v, v])))
    for method in grassmann.RETRACTIONS:
        cases[f"grassmann.retract[{method}]"] = (
            lambda a, b, m=method: grassmann.retract(a, b, retraction=m), (x, v))
    # Derivatives through the library (transposes keep the forward precision): first and
    # second order, forward and reverse, vmapped. "qr" and "exp" take QRs, whose JAX rule
    # multiplies at the default precision: their derivatives have the library's own rules.
    for method in stiefel.RETRACTIONS:
        loss = lambda a, b, m=method: jnp.sum(stiefel.retract(a, b, retraction=m) ** 2)  # noqa: E731
        cases[f"grad stiefel.retract[{method}]"] = (jax.grad(loss), (x, v))
        cases[f"jvp stiefel.retract[{method}]"] = (
            lambda a, b, m=method: jax.jvp(lambda c: stiefel.retract(a, c, retraction=m),
                                           (b,), (b,))[1], (x, v))
        cases[f"vmap grad stiefel.retract[{method}]"] = (
            jax.vmap(jax.grad(loss)), (jnp.stack([x, x]), jnp.stack([v, v])))
        cases[f"hessian stiefel.retract[{method}]"] = (
            lambda a, b, f=loss: jax.hessian(f, argnums=1)(a, b)[0, 0], (x, v))
    cases["grad grassmann.principal_angles"] = (
        jax.grad(lambda a, b: jnp.sum(grassmann.principal_angles(a, b) ** 2)), (x, y))
    cases["grad stiefel.project"] = (
        jax.grad(lambda a, b: jnp.sum(stiefel.project(a, b) ** 2)), (x, u))
    return cases


def _problem_cases():
    x = _point()
    data = _data()
    z = data[0]
    problem, params = _rmc()
    return {
        "spca_loss": (problems.spca_loss, (x, z)),
        "spca_grad": (problems.spca_grad, (x, z)),
        "grad spca_loss": (jax.grad(problems.spca_loss), (x, z)),
        "spca_objective": (lambda a, b: problems.spca_objective(a, b, 0.1), (x, data)),
        "spca_objective[chunked]": (
            lambda a, b: problems.spca_objective(a, b, 0.1, chunk_size=7), (x, data)),
        "grad spca_objective": (jax.grad(lambda a, b: problems.spca_objective(a, b, 0.1)),
                                (x, data)),
        "explained_variance": (lambda a, b: problems.explained_variance(a, b, True), (x, data)),
        "rmc_background": (problems.rmc_background, (params, problem)),
        "grad rmc_objective": (jax.grad(problems.rmc_objective), (params, problem)),
    }


# rmc_v, rmc_objective and rmc_batch_loss form no matrix product (row-wise
# sums and batched small solves): no op to check, but none may be imprecise.
def _productless_cases():
    problem, params = _rmc()
    batch = jnp.arange(5)
    return {
        "rmc_v": (problems.rmc_v, (params["U"], params["S"], problem)),
        "rmc_objective": (lambda p, q: problems.rmc_objective(p, q, 0.1), (params, problem)),
        "rmc_batch_loss": (problems.rmc_batch_loss, (params, batch, problem)),
        "grad rmc_batch_loss": (jax.grad(problems.rmc_batch_loss), (params, batch, problem)),
    }


GEOMETRY = _geometry_cases()
PROBLEMS = _problem_cases()
PRODUCTLESS = _productless_cases()


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(GEOMETRY))
def test_geometry_products_are_highest(name, platform):
    fn, args = GEOMETRY[name]
    # The QR retraction is a LAPACK/cuSOLVER/TPU QR and a sign flip: no product (its
    # derivatives have products).
    plain_qr = name.startswith(("stiefel.retract[qr", "grassmann.retract[qr"))
    assert_highest(lower(fn, *args, platform=platform), expect_dots=not plain_qr)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_problem_products_are_highest(name, platform):
    fn, args = PROBLEMS[name]
    assert_highest(lower(fn, *args, platform=platform))


@pytest.mark.parametrize("name", sorted(PRODUCTLESS))
def test_productless_problem_functions(name):
    fn, args = PRODUCTLESS[name]
    assert_highest(lower(fn, *args), expect_dots=False)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("linear_solver", ["dense", "cg"])
@pytest.mark.parametrize("reg", ["l1", "l21"])
def test_tangent_prox_products_are_highest(reg, linear_solver, platform):
    x = _point()
    g = jax.random.normal(jax.random.key(5), (D, R), F32)
    regularizer = {"l1": rproxjax.l1, "l21": rproxjax.l21}[reg](0.1)

    def solve(x, g):
        return rproxjax.tangent_prox(x, g, 0.5, regularizer,
                                     ssn=rproxjax.SSN(linear_solver=linear_solver))

    assert_highest(lower(solve, x, g, platform=platform))
    # Its derivatives (implicit function theorem), forward and reverse.
    assert_highest(lower(lambda a, b: jax.jvp(lambda c: solve(a, c)[0], (b,), (b,))[1], x, g,
                         platform=platform))
    assert_highest(lower(jax.grad(lambda a, b: jnp.sum(solve(a, b)[0] ** 2), argnums=(0, 1)),
                         x, g, platform=platform))


def _optimizer_cases():
    data = _data()
    f = _spca_f(data)
    reg = rproxjax.l1(0.1)

    def grad_fn(x):
        return jax.grad(f)(x)

    return {
        "r_prox_sgd": (rproxjax.r_prox_sgd(0.1, 0.1, reg), {}),
        "r_prox_spb": (rproxjax.r_prox_spb(0.1, 0.1, reg, q=2), {"grad_fn": grad_fn}),
        "r_subgrad": (rproxjax.r_subgrad(0.1, reg), {}),
        "manpg": (rproxjax.manpg(0.1, reg, tol=1e-8), {"value_fn": f}),
    }, grad_fn


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", ["r_prox_sgd", "r_prox_spb", "r_subgrad", "manpg"])
def test_optimizer_update_products_are_highest(name, platform):
    cases, grad_fn = _optimizer_cases()
    opt, extra = cases[name]
    x = _point()
    grads = grad_fn(x)
    state = opt.init(x)
    assert grads.dtype == F32
    assert not any(leaf.dtype == jnp.float64 for leaf in jax.tree.leaves(state))

    def update(g, s, p):
        return opt.update(g, s, p, **extra)

    # The state's count is traced, so r_prox_spb compiles both the refresh
    # and the SARAH (grad_fn, transport) branches.
    assert_highest(lower(update, grads, state, x, platform=platform))


def test_fit_products_are_highest():
    # pure_fit (all epochs in one lax.scan) lowers like any function of the starting
    # point; fit runs the same epoch programs.
    data = _data(n=24)
    x0 = _point()
    opt = rproxjax.r_subgrad(0.1, rproxjax.l1(0.1))

    def run(x):
        res = rproxjax.pure_fit(opt, problems.spca_loss, x, data, key=jax.random.key(3),
                                batch_size=4, num_epochs=2,
                                recording=rproxjax.Recording(loss=True))
        return res.params, res.epoch_loss

    assert_highest(lower(run, x0))
