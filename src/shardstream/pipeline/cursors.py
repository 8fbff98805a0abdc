"""Resumable pipelines: each iteration is a chain of *cursors*, iterators that say where they are.

``iter(pipeline)`` builds one cursor per stage (torchdata's nodes and Grain's dataset iterators work the same way).
A cursor's ``state_dict()`` nests its input's state under ``"upstream"`` and adds what it holds itself;
``load_state_dict()`` restores it strictly (a missing key raises :class:`~shardstream.errors.StateError`
naming it). How a stage is saved follows from how it is registered (:func:`~shardstream.pipeline.core.stage`):

- a generator function with ``state="pass"``: the stage keeps nothing between the items it yields (``map``,
  ``select``, ``decode``, ``to_tuple``, ``batched``...): its position is its input's position;
- a cursor class: the class is the stage (its ``__init__`` is the stage's signature), e.g. ``shuffle`` (its
  buffer, kept as *references*: the input's position before each buffered item, re-read on restore),
  ``unbatched``, ``slice``, ``rsample``, ``repeat``, ``with_epoch``...;
- a shard reader (``tarfile_to_samples``, ``state=ReaderCursor``): the shard being read and how many of its
  samples were yielded. The shard list before it (shard shuffle, node and worker splitting) is *replayed*: it is a
  deterministic function of ``(seed, epoch, rank, worker)``, and its items are URLs, so going back to shard ``i``
  costs nothing; restoring reads the current shard again up to the saved sample (bounded: one shard, never the
  epoch).

A stage without state support (a plain function in the pipeline, a stage registered without ``state=``)
iterates normally, and ``state_dict()`` raises a :class:`~shardstream.errors.StateError` naming it.

>>> from shardstream.pipeline import DataPipeline, batched, shuffle
>>> p = DataPipeline(range(20), shuffle(5), batched(4, collation_fn=None))
>>> it = iter(p); first = next(it); state = p.state_dict()
>>> q = DataPipeline(range(20), shuffle(5), batched(4, collation_fn=None)); q.load_state_dict(state)
>>> list(q) == list(it)
True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import StateError
from ..resume.fields import MAX_COUNT, field, mapping, path, random_state, within

__all__ = ["Counted", "Cursor", "DelegateCursor", "IndexCursor", "NestedCursor", "PassCursor", "ReplayCursor",
           "Restart", "UnsupportedCursor", "require", "rng_state", "set_rng_state", "unwrap"]


def require(state: Any, keys: Sequence[str], what: str) -> Mapping[str, Any]:
    """``state`` as a mapping with ``keys``; else a :class:`~shardstream.errors.StateError` naming the first
    missing key and where the state is (see :mod:`shardstream.resume.fields`, which checks each field's value).

    >>> require({"a": 1}, ("a",), "x")["a"]
    1
    """
    mapping(state, what)
    for key in keys:
        if key not in state:
            where = f" (under {path()!r} in the state)" if path() else ""
            raise StateError(f"cannot restore {what}: its state lacks the key {key!r}{where}; it was damaged, or "
                             "saved by another pipeline or version")
    return state


class Cursor:
    """An iterator with ``state_dict()`` / ``load_state_dict()``.

    ``mark()`` is a cheap token for "here" and ``state_at(mark)`` its state (a shuffle buffer keeps one mark per
    item); ``mark()`` never raises, ``state_at`` raises where ``state_dict`` would. ``restorable`` says whether
    going back to an earlier mark is cheap.
    """

    restorable = True

    def __iter__(self) -> Cursor:
        return self

    def __next__(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def mark(self) -> Any:
        return self.state_dict()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return mark

    def simplest(self) -> Cursor:
        """The cursor a pipeline uses in this one's place: itself, or one that gives the same items and states
        more cheaply for this stage's arguments (a shuffle of fewer than 2 items passes them on). Called once, on
        the cursor a stage's class makes (see :mod:`~shardstream.pipeline.core`)."""
        return self


#: ``restart(cycle)``: a fresh cursor of the stages before a restarting stage (``repeat``), for pass ``cycle``
Restart = Callable[[int], Cursor]
def rng_state(rng: random.Random) -> list[Any]:
    """A ``random.Random``'s state as plain lists (JSON-serialisable).

    >>> r = random.Random(1); s = rng_state(r); a = r.random(); set_rng_state(r, s); a == r.random()
    True
    """
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: Any, what: str = "a random generator") -> None:
    """Restore what :func:`rng_state` saved (checked: a damaged state raises
    :class:`~shardstream.errors.StateError` naming the field ``"rng"``)."""
    rng.setstate(random_state({"rng": state}, "rng", what=what))


