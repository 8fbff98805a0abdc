"""Convert datasets from the formats users already have into WebDataset shards, in parallel (and shards back to
Parquet), on the engines of :mod:`shardstream.process`: resumable, exactly once, indexed.

Sources (``kind``, detected from ``src`` when ``"auto"``):

- ``"hf"``: a Hugging Face dataset saved with ``save_to_disk`` (a folder with ``state.json``; a
  ``DatasetDict`` folder needs ``split=``), or a ``datasets.Dataset`` object (e.g. from ``load_dataset`` on
  local files): its Arrow files; image and audio columns keep their encoded bytes;
- ``"parquet"``: ``.parquet`` files (or a folder of them); binary columns keep their bytes;
- ``"tfrecord"``: ``tf.train.Example`` TFRecord files, gzip-compressed or not, read without TensorFlow;
- ``"csv"`` / ``"jsonl"``: one sample per record; path columns name local files whose bytes become fields;
- ``"imagefolder"``: ``ROOT/<class>/<file>``, with a ``cls`` field;
- ``"shards"``: WebDataset shards (re-sharding), or to Parquet with ``to="parquet"``.

Columns become fields by one rule (:mod:`.fields`), so that ``.to_tuple("jpg", "cls")`` reads the output: the
one column of files or image/audio bytes is named by their extension (``jpg``, original bytes), the one integer
label column (``label``, ``class``, ``target``...) is ``cls``, other columns keep their names (``caption`` ->
``caption.txt``); ``fields={"image": "img.jpg"}`` picks other names. Keys come from
``key=`` (a column), else a ``__key__`` column, else the row's position. What cannot be converted (a missing
file, a record that is not an Example, an empty row) is listed in ``result.skipped``, never dropped silently.

>>> import pyarrow as pa, pyarrow.parquet as pq
>>> table = pa.table({"image": [b"\\xff\\xd8\\xff\\xe0" + bytes([i]) for i in range(5)], "label": list(range(5))})
>>> pq.write_table(table, "small.parquet")
>>> result = convert("small.parquet", "small-shards", engine="inline")
>>> result.samples, result.urls
(5, ['small-shards/part-000000-000.tar'])
>>> import shardstream as wds
>>> sorted(next(iter(wds.WebDataset(result.urls))))
['__key__', '__local_path__', '__url__', 'cls', 'jpg']
>>> next(iter(wds.WebDataset(result.urls).to_tuple("jpg", "cls")))[1]
b'0'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..io.urls import expand_inputs
from ..process import JobResult, ShardSource, TarOutput, Task, TaskSource
from ..process.engines import Engine
from ..process.job import EngineSession, run_in_session
from ..redact import redacting_logger
from .arrow import ArrowSource, ParquetSource, arrow_rows, parquet_rows
from .fields import column_field, safe_key, sniff_extension
from .folders import ImageFolderSource, Mapper, list_imagefolder
from .lines import chunks_from_marks, jsonl_chunks, record_marks
from .tables import CsvSource, csv_chunks
from .tfrecord import TFRecordSource, parse_example
from .to_parquet import ParquetOutput

log = redacting_logger(__name__)

__all__ = [
    "ArrowSource",
    "CsvSource",
    "ImageFolderSource",
    "KINDS",
    "ParquetOutput",
    "ParquetSource",
    "TFRecordSource",
    "column_field",
    "convert",
    "detect",
    "parse_example",
    "plan",
    "safe_key",
    "sniff_extension",
]

KINDS = ("hf", "parquet", "tfrecord", "csv", "tsv", "jsonl", "imagefolder", "shards")
_SUFFIXES = {
    ".parquet": "parquet", ".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".tfrec": "tfrecord",
    ".tfrecord.gz": "tfrecord", ".tfrecords.gz": "tfrecord", ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl",
    ".ndjson": "jsonl", ".tar": "shards", ".tar.gz": "shards", ".tgz": "shards", ".tar.zst": "shards",
    ".arrow": "hf",
}  # fmt: skip
#: without ``per_task``, an input is cut into about TASKS tasks (enough to keep every worker of a small cluster busy
#: to the end), of ROWS rows (CSV, JSON Lines, Parquet) or BYTES bytes of files (ImageFolder) within these bounds;
#: the cut depends only on the input, so output names stay the same whatever the engine
TASKS = 32
ROWS = (1000, 100_000)
BYTES = (16 << 20, 256 << 20)


def _per_task(total: int, bounds: tuple[int, int]) -> int:
    return min(max(total // TASKS, bounds[0]), bounds[1])


def _rows_per_task(total: int) -> int:
    """Rows per task for ``total`` rows: a multiple of ``ROWS[0]`` (JSON Lines is cut at the marks taken every
    ``ROWS[0]`` records while counting them: one pass over the file)."""
    return _per_task(total, ROWS) // ROWS[0] * ROWS[0]


def _lines(paths: list[str]) -> int:
    count = 0
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                count += int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == 10))  # bytes.count: 4x slower
    return count


def _counts(total: int, per_task: int, unit: int, tail: bool) -> list[int]:
    """The sizes of the tasks cut from ``total`` rows (or bytes), but for the last one (what is left): ``per_task``
    each; with ``tail``, the last ``2 * per_task`` go in tasks of half that (multiples of ``unit``), so that the
    workers run out of tasks nearly together (the tail a worker waits for is half as long)."""
    counts, left = [], total
    while left > (2 * per_task if tail else per_task - 1):
        counts.append(per_task)
        left -= per_task
    half = max(unit, per_task // 2 // unit * unit)
    while tail and left > half:
        counts.append(half)
        left -= half
    return counts


def _jsonl_chunks(files: list[str], per_task: int | None) -> list[list[tuple[int, int, int]]]:
    """The ranges of each JSON Lines file (:func:`.lines.jsonl_chunks`), the files read once; without
    ``per_task``, the last file ends in half tasks (see :func:`_counts`)."""
    if per_task:
        return [jsonl_chunks(url, per_task) for url in files]
    scans = [record_marks(url, ROWS[0]) for url in files]
    rows = _rows_per_task(sum(scan[1] for scan in scans))
    return [chunks_from_marks(*scan, ROWS[0], _counts(scan[1], rows, ROWS[0], n == len(scans) - 1))
            for n, scan in enumerate(scans)]  # fmt: skip


def _files(src: str | list[str]) -> list[str]:
    """Files named by ``src``: brace patterns expanded and local globs matched (the rule of :mod:`shardstream.io.urls`)."""
    return expand_inputs([src] if isinstance(src, str) else [os.fspath(item) for item in src], globs=True)


def _by_suffix(path: str) -> str | None:
    lowered = path.lower()
    return next((kind for suffix, kind in sorted(_SUFFIXES.items(), key=lambda kv: -len(kv[0]))
                 if lowered.endswith(suffix)), None)  # fmt: skip


def detect(src: Any) -> str:
    """The kind of ``src`` (one of :data:`KINDS`), from a dataset object, a folder's contents or file suffixes.

    >>> detect("train-{000000..000009}.tar"), detect(["a.tfrecord.gz"]), detect("rows.csv")
    ('shards', 'tfrecord', 'csv')
    """
    if hasattr(src, "cache_files"):
        return "hf"
    if isinstance(src, str) and os.path.isdir(src):
        names = os.listdir(src)
        if {"state.json", "dataset_dict.json", "dataset_info.json"} & set(names):
            return "hf"
        kinds = {kind for kind in (_by_suffix(n) for n in names if not n.startswith(".")) if kind is not None}
        if len(kinds) == 1:
            return kinds.pop()
        if any(os.path.isdir(os.path.join(src, n)) for n in names if not n.startswith(".")):
            return "imagefolder"
        raise ConfigError(f"cannot tell what {src!r} holds ({sorted(kinds) or 'no known files'}); pass kind=")
    items = [src] if isinstance(src, str) else list(src)
    found = {_by_suffix(item) for item in items}
    kind = found.pop() if len(found) == 1 else None
    if kind is not None:
        return kind
    raise ConfigError(f"cannot tell the format of {src!r} from its name; pass kind= (one of {', '.join(KINDS)})")


def _folder_files(src: str | list[str], suffixes: tuple[str, ...]) -> list[str]:
    if isinstance(src, str) and os.path.isdir(src):
        return sorted(os.path.join(src, n) for n in os.listdir(src) if n.lower().endswith(suffixes))
    return _files(src)


def _hf_files(src: Any, split: str | None) -> list[str]:
    if hasattr(src, "cache_files"):
        if getattr(src, "_indices", None) is not None:
            raise ConfigError("this Dataset has an indices mapping (select/shuffle/filter): call "
                              "ds.flatten_indices() first, or save_to_disk() it")
        return [f["filename"] for f in src.cache_files]
    if os.path.exists(os.path.join(src, "dataset_dict.json")):
        with open(os.path.join(src, "dataset_dict.json")) as f:
            splits = json.load(f).get("splits", [])
        if split is None:
            raise ConfigError(f"{src!r} is a DatasetDict with splits {splits}: pass split= (or --split)")
        src = os.path.join(src, split)
    with open(os.path.join(src, "state.json")) as f:
        return [os.path.join(src, d["filename"]) for d in json.load(f)["_data_files"]]


def plan(src: Any, kind: str = "auto", *, key: str | None = None, paths: Iterable[str] | None = None,
         rename: Mapping[str, str] | None = None, split: str | None = None, per_task: int | None = None,
         rule: str = "first-dot", mapper: Mapper | None = None,
         fields: Mapping[str, str] | None = None) -> list[TaskSource]:
    """The task sources that convert ``src``: one per input file or chunk of rows (see the module docstring).

    ``fields`` maps a column (a TFRecord feature with ``/`` written ``_``; for an ImageFolder, ``cls`` or an
    extension) to the name of its field, over the default names; ``rename`` is its older name.

    ``mapper`` runs the listing of an ImageFolder's class folders (``mapper(fn, [args, ...])`` -> results in
    order): :func:`convert` lists them on the job's workers, beside each other; by default, here."""
    kind = detect(src) if kind == "auto" else kind
    renamed = tuple(sorted({**(rename or {}), **(fields or {})}.items()))
    if kind == "shards":
        return [ShardSource(url, rule) for url in _files(src)]
    if kind == "tfrecord":
        suffixes = (".tfrecord", ".tfrecords", ".tfrec", ".tfrecord.gz", ".tfrecords.gz")
        return [TFRecordSource(url, key, rename=renamed) for url in _folder_files(src, suffixes)]
    if kind == "parquet":
        out: list[TaskSource] = []
        files = _folder_files(src, (".parquet",))
        counts = {url: parquet_rows(url) for url in files if os.path.exists(url)}
        rows = per_task or _per_task(sum(counts.values()), ROWS)
        for url in files:
            count = counts.get(url)
            starts = range(0, count, rows) if count else [0]
            out += [ParquetSource(url, a, a + rows if count else None, key, renamed) for a in starts]
        return out
    if kind == "hf":
        out, first = [], 0
        for url in _hf_files(src, split):
            out.append(ArrowSource(url, key, renamed, first))
            first += arrow_rows(url)
        return out
    if kind in ("csv", "tsv", "jsonl"):
        out = []
        files = _folder_files(src, (".csv", ".tsv", ".jsonl", ".ndjson"))
        if kind == "jsonl":
            cuts = _jsonl_chunks(files, per_task)
        else:
            rows = per_task or _rows_per_task(_lines(files))
            cuts = [csv_chunks(url, rows) for url in files]
        for url, ranges in zip(files, cuts, strict=True):
            for a, b, first in ranges:
                out.append(CsvSource(url, key, None if paths is None else tuple(paths), renamed, kind == "jsonl",
                                     "\t" if kind == "tsv" else ",", a, b, first))  # fmt: skip
        return out
    if kind == "imagefolder":
        listing = list_imagefolder(src, mapper)
        sizes = listing.sizes
        left = sum(sizes)
        budget = _per_task(left, BYTES)
        files_per_task = per_task or ROWS[1]
        limit = budget if per_task or left > 2 * budget else budget // 2  # the last 2 budgets: half tasks
        chunks, current, size = [], [], 0
        for (rel, number), nbytes in zip(listing.files, sizes, strict=True):
            current.append((rel, number))
            size += nbytes
            if len(current) >= files_per_task or size >= limit:
                chunks.append(current)
                left -= size
                current, size = [], 0
                if not per_task and left <= 2 * budget:
                    limit = budget // 2
        if current:
            chunks.append(current)
        return [ImageFolderSource(src, chunk, renamed) for chunk in chunks]
    raise ConfigError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


