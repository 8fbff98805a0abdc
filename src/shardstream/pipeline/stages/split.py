"""Splitting shards between ranks (nodes) and DataLoader workers, exactly.

``split_by_node`` keeps every ``world_size``-th item starting at this rank; ``split_by_worker`` does the
same with the DataLoader workers of this rank. Every item goes to exactly one (rank, worker). When one of
them would receive nothing (fewer shards than ranks x workers), :class:`~shardstream.errors.WorkerSplitError`
says so and names the fixes, instead of that worker silently yielding nothing (or a collective hanging).

Use them as stages: ``DataPipeline(SimpleShardList(urls), split_by_node, split_by_worker, ...)`` (they are
ready-made stages, like in webdataset), or ``WebDataset(urls, nodesplitter=..., workersplitter=...)``. They are
cursor classes over one base, :class:`_Split`, whose state is its counters (a shard list before a reader is
replayed).

>>> from shardstream.pipeline.context import Context
>>> from shardstream.runtime import Placement
>>> ctx = Context(placement=Placement(worker=1, num_workers=2))
>>> list(split_by_worker(range(5), ctx))
[1, 3]
>>> list(split_by_worker(range(1), ctx))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.WorkerSplitError: DataLoader worker 1 of 2 received no shard: there is only 1 shard for 2 workers...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ...errors import ConfigError, WorkerSplitError
from ...redact import redacting_logger
from ...resume.fields import refuse
from ..bases import Tally
from ..context import Context
from ..core import Stage, stage
from ..cursors import Counted, Cursor, PassCursor

__all__ = ["as_splitter", "check_empty", "deal", "single_node_only", "split_by_node", "split_by_worker"]

log = redacting_logger(__name__)
T = TypeVar("T")


def _nothing_for(index: int, count: int, what: str, total: int) -> WorkerSplitError:
    """The error of a rank or worker that received no item out of ``total``."""
    shards = f"{total} shard" + ("" if total == 1 else "s")
    is_are = "is only" if total == 1 else "are only"
    if what == "worker":
        fix = f"Use at most {total} worker" + ("" if total == 1 else "s") + f" (num_workers={total or 1})"
        who = f"DataLoader worker {index} of {count}"
    else:
        fix = f"Use at most {total} ranks"
        who = f"rank {index} of {count}"
    return WorkerSplitError(
        f"{who} received no shard: there {is_are} {shards} for {count} {what}s. {fix}, more shards, or "
        f"resampled=True (ResampledShards) so that every {what} draws its own shards"
    )


def _uneven(rank: int, ranks: int, total: int) -> None:
    """Say that the ranks got different numbers of shards (then of batches: a DDP job waits at the end)."""
    log.warning(
        "rank %d of %d: %d shards do not split evenly between %d ranks, so the ranks train on different numbers of "
        "batches and a DDP job waits forever for the missing ones at the end of the epoch; use a shard count that "
        "divides by the ranks, .with_epoch(n) (each rank's epoch n items), or shardstream.training.TrainingLoader "
        "(exact epochs, equal batches)", rank, ranks, total, ranks)


def _nothing_at_all(total: int) -> WorkerSplitError:
    """``check_empty``'s error."""
    return WorkerSplitError(
        "no samples at all came out of the shards given to this rank/worker: the shards are empty, or every "
        "sample was skipped by the handler (check the shards and the handler's warnings); pass "
        "empty_check=False to allow an empty stream"
    )


_END = object()


def deal(items: Sequence[T], index: int, count: int) -> list[T]:
    """The items that part ``index`` of ``count`` receives: every ``count``-th from ``index`` (the splitters' rule,
    for code that works a split out ahead, see :mod:`~shardstream.pipeline.shares`).

    >>> deal("abcde", 1, 2)
    ['b', 'd']
    """
    return list(items[index::count])


class _Split(Tally, Counted):
    """Every ``count``-th item from ``index`` (``count == 1``: all of them); at the end, ``on_empty(total)`` makes
    the error raised when this rank or worker got nothing. Its counters join its input's position. ``next()`` is
    the :data:`~shardstream.pipeline.bases.Tally` base's (no interpreter frame per item), which calls :meth:`_ended`
    when the input ends."""

    fields = ("total", "mine")

    def __init__(self, upstream: Cursor, index: int, count: int, on_empty: Callable[[int], Exception] | None,
                 name: str, on_uneven: Callable[[int], None] | None = None):
        super().__init__(upstream, name)
        self.index, self.count, self.on_empty, self.total, self.mine = index, count, on_empty, 0, 0
        self.on_uneven = on_uneven

    # next(): keeps item number total (from 0) when total % count == index, the rule of deal()
    __next__ = Tally.__next__

    def _ended(self) -> None:
        """The input ended: the error of a rank or worker that got nothing; the uneven split's warning."""
        if self.mine == 0 and self.on_empty is not None:
            raise self.on_empty(self.total)
        if self.on_uneven is not None and self.total % self.count:
            self.on_uneven(self.total)
            self.on_uneven = None

    def take(self, n: int) -> list[Any]:
        """At most ``n`` next items (several when this keeps all and the input can give several, see
        ``ReaderCursor.take``); none at the end."""
        take = getattr(self.upstream, "take", None)
        if self.count != 1 or take is None:
            item = next(self, _END)
            return [] if item is _END else [item]
        items = take(n)
        if not items:
            if self.mine == 0 and self.on_empty is not None:
                raise self.on_empty(self.total)
            return items
        self.total += len(items)
        self.mine += len(items)
        return items

    def take_columns(self, n: int, want: Any) -> tuple[Any, list[Any]]:
        """:meth:`take`, or rows as columns where this keeps all and the input gives them (see
        ``ReaderCursor.take_columns``): ``(columns, [])`` or ``(None, items)``."""
        take_columns = getattr(self.upstream, "take_columns", None)
        if self.count != 1 or take_columns is None:
            return None, self.take(n)
        columns, items = take_columns(n, want)
        got = len(items) if columns is None else len(columns[0])
        if not got and self.mine == 0 and self.on_empty is not None:
            raise self.on_empty(self.total)
        self.total += got
        self.mine += got
        return columns, items

    def give_back(self, n: int) -> None:
        """Undo the taking of the last ``n`` items of the latest :meth:`take`."""
        if n:
            self.upstream.give_back(n)  # a cursor with take() has give_back()
            self.total -= n
            self.mine -= n

    def mark(self) -> Any:
        return self.upstream.mark(), (self.total, self.mine)

    def _check(self, values: dict[str, Any]) -> None:
        if values["mine"] > values["total"]:
            raise refuse(self.name, "mine", f"is {values['mine']}, more than the {values['total']} items "
                                                       "read ('total')")


