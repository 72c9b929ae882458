"""Between compiled epochs: callbacks (early stopping, resuming), progress bars, logging, and
how few programs a first fit compiles."""

import io
import logging
import re
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rproxjax
from rproxjax import Recording
from rproxjax._run.monitor import Monitor
from tests.compilations import count_compilations

D, R = 24, 2


def _loss(x, z):
    return jnp.sum(z**2) - jnp.sum((x.T @ z) ** 2)


def _sgd(mu=0.1):
    return rproxjax.r_prox_sgd(0.05, 0.5, rproxjax.l1(mu))


def _spb(mu=0.1):
    return rproxjax.r_prox_spb(0.05, 0.5, rproxjax.l1(mu), q=5)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


KW = dict(batch_size=100, num_epochs=4)


@pytest.mark.parametrize("make", [_sgd, _spb], ids=["r_prox_sgd", "r_prox_spb"])
def test_a_callback_stops_the_run_and_the_rest_resumes_bit_identically(planted, make):
    data, x0, _ = planted
    seen = []

    def stop_after_two(info):
        seen.append(info)
        return info.epoch == 2

    full = rproxjax.fit(make(), _loss, x0, data, key=jax.random.key(3), **KW)
    part = rproxjax.fit(make(), _loss, x0, data, key=jax.random.key(3),
                        recording=Recording(callback=stop_after_two), **KW)
    assert [i.epoch for i in seen] == [1, 2] and {i.num_epochs for i in seen} == {4}
    assert part.epoch_loss.shape == (3,) and part.history.ifo.shape[0] * 2 == \
        full.history.ifo.shape[0]
    np.testing.assert_array_equal(part.epoch_loss, full.epoch_loss[:3])
    np.testing.assert_array_equal(seen[-1].params, part.params)
    np.testing.assert_array_equal(jax.random.key_data(seen[-1].key), jax.random.key_data(part.key))
    assert float(seen[-1].loss) == float(part.epoch_loss[-1])
    assert int(seen[-1].ifo) == int(part.epoch_ifo[-1]) and seen[-1].time > 0
    # The key, state and IFOs of the stopped run continue it as the uninterrupted run went on.
    rest = rproxjax.fit(make(), _loss, part.params, data, key=part.key,
                        opt_state=part.opt_state, initial_ifo=int(part.epoch_ifo[-1]),
                        batch_size=100, num_epochs=2)
    np.testing.assert_array_equal(rest.params, full.params)
    np.testing.assert_array_equal(rest.epoch_loss, full.epoch_loss[2:])
    np.testing.assert_array_equal(rest.epoch_ifo, full.epoch_ifo[2:])
    np.testing.assert_array_equal(jax.random.key_data(rest.key), jax.random.key_data(full.key))


def test_a_callback_that_returns_nothing_lets_the_run_finish(planted):
    data, x0, _ = planted
    calls = []
    res = rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(3), num_steps=30,
                       batch_size=100, recording=Recording(callback=calls.append))  # -> None
    assert [i.epoch for i in calls] == [1, 2, 3] and res.history.ifo.shape == (30,)


def test_an_online_run_reports_each_chunk(planted):
    data, x0, _ = planted
    batches = iter(np.asarray(data).reshape(-1, 20, D))
    calls = []
    res = rproxjax.fit(_sgd(), _loss, x0, batches, key=jax.random.key(0), batch_size=20,
                       num_steps=30, sampling=rproxjax.Sampling(chunk_size=200),
                       recording=Recording(callback=lambda i: calls.append(i) or i.epoch == 2))
    assert [i.epoch for i in calls] == [1, 2] and res.history.ifo.shape == (20,)
    assert calls[0].key is None


def test_an_error_in_the_callback_keeps_the_epochs_run(planted):
    data, x0, _ = planted

    def fail(info):
        raise KeyError("from the callback")

    with pytest.raises(KeyError) as err:
        rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW,
                     recording=Recording(callback=fail))
    assert err.value.partial_result.epoch_loss.shape == (2,)


@pytest.mark.parametrize("bad", [3, "print"])
def test_a_callback_that_is_not_callable_is_a_type_error(planted, bad):
    data, x0, _ = planted
    with pytest.raises(TypeError, match="callback must be callable"):
        Recording(callback=bad)
    for run in (rproxjax.fit, rproxjax.pure_fit):  # the former keyword: warns, then the error
        with pytest.raises(TypeError, match="callback must be callable"), \
                pytest.warns(DeprecationWarning, match=r"\(callback=\) is deprecated"):
            run(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW, callback=bad)


