"""Epoch-level stages: ``repeat``, ``with_epoch``, ``with_length`` (webdataset's meanings).

They apply to the output of the whole pipeline: fluid calls made after them still go before them. In a
:class:`~shardstream.pipeline.DataPipeline` the upstream restarts for each repetition, and every restart is a
new *cycle* with fresh shuffles. A repetition that yields nothing ends the stream (never a busy loop).

``with_epoch(n)`` makes one iteration exactly ``n`` items (repeating the data as needed); inside DataLoader
workers that is ``n`` per worker, as in webdataset. ``with_length(n)`` only declares ``len()``.

``repeat`` and ``with_epoch`` are cursor classes over one base, :class:`_Cycles` (see
:mod:`~shardstream.pipeline.cursors`): its state is the pass number, the items so far and the position inside the
current pass.

>>> from shardstream.pipeline.datapipeline import DataPipeline
>>> list(DataPipeline(range(3)).with_epoch(7))
[0, 1, 2, 0, 1, 2, 0]
>>> list(DataPipeline(range(3)).repeat(2))
[0, 1, 2, 0, 1, 2]
>>> len(DataPipeline(range(3)).with_length(3))
3
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...resume.fields import field, refuse, within
from ..core import stage
from ..cursors import Counted, Cursor, Restart, require

__all__ = ["repeat", "with_epoch", "with_length"]


class _Cycles(Counted):
    """``passes`` passes over the stages before (forever when < 0), at most ``limit`` items: each pass is
    ``restart(cycle)``, a fresh cursor of those stages (the base of ``repeat`` and ``with_epoch``)."""

    fields = ("cycle", "total", "produced", "stopped")

    def __init__(self, restart: Restart, passes: int, limit: int | None, name: str):
        self.restart, self.passes, self.limit, self.name = restart, passes, limit, name
        self.current: Cursor | None = None
        self.cycle = self.total = self.produced = 0
        self.stopped = False

    def __next__(self) -> Any:
        while not self.stopped and (self.limit is None or self.total < self.limit):
            if self.current is None:
                if 0 <= self.passes <= self.cycle:
                    break
                self.current, self.produced = self.restart(self.cycle), 0
            try:
                item = next(self.current)
            except StopIteration:
                self.stopped = self.produced == 0  # a pass that yields nothing ends the stream
                self.current, self.cycle = None, self.cycle + (not self.stopped)
                continue
            self.produced += 1
            self.total += 1
            return item
        raise StopIteration

    def mark(self) -> Any:
        return self.state_dict()

    def state_at(self, mark: Any) -> dict[str, Any]:
        return mark

    def state_dict(self) -> dict[str, Any]:
        upstream = None if self.current is None else self.current.state_dict()
        return {"upstream": upstream, "cycle": self.cycle, "total": self.total, "produced": self.produced,
                "stopped": self.stopped}

    def _read(self, state: Mapping[str, Any], name: str) -> Any:
        if name == "stopped":
            return field(state, name, bool, what=self.name)
        return super()._read(state, name)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = require(state, ("upstream", *self.fields), self.name)
        values = {name: self._read(state, name) for name in self.fields}
        upstream = field(state, "upstream", dict, none=True, what=self.name)
        if values["produced"] > values["total"]:
            raise refuse(self.name, "produced", f"is {values['produced']}, more than the "
                                                             f"{values['total']} items of the whole iteration")
        for name, value in values.items():
            setattr(self, name, value)
        self.current = None
        if upstream is not None:
            self.current = self.restart(self.cycle)
            with within("upstream"):
                self.current.load_state_dict(upstream)


class _Repeat(_Cycles):
    """Iterate the upstream ``nepochs`` times (forever when < 0), stopping after ``nbatches`` items if > 0.

    >>> list(repeat(2, nbatches=3)([1, 2]))
    [1, 2, 1]
    """

    def __init__(self, upstream: Cursor, nepochs: int = -1, nbatches: int = -1, *, restart: Restart, name: str):
        super().__init__(restart, nepochs, nbatches if nbatches > 0 else None, name)


def _endless(*, nepochs: int, nbatches: int) -> bool:
    """Whether ``repeat(nepochs, nbatches)`` makes every rank's epoch endless (or ``nbatches`` long)."""
    return int(nepochs) < 0 or int(nbatches) > 0


class _WithEpoch(_Cycles):
    """Make each iteration exactly ``max(nsamples, nbatches)`` items long, repeating the upstream as needed.

    >>> list(with_epoch(5)("ab"))
    ['a', 'b', 'a', 'b', 'a']
    """

    def __init__(self, upstream: Cursor, nsamples: int = -1, nbatches: int = -1, *, restart: Restart, name: str):
        n = max(nsamples, nbatches)
        super().__init__(restart, 0 if n == 0 else -1, n if n > 0 else None, name)


def _epoch_count(count: int, /, *, nsamples: int, nbatches: int) -> int:
    """The items ``with_epoch(nsamples, nbatches)`` makes of ``count`` items."""
    epoch = max(int(nsamples), int(nbatches))
    if epoch < 0:
        raise TypeError("with_epoch() without a length repeats forever: there is no length")
    return epoch if count else 0


def _fixed_length(**arguments: Any) -> bool:
    """``with_epoch(...)`` makes every rank's epoch as long as it says."""
    return True


repeat = stage(_Repeat, at_end=True, equal_epochs=_endless)
with_epoch = stage(_WithEpoch, at_end=True, count=_epoch_count, equal_epochs=_fixed_length)


def _with_length(source: Iterable[Any], n: int, silent: bool = False) -> Iterator[Any]:
    """Declare ``len(pipeline) == n`` (the items themselves pass through unchanged)."""
    return iter(source)


def _declared(*, n: int, silent: bool) -> int:
    """The length ``with_length(n)`` declares."""
    return int(n)


with_length = stage(_with_length, at_end=True, state="pass", length=_declared)
