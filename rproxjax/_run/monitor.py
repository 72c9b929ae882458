"""What a run reports between its compiled epochs: a callback, a progress bar and log records.

:func:`rproxjax.fit` runs one compiled program per epoch (or online chunk) and, between
them, hands an :class:`EpochInfo` to a :class:`Monitor`, which

* calls the user's ``callback(info)`` (:class:`rproxjax.Recording`'s ``callback``): a true
  return value stops the run there (the result holds the epochs run so far, resumable with
  its state and key);
* reports progress on stderr when ``Recording(progress=True)``: on a terminal a bar
  (``tqdm`` when it is installed, the optional extra ``rproxjax[progress]``, else a
  one-line display of its own), in a Jupyter notebook ``tqdm.auto``'s bar (when installed),
  elsewhere (pipes, CI logs; notebooks without tqdm) a whole line per tenth of the run;
  a log record of the library's logger first ends the bar's line, so the two never share
  one; nothing at all when progress is off;
* logs a record per epoch at DEBUG level and one per run at INFO level to the logger
  ``"rproxjax"``, which has no handler of its own (configure :mod:`logging` to see them).

:func:`rproxjax.pure_fit` runs inside ``jax.jit``: its ``callback`` is called through
``jax.debug.callback`` with traced values made concrete, and cannot stop the run.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from rproxjax._typing import Array, PyTree

__all__ = ["EpochInfo", "Monitor", "Relay", "RelayHub", "Stages", "logger"]

#: The library's logger; it has no handler of its own (see :mod:`logging`).
logger = logging.getLogger("rproxjax")


class EpochInfo(NamedTuple):
    """What a ``callback`` receives after each epoch (or online chunk) of a run.

    Attributes:
      epoch: epochs (chunks) done in this run, from 1.
      num_epochs: epochs (chunks) the run was asked for.
      params: the point after the epoch.
      opt_state: the optimizer state after the epoch.
      loss: F after the epoch (online: the chunk's mean minibatch loss).
      ifo: IFOs spent so far (counted from ``initial_ifo``).
      time: seconds of optimization so far (NaN in :func:`rproxjax.pure_fit`).
      key: the PRNG key that resumes the run after this epoch: ``fit(..., opt_state=
        info.opt_state, key=info.key, initial_ifo=int(info.ifo))`` from ``info.params``
        continues it as the uninterrupted run would (finite-sum mode; online mode keeps
        the run's key).

    Example:
        >>> import jax, rproxjax
        >>> z = jax.random.normal(jax.random.key(0), (64, 8))
        >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
        >>> opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
        >>> seen = []
        >>> def stop_after_one(info):
        ...     seen.append((int(info.epoch), int(info.num_epochs), int(info.ifo)))
        ...     return info.epoch >= 1  # a true value stops the run
        >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
        ...                    batch_size=16, num_epochs=3,
        ...                    recording=rproxjax.Recording(callback=stop_after_one))
        >>> seen, res.epoch_loss.shape
        ([(1, 3, 64)], (2,))
    """

    epoch: int | np.ndarray
    num_epochs: int | np.ndarray
    params: PyTree
    opt_state: PyTree
    loss: Array | np.ndarray
    ifo: Array | np.ndarray
    time: float | np.ndarray
    key: Array | np.ndarray | None


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class _Line:
    """A one-line progress display of its own on a terminal (when tqdm is not installed)."""

    def __init__(self, total, stream, unit):
        self.total, self.stream, self.width, self.unit = total, stream, 0, unit
        self.done, self.text = 0, ""

    def update(self, done, text):
        self.done, self.text = done, text
        line = f"rproxjax: {self.unit} {done}/{self.total}  {text}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def finish(self):
        """Ends at its last update (the run took fewer stages than planned)."""
        self.total = self.done
        self.update(self.done, self.text)

    def break_line(self):
        """Ends the drawn line, so that what is written next starts on a new one."""
        if self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


class _Plain:
    """Off a terminal (a pipe, a CI log, a notebook without tqdm): a whole line per update,
    at most one per tenth of the total (the first, each tenth reached, the last)."""

    def __init__(self, total, stream, unit):
        self.total, self.stream, self.unit = total, stream, unit
        self.done, self.text, self.shown, self.tenth = 0, "", None, -1

    def _write(self):
        self.stream.write(f"rproxjax: {self.unit} {self.done}/{self.total}  {self.text}\n")
        self.stream.flush()
        self.shown = self.done

    def update(self, done, text):
        self.done, self.text = done, text
        tenth = 10 * done // max(self.total, 1)
        if tenth > self.tenth or done >= self.total:
            self.tenth = tenth
            self._write()

    def finish(self):
        self.total = self.done
        self._write()

    def break_line(self):
        pass

    def close(self):
        if self.done and self.shown != self.done:  # the last update was throttled
            self._write()


class _Tqdm:
    def __init__(self, tqdm, total, stream, unit):
        self.bar = tqdm(total=total, file=stream, desc="rproxjax", unit=unit, leave=True)

    def update(self, done, text):
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(done - self.bar.n)

    def finish(self):
        self.bar.total = self.bar.n
        self.bar.refresh()

    def break_line(self):
        self.bar.clear()  # the record is written where the bar was; the bar redraws below

    def close(self):
        self.bar.close()


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython with a kernel)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        shell = get() if get is not None else None
    except Exception:  # noqa: BLE001 (an IPython in an odd state: not a notebook)
        return False
    return shell is not None and hasattr(shell, "kernel")


class _ApartFromBars(logging.Filter):
    """On the library's logger: the bars drawn now (any thread), and a filter that ends
    their lines before a record is emitted, so that a record never shares a bar's line (it
    passes every record; it is only called for records of enabled levels). The logger owns
    it: :func:`_open_bars` finds it there."""

    def __init__(self):
        super().__init__()
        self._bars: list = []
        self._lock = threading.Lock()

    def add(self, bar) -> None:
        with self._lock:
            self._bars.append(bar)

    def remove(self, bar) -> None:
        with self._lock:
            if bar in self._bars:
                self._bars.remove(bar)

    def break_lines(self) -> None:
        """Ends the lines of the bars drawn now, so that what is written next (a log
        record, a notice) starts on a new line."""
        with self._lock:
            bars = list(self._bars)
        for bar in bars:
            bar.break_line()

    def filter(self, record):
        if self._bars:
            self.break_lines()
        return True


def _open_bars() -> _ApartFromBars:
    """The registry of the bars drawn now: the filter on the library's logger, installed on
    first use (at import)."""
    for f in logger.filters:
        if isinstance(f, _ApartFromBars):
            return f
    found = _ApartFromBars()
    logger.addFilter(found)
    return found


_open_bars()  # installed once, at import: threads then share one registry


def _bar(total, stream, unit="epoch"):
    """A progress display: on a terminal tqdm's bar (when installed) or a line of its own;
    in a notebook ``tqdm.auto``'s (when installed); elsewhere whole lines (:class:`_Plain`)."""
    terminal = _is_terminal(stream)
    if terminal or _in_notebook():
        try:
            from tqdm.auto import tqdm
        except ImportError:
            bar = _Line(total, stream, unit) if terminal else _Plain(total, stream, unit)
        else:
            bar = _Tqdm(tqdm, total, stream, unit)
    else:
        bar = _Plain(total, stream, unit)
    _open_bars().add(bar)
    return bar


