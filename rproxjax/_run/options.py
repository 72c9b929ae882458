"""The option groups of :func:`rproxjax.fit` and :func:`rproxjax.pure_fit`.

A run's options come in three values that both functions take whole:

* :class:`Sampling` (``sampling=``): how epochs are cut and batches drawn and read;
* :class:`Recording` (``recording=``): what the history records and how the run reports;
* ``sharding=``: a ``jax.sharding.NamedSharding`` that splits the samples over one mesh axis.

The size of a run (``batch_size``, ``num_epochs`` or ``num_steps``) stays a keyword of its
own. The former flat keywords (``steps_per_epoch=``, ``record_loss=``, ``mesh=``, ...) are
translated by :func:`grouped` for one release.

Example:
    >>> import jax, rproxjax
    >>> z = jax.random.normal(jax.random.key(0), (64, 8))
    >>> x0 = rproxjax.stiefel.random_point(jax.random.key(1), 8, 2)
    >>> opt = rproxjax.r_prox_sgd(0.1, 0.5, rproxjax.l1(0.05))
    >>> res = rproxjax.fit(opt, rproxjax.problems.spca_loss, x0, z, key=jax.random.key(2),
    ...                    batch_size=16, num_epochs=2,
    ...                    sampling=rproxjax.Sampling(steps_per_epoch=2),
    ...                    recording=rproxjax.Recording(loss=True))
    >>> res.history.loss.shape, res.epoch_loss.shape
    ((4,), (3,))
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rproxjax._run.checks import positive_int
from rproxjax._run.monitor import EpochInfo, check_callback

__all__ = ["Recording", "Sampling", "check_sharding", "grouped"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sampling:
    """How a run's epochs are cut and its batches drawn and read (``fit(sampling=...)``).

    Attributes:
      steps_per_epoch: finite-sum mode: steps per compiled epoch, a point of
        ``epoch_loss`` after each (default n // batch_size, a pass over the data; with a
        refresh period q, max(1, (n // b) // (q - 1)) blocks of q steps, a pass of
        minibatch steps; a value of at least q is rounded down to whole blocks). In
        :func:`rproxjax.fit`, a value below q that divides it makes each epoch a segment
        of a block (the first segment holds the refresh; the block's samples are drawn as
        a whole-block epoch draws them, so the run takes the same steps; ``num_epochs``
        counts segments, and a run resumed mid-block starts a new block);
        :func:`rproxjax.pure_fit` runs whole blocks only. Each epoch (or block) draws a
        fresh permutation and uses its first ``steps_per_epoch * batch_size`` indices: no
        sample repeats within an epoch, samples may repeat across epochs. Shorter epochs
        give finer curves and also change the sampling: compare methods at the same
        epoch length.
      refresh_batch_size: |S1|, the large batch of the variance-reduced methods' refreshes
        (default n, a full gradient, in finite-sum mode; required online).
      chunk_size: samples per chunk when a large batch or the full data set is summed
        (its memory), and online, steps per compiled chunk: ``chunk_size // batch_size``.

    Raises:
      TypeError: a field that is not an int (a bool, a float).
      ValueError: a field below 1.

    Example:
        >>> import rproxjax
        >>> rproxjax.Sampling(steps_per_epoch=10)
        Sampling(steps_per_epoch=10, refresh_batch_size=None, chunk_size=2048)
        >>> rproxjax.Sampling(refresh_batch_size=0)
        Traceback (most recent call last):
        ...
        ValueError: refresh_batch_size must be a positive int, got 0.
    """

    steps_per_epoch: int | None = None
    refresh_batch_size: int | None = None
    chunk_size: int = 2048

    def __post_init__(self):
        for name in ("steps_per_epoch", "refresh_batch_size", "chunk_size"):
            value = positive_int(name, getattr(self, name), allow_none=name != "chunk_size")
            object.__setattr__(self, name, value)  # NumPy integers become Python ints


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recording:
    """What a run records in its history and how it reports (``fit(recording=...)``).

    Attributes:
      loss: record F = f + h after every step (``history.loss``; a pass over the data per
        step in finite-sum mode, the step's minibatch online).
      variance: record ||V_t - grad f(X_t)||^2 and its tangent part
        ||P_{X_t}(V_t - grad f(X_t))||^2 (``history.variance``,
        ``history.riemannian_variance``; a full gradient per step; finite-sum mode only).
      progress: :func:`rproxjax.fit` only: a progress bar on stderr after each epoch
        (online: chunk), drawn when stderr is a terminal (``tqdm``'s with the
        ``progress`` extra, else a line of its own). Each epoch is also logged at DEBUG
        level to the logger ``"rproxjax"``, and the run's end at INFO level, either way.
      callback: ``callback(info)`` after each epoch (online: chunk), with an
        :class:`rproxjax.EpochInfo` (the epoch's number, params, opt_state, F, IFOs, time
        and the key that resumes the run). In :func:`rproxjax.fit` a true return value
        stops the run there (the result holds the epochs run so far; passing its
        ``params``, ``opt_state`` and ``key`` back continues it as an uninterrupted run
        would). In :func:`rproxjax.pure_fit` it is called through ``jax.debug.callback``
        with NumPy arrays (once per lane under ``jax.vmap``; ``time`` NaN), and its
        return value is ignored.

    Raises:
      TypeError: ``loss``, ``variance`` or ``progress`` not a bool; a ``callback`` that is
        not callable.

    Example:
        >>> import rproxjax
        >>> rec = rproxjax.Recording(loss=True, callback=print)
        >>> rec.loss, rec.variance, rec.progress
        (True, False, False)
    """

    loss: bool = False
    variance: bool = False
    progress: bool = False
    callback: Callable[[EpochInfo], Any] | None = None

    def __post_init__(self):
        for name in ("loss", "variance", "progress"):
            value = getattr(self, name)
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"Recording.{name} must be True or False, got {value!r}.")
            object.__setattr__(self, name, bool(value))
        check_callback(self.callback)


def check_sharding(sharding) -> tuple[Mesh, str] | None:
    """(mesh, axis) of a ``sharding=`` that splits the samples, or None for None.

    Raises:
      TypeError: a value other than a ``jax.sharding.NamedSharding`` or None.
      ValueError: a sharding whose mesh is not a ``jax.sharding.Mesh``, that does not split
        the leading (sample) axis over one mesh axis, or that splits another axis.
    """
    if sharding is None:
        return None
    if not isinstance(sharding, NamedSharding):
        raise TypeError("sharding must be a jax.sharding.NamedSharding that splits the "
                        "samples, e.g. NamedSharding(mesh, PartitionSpec('data')); got "
                        f"{type(sharding).__name__}.")
    if not isinstance(sharding.mesh, Mesh):
        raise ValueError("sharding's mesh must be a jax.sharding.Mesh (of devices), got "
                         f"{type(sharding.mesh).__name__}.")
    spec = tuple(sharding.spec)
    if not spec or not isinstance(spec[0], str):
        raise ValueError(f"sharding must split the leading (sample) axis over one mesh axis, "
                         f"e.g. PartitionSpec('data'); got {sharding.spec}.")
    if any(s is not None for s in spec[1:]):
        raise ValueError(f"sharding splits the samples only: the dimensions after the first "
                         f"must be None (replicated); got {sharding.spec}.")
    return sharding.mesh, spec[0]


#: The former flat keywords of :func:`rproxjax.fit`: name -> (the group, its field).
FORMER = MappingProxyType({
    "steps_per_epoch": ("sampling", "steps_per_epoch"),
    "refresh_batch_size": ("sampling", "refresh_batch_size"),
    "chunk_size": ("sampling", "chunk_size"),
    "record_loss": ("recording", "loss"),
    "record_variance": ("recording", "variance"),
    "progress": ("recording", "progress"),
    "callback": ("recording", "callback"),
    "mesh": ("sharding", "mesh"),
    "data_axis": ("sharding", "data_axis"),
})

_GROUP_TYPE = MappingProxyType({"sampling": "rproxjax.Sampling",
                                "recording": "rproxjax.Recording"})


def grouped(where: str, sampling, recording, sharding, former: dict, *,
            progress: bool = True) -> tuple[Sampling, Recording, NamedSharding | None]:
    """(sampling, recording, sharding) of a call of ``where`` (``"fit"`` or ``"pure_fit"``)
    given its groups and its former flat keywords ``former`` (a DeprecationWarning per
    group, naming the new form). ``progress``: whether ``where`` draws a progress bar.

    Raises:
      TypeError: an unknown keyword; a group of the wrong type; a group given together with
        one of its former keywords.
      ValueError: a bad value, as the groups' own checks raise it.
    """
    accepted = set(FORMER) - ({"progress"} if not progress else set())
    for name in former:
        if name not in accepted:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}.")
    given = {"sampling": sampling, "recording": recording, "sharding": sharding}
    fields: dict[str, dict[str, Any]] = {"sampling": {}, "recording": {}, "sharding": {}}
    for name, value in former.items():
        group, field = FORMER[name]
        if given[group] is not None:
            raise TypeError(f"{where}() got {group}= and {name}=: give {field} in {group}= "
                            "only.")
        fields[group][field] = value
    for group in ("sampling", "recording", "sharding"):  # one warning per group
        warned = [n for n in former if FORMER[n][0] == group]
        if not warned:
            continue
        new = ("sharding=NamedSharding(mesh, PartitionSpec(data_axis))" if group == "sharding"
               else f"{group}={_GROUP_TYPE[group]}("
               + ", ".join(f"{FORMER[n][1]}=..." for n in warned) + ")")
        keywords = ", ".join(f"{n}=" for n in warned)
        verb = "is" if len(warned) == 1 else "are"
        warnings.warn(f"{where}({keywords}) {verb} deprecated and will be removed in rproxjax "
                      f"0.5: use {new} instead.",
                      DeprecationWarning, stacklevel=3)
    for group, kind in (("sampling", Sampling), ("recording", Recording)):
        if given[group] is not None and not isinstance(given[group], kind):
            raise TypeError(f"{group} must be a {_GROUP_TYPE[group]}, got "
                            f"{type(given[group]).__name__}.")
    sampling = sampling if sampling is not None else Sampling(**fields["sampling"])
    recording = recording if recording is not None else Recording(**fields["recording"])
    if fields["sharding"]:
        sharding = _from_mesh(**fields["sharding"])
    check_sharding(sharding)
    if recording.progress and not progress:
        raise ValueError(f"{where} draws no progress bar (it runs inside jax.jit): use "
                         "rproxjax.fit, or report from Recording.callback.")
    return sampling, recording, sharding


def _from_mesh(mesh=None, data_axis=None) -> NamedSharding:
    """The sharding of the former ``mesh=`` and ``data_axis=`` (default: the mesh's only
    axis)."""
    if mesh is None:
        raise ValueError("data_axis needs mesh= (a jax.sharding.Mesh).")
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}.")
    if data_axis is None:
        if len(mesh.axis_names) != 1:
            raise ValueError(f"mesh has axes {mesh.axis_names}: name the data axis with "
                             "data_axis=.")
        data_axis = mesh.axis_names[0]
    if data_axis not in mesh.axis_names:
        raise ValueError(f"data_axis {data_axis!r} is not an axis of the mesh "
                         f"{mesh.axis_names}.")
    return NamedSharding(mesh, P(data_axis))