def convert(
    src: Any,
    dst: str,
    kind: str = "auto",
    *,
    to: str = "shards",
    key: str | None = None,
    paths: Iterable[str] | None = None,
    rename: Mapping[str, str] | None = None,
    split: str | None = None,
    per_task: int | None = None,
    engine: str | Engine | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    maxcount: int = 100000,
    maxsize: float = 3e9,
    prefix: str = "part",
    index: bool = True,
    retries: int = 2,
    progress: bool | None = None,
    overwrite: bool = False,
    fields: Mapping[str, str] | None = None,
) -> JobResult:
    """Convert ``src`` into shards (``to="shards"``) or Parquet files (``to="parquet"``) under ``dst``.

    ``dst`` is a directory or a URL prefix (``s3://bucket/out``). Engine and output options are those of
    :func:`shardstream.process.map_dataset`. Returns the job's result (``result.skipped`` lists what could not
    be converted, with the reason); a task that fails after its retries raises
    :class:`~shardstream.errors.ProcessingError` at the end. ``fields`` (column -> field name) overrides the
    default names (see the module docstring; ``rename`` is its older name).
    """
    if to == "shards":
        output: Any = TarOutput(dst, prefix=prefix, maxcount=maxcount, maxsize=maxsize, index=index)
    elif to == "parquet":
        output = ParquetOutput(dst, prefix=prefix, maxcount=maxcount, maxsize=min(maxsize, 512 << 20))
    else:
        raise ConfigError(f"to must be 'shards' or 'parquet', got {to!r}")
    session = EngineSession(engine, workers=workers, scheduler=scheduler)
    try:  # the planning's listing runs on the workers the tasks run on (their CPU counts in worker_cpu)
        sources = plan(src, kind, key=key, paths=paths, rename=rename, split=split, per_task=per_task,
                       mapper=session.map, fields=fields)  # fmt: skip
        if not sources:
            if type(src).__module__.split(".")[0] == "datasets":  # a Dataset built in memory has no Arrow files
                raise ConfigError(f"nothing to convert in this {type(src).__name__}: it lives in memory, not in "
                                  "Arrow files; save it with .save_to_disk(PATH), then convert PATH")
            raise ConfigError(f"nothing to convert in {src!r}")
        tasks = [Task(i, source, output) for i, source in enumerate(sources)]
        log.info("converting %s (%s) to %s under %s: %d tasks", src, type(sources[0]).__name__, to, dst, len(tasks))
        result = run_in_session(tasks, session, retries=retries, progress=progress, overwrite=overwrite)
        log.info("converted %s: %d samples in %d files under %s (%d skipped)", src, result.samples,
                 len(result.shards), dst, len(result.skipped))
        return result
    finally:
        session.close()
