"""Which shards each rank and DataLoader worker reads in an epoch, and how many samples that makes, worked out
without reading a shard.

A shard pipeline (a :class:`~.shardlists.SimpleShardList`, maybe a ``shuffle``, then ``split_by_node`` and
``split_by_worker``) deals the same list, shuffled the same way, to every rank and worker. :class:`ShardShares`
replays the shared part for the epoch (URLs only: cheap) and deals it by the splitters' rule
(:func:`~.stages.split.deal`). With each shard's samples (a ``counts`` callable, e.g.
:class:`~shardstream.indexed.counts.ShardCounts`) that gives:

- the samples one rank, or one DataLoader worker, reads this epoch (``len(WebDataset)``);
- equal shares (``equalize=True``): the ``j``-th shard of every rank's list keeps the *smallest* number of samples
  among the ``j``-th shards of all the ranks (0 where a rank has no ``j``-th shard), the first ones in the shard.
  Every rank then has the same counts at the same positions, so each rank, and each DataLoader worker (the
  ``k``-th worker of every rank reads the same positions), yields the same number of samples and batches.

:func:`count_through` follows a count through the stages after the reader (exactly, or ``TypeError``), by the
rules the stages declare (:class:`~.core.StageSpec`'s ``keeps_count`` and ``count``).

>>> from shardstream.pipeline import SimpleShardList, split_by_node
>>> from shardstream.pipeline.context import Context
>>> from shardstream.runtime import Placement
>>> counts = {"a.tar": 10, "b.tar": 10, "c.tar": 4}.__getitem__
>>> shares = ShardShares([SimpleShardList(["a.tar", "b.tar", "c.tar"])], 1, True, False,
...                      lambda urls: {u: counts(u) for u in urls}, equalize=True)
>>> ctx = Context(placement=Placement(rank=1, world_size=2))
>>> [(s.url, s.samples, s.keep) for s in shares.mine(ctx)]
[('b.tar', 10, 10)]
>>> [(s.url, s.keep) for s in shares.mine(ctx.replace(placement=Placement(rank=0, world_size=2)))]
[('a.tar', 10), ('c.tar', 0)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .context import Context
from .core import Stage
from .iteration import build_chain
from .stages.reading import url_of
from .stages.split import deal

__all__ = ["ShardShares", "Share", "count_through"]

@dataclasses.dataclass(frozen=True)
class Share:
    """One shard in a rank's or worker's list: its ``samples`` and how many of them it ``keep``s (equal shares)."""

    url: str
    samples: int
    keep: int


class ShardShares:
    """The shards of every rank and worker for one epoch (see the module docstring).

    ``stages``: the pipeline from its source up to its first splitter (excluded); ``last_split``: the index of
    the pipeline's last splitter (the stages before it see shared randomness); ``node``/``worker``: whether the
    pipeline splits between ranks / workers; ``counts(urls) -> {url: samples}`` raises ``TypeError`` when a
    count is not known.
    """

    def __init__(self, stages: Sequence[Any], last_split: int, node: bool, worker: bool,
                 counts: Callable[[Iterable[str]], dict[str, int]], equalize: bool = False):
        self.stages, self.last_split, self.node, self.worker = list(stages), last_split, node, worker
        self.counts, self.equalize = counts, equalize

    def order(self, ctx: Context) -> list[str]:
        """Every shard of the epoch (and cycle) of ``ctx``, in the order the first splitter receives them."""
        return [url_of(item) for item in build_chain(self.stages, ctx, self.last_split)]

    def ranks(self, ctx: Context) -> int:
        """How many ranks the shards are dealt to (1 without a node splitter)."""
        return ctx.world_size if self.node else 1

    def mine(self, ctx: Context) -> list[Share]:
        """The shards of this rank (all its workers: ``ctx.num_workers`` is ignored) with their counts."""
        order, world = self.order(ctx), self.ranks(ctx)
        counts = self.counts(order)
        lists = [deal(order, r, world) for r in range(world)]
        mine = lists[ctx.rank if self.node else 0]
        if not self.equalize or world == 1:
            return [Share(url, counts[url], counts[url]) for url in mine]
        keep = [min(counts[urls[j]] if j < len(urls) else 0 for urls in lists) for j in range(len(mine))]
        return [Share(url, counts[url], kept) for url, kept in zip(mine, keep, strict=True)]

    def workers(self, ctx: Context, num_workers: int) -> list[list[Share]]:
        """This rank's shards dealt to ``num_workers`` DataLoader workers (all to one without a worker splitter)."""
        mine = self.mine(ctx)
        count = max(1, num_workers) if self.worker else 1
        return [deal(mine, w, count) for w in range(count)]

    def here(self, ctx: Context) -> list[Share]:
        """The shards of the rank and worker of ``ctx``."""
        return self.workers(ctx, ctx.num_workers)[ctx.worker if self.worker else 0]


def count_through(stages: Iterable[Any], count: int) -> int:
    """The items that ``count`` items make after ``stages`` (in one stream: one DataLoader worker), exactly, or a
    ``TypeError`` naming the stage that makes the count unknown.

    >>> from shardstream.pipeline import batched, map, slice
    >>> count_through([map(str), batched(4)], 10), count_through([batched(4, partial=False)], 10)
    (3, 2)
    >>> count_through([slice(1, 8, 2)], 10)
    4
    """
    for item in stages:
        spec = item.spec if isinstance(item, Stage) else None
        if spec is not None and spec.keeps_count:
            continue
        if spec is not None and spec.count is not None:
            count = spec.count(count, **item.arguments)
        else:
            what = f"stage {spec.name!r}" if spec is not None else f"the stage {item!r}"
            raise TypeError(f"{what} changes the number of items by an amount known only when iterating, so the "
                            "length is not known; declare it with .with_length(n)")
    return count
