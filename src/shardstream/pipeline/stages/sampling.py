"""Stages that keep some items and drop others by count or by chance: ``slice`` and ``rsample``.

Both are cursors (see :mod:`~shardstream.pipeline.cursors`): ``slice`` saves how many items it has seen, ``rsample``
its random generator's state, each with its input's position.

>>> list(slice(2, None, 3)(range(10)))
[2, 5, 8]
>>> list(rsample(1.0)(range(3)))
[0, 1, 2]
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from ...resume.fields import random_state
from ..context import Context
from ..core import stage
from ..cursors import Counted, Cursor, rng_state

__all__ = ["rsample", "slice"]


class _Slice(Counted):
    """``itertools.islice`` as a stage: ``slice(stop)`` or ``slice(start, stop[, step])``.

    >>> list(slice(1, 6, 2)(range(10)))
    [1, 3, 5]
    """

    fields = ("seen",)

    def __init__(self, upstream: Cursor, *args: int | None, name: str):
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


def _sliced(count: int, /, *, args: tuple[int | None, ...]) -> int:
    """The items that ``count`` items make after ``slice(*args)``."""
    return len(range(count)[builtins.slice(*args)])


class _Rsample(Counted):
    """Keep each sample with probability ``p`` (reproducible from the pipeline's seed and epoch).

    >>> kept = list(rsample(0.5)(range(1000)))
    >>> 400 < len(kept) < 600
    True
    """

    fields = ("rng",)

    def __init__(self, upstream: Cursor, p: float = 0.5, *, ctx: Context, name: str):
        super().__init__(upstream, name)
        self.p, self.random = p, ctx.rng("rsample")

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            if self.random.random() < self.p:
                return item

    def _get(self, field: str) -> Any:
        return rng_state(self.random)

    def _read(self, state: Mapping[str, Any], name: str) -> Any:
        return random_state(state, name, what=self.name)

    def _set(self, field: str, value: Any) -> None:
        self.random.setstate(value)


rsample = stage(_Rsample)
slice = stage(_Slice, count=_sliced)
