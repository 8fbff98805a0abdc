"""Shard lists: brace expansion, ``::``-joined lists, SimpleShardList and ResampledShards.

>>> braceexpand("shard-{000..002}.tar")
['shard-000.tar', 'shard-001.tar', 'shard-002.tar']
>>> braceexpand("{a,b{1..2}}-{x,y}")
['a-x', 'a-y', 'b1-x', 'b1-y', 'b2-x', 'b2-y']
>>> expand_urls("a-{0..1}.tar::b.tar")
['a-0.tar', 'a-1.tar', 'b.tar']
>>> [s["url"] for s in SimpleShardList("s-{0..2}.tar")]
['s-0.tar', 's-1.tar', 's-2.tar']
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigError
from ..io.urls import Urls, braceexpand, expand_urls
from .core import Context, Source

__all__ = ["MockDataset", "ResampledShards", "SimpleShardList", "braceexpand", "expand_urls"]


class SimpleShardList(Source):
    """The shards of ``urls``, in order, as ``{"url": url}`` items (what tarfile_to_samples reads).

    With ``seed``, the list is shuffled (before any split) differently every epoch, reproducibly.

    >>> list(SimpleShardList(["a.tar", "b.tar"]))
    [{'url': 'a.tar'}, {'url': 'b.tar'}]
    """

    def __init__(self, urls: Urls, seed: int | str | None = None):
        self.urls = expand_urls(urls)
        if not self.urls:
            raise ConfigError(f"the shard list {urls!r} is empty")
        self.seed = seed

    def __len__(self) -> int:
        return len(self.urls)

    def iterate(self, ctx: Context) -> Iterator[dict[str, Any]]:
        urls = list(self.urls)
        if self.seed is not None:
            ctx.replace(seed=self.seed, shared=True).rng("shardlist").shuffle(urls)
        for url in urls:
            yield {"url": url}

    def __repr__(self) -> str:
        return f"SimpleShardList({len(self.urls)} shards: {self.urls[0]!r}...)"


class ResampledShards(Source):
    """An endless stream of shards drawn at random with replacement (``nshards`` of them if given): each rank
    and worker draws its own, so no splitting is needed. Draws are reproducible from (seed, epoch, rank,
    worker); ``deterministic`` and ``worker_seed`` are accepted for webdataset compatibility (shardstream's
    draws are always deterministic).

    >>> r = ResampledShards("s-{0..9}.tar", nshards=5, seed=1)
    >>> draws = [s["url"] for s in r]
    >>> len(draws), draws == [s["url"] for s in r], set(draws) <= set(r.urls)
    (5, True, True)
    """

    def __init__(self, urls: Urls, nshards: int = sys.maxsize, seed: int | str | None = None,
                 worker_seed: Any = None, deterministic: bool = True, max_urls: int = int(1e6),
                 empty_check: bool = True):
        self.urls = expand_urls(urls)[:max_urls]
        if not self.urls:
            raise ConfigError(f"the shard list {urls!r} is empty")
        self.nshards, self.seed = nshards, seed

    def iterate(self, ctx: Context) -> Iterator[dict[str, Any]]:
        rng = (ctx if self.seed is None else ctx.replace(seed=self.seed)).replace(shared=False).rng("resampled")
        for _ in range(self.nshards):
            yield {"url": self.urls[rng.randrange(len(self.urls))]}

    def __repr__(self) -> str:
        return f"ResampledShards({len(self.urls)} shards: {self.urls[0]!r}...)"


class MockDataset(Source):
    """``sample``, ``length`` times: a stand-in data source for testing a pipeline (webdataset's MockDataset).

    >>> list(MockDataset({"x": 1}, 2))
    [{'x': 1}, {'x': 1}]
    """

    def __init__(self, sample: Any, length: int):
        self.sample, self.length = sample, length

    def __len__(self) -> int:
        return self.length

    def iterate(self, ctx: Context) -> Iterator[Any]:
        for _ in range(self.length):
            yield self.sample