def test_progress_must_be_a_bool(planted):
    data, x0, _ = planted
    with pytest.raises(TypeError, match="progress must be True or False"):
        Recording(progress="yes")
    with pytest.raises(TypeError, match="progress must be True or False"), \
            pytest.warns(DeprecationWarning, match=r"fit\(progress=\) is deprecated"):  # former
        rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW, progress="yes")


@pytest.mark.parametrize("tqdm", [True, False], ids=["tqdm", "own-line"])
def test_progress_bar_on_a_terminal_and_lines_elsewhere(planted, monkeypatch, tqdm):
    data, x0, _ = planted
    if tqdm:
        pytest.importorskip("tqdm")
    else:
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: the own line
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW,
                 recording=Recording(progress=True))
    shown = terminal.getvalue()
    assert "4/4" in shown and "IFO/n = 4.00" in shown and "F = " in shown
    pipe = io.StringIO()  # not a terminal: whole lines, one per epoch of 4 (each a tenth)
    monkeypatch.setattr(sys, "stderr", pipe)
    rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW,
                 recording=Recording(progress=True))
    lines = pipe.getvalue().split("\n")
    assert lines[-1] == "" and "\r" not in pipe.getvalue()  # every line ends complete
    assert [line.split()[2] for line in lines[:-1]] == ["1/4", "2/4", "3/4", "4/4"]
    assert "IFO/n = 4.00" in lines[-2]
    monkeypatch.setattr(sys, "stderr", terminal := _Terminal())
    rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW)  # progress off
    assert terminal.getvalue() == ""


def test_epochs_are_logged_at_debug_and_the_run_at_info(planted, caplog):
    data, x0, _ = planted
    with caplog.at_level(logging.DEBUG, logger="rproxjax"):
        rproxjax.fit(_sgd(), _loss, x0, data, key=jax.random.key(0), **KW)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert [m.split()[1] for m in debug] == ["1/4", "2/4", "3/4", "4/4"]
    assert len(info) == 1 and "after 4 of 4 epochs" in info[0]
    assert not logging.getLogger("rproxjax").handlers  # the library adds no handler


def test_a_monitor_without_progress_or_callback_formats_nothing():
    class Loud:
        def __float__(self):
            raise AssertionError("formatted although nobody listens")

    Monitor(3, 10).update(rproxjax.EpochInfo(1, 3, None, None, Loud(), Loud(), 0.0, None))


@pytest.mark.parametrize("num_steps", [None, 30])
def test_pure_fit_calls_back_every_epoch_under_jit_and_per_lane_under_vmap(planted, num_steps):
    data, x0, _ = planted
    calls = []
    kw = dict(batch_size=100, key=jax.random.key(3))
    kw.update(num_epochs=3) if num_steps is None else kw.update(num_steps=num_steps)
    ref = rproxjax.fit(_sgd(), _loss, x0, data, **kw)
    res = jax.jit(lambda x: rproxjax.pure_fit(_sgd(), _loss, x, data, **kw,
                                              recording=Recording(callback=calls.append)))(x0)
    jax.effects_barrier()
    assert [int(c.epoch) for c in calls] == [1, 2, 3]
    np.testing.assert_allclose(calls[-1].params, res.params, rtol=0, atol=0)
    np.testing.assert_array_equal(jax.random.key_data(calls[-1].key), jax.random.key_data(ref.key))
    np.testing.assert_allclose([float(c.loss) for c in calls], ref.epoch_loss[1:], rtol=1e-12)
    assert all(np.isnan(c.time) for c in calls)
    calls.clear()

    def lane(mu):
        return rproxjax.pure_fit(_sgd(mu), _loss, x0, data, **kw,
                                 recording=Recording(callback=calls.append)).epoch_loss

    losses = jax.jit(jax.vmap(lane))(jnp.array([0.05, 0.2]))
    jax.effects_barrier()
    assert len(calls) == 6 and sorted(int(c.epoch) for c in calls) == [1, 1, 2, 2, 3, 3]
    got = sorted(float(c.loss) for c in calls)
    np.testing.assert_allclose(got, np.sort(np.asarray(losses[:, 1:]).ravel()), rtol=1e-12)


