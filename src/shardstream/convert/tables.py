"""Table sources: CSV and JSON Lines, and the rule that turns any table's row into a sample (:func:`row_sample`,
also for Parquet and Hugging Face Arrow files: :mod:`.arrow`).

Each row is one sample; columns become fields by :func:`~shardstream.convert.fields.column_field`. The key
is the ``key`` column where one is given (or a ``__key__`` column), else ``FILESTEM-ROWNUMBER``. In CSV and
JSON Lines, *path columns* (``paths=``; by default the columns whose names end in ``path``, ``file`` or
``filename``) name local files, relative to the table's directory: the field holds the file's bytes as they
are, named by the file's extension (``jpg``) when it is the table's one path column, else ``COLUMN.EXT``
(``image_path`` -> ``image.jpg``). A row whose file is missing is reported as skipped.

>>> import csv
>>> with open("photos.csv", "w", newline="") as f:
...     csv.writer(f).writerows([["id", "image_path", "label"], ["a", "photos.csv", "1"], ["b", "gone.jpg", "0"]])
>>> rows = list(CsvSource("photos.csv", key="id").samples())
>>> rows[0]["__key__"], sorted(rows[0]), rows[1]
('a', ['__key__', 'cls', 'csv', 'id.txt'], Skip(key='b', reason="column 'image_path': no file 'gone.jpg'"))
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from itertools import compress, repeat
from operator import itemgetter, methodcaller
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError
from ..io import open_url
from ..io.trust import urls_from_document
from ..io.urls import local_path
from ..process import Skip
from ..writer import SampleBatch
from .fields import EXTENSION, LABEL, column_field, column_values, external_path, field_names, safe_key
from .lines import jsonl_chunks

__all__ = ["CsvSource", "csv_chunks", "default_path_columns", "row_sample"]

Item = dict[str, Any] | Skip


def _stem(url: str) -> str:
    name = os.path.basename(url.rstrip("/"))
    for suffix in (".gz", ".parquet", ".arrow", ".csv", ".tsv", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suffix)
    return name or "row"


def default_path_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """The columns that name files by default: names ending in ``path``, ``file`` or ``filename``."""
    return tuple(c for c in columns if c.lower().endswith(("path", "file", "filename")))


def _path_field(column: str, value: Any, base: str, rename: Mapping[str, str] | None) -> tuple[str, bytes] | str:
    """The field of a path column (named as ``rename`` says, :func:`.fields.field_names`), or the reason it
    cannot be read."""
    if not isinstance(value, str) or not value:
        return f"column {column!r}: not a file path: {value!r}"
    path = value if os.path.isabs(value) else os.path.join(base, value)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return f"column {column!r}: no file {value!r}"
    ext = os.path.splitext(value)[1][1:].lower() or "bin"
    name = (rename or {}).get(column)
    if name is not None and name not in (EXTENSION, LABEL):
        return name, data
    if name == EXTENSION and ext != "bin":
        return ext, data
    stem = column
    for suffix in ("_filename", "_path", "_file", "filename", "path", "file"):
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    return f"{stem}.{ext}", data


def _shown(url: str) -> str:
    """``url`` for a message: a URL without its user info, query and fragment (where credentials and signatures
    go); a path as it is."""
    parts = urlsplit(url)
    if local_path(url) is not None or not parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.hostname or "", parts.path, "", ""))


def _external(column: str, path: str, base: str, document: str) -> bytes | str:
    """The bytes of the file an image/audio struct names instead of holding them (:func:`.fields.external_path`),
    or the reason they cannot be read. The path is a URL read out of the table ``document``: it goes through
    the library's one check of such URLs (:func:`~shardstream.io.trust.urls_from_document`: no command runs;
    secure mode refuses local files, when opened) and is opened as any input is; a relative path is taken from
    ``base``, the table's folder. Only a regular file is read (not a device, a FIFO or standard input)."""
    if path == "-":
        return f"column {column!r}: '-' (standard input) is not a file"
    url = urls_from_document([path], document=document)[0]
    local = local_path(url)
    if local is not None:
        url = local = local if os.path.isabs(local) else os.path.join(base, local)
        try:
            mode = os.stat(local).st_mode
        except OSError as e:
            return f"column {column!r}: cannot read the file {path!r}: {e.strerror or e}"
        if not stat.S_ISREG(mode):
            return f"column {column!r}: {path!r} is not a regular file"
    try:
        with open_url(url) as f:
            return f.read()
    except OSError as e:
        return f"column {column!r}: cannot read the file {_shown(path)!r}: {e.strerror or type(e).__name__}"


