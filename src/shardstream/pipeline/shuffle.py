"""Buffered shuffling, deterministic from (seed, epoch[, rank, worker]).

``shuffle(bufsize, initial)`` keeps a buffer of up to ``bufsize`` items and yields a random one of them for
each item it reads, once at least ``initial`` are buffered. Its random numbers come from the pipeline's
:class:`~shardstream.pipeline.core.Context`: the pipeline seed (or ``seed=``), the epoch, and, after the data
has been split between ranks and workers, the rank and worker. Before a splitter (shuffling the shard list)
every worker makes the same choices, so the split stays exact.

>>> order = list(shuffle(100, seed=3)(range(10)))
>>> sorted(order) == list(range(10)) and order == list(shuffle(100, seed=3)(range(10)))
True
>>> order != list(range(10))
True
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from .core import Context, stage
from .stateful import shuffle_cursor

__all__ = ["detshuffle", "shuffle"]


def _shuffle(source: Iterable[Any], bufsize: int = 1000, initial: int = 100, seed: int | str | None = None,
             rng: random.Random | None = None, handler: Any = None, *, ctx: Context) -> Iterator[Any]:
    """Shuffle with a buffer of ``bufsize`` items, starting once ``initial`` are buffered; ``bufsize < 2``
    passes items through. ``seed`` replaces the pipeline seed for this stage; ``rng`` (a ``random.Random``)
    replaces the derived generator altogether. ``handler`` is accepted for webdataset compatibility.

    >>> list(shuffle(0)(range(3)))
    [0, 1, 2]
    """
    if bufsize < 2:
        yield from source
        return
    if rng is None:
        rng = (ctx if seed is None else ctx.replace(seed=seed)).rng("shuffle")
    initial = max(1, min(initial, bufsize))
    buf: list[Any] = []
    it = iter(source)
    for item in it:
        buf.append(item)
        if len(buf) < bufsize:  # grow the buffer: take a second item for this one
            extra = next(it, _END)
            if extra is not _END:
                buf.append(extra)
        if len(buf) >= initial:
            yield _pick(buf, rng)
    while buf:
        yield _pick(buf, rng)


def _pick(buf: list[Any], rng: random.Random) -> Any:
    i = rng.randrange(len(buf))
    buf[i], buf[-1] = buf[-1], buf[i]
    return buf.pop()


_END = object()

shuffle = stage(_shuffle, context=True, state=shuffle_cursor)


def _detshuffle(source: Iterable[Any], bufsize: int = 1000, initial: int = 100, seed: int | str = 0,
                epoch: int = -1, *, ctx: Context) -> Iterator[Any]:
    """webdataset's ``detshuffle``: ``shuffle`` with an explicit seed (every shuffle here is deterministic);
    ``epoch >= 0`` replaces the pipeline's epoch.

    >>> list(detshuffle(10, seed=1)(range(5))) == list(detshuffle(10, seed=1)(range(5)))
    True
    """
    if epoch >= 0:
        ctx = ctx.replace(epoch=epoch)
    return _shuffle(source, bufsize, initial, seed=seed, ctx=ctx)


detshuffle = stage(_detshuffle, context=True, fluid=False, state=shuffle_cursor)