def _close_bar(bar) -> None:
    _open_bars().remove(bar)
    bar.close()


def compile_notice(progress: bool, what: str, stream=None) -> None:
    """With ``progress``, a line on stderr saying that ``what`` compiles now (a first call),
    the longest wait of a first call."""
    if progress:
        stream = sys.stderr if stream is None else stream
        _open_bars().break_lines()
        stream.write(f"rproxjax: compiling {what} (first call for these shapes and "
                     "settings) ...\n")
        stream.flush()


#: JAX's event after tracing a function for a compilation (before lowering and XLA's
#: compilation, the long part): a program not yet compiled for these shapes and settings.
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


@contextlib.contextmanager
def compile_watch(progress: bool, what: str, stream=None):
    """With ``progress``, :func:`compile_notice` of ``what`` once, at the first program this
    thread traces inside the block (JAX traces only what it has not compiled for these
    shapes and settings, and before it compiles); nothing when every program is compiled.
    The listener is JAX's event hook, registered for the block alone."""
    if not progress:
        yield
        return
    thread, said = threading.get_ident(), threading.Event()

    def listener(event, duration, **kwargs):
        del duration, kwargs
        if event == TRACE_EVENT and threading.get_ident() == thread and not said.is_set():
            said.set()
            compile_notice(True, what, stream)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def check_progress(progress) -> None:
    if not isinstance(progress, bool | np.bool_):
        raise TypeError(f"progress must be True or False, got {progress!r}.")


