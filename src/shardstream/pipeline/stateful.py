"""Cursors of the stages that keep something between items (see :mod:`~shardstream.pipeline.cursors`).

Each is a *factory* ``(upstream, stage, ctx, restart, name) -> Cursor`` named in the stage's registration
(``stage(fn, state=shuffle_cursor)``) and iterates exactly like the stage's generator function (same random
numbers, same items): the generator serves plain iteration's reference, the cursor adds a position.

- ``shuffle``: the buffer is saved as *references*, the input's position before each buffered item, and the
  random generator's state; restoring reads each buffered item again at its reference, in reading order (from a
  shard reader: within the shards that hold them), then puts the input back where it was.
- ``unbatched``/``unlisted``: the position before the current batch and the index in it.
- ``slice``, ``rsample``: a counter or the random state, with the input's position.

The cursors of ``split_by_node``/``split_by_worker``/``check_empty`` and of ``repeat``/``with_epoch`` live next to
their stages (:mod:`.split`, :mod:`.epochs`).

>>> from shardstream.pipeline import DataPipeline, shuffle, unlisted
>>> p = DataPipeline(([1, 2, 3], [4, 5, 6]), unlisted(), shuffle(3))
>>> it = iter(p); head = [next(it) for _ in range(2)]; state = p.state_dict()
>>> q = DataPipeline(([1, 2, 3], [4, 5, 6]), unlisted(), shuffle(3)); q.load_state_dict(state)
>>> rest = list(q)
>>> rest == list(it), sorted(head + rest)
(True, [1, 2, 3, 4, 5, 6])
"""

from __future__ import annotations

import builtins
import random
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from .core import Context, Stage
from .cursors import Cursor, PassCursor, require

__all__ = ["Counted", "Restart", "rsample_cursor", "shuffle_cursor", "slice_cursor", "stage_arguments",
           "unbatch_cursor"]

Restart = Callable[[int], Cursor]