def row_sample(row: Mapping[str, Any], key: str, *, paths: Iterable[str] = (), base: str = ".",
               rename: Mapping[str, str] | None = None, document: str = "<table>") -> Item:
    """One row as a sample ``{"__key__": key, field: bytes...}``, or a :class:`Skip` saying what is wrong.
    ``rename`` is the table's field-name mapping (:func:`.fields.field_names`).

    An image/audio struct that names a file instead of holding its bytes (``load_dataset`` on local files) gets
    the file's bytes (:func:`_external`; ``document`` is the table, ``base`` its folder); a file that cannot be
    read skips the row, naming the column."""
    sample: dict[str, Any] = {"__key__": key}
    for column, value in row.items():
        if column == "__key__":
            continue
        got: tuple[str, bytes] | str | None
        if paths and column in paths:
            got = _path_field(column, value, base, rename)
            if isinstance(got, str):
                return Skip(key, got)
        else:
            path = external_path(value)
            if path is not None:
                data = _external(column, path, base, document)
                if isinstance(data, str):
                    return Skip(key, data)
                value = {"bytes": data, "path": path}
            got = column_field(column, value, rename=rename)
            if got is None:
                continue
        name, data = got
        if name in sample:
            return Skip(key, f"two columns give the field {name!r}; name one with fields={{COLUMN: FIELD}} "
                             "(--fields COLUMN=FIELD)")
        sample[name] = data
    if len(sample) == 1:
        return Skip(key, "the row has no values")
    return sample


def _key(row: Mapping[str, Any], key: str | None, stem: str, number: int) -> str:
    """The key column's value (or ``__key__``'s), else ``STEM-NUMBER`` (8 digits; no stem: the number alone)."""
    value = row.get(key) if key else row.get("__key__")
    if value is None or value == "":
        return safe_key(f"{stem}-{number:08d}" if stem else f"{number:08d}")
    return safe_key(value if value.__class__ is str else str(value))


def _keys(rows: list[dict[str, Any]], key: str | None, stem: str, first: int) -> list[str]:
    """:func:`_key` of each row (numbered from ``first``), with a shortcut for str keys that need no change."""
    values = list(map(methodcaller("get", key or "__key__"), rows))
    if set(map(type, values)) == {str} and "" not in values:
        joined = "".join(values)
        if "." not in joined and "/" not in joined and "\\" not in joined and "\0" not in joined:
            return values  # safe_key would return each as it is
    return [_key(row, key, stem, number) for number, row in enumerate(rows, first)]


def _batch(rows: list[dict[str, Any]], keys: list[str], rename: Mapping[str, str] | None,
           paths: Iterable[str] = ()) -> SampleBatch | None:
    """``rows`` as one :class:`SampleBatch` (the samples :func:`row_sample` makes of them), or None when the rows
    differ in their columns or in the fields their values give, or name files (then row by row)."""
    names = rows[0].keys()
    columns = [column for column in names if column != "__key__"]
    if not columns or not all(map(names.__eq__, map(dict.keys, rows))) or any(c in paths for c in columns):
        return None
    fields, values = [], []
    for column in columns:
        got = column_values(column, list(map(itemgetter(column), rows)), rename)
        if got is None:
            return None
        fields.append(got[0])
        values.append(got[1])
    if len(set(fields)) != len(fields):
        return None
    return SampleBatch(keys, tuple(fields), values)


def csv_chunks(path: str, rows_per_task: int, *, jsonl: bool = False) -> list[tuple[int, int, int]]:
    """Split a CSV file into ``(byte start, byte stop, first row number)`` ranges of about ``rows_per_task``
    records each, cut only between records (quoted fields may hold newlines: a record ends where the number
    of quote characters so far is even). JSON Lines (``jsonl=True``): one record per non-blank line
    (:func:`~shardstream.convert.lines.jsonl_chunks`, which needs no Python step per line)."""
    if jsonl:
        return jsonl_chunks(path, rows_per_task)
    chunks, quotes, rows, start, first = [], 0, 0, 0, 0
    with open(path, "rb") as f:
        header = f.readline()
        start = f.tell()
        while header.count(b'"') % 2:  # a header spanning lines
            more = f.readline()
            header += more
            start = f.tell()
            if not more:
                break
        offset = start
        for line in f:
            offset += len(line)
            quotes += line.count(b'"')
            if quotes % 2 == 0 and line.strip():
                rows += 1
                if rows - first >= rows_per_task:
                    chunks.append((start, offset, first))
                    start, first = offset, rows
    if rows > first or not chunks:
        chunks.append((start, offset, first))
    return chunks