class _Deal(_Split):
    """A splitter between ranks or workers: with one part there is nothing to split, and the items pass on."""

    def simplest(self) -> Cursor:
        return PassCursor(self.upstream, iter, self.name) if self.count == 1 else self


class _SplitByNode(_Deal):
    """Keep this rank's share of the items (rank and world size from ``torch.distributed`` when initialised,
    else ``RANK``/``WORLD_SIZE``). ``group`` is accepted for webdataset compatibility. A rank that gets no item
    raises :class:`~shardstream.errors.WorkerSplitError` unless ``empty_check=False``. Items that do not split
    evenly between the ranks are logged as a warning at the end, unless ``warn_uneven=False`` (WebDataset, which
    checks the split before it starts: :class:`~shardstream.errors.UnevenSplitError`)."""

    def __init__(self, upstream: Cursor, group: Any = None, empty_check: bool = True, *, warn_uneven: bool = True,
                 ctx: Context, name: str):
        index, count = ctx.rank, ctx.world_size
        uneven = (lambda total: _uneven(index, count, total)) if warn_uneven else None
        on_empty = (lambda total: _nothing_for(index, count, "rank", total)) if empty_check else None
        super().__init__(upstream, index, count, on_empty, name, uneven)


class _SplitByWorker(_Deal):
    """Keep this DataLoader worker's share of the items (all of them outside a DataLoader worker). A worker that
    gets no item raises :class:`~shardstream.errors.WorkerSplitError` unless ``empty_check=False`` (then it
    yields nothing, as webdataset's idle workers do)."""

    def __init__(self, upstream: Cursor, empty_check: bool = True, *, ctx: Context, name: str):
        index, count = ctx.worker, ctx.num_workers
        on_empty = (lambda total: _nothing_for(index, count, "worker", total)) if empty_check else None
        super().__init__(upstream, index, count, on_empty, name)


class _SingleNodeOnly(PassCursor):
    """Pass the items through; refuse to run with more than one rank (webdataset's default nodesplitter)."""

    def __init__(self, upstream: Cursor, group: Any = None, *, ctx: Context, name: str):
        if ctx.world_size > 1:
            raise ConfigError(
                f"this pipeline runs on {ctx.world_size} ranks but does not split its shards between them: pass "
                f"nodesplitter=split_by_node (or add split_by_node to the pipeline), or use resampled=True"
            )
        super().__init__(upstream, iter, name)


class _CheckEmpty(_Split):
    """Raise :class:`~shardstream.errors.WorkerSplitError` at the end if nothing came through (WebDataset's
    ``empty_check``): all of this worker's shards were empty, or all their samples were skipped."""

    def __init__(self, upstream: Cursor, *, name: str):
        super().__init__(upstream, 0, 1, _nothing_at_all, name)


def _apply_splitter(source: Iterable[Any], fn: Callable[[Iterable[Any]], Iterator[Any]]) -> Iterator[Any]:
    return fn(source)


_node = stage(_SplitByNode, splits=True, fluid=False, deals_to="ranks")
_worker = stage(_SplitByWorker, splits=True, fluid=False, deals_to="workers")
_single = stage(_SingleNodeOnly, splits=True, fluid=False, deals_to="one rank")
_custom = stage(_apply_splitter, name="custom_splitter", splits=True, fluid=False)
check_empty = stage(_CheckEmpty, fluid=False, keeps_count=True)

#: ready-made stages (use them without calling: ``DataPipeline(..., split_by_worker, ...)``)
split_by_node: Stage = _node()
split_by_worker: Stage = _worker()
single_node_only: Stage = _single()


def as_splitter(fn: Callable[[Iterable[Any]], Iterator[Any]] | None) -> Stage | None:
    """Mark a user's ``iterator -> iterator`` splitter as one, so that randomness before it (the shard
    shuffle) is shared by every rank and worker. shardstream's own splitters are returned unchanged."""
    if fn is None or (isinstance(fn, Stage) and fn.splits):
        return fn
    return _custom(fn)
