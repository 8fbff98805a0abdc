"""What one iteration gives its stages: the :class:`Context` of every random or placement-dependent choice, and
:class:`Source`, the base of the sources that need it (shard lists, mixes).

Every random choice comes from ``ctx.rng()``, a fresh ``random.Random`` whose seed is
:func:`~shardstream.runtime.derive_key` of the context's values: there is no hidden global random state, and an
iteration is reproducible from ``(seed, epoch)`` (and, once the data has been split, the rank and worker).

>>> a, b = Context(seed=1, epoch=0), Context(seed=1, epoch=1)
>>> a.rng().random() == Context(seed=1, epoch=0).rng().random() != b.rng().random()
True
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from typing import Any

from ..runtime import Placement, derive_key

__all__ = ["Context", "Source"]


@dataclasses.dataclass(frozen=True)
class Context:
    """The inputs of every random or placement-dependent choice a stage makes during one iteration.

    ``cycle`` counts restarts of the upstream within one epoch (``repeat``, ``with_epoch``); ``stage`` is the
    stage's position in its pipeline; ``shared`` is True where the data is still the same in every rank and
    worker (before a splitter), so the random choices there must be the same everywhere too.

    >>> Context(seed=3).replace(epoch=2).epoch
    2
    """

    seed: int | str = 0
    epoch: int = 0
    placement: Placement = Placement()
    cycle: tuple[int, ...] = ()
    stage: int = 0
    shared: bool = False
    loader_seed: int | None = None

    @classmethod
    def current(cls, seed: int | str | None = None, epoch: int = 0) -> Context:
        """A context for an iteration starting now, here (rank and worker read from the runtime)."""
        return cls(seed=0 if seed is None else seed, epoch=epoch, placement=Placement.current())

    def replace(self, **changes: Any) -> Context:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @property
    def rank(self) -> int:
        return self.placement.rank

    @property
    def world_size(self) -> int:
        return self.placement.world_size

    @property
    def worker(self) -> int:
        return self.placement.worker

    @property
    def num_workers(self) -> int:
        return self.placement.num_workers

    def rng(self, *salt: Any) -> random.Random:
        """A new ``random.Random`` seeded with :func:`~shardstream.runtime.derive_key` of (seed, epoch,
        loader_seed, cycle, stage, salt) and, unless ``shared``, the rank and worker."""
        who = () if self.shared else (self.rank, self.worker)
        return random.Random(derive_key(self.seed, self.epoch, self.loader_seed, self.cycle, self.stage, who, salt))


class Source:
    """Base of the sources that need the :class:`Context` (shard lists): pipelines call ``iterate(ctx)``;
    iterating one directly uses a context read from the runtime with the source's own seed.

    >>> class Three(Source):
    ...     def iterate(self, ctx):
    ...         return iter(range(3))
    >>> list(Three())
    [0, 1, 2]
    """

    seed: int | str | None = None

    def iterate(self, ctx: Context) -> Iterator[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def cursor(self, ctx: Context | None) -> Any:
        """A cursor over the items of ``iterate(ctx)`` that saves its own position (see
        :mod:`~shardstream.pipeline.cursors`), or None (the default): a resumable pipeline then replays
        ``iterate(ctx)`` up to its position, which suits sources of cheap items such as URLs."""
        return None

    def __iter__(self) -> Iterator[Any]:
        return self.iterate(Context.current(seed=self.seed))
