"""The one place for resumable state: the :class:`Resumable` base every recipe shares, and the one state format.

A recipe (a :class:`~shardstream.pipeline.DataPipeline` or ``WebDataset``, a
:class:`~shardstream.training.TrainingDataset`, an :class:`~shardstream.indexed.IndexedDataset` iterated) describes
data; each ``iter()`` makes an iterator (a cursor: ``next``, ``state_dict``, ``load_state_dict``) that holds the
position. :class:`Resumable` adds the four rules every recipe shares:

- **pending state**: ``load_state_dict(state)`` is checked at once and consumed by the next ``iter()``;
- **progress**: the recipe keeps a :class:`Progress` record of its latest iterator: ``state_dict()`` reports that
  iterator's position even after a ``break`` dropped it (the next ``iter()``, ``set_epoch()`` or
  ``load_state_dict()`` lets it go, with its open shard). Nothing refers back to the recipe (the record holds it
  weakly, an iterator lets go of the record once started): no reference cycle, so a recipe dropped mid-epoch
  closes its shards and ends its DataLoader workers at once, not when the garbage collector runs;
- **epochs**: ``set_epoch(n)`` chooses the next iteration's epoch and drops a pending state or a progress record
  of another epoch (a :class:`~shardstream.training.TrainingLoader` keeps its pass's record: the batches it handed
  out are consumed); without it, each iteration moves on to the next epoch once its iterator yields an item.
  ``set_epoch(n, source="loader")`` is a loader handing its epoch on (a restored state keeps its own epoch;
  :attr:`~Resumable.epoch_source` tells a loader whether the user chose the epoch);
- **pickling**: the progress record never travels (a DataLoader worker gets the recipe, not an open iterator).

**The state format.** Every state is plain data (JSON-serialisable), one envelope for every kind (:func:`envelope`)::

    {"format": "shardstream.state", "version": 2, "kind": "pipeline" | "training" | "indexed",
     "fingerprint": {...what the state must agree with...}, "epoch": n, ...the kind's position...}

:func:`check_state` is the one check: it refuses a state of another format, version, kind or fingerprint with a
:class:`~shardstream.errors.StateError` that names every difference (states of the format before version 2,
``"shardstream.pipeline"`` and ``"shardstream.training"``, are refused with a message that says so).

>>> class Count(Resumable):
...     def __iter__(self):
...         it = iter(range(self.epoch, self.epoch + 2))
...         return self._track(self.epoch, it)
>>> c = Count(); list(c), c.epoch, list(c), c.epoch
([0, 1], 1, [1, 2], 2)
>>> state = envelope("indexed", {"rows": [0, 8, 1]}, 0, next=3)
>>> check_state(state, "indexed", {"rows": [0, 4, 1]}, "this dataset")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.StateError: cannot restore this dataset: saved state has rows=[0, 8, 1], this dataset has rows=[0, 4, 1]...
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, StateError
from ..runtime import framework_split
from .fields import MAX_COUNT, mapping, path, problem, shown

__all__ = ["FORMAT", "KINDS", "Progress", "Resumable", "VERSION", "check_state", "digest", "envelope"]

FORMAT = "shardstream.state"
VERSION = 2
KINDS = ("pipeline", "training", "indexed")
#: the formats of version 1 (pipelines, training), refused with a message that names them
_OLD_FORMATS = ("shardstream.pipeline", "shardstream.training")
_ENVELOPE = ("format", "version", "kind", "fingerprint", "epoch")

EPOCH_SOURCES = ("auto", "user", "loader")


def envelope(kind: str, fingerprint: Mapping[str, Any], epoch: int, **position: Any) -> dict[str, Any]:
    """A state of ``kind``: the envelope (format, version, kind, fingerprint, epoch) and the kind's ``position``.

    >>> envelope("indexed", {"rows": [0, 3, 1]}, 1, next=2)["format"]
    'shardstream.state'
    """
    if kind not in KINDS:
        raise ConfigError(f"a state's kind is one of {KINDS}, not {kind!r}")
    return {"format": FORMAT, "version": VERSION, "kind": kind, "fingerprint": dict(fingerprint), "epoch": int(epoch),
            **position}


def digest(values: Iterable[Any]) -> str:
    """A short digest of printable values (shard lengths, names) for a fingerprint: 16 hex digits.

    >>> digest([3, 4]) == digest((3, 4)) != digest([4, 3]), len(digest([3, 4]))
    (True, 16)
    """
    return hashlib.blake2b(repr(tuple(values)).encode(), digest_size=8).hexdigest()


Explain = Callable[[Any, Any, str], str]


def _plain(value: Any, depth: int = 4) -> Any:
    """``value`` with tuples as lists (a state that went through a serialiser may come back with either), down to
    ``depth`` levels (a fingerprint's values are shallow; a damaged state's need not be)."""
    if isinstance(value, (list, tuple)) and depth:
        return [_plain(v, depth - 1) for v in value]
    return value


def _shape(value: Any) -> Any:
    """A value's type, and for a list its items' types: values of one shape can be worded alike."""
    if isinstance(value, (list, tuple)):
        return list, frozenset(type(v) for v in value)
    return type(value)


def _difference(key: str, saved: Any, here: Any, what: str) -> str:
    return f"saved state has {key}={shown(saved)}, {what} has {key}={here!r}"


def check_state(state: Any, kind: str, fingerprint: Mapping[str, Any], what: str, *, keys: Sequence[str] = (),
                explain: Mapping[str, Explain] | None = None) -> Mapping[str, Any]:
    """``state`` if it is a state of this format and version, of ``kind``, with ``keys`` (its position) and a
    fingerprint equal to ``fingerprint``; else a :class:`~shardstream.errors.StateError` naming every difference:
    the version, the kind, each missing key, each fingerprint key that differs (``explain[key](saved, here, what)``
    words one key's difference its own way). The fingerprints of states of another kind are not compared.

    >>> check_state(envelope("training", {"seed": 1}, 0), "pipeline", {"seed": 2}, "this pipeline")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.StateError: cannot restore this pipeline: the state's kind is 'training', not 'pipeline'...
    """
    mapping(state, what)  # a StateError naming where a state nested in another one is
    head = f"cannot restore {what}" + (f" (the state at {path()!r})" if path() else "")
    fmt = state.get("format")
    if fmt in _OLD_FORMATS:
        raise StateError(
            f"{head}: the state is {shown(fmt)} version {shown(state.get('version'))}, the format of shardstream "
            f"before {FORMAT!r} version {VERSION}; old states are not restored: start the epoch again "
            "(set_epoch(n)), or resume with the shardstream that saved it")
    if fmt != FORMAT:
        hint = "" if "format" in state else f"the state lacks the key 'format' ({what} saves {FORMAT!r} states)"
        raise StateError(f"{head}: " + (hint or f"the state's 'format' is {shown(fmt)}, not {FORMAT!r}"))
    problems = []
    if state.get("version") != VERSION or isinstance(state.get("version"), bool):
        problems.append(f"the state is version {shown(state.get('version'))}, this shardstream reads version {VERSION}")
    if "kind" in state and state["kind"] != kind:
        problems.append(f"the state's kind is {shown(state['kind'])}, not {kind!r} (saved by another kind of dataset)")
    missing = [key for key in (*_ENVELOPE, *keys) if key not in state]
    if missing:
        problems.append(f"the state lacks the key{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(repr(k) for k in missing)}")
    wrong = problem(state.get("epoch", 0), int, lo=0, hi=MAX_COUNT)
    if wrong:
        problems.append(f"the state's 'epoch' {wrong}")
    saved = state.get("fingerprint")
    if "fingerprint" in state and not isinstance(saved, Mapping):
        problems.append("the state's 'fingerprint' must be a dict")
    elif isinstance(saved, Mapping) and state.get("kind") == kind:
        words = explain or {}
        for key in sorted(set(saved) | set(fingerprint), key=str):
            if key not in saved:
                problems.append(f"saved state lacks {key!r} (this one has {key}={fingerprint[key]!r})")
            elif key not in fingerprint:
                problems.append(f"saved state has {shown(key)}={shown(saved[key])}, unknown here")
            elif _plain(saved[key]) != _plain(fingerprint[key]):
                words_for = words.get(key)
                alike = words_for is not None and _shape(saved[key]) == _shape(fingerprint[key])
                problems.append(words_for(saved[key], fingerprint[key], what) if alike  # type: ignore[misc]
                                else _difference(key, saved[key], fingerprint[key], what))
    if problems:
        raise StateError(f"{head}: {'; '.join(problems)}; it was saved by another dataset, "
                         "configuration or version")
    return state


class Progress:
    """The record a recipe keeps of its latest iteration: the epoch served, whether the iterator has yielded (then
    the recipe has moved on to the next epoch), and the iterator, which knows its position."""

    __slots__ = ("_owner", "epoch", "iterator", "started")

    def __init__(self, owner: Resumable, epoch: int, iterator: Any):
        # the recipe holds this record, so the record holds the recipe weakly: no reference cycle, and a loader
        # dropped mid-epoch lets its DataLoader workers go at once (a cycle kept them until the garbage collector
        # ran, and torch's iterator collected in a cycle then waits 5 s for each worker)
        self._owner = weakref.ref(owner)
        self.epoch, self.iterator, self.started = epoch, iterator, False

    @property
    def owner(self) -> Resumable | None:
        """The recipe whose iteration this is (None once it is gone)."""
        return self._owner()

    def start(self) -> None:
        """Called by the iterator before its first item: the recipe's next iteration is the following epoch."""
        if not self.started:
            self.started = True
            owner = self.owner
            if owner is not None and owner._epoch == self.epoch:
                owner._epoch = self.epoch + 1


class _Tracked:
    """An iterator that starts its progress record at its first item (for iterators that do not do it)."""

    def __init__(self, progress: Progress, it: Iterator[Any]):
        self.progress: Progress | None = progress
        self.it = it

    def __iter__(self) -> _Tracked:
        return self

    def __next__(self) -> Any:
        item = next(self.it)
        progress, self.progress = self.progress, None  # started once: no reference back to the record
        if progress is not None:
            progress.start()
        return item


class Resumable:
    """Base of the resumable recipes (see the module docstring). Subclasses implement ``__iter__`` (with
    :meth:`_begin` or :meth:`_track`), :meth:`_initial_state` and :meth:`_check_state`."""

    _epoch: int = 0
    _epoch_source: str = "auto"
    _pending: dict[str, Any] | None = None
    _progress: Progress | None = None
    _framework: str | None = None  # set in a copy made for a DataLoader worker by a framework's loader
    #: whether ``set_epoch`` to another epoch forgets the latest iteration's position (a loader keeps it: the
    #: batches it handed out are consumed)
    _epoch_forgets_progress: bool = True

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
        if self._progress is not None and self._progress.epoch != self._epoch and self._epoch_forgets_progress:
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