def check_callback(callback) -> None:
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable (it receives an EpochInfo), got "
                        f"{type(callback).__name__}.")


class Monitor:
    """Between epochs: the callback, the progress bar and the log records of one run.

    Args:
      total: epochs (chunks) of the run.
      n: samples per pass (the data set's n; online, the batch size), for IFO/n.
      progress: report progress on ``stream`` (a bar on a terminal, lines elsewhere).
      callback: ``callback(info: EpochInfo)``; a true return value stops the run.
      stream: where the bar goes (default ``sys.stderr``, read when the run starts).
    """

    def __init__(self, total: int, n: int, progress: bool = False,
                 callback: Callable[[EpochInfo], Any] | None = None, stream=None):
        check_progress(progress)
        check_callback(callback)
        stream = sys.stderr if stream is None else stream
        self.total, self.n, self.callback = total, n, callback
        self.progress, self.stream, self.noticed = bool(progress), stream, False
        self.bar = _bar(total, stream) if progress else None
        self.stopped_at: int | np.ndarray | None = None

    def compiling(self) -> None:
        """With progress, the line of :func:`compile_notice` before the run's first
        compilation of an epoch program (once per run; nothing where every program is
        cached)."""
        if self.progress and not self.noticed:
            self.noticed = True
            compile_notice(True, "the run's epoch program", self.stream)

    def _text(self, info) -> str:
        return f"F = {float(info.loss):.6g}  IFO/n = {float(info.ifo) / self.n:.2f}"

    def update(self, info: EpochInfo) -> bool:
        """Reports epoch ``info.epoch``; True when the callback asks to stop."""
        debug = logger.isEnabledFor(logging.DEBUG)
        if self.bar is not None or debug:
            text = self._text(info)
            if self.bar is not None:
                self.bar.update(info.epoch, text)
            if debug:
                logger.debug("epoch %d/%d  %s", info.epoch, self.total, text)
        if self.callback is not None and self.callback(info):
            self.stopped_at = info.epoch
            logger.info("the callback stopped the run after epoch %d of %d", info.epoch,
                        self.total)
            return True
        return False

    def close(self, info: EpochInfo | None) -> None:
        """Ends the bar and logs the run's outcome."""
        if self.bar is not None:
            _close_bar(self.bar)
            self.bar = None
        if info is not None and logger.isEnabledFor(logging.INFO):
            logger.info("run ended after %d of %d epochs: %s, %.3g s", info.epoch,
                        self.total, self._text(info), float(info.time))