class Counted(Cursor):
    """A cursor over ``upstream`` that adds a few counters (``fields``, its attributes) to its input's position.
    Restoring checks every field (:meth:`_read`: by default an integer in ``0..MAX_COUNT``) before using any."""

    fields: tuple[str, ...] = ()

    def __init__(self, upstream: Cursor, name: str):
        self.upstream, self.name = upstream, name
        self.restorable = upstream.restorable

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict(), **{f: self._get(f) for f in self.fields}}

    def _get(self, field: str) -> Any:
        return getattr(self, field)

    def mark(self) -> Any:
        return self.upstream.mark(), tuple(self._get(f) for f in self.fields)

    def state_at(self, mark: Any) -> dict[str, Any]:
        return {"upstream": self.upstream.state_at(mark[0]), **dict(zip(self.fields, mark[1], strict=True))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = require(state, ("upstream", *self.fields), self.name)
        values = {name: self._read(state, name) for name in self.fields}
        self._check(values)
        with within("upstream"):
            self.upstream.load_state_dict(state["upstream"])
        for name, value in values.items():
            self._set(name, value)

    def _read(self, state: Mapping[str, Any], name: str) -> Any:
        """Field ``name`` of ``state``, checked (a count: an integer in ``0..MAX_COUNT``)."""
        return field(state, name, int, lo=0, hi=MAX_COUNT, what=self.name)

    def _check(self, values: dict[str, Any]) -> None:
        """Refuse fields that do not fit together (a :class:`~shardstream.errors.StateError`); default: nothing."""

    def _set(self, name: str, value: Any) -> None:
        setattr(self, name, value)


class IndexCursor(Cursor):
    """A sequence (list, tuple, range) as the source: the state is the index of the next item.

    >>> c = IndexCursor("abc"); _ = next(c); c.state_dict()
    {'items': 1}
    """

    def __init__(self, items: Sequence[Any]):
        self.items, self.n = items, 0

    def __next__(self) -> Any:
        if self.n >= len(self.items):
            raise StopIteration
        self.n += 1
        return self.items[self.n - 1]

    def state_dict(self) -> dict[str, Any]:
        return {"items": self.n}

    def mark(self) -> int:
        return self.n

    def state_at(self, mark: int) -> dict[str, Any]:
        return {"items": mark}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.n = field(state, "items", int, lo=0, hi=len(self.items), what="the source")


class ReplayCursor(IndexCursor):
    """A deterministic iterable replayed to its position: going back re-iterates it from the start, going
    forward reads on. For shard lists (URLs) and other cheap sources. A position beyond ``limit`` items is refused
    (the shard list before a reader: :data:`~shardstream.resume.fields.MAX_REPLAY`, since an endless one would
    replay without end; another source: any count, its data bound the replay).

    >>> c = ReplayCursor(lambda: iter("abcd"), "letters"); c.load_state_dict({"items": 2}); next(c)
    'c'
    """

    def __init__(self, open_fn: Callable[[], Iterator[Any]], what: str, limit: int = MAX_COUNT):
        self.open_fn, self.what, self.n, self.limit = open_fn, what, 0, limit
        self._it: Iterator[Any] | None = None

    def __next__(self) -> Any:
        if self._it is None:
            self._it = self.open_fn()
        item = next(self._it)
        self.n += 1
        return item

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        target = field(state, "items", int, lo=0, hi=self.limit, what=self.what)
        if self._it is None or target < self.n:
            self._it, self.n = self.open_fn(), 0
        while self.n < target:
            try:
                next(self._it)
            except StopIteration:
                raise StateError(f"cannot restore {self.what}: it has {self.n} items, the state says {target} "
                                 "were read (did it change?)") from None
            self.n += 1


class PassCursor(Cursor):
    """Stages that keep nothing between the items they yield: their position is their input's.

    Consecutive such stages share one cursor (their generators are chained directly, as in plain iteration);
    the state still nests one ``"upstream"`` level per stage.
    """

    #: ``plan(items, makes) -> makes``: may replace runs of the stages by fused loops with the same outputs
    #: (set by the engine: :func:`shardstream.pipeline.stages.fused.fuse`)
    plan: Callable[[list[Any], list[Any]], list[Any]] | None = None

    def __init__(self, upstream: Cursor, make: Callable[[Iterable[Any]], Iterator[Any]], name: str,
                 item: Any = None):
        self.upstream, self.makes, self.names, self.items = upstream, [make], [name], [item]
        self.restorable = upstream.restorable
        self._gen: Iterator[Any] | None = None

    @property
    def name(self) -> str:
        return self.names[-1]

    def then(self, make: Callable[[Iterable[Any]], Iterator[Any]], name: str, item: Any = None) -> PassCursor:
        """Add the next pass-through stage to this cursor (before iterating); ``item`` is the stage itself."""
        self.makes.append(make)
        self.names.append(name)
        self.items.append(item)
        return self

    def __next__(self) -> Any:
        gen = self._gen
        if gen is None:
            gen = self.upstream
            makes = self.makes if self.plan is None else self.plan(self.items, self.makes)
            for make in makes:
                gen = iter(make(gen))
            self._gen = gen
        return next(gen)

    def _wrap(self, state: Any) -> dict[str, Any]:
        for _ in self.names:
            state = {"upstream": state}
        return state

    def state_dict(self) -> dict[str, Any]:
        return self._wrap(self.upstream.state_dict())

    def mark(self) -> Any:
        return self.upstream.mark()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return self._wrap(self.upstream.state_at(mark))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for depth, name in enumerate(reversed(self.names)):
            with within(*["upstream"] * depth):
                state = require(state, ("upstream",), name)["upstream"]
        with within(*["upstream"] * len(self.names)):
            self.upstream.load_state_dict(state)
        self._gen = None


class UnsupportedCursor(PassCursor):
    """A stage with no declared state: it iterates, but cannot say where it is."""

    restorable = False

    def _refuse(self) -> StateError:
        return StateError(
            f"{self.name} cannot save its position: shardstream does not know whether it keeps items between the "
            "ones it yields; declare it with shardstream.pipeline.stage(fn, state='pass') if it keeps nothing "
            "(a map or a filter), or move it into a map"
        )

    def state_dict(self) -> dict[str, Any]:
        raise self._refuse()

    def mark(self) -> Any:
        return None

    def state_at(self, mark: Any) -> dict[str, Any]:
        raise self._refuse()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        raise self._refuse()


class DelegateCursor(Cursor):
    """A source that keeps its own state (a StatefulDataLoader, a TrainingLoader, another pipeline): the cursor
    saves and restores *it*. Going back to an earlier item is not cheap (``restorable`` is False)."""

    restorable = False

    def __init__(self, holder: Any, iterable: Iterable[Any], name: str, why: str | None = None):
        self.holder, self.iterable, self.name, self.why = holder, iterable, name, why
        self._it: Iterator[Any] | None = None

    def __next__(self) -> Any:
        if self._it is None:
            self._it = iter(self.iterable)
        return next(self._it)

    def state_dict(self) -> dict[str, Any]:
        if self.holder is None:
            raise StateError(f"the source {self.name} cannot save its position: {self.why}")
        return {"source": self.holder.state_dict()}

    def mark(self) -> Any:
        return None if self.holder is None else self.state_dict()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return self.state_dict() if mark is None else mark  # state_dict raises the explanation

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.holder is None:
            self.state_dict()  # raises the explanation
        saved = require(state, ("source",), f"the source {self.name}")["source"]
        with within("source"):
            self.holder.load_state_dict(saved)
        self._it = None


def unwrap(cursor: Cursor) -> Iterator[Any]:
    """The fastest iterator over ``cursor``'s items for a reader that keeps no position: the plain iterator under a
    :class:`DelegateCursor` that saves nothing, else the cursor itself.

    >>> it = unwrap(DelegateCursor(None, [1, 2], "x", "no state")); type(it).__name__, list(it)
    ('list_iterator', [1, 2])
    """
    if isinstance(cursor, DelegateCursor) and cursor.holder is None:
        if cursor._it is None:
            cursor._it = iter(cursor.iterable)
        return cursor._it
    return cursor


class NestedCursor(Cursor):
    """Another pipeline as the source (a WebDataset, a RandomMix...): its own iterator is a chain of cursors, so
    its state is saved under ``"source"`` and restored in place, and going back is as cheap as inside it.
    ``epoch`` (the outer pipeline's, when it means something) is handed to the inner pipeline before it starts.

    >>> from shardstream.pipeline import DataPipeline
    >>> c = NestedCursor(DataPipeline(range(5)), "inner"); _ = next(c); c.state_dict()["source"]["chain"]
    {'items': 1}
    """

    def __init__(self, pipeline: Iterable[Any], name: str, epoch: int | None = None):
        self.pipeline, self.name, self.epoch = pipeline, name, epoch
        self._it: Cursor | None = None

    def _iter(self) -> Cursor:
        if self._it is None:
            if self.epoch is not None:
                self.pipeline.set_epoch(self.epoch)  # type: ignore[attr-defined]
            self._it = iter(self.pipeline)  # type: ignore[assignment]
        return self._it  # type: ignore[return-value]

    @property
    def restorable(self) -> bool:  # type: ignore[override]
        return self._iter().restorable

    def __next__(self) -> Any:
        return next(self._iter())

    def state_dict(self) -> dict[str, Any]:
        return {"source": self._iter().state_dict()}

    def mark(self) -> Any:
        return self._iter().mark()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return {"source": self._iter().state_at(mark)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = require(state, ("source",), f"the source {self.name}")["source"]
        with within("source"):
            self._iter().load_state_dict(saved)
