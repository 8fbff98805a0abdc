"""Equal shares for every rank: ``WebDataset(..., equalize=True)``.

Two stages around the reader, both given the pipeline's :class:`~shardstream.pipeline.shares.ShardShares`:
``equalize_shards`` (before the reader) drops the shards this rank keeps nothing of, and ``equalize`` (after it)
keeps the first ``keep`` samples of each shard. ``keep`` is, for the ``j``-th shard of a rank's list, the smallest
sample count among the ``j``-th shards of all the ranks: every rank, and every DataLoader worker (the ``k``-th
worker of each rank reads the same positions), then yields the same number of samples, so the same number of
batches, in every epoch. The samples dropped are the tails of the bigger shards at each position (which ones
changes with the shard shuffle of each epoch). On one rank both stages pass everything through.

The counts come from sidecar or dataset indexes (never from reading shards); without them, iterating on several
ranks raises :class:`~shardstream.errors.ConfigError` naming the fixes. The position inside the current shard is
part of the pipeline's state (``state_dict()``).

>>> from shardstream.pipeline import SimpleShardList
>>> from shardstream.pipeline.context import Context
>>> from shardstream.pipeline.shares import ShardShares
>>> from shardstream.runtime import Placement
>>> shares = ShardShares([SimpleShardList(["a", "b", "c"])], 1, True, False, lambda urls: {"a": 3, "b": 2, "c": 9},
...                      equalize=True)
>>> samples = [{"__url__": u, "i": i} for u, n in (("a", 3), ("c", 9)) for i in range(n)]
>>> ctx = Context(placement=Placement(rank=0, world_size=2))
>>> [s["url"] for s in equalize_shards(shares)([{"url": "a"}, {"url": "c"}], ctx)]
['a']
>>> [(s["__url__"], s["i"]) for s in equalize(shares)(samples, ctx)]
[('a', 0), ('a', 1)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...errors import ConfigError, WorkerSplitError
from ...resume.fields import field
from ..context import Context
from ..core import stage
from ..cursors import Counted, Cursor
from ..shares import ShardShares, Share
from .reading import url_of

__all__ = ["equalize", "equalize_shards"]


def _plan(shares: ShardShares, ctx: Context) -> list[Share] | None:
    """This worker's shares, or None on one rank (nothing to equalize)."""
    if shares.ranks(ctx) == 1:
        return None
    try:
        return shares.here(ctx)
    except TypeError as e:
        raise ConfigError(
            f"equalize=True needs the samples of every shard, to give {shares.ranks(ctx)} ranks equal shares: {e}. "
            "Or use .with_epoch(n) (n samples per rank and worker), resampled=True with .with_epoch(n), or "
            "shardstream.training.TrainingDataset (exact epochs, equal batches)") from None


def _equalize_shards(source: Iterable[Any], shares: ShardShares, *, ctx: Context) -> Iterator[Any]:
    """Pass on the shards this rank and worker keep samples of (see the module docstring)."""
    plan = _plan(shares, ctx)
    if plan is None:
        yield from source
        return
    expected = iter(plan)
    for item in source:
        share = next(expected, None)
        if share is None or share.url != url_of(item):
            raise ConfigError(f"equalize: the shard list changed while it was dealt ({url_of(item)!r} came where "
                              f"{share.url if share else 'nothing'!r} was expected); equal shares need the "
                              "pipeline's own shard list, shuffle and splitters")
        if share.keep:
            yield item


equalize_shards = stage(_equalize_shards, context=True, fluid=False, state="pass")


class _Equalize(Counted):
    """Keep the first ``keep`` samples of each shard (see the module docstring); ``empty_check``: refuse a worker
    left without any (:class:`~shardstream.errors.WorkerSplitError`).

    Its cursor keeps the samples of each shard of this worker's plan that keeps some (in order). A shard ends after
    its ``samples`` or when a sample of another URL comes (one that failed to read is not waited for)."""

    fields = ("shard", "seen")

    def __init__(self, upstream: Cursor, shares: ShardShares, empty_check: bool = True, *, ctx: Context, name: str):
        super().__init__(upstream, name)
        self.whole = _plan(shares, ctx)  # None on one rank: simplest() passes everything
        if self.whole is not None and empty_check and not any(share.keep for share in self.whole):
            kept = sum(1 for share in shares.mine(ctx) if share.keep)
            raise WorkerSplitError(
                f"DataLoader worker {ctx.worker} of {ctx.num_workers} on rank {ctx.rank} keeps no sample with "
                f"equalize=True: the ranks have {kept} shard positions with samples in common this epoch. Use at "
                f"most {kept} workers, more shards, or empty_check=False")
        self.plan, self.shard, self.seen = [share for share in self.whole or () if share.keep], 0, 0

    def simplest(self) -> Cursor:
        return _Passing(self.upstream, self.name) if self.whole is None else self

    def __next__(self) -> Any:
        plan = self.plan
        while self.shard < len(plan):
            share = plan[self.shard]
            if self.shard == len(plan) - 1 and self.seen >= share.keep:
                break  # the last shard's share is done: read no further
            sample = next(self.upstream)
            url = sample.get("__url__") if isinstance(sample, dict) else None
            if self.seen >= share.samples or (url is not None and url != share.url):
                self.shard, self.seen = self._next_shard(url), 0  # the next shard has begun
                if self.shard == len(plan):
                    break
                share = plan[self.shard]
            self.seen += 1
            if self.seen <= share.keep:
                return sample
        raise StopIteration

    def _read(self, state: Mapping[str, Any], name: str) -> Any:
        if name == "shard":
            return field(state, name, int, lo=0, hi=len(self.plan), what=self.name)
        return super()._read(state, name)

    def _next_shard(self, url: str | None) -> int:
        """The shard a sample of ``url`` begins: the next one of that URL (shards that yielded nothing, e.g.
        skipped by the handler, are passed over), else simply the next one."""
        later = range(self.shard + 1, len(self.plan))
        return next((k for k in later if self.plan[k].url == url), self.shard + 1)


class _Passing(Counted):
    """One rank: everything passes."""

    def __next__(self) -> Any:
        return next(self.upstream)


equalize = stage(_Equalize, fluid=False, keeps_count=True)
