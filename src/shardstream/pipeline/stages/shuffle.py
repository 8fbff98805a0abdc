"""Buffered shuffling, deterministic from (seed, epoch[, rank, worker]).

``shuffle(bufsize, initial)`` keeps a buffer of up to ``bufsize`` items and yields a random one of them for
each item it reads, once at least ``initial`` are buffered. Its random numbers come from the pipeline's
:class:`~shardstream.pipeline.core.Context`: the pipeline seed (or ``seed=``), the epoch, and, after the data
has been split between ranks and workers, the rank and worker. Before a splitter (shuffling the shard list)
every worker makes the same choices, so the split stays exact.

:class:`ShuffleCursor` is the stage (a cursor class, see :mod:`~shardstream.pipeline.core`): its state keeps the
buffer as *references*, the input's position before each buffered item, and the random generator's state;
restoring reads each buffered item again at its reference, in reading order (from a shard reader: within the
shards that hold them), then puts the input back where it was. Over an input that cannot give items back (a
plain iterable, a DataLoader) the same draws run in :class:`_PlainShuffle`, a generator that keeps no position.

>>> order = list(shuffle(100, seed=3)(range(10)))
>>> sorted(order) == list(range(10)) and order == list(shuffle(100, seed=3)(range(10)))
True
>>> order != list(range(10))
True
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...errors import StateError
from ...resume.fields import MAX_COUNT, field, ints, random_state, refuse, within
from ..context import Context
from ..core import Stage, StageSpec, stage
from ..cursors import Counted, Cursor, PassCursor, Restart, require, rng_state, unwrap

__all__ = ["DetshuffleStage", "ShuffleCursor", "detshuffle", "shuffle"]


class ShuffleCursor(Counted):
    """Shuffle with a buffer of ``bufsize`` items, starting once ``initial`` are buffered; ``bufsize < 2``
    passes items through. ``seed`` replaces the pipeline seed for this stage; ``rng`` (a ``random.Random``)
    replaces the derived generator altogether. ``handler`` is accepted for webdataset compatibility.

    >>> list(shuffle(0)(range(3)))
    [0, 1, 2]
    """

    def __init__(self, upstream: Cursor, bufsize: int = 1000, initial: int = 100, seed: int | str | None = None,
                 rng: random.Random | None = None, handler: Any = None, *, ctx: Context, name: str):
        super().__init__(upstream, name)
        self.bufsize = bufsize
        self.buf: list[Any] = []  # (item, pull number, the input's mark before the item)
        self.pulls, self.exhausted = 0, False
        if bufsize < 2:  # no buffer: simplest() passes the items on
            return
        self.initial = max(1, min(initial, bufsize))
        self.rng = rng or (ctx if seed is None else ctx.replace(seed=seed)).rng("shuffle")

    def simplest(self) -> Cursor:
        """No buffer (``bufsize < 2``): the items as they come; an input that cannot give items back: the draws
        as a generator (:class:`_PlainShuffle`)."""
        if self.bufsize < 2:
            return PassCursor(self.upstream, iter, self.name)
        return self if self.upstream.restorable else _PlainShuffle(self)

    def __next__(self) -> Any:
        buf = self.buf
        if not self.exhausted:  # this loop runs once per item: keep it flat
            upstream = self.upstream
            while True:
                mark = upstream.mark()
                try:
                    item = next(upstream)
                except StopIteration:
                    self.exhausted = True
                    break
                buf.append((item, self.pulls, mark))
                self.pulls += 1
                if len(buf) < self.bufsize:  # grow the buffer: take a second item for this one
                    mark = upstream.mark()
                    try:
                        item = next(upstream)
                    except StopIteration:
                        self.exhausted = True
                    else:
                        buf.append((item, self.pulls, mark))
                        self.pulls += 1
                if len(buf) >= self.initial:
                    break
                if self.exhausted:
                    break
        if not buf:
            raise StopIteration
        i = self.rng.randrange(len(buf))
        buf[i], buf[-1] = buf[-1], buf[i]
        return buf.pop()[0]

    def mark(self) -> Any:  # a shuffle under another shuffle: its whole state (rare)
        return self.state_dict()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return mark

    def state_dict(self) -> dict[str, Any]:
        if not self.restorable:
            raise StateError(
                f"{self.name} cannot save its buffer: its input cannot give back earlier items cheaply (it comes "
                "from a DataLoader or a stage without state); shuffle inside the dataset, before the loader, or use "
                "shardstream.training for exact resumable shuffling"
            )
        return {
            "upstream": self.upstream.state_dict(),
            "buffer": [self.upstream.state_at(mark) for _, _, mark in self.buf],
            "pulls": [number for _, number, _ in self.buf],
            "count": self.pulls, "exhausted": self.exhausted, "rng": rng_state(self.rng),
        }  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        what = self.name
        state = require(state, ("upstream", "buffer", "pulls", "count", "exhausted", "rng"), what)
        count = field(state, "count", int, lo=0, hi=MAX_COUNT, what=what)
        refs = field(state, "buffer", list, hi=self.bufsize, what=what)
        numbers = ints(state, "pulls", length=len(refs), hi=count - 1, what=what)
        if len(set(numbers)) != len(numbers):
            raise refuse(what, "pulls", "names an item twice; expected the distinct numbers of the buffered items")
        exhausted = field(state, "exhausted", bool, what=what)
        rng = random_state(state, "rng", what=what)
        buf: list[Any] = [None] * len(refs)
        for i in sorted(range(len(refs)), key=numbers.__getitem__):  # in reading order: one pass per shard
            with within("buffer", i):
                self.upstream.load_state_dict(refs[i])
            mark = self.upstream.mark()
            try:
                buf[i] = (next(self.upstream), numbers[i], mark)
            except StopIteration:
                raise StateError(f"cannot restore {self.name}: a buffered item is missing from its input "
                                 "(did the data change?)") from None
        self.buf = buf
        with within("upstream"):
            self.upstream.load_state_dict(state["upstream"])
        self.pulls, self.exhausted = count, exhausted
        self.rng.setstate(rng)


class _PlainShuffle(Cursor):
    """A :class:`ShuffleCursor` over an input that cannot give items back (a plain iterable, a DataLoader): the same
    draws, the buffer holds plain items, and ``state_dict()`` says why it cannot be saved (the shuffle's own
    refusal). The draws run in a generator (a resumed frame costs less per item than a method call); ``iter()``
    hands it out directly."""

    restorable = False

    def __init__(self, shuffle: ShuffleCursor):
        self.shuffle, self.upstream, self.name = shuffle, shuffle.upstream, shuffle.name
        # the input's own iterator where it has one: one call less per item
        self._draws = self._drawing(unwrap(shuffle.upstream))

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return self._draws

    def __next__(self) -> Any:
        return next(self._draws)

    def _drawing(self, it: Iterator[Any]) -> Iterator[Any]:
        shuffle = self.shuffle
        buf, bufsize, initial, randrange = shuffle.buf, shuffle.bufsize, shuffle.initial, shuffle.rng.randrange
        for item in it:  # this loop runs once per item: keep it flat
            buf.append(item)
            if len(buf) < bufsize:  # grow the buffer: take a second item for this one
                extra = next(it, _END)
                if extra is _END:
                    break
                buf.append(extra)
            if len(buf) >= initial:
                i = randrange(len(buf))
                buf[i], buf[-1] = buf[-1], buf[i]
                yield buf.pop()
        shuffle.exhausted = True
        while buf:
            i = randrange(len(buf))
            buf[i], buf[-1] = buf[-1], buf[i]
            yield buf.pop()

    def mark(self) -> Any:
        return None  # no position to keep: state_at() says why

    def state_at(self, mark: Any) -> dict[str, Any]:
        return self.shuffle.state_dict()  # raises: the input cannot give items back

    def state_dict(self) -> dict[str, Any]:
        return self.shuffle.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.shuffle.load_state_dict(state)  # raises where the input cannot restore


_END = object()


def _fixed_epoch(ctx: Context, epoch: int) -> int:
    """The epoch a ``detshuffle`` draws with: its own ``epoch`` when given (``>= 0``), else the pipeline's."""
    return epoch if epoch >= 0 else ctx.epoch


