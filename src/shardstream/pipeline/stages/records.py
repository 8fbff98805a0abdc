"""Stream files as samples: ``msgpack_to_samples``, ``cbors_to_samples``, ``jsonl_to_samples``.

The counterparts of ``tarfile_to_samples`` for stream files (see :mod:`shardstream.streams`): each reads the
files of a shard list and yields their records, in order, as they were written. They are pipeline stages
(``DataPipeline(SimpleShardList("a.cbors"), cbors_to_samples())``) that resume mid-file like the tar reader (the
position is the file and the number of records read from it), and take the same ``handler``.
``records_to_samples(format=None)`` reads any of the three, each file by its ending.

>>> from shardstream.streams import RecordWriter
>>> from shardstream.pipeline import DataPipeline, SimpleShardList
>>> with RecordWriter("test.cbors") as w:
...     for i in range(5):
...         w.write((i, str(i)))
>>> list(DataPipeline(SimpleShardList("test.cbors"), cbors_to_samples()))[:2]
[[0, '0'], [1, '1']]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...streams import format_of, iter_records
from ..core import stage
from ..cursors import Cursor
from ..error_handlers import reraise_exception
from .reading import ReaderCursor, ShardReading, url_of

__all__ = ["cbors_to_samples", "jsonl_to_samples", "msgpack_to_samples", "records_to_samples"]

Handler = Callable[[BaseException], bool]


def _records(source: Iterable[Any], format: str | None = None, handler: Handler = reraise_exception,
             opener: Callable[[str], Any] | None = None) -> Iterator[Any]:
    """Read each stream file of a shard list and yield its records (``format``: ``"msgpack"``, ``"cbors"``,
    ``"jsonl"``, or None: each file's ending says)."""
    reading = ShardReading(handler)

    def read(stream: Any, url: str) -> Iterator[Any]:
        return iter_records(stream, format or format_of(url), url=url)

    yield from reading.run(source, read, opener)


class RecordCursor(ReaderCursor):
    """:class:`~shardstream.pipeline.stages.reading.ReaderCursor` over stream files: the same position (the file and
    the records read from it) and restore (reopen, skip those records)."""

    def __init__(self, upstream: Cursor, format: str | None = None, handler: Handler = reraise_exception,
                 opener: Callable[[str], Any] | None = None, *, name: str):
        """The arguments of :func:`records_to_samples` (``name`` is given by the pipeline)."""
        self._begin(upstream, handler, name)
        self.format, self.opener = format, opener

    def _open(self, item: Any) -> None:
        watched, stop = self._watched()
        self._close()
        records = _records(self._next.one_shard(item), self.format, watched, self.opener)
        # ReaderCursor serves chunks (lists of consecutive samples): here, one record a chunk
        self._samples, self._stop, self._url, self._count = ([r] for r in records), stop, url_of(item), 0


records_to_samples = stage(_records, name="records_to_samples", fluid=False, state=RecordCursor, reads_shards=True)


class _OneFormat(RecordCursor):
    """:class:`RecordCursor` of the files of one format (``fixed``), for ``msgpack_to_samples``..."""

    fixed: str

    def __init__(self, upstream: Cursor, handler: Handler = reraise_exception,
                 opener: Callable[[str], Any] | None = None, *, name: str):
        super().__init__(upstream, self.fixed, handler, opener, name=name)


class _Msgpack(_OneFormat):
    fixed = "msgpack"


class _Cbors(_OneFormat):
    fixed = "cbors"


class _Jsonl(_OneFormat):
    fixed = "jsonl"


def _fixed(cursor: type[_OneFormat]) -> Any:
    fmt = cursor.fixed

    def read(source: Iterable[Any], handler: Handler = reraise_exception,
             opener: Callable[[str], Any] | None = None) -> Iterator[Any]:
        return _records(source, fmt, handler, opener)

    read.__doc__ = f"Read each {fmt} stream file of a shard list and yield its records (see the module docstring)."
    return stage(read, name=f"{fmt}_to_samples", fluid=False, state=cursor, reads_shards=True)


msgpack_to_samples = _fixed(_Msgpack)
cbors_to_samples = _fixed(_Cbors)
jsonl_to_samples = _fixed(_Jsonl)
