"""Arrow-based sources: Parquet files and the Arrow files of Hugging Face datasets, read by record batches.

Rows become samples by the rule of :mod:`.tables` (:func:`~shardstream.convert.tables.row_sample`). A file that
pyarrow cannot read (truncated, garbage, a corrupt row group) raises
:class:`~shardstream.errors.RecordFormatError` naming the file and, while reading, the row group (Parquet) or
record batch (Arrow) and its first row, whether at planning (:func:`parquet_rows`, :func:`arrow_rows`) or in a
task.

>>> _ = open("broken.parquet", "wb").write(b"PAR1 not really")
>>> parquet_rows("broken.parquet")
Traceback (most recent call last):
...
shardstream.errors.RecordFormatError: not a Parquet file: ... (shard 'broken.parquet'); the file is corrupt or truncated: re-download or re-export it
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import MissingDependencyError, RecordFormatError, ShardstreamError
from ..io import open_url
from ..io.urls import local_path
from ..writer import SampleBatch
from .fields import field_names
from .tables import Item, _batch, _keys, _stem, row_sample

__all__ = ["ArrowSource", "ParquetSource", "arrow_rows", "parquet_rows"]


def _pyarrow() -> Any:
    try:
        import pyarrow  # noqa: PLC0415 - optional: shardstream[parquet]
        import pyarrow.parquet  # noqa: PLC0415 - optional: shardstream[parquet]
    except ImportError:
        raise MissingDependencyError("converting Parquet and Arrow", "parquet", "pyarrow") from None
    return pyarrow


class _RecordBatches:
    """What the Parquet and Arrow sources share: samples and batches from one ``_items(batched)`` walk."""

    def _items(self, batched: bool) -> Iterator[SampleBatch | Item]:
        raise NotImplementedError

    def samples(self) -> Iterator[Item]:
        yield from self._items(False)  # type: ignore[misc]  # no SampleBatch without batched

    def batches(self) -> Iterator[SampleBatch | Item]:
        """The rows as :class:`SampleBatch` columns, one per record batch where its rows allow."""
        yield from self._items(True)


@dataclasses.dataclass(frozen=True)
class ParquetSource(_RecordBatches):
    """Rows ``start`` to ``stop`` of a Parquet file (any URL the library reads)."""

    url: str
    start: int = 0
    stop: int | None = None
    key: str | None = None
    rename: tuple[tuple[str, str], ...] = ()
    batch_rows: int = 1024

    def describe(self) -> str:
        return f"parquet {self.url} [{self.start}:{self.stop}] key={self.key} rename={self.rename}"

    def _items(self, batched: bool) -> Iterator[SampleBatch | Item]:
        pa = _pyarrow()
        stream = open_url(self.url)
        try:
            with _arrow_errors(self.url, "not a Parquet file"):
                reader = pa.parquet.ParquetFile(stream)
                groups = [reader.metadata.row_group(i).num_rows for i in range(reader.num_row_groups)]
            batches = _checked(reader.iter_batches(batch_size=self.batch_rows), self.url, groups, self.batch_rows)
            yield from _table_rows(batches, self.url, self.start, self.stop, self.key, dict(self.rename),
                                   batched=batched)  # fmt: skip
        finally:
            stream.close()


@contextlib.contextmanager
def _arrow_errors(url: str, problem: str) -> Iterator[None]:
    """pyarrow's errors (``ArrowException``, and the plain ``OSError`` it raises for corrupt data) as a
    :class:`~shardstream.errors.RecordFormatError` naming ``url``: ``problem: pyarrow's message``. Errors of the
    library (an :class:`~shardstream.errors.OpenError` of the stream under pyarrow) pass as they are."""
    pa = _pyarrow()
    try:
        yield
    except (pa.ArrowException, OSError) as e:
        if isinstance(e, ShardstreamError):
            raise
        raise RecordFormatError(f"{problem}: {e}", url=url) from e


def _checked(batches: Iterable[Any], url: str, groups: list[int] | None = None, batch_rows: int = 0) -> Iterator[Any]:
    """The record batches of ``batches``, a failure to read one named by :func:`_arrow_errors` with where it is:
    a Parquet file's row groups (``groups``: the rows of each, from the footer; a batch of up to ``batch_rows``
    rows may span several) and rows, else the number of the record batch (an Arrow file) and its first row."""
    ends = list(itertools.accumulate(groups)) if groups is not None else []
    it, rows, number = iter(batches), 0, 0
    while True:
        if groups is None:
            where = f"record batch {number} (rows from {rows:,})"
        else:
            last = min(rows + batch_rows, ends[-1] if ends else 0) - 1
            first_group, last_group = bisect.bisect_right(ends, rows), bisect.bisect_right(ends, max(last, rows))
            span = f" {first_group}" if last_group <= first_group else f"s {first_group} to {last_group}"
            where = f"row group{span} (rows from {rows:,})"
        with _arrow_errors(url, f"cannot read {where}"):
            batch = next(it, None)
        if batch is None:
            return
        yield batch
        rows += batch.num_rows
        number += 1


def parquet_rows(url: str) -> int:
    """The number of rows of a local Parquet file, from its footer; a file that is not Parquet (truncated,
    garbage) raises :class:`~shardstream.errors.RecordFormatError` naming it."""
    pa = _pyarrow()
    with _arrow_errors(url, "not a Parquet file"):
        return int(pa.parquet.ParquetFile(url).metadata.num_rows)


def arrow_rows(path: str) -> int:
    """The number of rows of a local Arrow file (the IPC stream format, else the file format); one that is not
    Arrow raises :class:`~shardstream.errors.RecordFormatError` naming it."""
    pa = _pyarrow()
    import pyarrow.ipc  # noqa: PLC0415 - optional: shardstream[parquet]

    with pa.memory_map(path) as stream, _arrow_errors(path, "not an Arrow file"):
        try:
            return sum(batch.num_rows for batch in pyarrow.ipc.open_stream(stream))
        except pa.ArrowInvalid:
            stream.seek(0)
            return int(pyarrow.ipc.open_file(stream).count_rows())


def _table_rows(batches: Iterable[Any], url: str, start: int, stop: int | None, key: str | None,
                rename: Mapping[str, str], first: int | None = None, *,
                batched: bool = False) -> Iterator[SampleBatch | Item]:
    """Rows ``start:stop`` as samples (``batched``: a :class:`SampleBatch` per record batch where it can be);
    keys ``FILESTEM-ROW``, or ``first + ROW`` (8 digits) when ``first`` is given (a dataset of several files
    numbered as one). Fields are named by :func:`.fields.field_names` from the schema (``rename``: the user's
    names): binary columns and image/audio structs are the media columns."""
    stem, number = _stem(url), 0
    names: dict[str, str] | None = None
    local = local_path(url)
    base = os.path.dirname(os.path.abspath(local)) if local is not None else posixpath.dirname(url)
    for batch in batches:
        if stop is not None and number >= stop:
            return
        if number + batch.num_rows <= start:
            number += batch.num_rows
            continue
        if names is None:
            names = field_names(batch.schema.names, _media_columns(batch.schema), rename)
        rows = batch.to_pylist()
        lo, hi = max(start - number, 0), len(rows) if stop is None else min(stop - number, len(rows))
        rows = rows[lo:hi] if lo or hi < len(rows) else rows
        named = _keys(rows, key, stem, number + lo) if first is None else _keys(rows, key, "", first + number + lo)
        number += batch.num_rows
        whole = _batch(rows, named, names) if batched and rows else None
        if whole is not None:
            yield whole
            continue
        for row, name in zip(rows, named, strict=True):
            yield row_sample(row, name, rename=names, base=base, document=url)


def _media_columns(schema: Any) -> list[str]:
    """The columns of an Arrow ``schema`` that hold files: binary ones, and image/audio structs (a ``bytes``
    field, as Hugging Face's ``Image()`` and ``Audio()`` store them)."""
    types = _pyarrow().types
    return [f.name for f in schema if types.is_binary(f.type) or types.is_large_binary(f.type)
            or types.is_fixed_size_binary(f.type) or (types.is_struct(f.type) and f.type.get_field_index("bytes") >= 0)]


@dataclasses.dataclass(frozen=True)
class ArrowSource(_RecordBatches):
    """An Arrow file of a Hugging Face dataset saved with ``save_to_disk`` (or a dataset's cache file): the
    Arrow IPC stream format. Image and audio columns keep their encoded bytes."""

    url: str
    key: str | None = None
    rename: tuple[tuple[str, str], ...] = ()
    first: int = 0

    def describe(self) -> str:
        size = os.path.getsize(self.url) if os.path.exists(self.url) else -1
        return f"arrow {self.url} size={size} key={self.key} rename={self.rename} first={self.first}"

    def _items(self, batched: bool) -> Iterator[SampleBatch | Item]:
        pa = _pyarrow()
        import pyarrow.ipc  # noqa: PLC0415 - optional: shardstream[parquet]

        with pa.memory_map(self.url) if os.path.exists(self.url) else open_url(self.url) as stream:
            with _arrow_errors(self.url, "not an Arrow file"):
                try:
                    reader = pyarrow.ipc.open_stream(stream)
                except pa.ArrowInvalid:
                    stream.seek(0)
                    reader = pyarrow.ipc.open_file(stream)  # the Arrow file format, with a footer
                    batches: Iterable[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
                else:
                    batches = reader
            yield from _table_rows(_checked(batches, self.url), self.url, 0, None, self.key,
                                   dict(self.rename), self.first, batched=batched)  # fmt: skip
