"""Where tasks write: output locations (a local directory or a URL prefix such as ``s3://bucket/prefix``), the
deterministic names of output shards, the per-task manifests, and the indexes of the result.

Task ``t`` of a job with ``prefix="part"`` writes ``part-{t:06d}-{n:03d}.tar`` for its parts ``n = 0, 1, ...``
(a new part when ``maxcount`` or ``maxsize`` is reached), so the names depend only on the input and the
options, never on timing or on the engine. Each part is published all or nothing (a local temporary file
renamed into place; an object store multipart upload completed on close). When a task's parts are published,
its *manifest* ``_tasks/part-{t:06d}.json`` is written last (same all-or-nothing rule): a task is complete
exactly when its manifest exists and describes the same input and options, which is what a rerun checks.

Local, uncompressed outputs get a sidecar index (``.ssidx``, from the offsets the writer records) and a DALI
index (``.idx``) per shard, and the job writes a dataset index (``dataset.json``) over all shards; remote
outputs get their DALI indexes uploaded beside them (random access over object stores is not provided).

>>> out = TarOutput("out", maxcount=2)
>>> out.shard_url(3, 1), out.manifest_url(3)
('out/part-000003-001.tar', 'out/_tasks/part-000003.json')
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import ConfigError, OpenError
from ..indexed import DatasetIndex, ShardEntry, index_dataset
from ..indexed.shardindex import rule_spec
from ..io import open_url, split_scheme
from ..io.files import write_file
from ..io.remote_write import open_for_write
from ..tar.index import format_dali_index
from ..writer import SampleBatch, ShardInfo, ShardWriter
from .indexes import shard_indexes

__all__ = ["Output", "TarOutput", "is_remote", "join", "read_text", "write_text"]

MANIFESTS = "_tasks"


def is_remote(location: str) -> bool:
    """Whether ``location`` is a URL (``s3://...``) rather than a local path (``file:`` counts as local)."""
    scheme, _ = split_scheme(location)
    return scheme not in ("", "file")


def _local(location: str) -> str:
    scheme, rest = split_scheme(location)
    return rest if scheme == "file" else location


def join(location: str, *names: str) -> str:
    """``location/name`` for a directory or a URL prefix."""
    if is_remote(location):
        return posixpath.join(location, *names)
    return os.path.join(_local(location), *names)


def write_text(url: str, text: str) -> None:
    """Write a small text file all or nothing (local: temporary name and rename; remote: one upload)."""
    data = text.encode("utf-8")
    if is_remote(url):
        sink = open_for_write(url)
        try:
            sink.write(data)
        except BaseException:
            sink.discard()
            raise
        sink.close()
        return
    os.makedirs(os.path.dirname(url) or ".", exist_ok=True)
    write_file(url, data, "the file")


def read_text(url: str) -> str | None:
    """The text of ``url``, or None when it does not exist (or cannot be opened)."""
    if not is_remote(url):
        try:
            with open(url, "rb") as f:
                return f.read().decode("utf-8")
        except FileNotFoundError:
            return None
    try:
        stream = open_url(url)
    except (OpenError, FileNotFoundError):
        return None
    try:
        return stream.read().decode("utf-8")
    except (OpenError, FileNotFoundError):
        return None
    finally:
        stream.close()


class Output(Protocol):
    """What a task writes to (picklable): per task, output files and a manifest; per job, the final indexes."""

    @property
    def location(self) -> str: ...  # pragma: no cover - protocol (read-only: outputs are frozen dataclasses)

    def options(self) -> dict[str, Any]: ...  # pragma: no cover - protocol

    def manifest_url(self, task: int) -> str: ...  # pragma: no cover - protocol

    def write(self, task: int, samples: Iterable[Mapping[str, Any]]) -> list[ShardInfo]: ...  # pragma: no cover

    def finish(self, shards: list[ShardInfo]) -> str | None: ...  # pragma: no cover - protocol


@dataclasses.dataclass(frozen=True)
class TarOutput:
    """WebDataset shards under ``location`` (a directory or URL prefix), named by task and part.

    :param location: ``"out/"``, ``"file:out"``, ``"s3://bucket/prefix"`` (any URL the writers take)
    :param prefix: the first part of every shard name
    :param maxcount: most samples per shard
    :param maxsize: most bytes per shard
    :param compress: as :class:`~shardstream.writer.TarWriter` (compressed shards get no indexes)
    :param index: write sidecar, DALI and dataset indexes (local) or DALI indexes (remote)
    """

    location: str
    prefix: str = "part"
    maxcount: int = 100000
    maxsize: float = 3e9
    compress: bool | str | None = None
    index: bool = True

    def __post_init__(self) -> None:
        if not self.prefix or "/" in self.prefix or "%" in self.prefix or "{" in self.prefix:
            raise ConfigError(f"prefix must be a plain name without '/', '%' or braces, got {self.prefix!r}")

    def options(self) -> dict[str, Any]:
        """What makes outputs differ: a manifest written with other options is not reused."""
        return {"kind": "tar", "prefix": self.prefix, "maxcount": self.maxcount, "maxsize": self.maxsize,
                "compress": self.compress}

    def _suffix(self) -> str:
        kind = self.compress
        return {None: "", False: "", True: ".gz", "gz": ".gz", "gzip": ".gz", "zst": ".zst", "zstd": ".zst",
                "bz2": ".bz2", "xz": ".xz"}.get(kind, "")  # fmt: skip

    def shard_url(self, task: int, part: int) -> str:
        return join(self.location, f"{self.prefix}-{task:06d}-{part:03d}.tar{self._suffix()}")

    def manifest_url(self, task: int) -> str:
        return join(self.location, MANIFESTS, f"{self.prefix}-{task:06d}.json")

    #: :meth:`write` takes :class:`~shardstream.writer.SampleBatch` items among the samples
    batches = True

    def write(self, task: int, samples: Iterable[Mapping[str, Any]]) -> list[ShardInfo]:
        """Write the samples of task ``task`` into its parts (sample dicts, or :class:`SampleBatch` columns);
        returns them, each published and indexed."""
        return self.write_indexed(task, samples)[0]

    def write_indexed(self, task: int, samples: Iterable[Mapping[str, Any]]) -> tuple[list[ShardInfo],
                                                                                       list[ShardEntry]]:
        """:meth:`write`, with the dataset index entry of each part written with a sidecar (none otherwise):
        the task hands them back, and :meth:`finish` writes ``dataset.json`` from them."""
        pattern = self.shard_url(task, 0)[: -len(f"000.tar{self._suffix()}")] + "%03d.tar" + self._suffix()
        if not is_remote(self.location):
            os.makedirs(_local(self.location), exist_ok=True)
        indexed = self.index and not self._suffix()
        remote = is_remote(self.location)
        # the indexes come from the offsets the writer records (numbers: no scan of the shards afterwards)
        with ShardWriter(pattern, maxcount=self.maxcount, maxsize=self.maxsize, compress=self.compress,
                         record_index=indexed) as sink:
            for sample in samples:
                if sample.__class__ is SampleBatch:  # columns from a table source (see TaskSource.batches)
                    sink.write_batch(sample)
                else:
                    sink.write(sample)
        entries = []
        for path, record in (sink.index_records or {}).items():
            if remote:
                dali = format_dali_index(([(f, o, n, f"{k}.{f}") for f, o, n in fields] for k, fields in
                                          record.entries()), path)  # fmt: skip
                write_text(path[: -len(".tar")] + ".idx", dali)
            else:
                entries.append(shard_indexes(path, record)[0])
        return list(sink.shard_info), entries

    def finish(self, shards: list[ShardInfo], entries: list[ShardEntry] | None = None) -> str | None:
        """After all tasks: the dataset index ``dataset.json`` over the local shards (None for remote ones).
        ``entries``: the shards' entries as their tasks wrote them (see :meth:`write_indexed`), in the order of
        ``shards``; without them (tasks reused from an earlier run), each shard's sidecar is read back."""
        if not self.index or self._suffix() or is_remote(self.location) or not shards:
            return None
        path = join(self.location, "dataset.json")
        if entries is not None and [e.url for e in entries] == [s.path for s in shards]:
            DatasetIndex(tuple(entries), *rule_spec(None)).save(path)  # what index_dataset writes, from the tasks
        else:
            index_dataset([s.path for s in shards], path)
        return path
