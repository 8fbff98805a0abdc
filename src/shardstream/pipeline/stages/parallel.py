"""Throughput stages: a thread-pool map, and shards read straight into column batches.

``parallel_map(f, workers=2)`` runs ``f`` on a pool of threads, in input order, with at most ``inflight`` items
taken from upstream and not yet yielded. It pays off where ``f`` releases the GIL: Pillow decoding and resizing
JPEGs, numpy, zlib, I/O. Inside DataLoader workers each worker gets its own pool.

``tarfile_to_columns(batch_size)`` reads shards like ``tarfile_to_samples()`` followed by batching into
columns ``{field: [value, ...]}`` (:class:`shardstream.samples.ColumnBatches`), without building per-sample
dicts in Python: the fast path for batches of small fields, e.g. with ``map(Decoder().decode_columns)``.

Neither stage is resumable: ``state_dict()`` of a pipeline holding one raises
:class:`~shardstream.errors.ConfigError` naming it (``parallel_map`` holds up to ``inflight`` items in its pool;
``tarfile_to_columns`` a partial batch). Where a checkpoint is needed, use ``map`` and ``tarfile_to_samples``.

>>> import shardstream as wds
>>> with wds.TarWriter("cols.tar") as sink:
...     for i in range(5):
...         _ = sink.write({"__key__": f"{i}", "txt": f"t{i}", "cls": i})
>>> from shardstream.codecs import Decoder
>>> pipeline = wds.DataPipeline(
...     wds.SimpleShardList("cols.tar"), tarfile_to_columns(2), parallel_map(Decoder().decode_columns)
... )
>>> [batch["cls"] for batch in pipeline]
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...errors import ConfigError
from ...reading import ColumnBatches
from ..core import stage
from ..error_handlers import annotate, reraise_exception
from .reading import ShardReading

__all__ = ["parallel_map", "tarfile_to_columns"]

Handler = Callable[[BaseException], bool]


def _parallel_map(
    source: Iterable[Any],
    f: Callable[[Any], Any],
    workers: int = 2,
    inflight: int | None = None,
    handler: Handler = reraise_exception,
) -> Iterator[Any]:
    """``map(f)`` on ``workers`` threads; results in input order, at most ``inflight`` (default ``2 * workers``)
    items in flight. A failing item goes to ``handler`` (True: skip it; False: stop), as in ``map``.

    >>> list(parallel_map(lambda x: x * x, workers=3)(range(6)))
    [0, 1, 4, 9, 16, 25]
    """
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"parallel_map: workers must be a positive integer, got {workers!r}")
    limit = 2 * workers if inflight is None else inflight
    if not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"parallel_map: inflight must be a positive integer, got {inflight!r}")
    import concurrent.futures  # noqa: PLC0415 - loads with the first parallel map, not with shardstream

    pending: collections.deque[tuple[Any, concurrent.futures.Future[Any]]] = collections.deque()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shardstream-map")
    try:
        items = iter(source)
        exhausted = False
        while True:
            while not exhausted and len(pending) < limit:
                item = next(items, _END)
                if item is _END:
                    exhausted = True
                else:
                    pending.append((item, pool.submit(f, item)))
            if not pending:
                return
            item, future = pending.popleft()
            try:
                result = future.result()
            except Exception as exn:
                annotate(exn, item)
                if handler(exn):
                    continue
                return
            yield result
    finally:
        for _, future in pending:
            future.cancel()
        pool.shutdown(wait=True)


_END = object()
parallel_map = stage(_parallel_map, name="parallel_map")


def _tarfile_to_columns(
    source: Iterable[Any],
    batch_size: int,
    handler: Handler = reraise_exception,
    partial: bool = True,
    keys: Any = None,
    opener: Callable[[str], Any] | None = None,
    decode: Any = None,
) -> Iterator[dict[str, list[Any]]]:
    """Read each shard of a shard list into batches of ``batch_size`` samples as columns
    ``{"__key__": [...], "__url__": [...], field: [bytes, ...]}``; batches run across shards.

    The samples and the errors are those of ``tarfile_to_samples(handler=..., keys=...)``. A sample whose fields
    differ from its batch's ends the batch early. ``partial=False`` drops the last, short batch.

    ``decode`` (a :class:`~shardstream.codecs.Decoder`): the batches come decoded, as ``map(decode.decode_columns)``
    after this stage gives them, faster: text and integer fields are converted as they are read (see
    :class:`~shardstream.reading.ColumnBatches`). A decoding error goes to ``handler`` as the shard's errors do.
    """
    reading = ShardReading(handler)
    batches = ColumnBatches(batch_size, rule=keys, handler=reading.on_sample_error, decoder=decode)
    yield from reading.run(source, batches.read, opener)
    last = batches.flush()
    if last is not None and partial:
        yield last


tarfile_to_columns = stage(_tarfile_to_columns, name="tarfile_to_columns", fluid=False)