class _Detshuffle(ShuffleCursor):
    """webdataset's ``detshuffle``: ``shuffle`` with an explicit seed (every shuffle here is deterministic);
    ``epoch >= 0`` replaces the pipeline's epoch. The stage records the epoch of its latest iteration in
    ``.epoch``, as webdataset's does (see :class:`DetshuffleStage`).

    >>> list(detshuffle(10, seed=1)(range(5))) == list(detshuffle(10, seed=1)(range(5)))
    True
    """

    def __init__(self, upstream: Cursor, bufsize: int = 1000, initial: int = 100, seed: int | str = 0,
                 epoch: int = -1, *, ctx: Context, name: str):
        if bufsize >= 2:
            ctx = ctx.replace(epoch=_fixed_epoch(ctx, epoch))
        super().__init__(upstream, bufsize, initial, seed, ctx=ctx, name=name)


class DetshuffleStage(Stage):
    """What ``detshuffle(...)`` makes: a :class:`~shardstream.pipeline.core.Stage` whose ``.epoch`` is, as on
    webdataset's ``detshuffle``, the epoch its latest iteration shuffled with (its ``epoch`` argument, -1 by
    default, until it runs). It is a record, like a pipeline's ``state_dict()`` after a ``break``: the order
    itself comes from ``(seed, epoch)``. Inside DataLoader workers the record is the workers' copy's.

    >>> from shardstream.pipeline import DataPipeline
    >>> pipeline = DataPipeline(range(5), detshuffle(10, seed=1))
    >>> pipeline.stage(1).epoch
    -1
    >>> first, second = list(pipeline), list(pipeline)  # two epochs: 0 then 1
    >>> pipeline.stage(1).epoch, sorted(second) == sorted(first), second != first
    (1, True, True)
    """

    __slots__ = ("epoch",)

    def __init__(self, spec: StageSpec, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None):
        super().__init__(spec, args, kwargs)
        self.epoch: int = self.arguments["epoch"]

    def cursor_over(self, upstream: Cursor, ctx: Context, restart: Restart | None, name: str) -> Cursor:
        cursor = super().cursor_over(upstream, ctx, restart, name)
        self.epoch = _fixed_epoch(ctx, self.arguments["epoch"])
        return cursor

    def replace(self, **kwargs: Any) -> DetshuffleStage:
        made = super().replace(**kwargs)
        return DetshuffleStage(made.spec, made.args, made.kwargs)

    def __getstate__(self) -> tuple[Any, ...]:
        return (*super().__getstate__(), self.epoch)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        super().__setstate__(state[:3])
        self.epoch = state[3]


def _recording(factory: Callable[..., Stage]) -> Callable[..., DetshuffleStage]:
    """``factory`` (the registered ``detshuffle``), making :class:`DetshuffleStage` objects."""
    def detshuffle(*args: Any, **kwargs: Any) -> DetshuffleStage:
        made = factory(*args, **kwargs)
        return DetshuffleStage(made.spec, made.args, made.kwargs)

    return functools.update_wrapper(detshuffle, factory)


shuffle = stage(ShuffleCursor, name="shuffle", shuffles=True, keeps_count=True)
detshuffle = _recording(stage(_Detshuffle, fluid=False, shuffles=True, keeps_count=True))