@pytest.mark.parametrize("make", [_sgd, _spb], ids=["r_prox_sgd", "r_prox_spb"])
def test_a_first_fit_compiles_three_programs_and_a_second_none(make):
    """The quickstart's fit on NumPy data: the optimizer's init, the epoch, and F with the
    next epoch's indices; new hyperparameter values, data values and key compile nothing."""
    jax.clear_caches()
    rproxjax._run.compile.clear_cache()
    rng = np.random.default_rng(0)
    data = rng.standard_normal((300, 16)).astype(np.float32)
    x0 = np.linalg.qr(rng.standard_normal((16, 3)))[0].astype(np.float32)
    kw = dict(batch_size=20, num_epochs=2)
    keys = jax.random.key(0), jax.random.key(1)
    first = count_compilations(lambda: rproxjax.fit(make(0.1), rproxjax.problems.spca_loss, x0,
                                               data, key=keys[0], **kw))
    assert first <= 3
    second = count_compilations(lambda: rproxjax.fit(make(0.3), rproxjax.problems.spca_loss, x0,
                                                data * 2, key=keys[1], **kw))
    assert second == 0


def _spca_data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((200, 12)) * np.linspace(3, 0.5, 12)).astype(np.float32)


def test_sparse_pca_draws_its_epochs_and_the_same_result_without(monkeypatch):
    data = _spca_data()
    monkeypatch.setattr(sys, "stderr", terminal := _Terminal())
    shown = rproxjax.sparse_pca(data, 2, passes=3, progress=True)
    quiet = rproxjax.sparse_pca(data, 2, passes=3)
    text = terminal.getvalue()
    epochs = int(shown.history.epoch_loss.shape[0]) - 1
    assert f"{epochs}/{epochs}" in text and "IFO/n" in text
    np.testing.assert_array_equal(shown.loadings, quiet.loadings)
    with pytest.raises(TypeError, match="progress must be True or False"):
        rproxjax.sparse_pca(data, 2, passes=3, progress=1)


def test_a_sparse_pca_path_reports_its_rounds(monkeypatch, caplog):
    data = _spca_data()
    monkeypatch.setattr(sys, "stderr", terminal := _Terminal())
    with caplog.at_level(logging.INFO, logger="rproxjax"):
        res = rproxjax.sparse_pca(data, 2, nonzeros=10, passes=2, progress=True)
    rounds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("path round")]
    assert rounds and rounds[0].startswith("path round 1: 12 values of mu")
    assert len(rounds) == 1 + (res.path.mu.shape[0] - 12) // 8
    shown = re.findall(r"\b(\d+)/(\d+)\b", terminal.getvalue())  # tqdm's or the own line
    assert shown[-1] == (str(len(rounds)),) * 2  # the bar finishes at the rounds run


def test_robust_matrix_completion_draws_its_epochs(monkeypatch):
    rng = np.random.default_rng(0)
    low = (rng.random((30, 1)) @ rng.random((1, 20))).astype(np.float32)
    mask = rng.random((30, 20)) < 0.6
    monkeypatch.setattr(sys, "stderr", terminal := _Terminal())
    res = rproxjax.robust_matrix_completion(low, mask, rank=1, method="r_prox_sgd",
                                            passes=3, progress=True)
    assert "3/3" in terminal.getvalue()
    quiet = rproxjax.robust_matrix_completion(low, mask, rank=1, method="r_prox_sgd",
                                              passes=3)
    np.testing.assert_array_equal(res.low_rank, quiet.low_rank)