def _json_objects(text: str) -> list[dict[str, Any]] | None:
    """The records of JSON Lines ``text`` when every non-blank line is one JSON object, parsed at once as one JSON
    array with no per-line Python (strings cannot span lines, so the array has as many items as lines exactly
    when each line is one object); None otherwise: :func:`_json_rows` then reads line by line. ``\\r\\n`` line
    ends are read too (JSON allows no raw ``\\r`` inside a string); a lone ``\\r`` ends a line only there."""
    text = text.replace("\r\n", "\n")
    if "\r" in text:
        return None
    lines = text.split("\n")
    stripped = list(map(str.strip, lines))
    if "" in stripped:
        lines = list(compress(lines, stripped))
        stripped = list(filter(None, stripped))
    if not all(map(str.startswith, stripped, repeat("{"))) or not all(map(str.endswith, stripped, repeat("}"))):
        return None
    try:
        rows = json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:
        return None
    return rows if len(rows) == len(lines) and set(map(type, rows)) <= {dict} else None


def _json_rows(url: str, first: int, lines: list[str]) -> Iterator[dict[str, Any]]:
    """The records of JSON Lines ``lines`` (blank lines left out) line by line, where :func:`_json_objects` could
    not read them at once: a bad line is named; a value that is not an object becomes ``{"json": value}``."""
    rows = []
    for number, line in enumerate(lines, first):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{url}: record {number}: not valid JSON: {e}") from e
    for row in rows:
        yield row if isinstance(row, dict) else {"json": row}


@dataclasses.dataclass(frozen=True)
class CsvSource:
    """Records of a CSV (or TSV: ``delimiter="\\t"``) or JSON Lines (``jsonl=True``) file; ``start``/``stop``
    are byte offsets cut between records (:func:`csv_chunks`), ``first`` the number of the first record."""

    url: str
    key: str | None = None
    paths: tuple[str, ...] | None = None
    rename: tuple[tuple[str, str], ...] = ()
    jsonl: bool = False
    delimiter: str = ","
    start: int = 0
    stop: int | None = None
    first: int = 0

    def describe(self) -> str:
        size = os.path.getsize(self.url) if os.path.exists(self.url) else -1
        return (f"{'jsonl' if self.jsonl else 'csv'} {self.url} size={size} [{self.start}:{self.stop}] "
                f"key={self.key} paths={self.paths} rename={self.rename} delimiter={self.delimiter!r}")

    def _rows(self) -> Iterator[dict[str, Any]]:
        header = None
        if not self.jsonl:
            with open(self.url, encoding="utf-8", newline="") as t:
                header = next(csv.reader(t, delimiter=self.delimiter), None)
        with open(self.url, "rb") as f:
            f.seek(self.start)
            data = f.read() if self.stop is None else f.read(self.stop - self.start)
        decoded = data.decode("utf-8")
        if self.jsonl:
            rows = _json_objects(decoded)
            if rows is not None:
                yield from rows
                return
        text = io.StringIO(decoded, newline=None if self.jsonl else "")
        if self.jsonl:
            yield from _json_rows(self.url, self.first, [line for line in text if line.strip()])
            return
        records = csv.reader(text, delimiter=self.delimiter)
        if self.start == 0:
            next(records, None)  # the header
        for values in records:
            if values:
                yield dict(zip(header or [], values, strict=False))

    def samples(self) -> Iterator[Item]:
        yield from self._items(self._rows(), None)

    def batches(self) -> Iterator[SampleBatch | Item]:
        """The records as one :class:`SampleBatch` where they allow (same columns, no path column...), else
        sample by sample."""
        rows = list(self._rows())
        if not rows:
            return
        paths = default_path_columns(rows[0]) if self.paths is None else self.paths
        keys = _keys(rows, self.key, _stem(self.url), self.first)
        batch = _batch(rows, keys, field_names(rows[0], paths, dict(self.rename)), paths)
        if batch is not None:
            yield batch
        else:
            yield from self._items(rows, keys)

    def _items(self, rows: Iterable[dict[str, Any]], keys: list[str] | None) -> Iterator[Item]:
        stem, base = _stem(self.url), os.path.dirname(os.path.abspath(self.url))
        fields = dict(self.rename)
        number = self.first
        known: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, str]]] = {}  # paths and names by columns
        for row in rows:
            columns = tuple(row)
            got = known.get(columns)
            if got is None:
                paths = default_path_columns(columns) if self.paths is None else self.paths
                got = known[columns] = paths, field_names(columns, paths, fields)
            named = _key(row, self.key, stem, number) if keys is None else keys[number - self.first]
            yield row_sample(row, named, paths=got[0], base=base, rename=got[1], document=self.url)
            number += 1
