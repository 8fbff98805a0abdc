"""The one resumable base: what a recipe (a :class:`~shardstream.pipeline.DataPipeline`, a ``WebDataset``, a
:class:`~shardstream.training.TrainingDataset`) keeps between its iterations.

A recipe describes data; each ``iter()`` makes an iterator (a cursor: ``next``, ``state_dict``,
``load_state_dict``) that holds the position. :class:`Resumable` adds the four rules every recipe shares:

- **pending state**: ``load_state_dict(state)`` is checked at once and consumed by the next ``iter()``;
- **progress**: the recipe keeps a :class:`Progress` record of its latest iterator (a plain reference, no weakref
  and no ``__del__``): ``state_dict()`` reports that iterator's position even after a ``break`` dropped it (the
  next ``iter()``, ``set_epoch()`` or ``load_state_dict()`` lets it go, with its open shard);
- **epochs**: ``set_epoch(n)`` chooses the next iteration's epoch and drops a pending state or a progress record
  of another epoch; without it, each iteration moves on to the next epoch once its iterator yields an item.
  ``set_epoch(n, source="loader")`` is a loader handing its epoch on (a restored state keeps its own epoch;
  :attr:`~Resumable.epoch_source` tells a loader whether the user chose the epoch);
- **pickling**: the progress record never travels (a DataLoader worker gets the recipe, not an open iterator).

Every state is plain data (JSON-serialisable) that names its format and version and the configuration it belongs
to; restoring a state of another format, version or configuration raises :class:`~shardstream.errors.StateError`
naming the difference (:func:`check_format`).

>>> class Count(Resumable):
...     def __iter__(self):
...         it = iter(range(self.epoch, self.epoch + 2))
...         return self._track(self.epoch, it)
>>> c = Count(); list(c), c.epoch, list(c), c.epoch
([0, 1], 1, [1, 2], 2)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, StateError
from ..runtime import framework_split

__all__ = ["Progress", "Resumable", "check_format"]

EPOCH_SOURCES = ("auto", "user", "loader")


def check_format(state: Any, fmt: str, version: int, keys: Sequence[str], what: str) -> Mapping[str, Any]:
    """``state`` as a mapping of format ``fmt`` and version ``version`` that has ``keys``; else a
    :class:`~shardstream.errors.StateError` naming what differs.

    >>> check_format({"format": "x", "version": 1}, "x", 2, (), "this loader")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.StateError: cannot restore this loader: the state is 'x' version 1, not 'x' version 2
    """
    if not isinstance(state, Mapping):
        raise StateError(f"cannot restore {what}: a state must be a dict, not {type(state).__name__}")
    missing = [key for key in ("format", "version", *keys) if key not in state]
    if missing:
        raise StateError(f"cannot restore {what}: the state lacks {', '.join(repr(k) for k in missing)} "
                         f"(is it a {fmt!r} state?)")
    if (state["format"], state["version"]) != (fmt, version):
        raise StateError(f"cannot restore {what}: the state is {state['format']!r} version {state['version']}, "
                         f"not {fmt!r} version {version}")
    return state


class Progress:
    """The record a recipe keeps of its latest iteration: the epoch served, whether the iterator has yielded (then
    the recipe has moved on to the next epoch), and the iterator, which knows its position."""

    __slots__ = ("owner", "epoch", "iterator", "started")

    def __init__(self, owner: Resumable, epoch: int, iterator: Any):
        self.owner, self.epoch, self.iterator, self.started = owner, epoch, iterator, False

    def start(self) -> None:
        """Called by the iterator before its first item: the recipe's next iteration is the following epoch."""
        if not self.started:
            self.started = True
            owner = self.owner
            if owner._epoch == self.epoch:
                owner._epoch = self.epoch + 1


class _Tracked:
    """An iterator that starts its progress record at its first item (for iterators that do not do it)."""

    def __init__(self, progress: Progress, it: Iterator[Any]):
        self.progress, self.it = progress, it

    def __iter__(self) -> _Tracked:
        return self

    def __next__(self) -> Any:
        item = next(self.it)
        self.progress.start()
        return item


class Resumable:
    """Base of the resumable recipes (see the module docstring). Subclasses implement ``__iter__`` (with
    :meth:`_begin` or :meth:`_track`), :meth:`_initial_state` and :meth:`_check_state`."""

    _epoch: int = 0
    _epoch_source: str = "auto"
    _pending: dict[str, Any] | None = None
    _progress: Progress | None = None
    _framework: str | None = None  # set in a copy made for a DataLoader worker by a framework's loader

    # -- epochs -------------------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use."""
        return self._epoch

    @property
    def epoch_source(self) -> str:
        """Who chose :attr:`epoch`: ``"auto"`` (counted here), ``"user"`` (``set_epoch``) or ``"loader"``."""
        return self._epoch_source

    def set_epoch(self, epoch: int, *, source: str = "user") -> None:
        """Make the next iteration epoch ``epoch`` (orders are a function of seed and epoch). A restored state of
        that same epoch is kept, so ``for e in range(start, n): ds.set_epoch(e)`` resumes where the state says.

        ``source="loader"``: a loader hands its epoch on; a restored state keeps its own epoch.
        """
        if source not in EPOCH_SOURCES[1:]:
            raise ConfigError(f"set_epoch(source=) must be 'user' or 'loader', not {source!r}")
        self._epoch, self._epoch_source = int(epoch), source
        if source == "loader":
            return
        if self._pending is not None and self._pending["epoch"] != self._epoch:
            self._pending = None
        if self._progress is not None and self._progress.epoch != self._epoch:
            self._progress = None  # state_dict() now describes the start of the epoch asked for
        self._epoch_set(self._epoch)

    def _epoch_set(self, epoch: int) -> None:
        """Hand a user's epoch on (to sources that have epochs of their own)."""

    # -- iterations ---------------------------------------------------------------------------------------------
    def _take_pending(self) -> dict[str, Any] | None:
        """The state the iteration starting now continues from (consumed), or None."""
        pending, self._pending = self._pending, None
        return pending

    def _begin(self, epoch: int, iterator: Any) -> Progress:
        """Record ``iterator`` (serving ``epoch``) as the latest; it calls ``progress.start()`` at its first item."""
        self._epoch = epoch  # the next epoch once it starts (an unused iterator changes nothing)
        self._progress = Progress(self, epoch, iterator)
        return self._progress

    def _track(self, epoch: int, it: Iterator[Any]) -> Iterator[Any]:
        """:meth:`_begin` for a plain iterator: wrapped so that its first item starts the record."""
        progress = self._begin(epoch, None)
        progress.iterator = tracked = _Tracked(progress, it)
        return tracked

    # -- states -------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where this recipe is: its latest iterator's position, a loaded state not used yet, or the start of the
        next epoch (plain values only)."""
        if self._progress is not None:
            return self._progress.iterator.state_dict()
        if self._pending is not None:
            return dict(self._pending)
        return self._initial_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state``, checked now: a state of another recipe or
        configuration raises :class:`~shardstream.errors.StateError` naming the difference."""
        self._check_state(state)
        self._epoch, self._pending, self._progress = int(state["epoch"]), dict(state), None

    def _initial_state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_state(self, state: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_progress"] = None  # an iteration in progress (open shards) never travels
        state["_framework"] = framework_split()  # a spawned worker cannot see who deals the data to the ranks
        return state