def test_two_threads_each_report_their_own_progress(monkeypatch):
    """Two sparse_pca calls at once (3 and 6 passes, compiled beforehand so that their runs
    overlap): each call's epochs reach its own bar, which completes; none overruns its
    total (one shared target sent one call's epochs to the other's bar and dropped the
    rest when the first call ended)."""
    import threading

    data = np.random.default_rng(0).standard_normal((20000, 40)).astype(np.float32)
    for passes in (3, 6):  # compile both programs first
        rproxjax.sparse_pca(data, 2, mu=0.05, passes=passes, refit=False, progress=True,
                           method="r_prox_sgd")
    monkeypatch.setattr(sys, "stderr", terminal := _Terminal())
    barrier = threading.Barrier(2)
    results = {}

    def call(passes):
        barrier.wait()
        results[passes] = rproxjax.sparse_pca(data, 2, mu=0.05, passes=passes, refit=False,
                                              progress=True, method="r_prox_sgd")

    threads = [threading.Thread(target=call, args=(p,)) for p in (3, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = terminal.getvalue()
    assert sorted(results) == [3, 6]
    totals = {int(n) for n in re.findall(r"\b\d+/(\d+)\b", text)}
    assert len(totals) == 2, text[-2000:]  # one bar per call (each counts its start)
    for total in totals:
        done = [int(k) for k in re.findall(rf"\b(\d+)/{total}\b", text)]
        assert max(done) == total, text[-2000:]  # complete, never beyond its total


def test_off_a_terminal_at_most_a_line_per_tenth_and_the_last(monkeypatch):
    """A run of 100 epochs off a terminal: 11 whole lines (the first epoch, each tenth);
    one of 25 stopped by its callback at 13: its last epoch is written when it closes."""
    pipe = io.StringIO()
    monitor = Monitor(100, 10, progress=True, stream=pipe)
    for epoch in range(1, 101):
        monitor.update(rproxjax.EpochInfo(epoch, 100, None, None, 1.0, 10 * epoch, 0.0, None))
    monitor.close(None)
    lines = pipe.getvalue().split("\n")
    assert lines[-1] == "" and "\r" not in pipe.getvalue()
    assert [line.split()[2] for line in lines[:-1]] == \
        ["1/100"] + [f"{k}/100" for k in range(10, 101, 10)]
    pipe = io.StringIO()
    monitor = Monitor(25, 10, progress=True, stream=pipe)
    for epoch in range(1, 14):
        monitor.update(rproxjax.EpochInfo(epoch, 25, None, None, 1.0, 10 * epoch, 0.0, None))
    monitor.close(None)
    assert pipe.getvalue().split("\n")[-2].split()[2] == "13/25"


def test_in_a_notebook_without_tqdm_whole_lines(monkeypatch):
    from rproxjax._run import monitor

    kernel = types.SimpleNamespace(kernel=object())  # IPython's shell inside a kernel
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: kernel))
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm is not installed
    pipe = io.StringIO()
    bar = monitor._bar(3, pipe)
    for k in (1, 2, 3):
        bar.update(k, "text")
    monitor._close_bar(bar)
    assert pipe.getvalue() == "".join(f"rproxjax: epoch {k}/3  text\n" for k in (1, 2, 3))


def test_a_compile_notice_on_a_first_call_only_and_silence_without_progress(monkeypatch):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((37, 9)).astype(np.float32)  # shapes no other test uses
    monkeypatch.setattr(sys, "stderr", quiet := io.StringIO())
    rproxjax.sparse_pca(data, 2, passes=2, method="r_prox_sgd")  # progress off: compiles
    assert quiet.getvalue() == ""
    data = rng.standard_normal((41, 9)).astype(np.float32)
    for kw in (dict(passes=2), dict(nonzeros=6, passes=2)):  # a run, then a path
        monkeypatch.setattr(sys, "stderr", first := io.StringIO())
        rproxjax.sparse_pca(data, 2, method="r_prox_sgd", progress=True, **kw)
        monkeypatch.setattr(sys, "stderr", second := io.StringIO())
        rproxjax.sparse_pca(data * 2, 2, method="r_prox_sgd", progress=True, **kw)
        notices = [line for line in first.getvalue().split("\n") if "compiling" in line]
        assert len(notices) == 1 and notices[0].startswith("rproxjax: compiling the r_prox_sgd")
        assert "compiling" not in second.getvalue() and "rproxjax:" in second.getvalue()