def traced_callback(callback, epoch, num_epochs, carry, loss, key):
    """``callback(EpochInfo)`` from inside a compiled program (:func:`pure_fit`), for the
    epoch that ended at ``carry`` (the runner's :class:`~rproxjax._run.program.Carry`): the
    values reach it as NumPy arrays, after the epoch; its return value is ignored."""
    import jax
    import jax.numpy as jnp

    info = EpochInfo(epoch, jnp.asarray(num_epochs, jnp.int32), carry.params,
                     carry.opt_state, loss, carry.ifo, jnp.full((), jnp.nan, loss.dtype), key)
    if isinstance(callback, Relay):  # its token is traced: an argument, concrete on the host
        jax.debug.callback(lambda relay, i: relay(i) and None, callback, info)
    else:
        jax.debug.callback(lambda i: callback(i) and None, info)


class RelayHub:
    """Routes the epochs of cached compiled runs to the monitors of the calls that run them,
    so that a program compiled once serves every call, whoever listens, from any thread.

    Each call opens :meth:`watch`, which registers a monitor under a new token and yields
    a :class:`Relay` holding that token; the call passes the relay into its compiled
    program as an argument (its token is the pytree's leaf: a new call compiles nothing),
    and the program reports each epoch through it. Calls running at once, in one thread or
    several, each reach their own monitor. The task modules own one hub each.
    """

    def __init__(self):
        self._targets: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._tokens = itertools.count()

    def dispatch(self, token, info) -> None:
        """Forwards ``info`` to the monitor registered under ``token`` (if any)."""
        with self._lock:
            target = self._targets.get(int(token))
        if target is not None:
            target(info)

    @contextlib.contextmanager
    def watch(self, n: int, progress: bool):
        """A context manager yielding this call's :class:`Relay`: while it is open, the
        epochs reported through the relay go to a progress bar of a run over ``n`` samples
        (built at the first epoch, which says how many there are)."""
        from rproxjax import _checks

        target = _Watch(n, progress)
        with self._lock:
            token = next(self._tokens) % (2**31 - 1)
            self._targets[token] = target
        try:
            yield Relay(_checks.as_dtype(token, np.int32), self)  # a transfer: no compile
        finally:
            jax.effects_barrier()  # the run's last callbacks have arrived
            with self._lock:
                del self._targets[token]
            if target.monitor is not None:
                target.monitor.close(None)


class _Watch:
    """One call's listener: a :class:`Monitor` built at the first epoch."""

    def __init__(self, n: int, progress: bool):
        self.n, self.progress, self.monitor = n, progress, None

    def __call__(self, info):
        if self.monitor is None:
            self.monitor = Monitor(int(info.num_epochs), self.n, self.progress)
        self.monitor.update(info._replace(epoch=int(info.epoch)))


@jax.tree_util.register_pytree_node_class
class Relay:
    """A callback for a compiled run that reports to one call's monitor through its
    :class:`RelayHub`: a pytree whose leaf is the call's token (the hub is static), passed
    into the program as an argument."""

    def __init__(self, token, hub: RelayHub):
        self.token, self.hub = token, hub

    def __call__(self, info):
        self.hub.dispatch(self.token, info)

    def tree_flatten(self):
        return (self.token,), self.hub

    @classmethod
    def tree_unflatten(cls, hub, children):
        return cls(children[0], hub)


class Stages:
    """A progress bar over the stages of a task (e.g. the rounds of a regularization path),
    drawn as :class:`Monitor`'s; each stage is also logged at INFO level."""

    def __init__(self, total: int, progress: bool, what: str, stream=None):
        stream = sys.stderr if stream is None else stream
        self.bar = _bar(total, stream, what) if progress else None
        self.what, self.done, self.total = what, 0, total

    def update(self, text: str) -> None:
        self.done += 1
        logger.info("%s %d: %s", self.what, self.done, text)
        if self.bar is not None:
            self.bar.update(self.done, text)

    def close(self, complete: bool = True) -> None:
        """Ends the bar; ``complete`` (the task ended): at its last stage, which becomes its
        total when the task took fewer stages than planned."""
        if self.bar is not None:
            if complete and 0 < self.done < self.total:
                self.bar.finish()
            _close_bar(self.bar)
            self.bar = None