def stage_arguments(stage: Stage) -> dict[str, Any]:
    """A stage's arguments by name, defaults included."""
    bound = stage.spec.signature.bind(*stage.args, **stage.kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng(rng: random.Random, state: Any) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


class Counted(Cursor):
    """A cursor over ``upstream`` that adds a few counters (``fields``, its attributes) to its input's position."""

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
        return {"upstream": self.upstream.state_at(mark[0]), **dict(zip(self.fields, mark[1]))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = require(state, ("upstream", *self.fields), f"stage {self.name}")
        self.upstream.load_state_dict(state["upstream"])
        for field in self.fields:
            self._set(field, state[field])

    def _set(self, field: str, value: Any) -> None:
        setattr(self, field, value)


class ShuffleCursor(Counted):
    """webdataset's buffered shuffle with a resumable buffer (see the module docstring)."""

    def __init__(self, upstream: Cursor, bufsize: int, initial: int, rng: random.Random, name: str):
        super().__init__(upstream, name)
        self.bufsize, self.initial, self.rng = bufsize, max(1, min(initial, bufsize)), rng
        self.buf: list[tuple[Any, int, Any]] = []  # (item, pull number, the input's mark before the item)
        self.pulls, self.exhausted = 0, False

    def _pull(self) -> bool:
        upstream = self.upstream
        mark = upstream.mark() if self.restorable else None
        try:
            item = next(upstream)
        except StopIteration:
            self.exhausted = True
            return False
        self.buf.append((item, self.pulls, mark))
        self.pulls += 1
        return True

    def _pick(self) -> Any:
        buf = self.buf
        i = self.rng.randrange(len(buf))
        buf[i], buf[-1] = buf[-1], buf[i]
        return buf.pop()[0]

    def __next__(self) -> Any:
        buf = self.buf
        while not self.exhausted:
            if not self._pull():
                break
            if len(buf) < self.bufsize:  # grow the buffer: take a second item for this one
                self._pull()
            if len(buf) >= self.initial:
                return self._pick()
        if buf:
            return self._pick()
        raise StopIteration

    def mark(self) -> Any:  # a shuffle under another shuffle: its whole state (rare)
        return self.state_dict()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return mark

    def state_dict(self) -> dict[str, Any]:
        if not self.restorable:
            raise ConfigError(
                f"{self.name} cannot save its buffer: its input cannot give back earlier items cheaply (it comes "
                "from a DataLoader or a stage without state); shuffle inside the dataset, before the loader, or use "
                "shardstream.training for exact resumable shuffling"
            )
        return {
            "upstream": self.upstream.state_dict(),
            "buffer": [self.upstream.state_at(mark) for _, _, mark in self.buf],
            "pulls": [number for _, number, _ in self.buf],
            "count": self.pulls, "exhausted": self.exhausted, "rng": _rng_state(self.rng),
        }  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        keys = ("upstream", "buffer", "pulls", "count", "exhausted", "rng")
        state = require(state, keys, f"stage {self.name}")
        refs, numbers = list(state["buffer"]), [int(n) for n in state["pulls"]]
        buf: list[Any] = [None] * len(refs)
        for i in sorted(range(len(refs)), key=numbers.__getitem__):  # in reading order: one pass per shard
            self.upstream.load_state_dict(refs[i])
            mark = self.upstream.mark()
            try:
                buf[i] = (next(self.upstream), numbers[i], mark)
            except StopIteration:
                raise ConfigError(f"cannot restore {self.name}: a buffered item is missing from its input "
                                  "(did the data change?)") from None
        self.buf = buf
        self.upstream.load_state_dict(state["upstream"])
        self.pulls, self.exhausted = int(state["count"]), bool(state["exhausted"])
        _set_rng(self.rng, state["rng"])


def shuffle_cursor(upstream: Cursor, stage: Stage, ctx: Context, restart: Restart | None, name: str) -> Cursor:
    a = stage_arguments(stage)
    if a["bufsize"] < 2:
        return PassCursor(upstream, iter, name)
    if stage.spec.name == "detshuffle" and a.get("epoch", -1) >= 0:
        ctx = ctx.replace(epoch=a["epoch"])
    rng = a.get("rng") or (ctx if a.get("seed") is None else ctx.replace(seed=a["seed"])).rng("shuffle")
    return ShuffleCursor(upstream, a["bufsize"], a["initial"], rng, name)


class _Unbatch(Counted):
    fields = ("index",)

    def __init__(self, upstream: Cursor, rows: Callable[[Any], Any], name: str):
        super().__init__(upstream, name)
        self.rows_of, self.rows, self.index, self.before = rows, None, 0, None

    def __next__(self) -> Any:
        while self.rows is None or self.index >= len(self.rows):
            self.before = self.upstream.mark()
            self.rows, self.index = list(self.rows_of(next(self.upstream))), 0
        self.index += 1
        return self.rows[self.index - 1]

    def mark(self) -> Any:
        return (self.upstream.mark(), 0) if self.rows is None else (self.before, self.index)

    def state_at(self, mark: Any) -> dict[str, Any]:
        return {"upstream": self.upstream.state_at(mark[0]), "index": mark[1]}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = require(state, ("upstream", "index"), f"stage {self.name}")
        self.upstream.load_state_dict(state["upstream"])
        self.rows, self.index = None, int(state["index"])
        if self.index:
            self.before = self.upstream.mark()
            self.rows = list(self.rows_of(next(self.upstream)))


def unbatch_cursor(upstream: Cursor, stage: Stage, ctx: Context, restart: Restart | None, name: str) -> Cursor:
    from .batching import _rows

    return _Unbatch(upstream, _rows if stage.spec.name == "unbatched" else list, name)


class _Slice(Counted):
    fields = ("seen",)

    def __init__(self, upstream: Cursor, args: tuple[Any, ...], name: str):
        super().__init__(upstream, name)
        window = builtins.slice(*args)
        self.start, self.stop, self.step = window.start or 0, window.stop, window.step or 1
        self.seen = 0

    def __next__(self) -> Any:
        while self.stop is None or self.seen < self.stop:
            item, index = next(self.upstream), self.seen
            self.seen += 1
            if index >= self.start and (index - self.start) % self.step == 0:
                return item
        raise StopIteration


def slice_cursor(upstream: Cursor, stage: Stage, ctx: Context, restart: Restart | None, name: str) -> Cursor:
    return _Slice(upstream, stage.args, name)


class _Rsample(Counted):
    fields = ("rng",)

    def __init__(self, upstream: Cursor, p: float, rng: random.Random, name: str):
        super().__init__(upstream, name)
        self.p, self.random = p, rng

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            if self.random.random() < self.p:
                return item

    def _get(self, field: str) -> Any:
        return _rng_state(self.random)

    def _set(self, field: str, value: Any) -> None:
        _set_rng(self.random, value)


def rsample_cursor(upstream: Cursor, stage: Stage, ctx: Context, restart: Restart | None, name: str) -> Cursor:
    return _Rsample(upstream, stage_arguments(stage)["p"], ctx.rng("rsample"), name)