@pytest.mark.parametrize("online", [False, True], ids=["finite-sum", "stream"])
def test_fit_says_when_it_compiles_once_and_not_when_cached(monkeypatch, online):
    """fit(progress=True) writes one line before its first compilation of an epoch program
    (the wait a first call spends), none when the programs are cached (the same shapes
    again), and nothing without progress; the line comes before the bar's lines."""
    rng = np.random.default_rng(7)

    def run(progress, d=11 if online else 13):  # shapes no other test uses
        data = rng.standard_normal((53, d)).astype(np.float32)
        x0 = np.linalg.qr(rng.standard_normal((d, 2)))[0].astype(np.float32)
        opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
        source = (iter([data[i:i + 5] for i in range(0, 50, 5)]) if online else data)
        kw = dict(num_steps=10) if online else dict(num_epochs=2)
        rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, source, key=jax.random.key(0),
                     batch_size=5, recording=rproxjax.Recording(progress=progress), **kw)

    monkeypatch.setattr(sys, "stderr", first := io.StringIO())
    run(True)
    monkeypatch.setattr(sys, "stderr", second := io.StringIO())
    run(True)
    lines = first.getvalue().splitlines()
    notices = [i for i, line in enumerate(lines) if "compiling" in line]
    assert notices == [0] and lines[0] == ("rproxjax: compiling the run's epoch program (first "
                                           "call for these shapes and settings) ...")
    assert len(lines) > 1  # then the bar's lines
    assert "compiling" not in second.getvalue() and "rproxjax:" in second.getvalue()
    monkeypatch.setattr(sys, "stderr", quiet := io.StringIO())
    run(False, d=17 if online else 19)  # new shapes: it compiles, silently
    assert quiet.getvalue() == ""


@pytest.mark.parametrize("stream", ["pipe", "terminal-tqdm", "terminal-own-line"])
def test_log_records_never_share_a_line_with_the_bar(monkeypatch, stream):
    if stream == "terminal-tqdm":
        pytest.importorskip("tqdm")
    elif stream == "terminal-own-line":
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = io.StringIO() if stream == "pipe" else _Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    handler = logging.StreamHandler(out)  # logging on, to the same stderr
    handler.setFormatter(logging.Formatter("LOG %(levelname)s %(message)s"))
    lib = logging.getLogger("rproxjax")
    level = lib.level
    lib.addHandler(handler)
    lib.setLevel(logging.DEBUG)
    try:
        rproxjax.sparse_pca(_spca_data(), 2, nonzeros=10, passes=2, progress=True)
        rproxjax.sparse_pca(_spca_data(), 2, passes=3, progress=True)  # DEBUG per epoch
    finally:
        lib.removeHandler(handler)
        lib.setLevel(level)
    shown = [line.split("\r")[-1] for line in out.getvalue().split("\n")]  # as displayed
    records = [line for line in shown if "LOG" in line]
    assert any("path round 1" in r for r in records) and any("epoch 1/" in r for r in records)
    for line in records:
        assert line.startswith("LOG ") and "rproxjax:" not in line, out.getvalue()
    assert not lib.handlers


@pytest.mark.parametrize("method", ["alternating", "r_prox_sgd"])
def test_robust_matrix_completion_says_when_it_compiles(monkeypatch, method):
    """robust_matrix_completion(progress=True) writes one line before a first call's
    compilation (new shapes), before its progress lines, and none when its programs are
    compiled (the same shapes again, new values); nothing without progress; JAX's event hook
    is released after the call (a later compilation elsewhere prints nothing)."""
    rng = np.random.default_rng(11)
    shape = (19, 14) if method == "alternating" else (17, 15)  # shapes no other test uses
    mask = rng.random(shape) < 0.7

    def run(progress, scale=1.0, m=shape[0]):
        low = rng.standard_normal((m, 2)) @ rng.standard_normal((2, shape[1]))
        rproxjax.robust_matrix_completion(low * scale, mask[:m], rank=2, method=method,
                                          passes=4, throw=False, progress=progress)

    monkeypatch.setattr(sys, "stderr", first := io.StringIO())
    run(True)
    monkeypatch.setattr(sys, "stderr", second := io.StringIO())
    run(True, scale=2.0)
    lines = first.getvalue().splitlines()
    assert [i for i, line in enumerate(lines) if "compiling" in line] == [0]
    assert lines[0] == (f"rproxjax: compiling robust_matrix_completion ({method}) (first call "
                        "for these shapes and settings) ...")
    assert len(lines) > 1  # then the run's own lines
    assert "compiling" not in second.getvalue() and second.getvalue()
    monkeypatch.setattr(sys, "stderr", quiet := io.StringIO())
    run(False, m=shape[0] - 2)  # new shapes: it compiles, silently
    jax.jit(lambda a: a * 3 + 1)(np.ones(7))  # a compilation after the calls
    assert quiet.getvalue() == ""
