"""Shards to Parquet: the reverse conversion, one Parquet file per task part, with the same naming and
exactly-once rules as tar outputs (:mod:`shardstream.process.outputs`).

Columns: ``__key__`` (string) and one binary column per field, holding the member's bytes as they are
(fields missing from a sample are null). A part ends at ``maxcount`` rows or ``maxsize`` bytes of data.

>>> out = ParquetOutput("as-parquet", maxcount=2)
>>> out.write(0, [{"__key__": f"k{i}", "txt": b"x", "__url__": "a.tar"} for i in range(3)])
[ShardInfo(path='as-parquet/part-000000-000.parquet', samples=2, bytes=...), ShardInfo(path='as-parquet/part-000000-001.parquet', samples=1, bytes=...)]
>>> import pyarrow.parquet as pq
>>> pq.read_table("as-parquet/part-000000-000.parquet").column_names
['__key__', 'txt']
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Iterable
from typing import Any

from ..io.files import write_file
from ..io.remote_write import open_for_write
from ..process.outputs import is_remote, join
from ..writer import ShardInfo
from .arrow import _pyarrow

__all__ = ["ParquetOutput"]


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


@dataclasses.dataclass(frozen=True)
class ParquetOutput:
    """Parquet files under ``location`` (a directory or URL prefix), named ``PREFIX-TTTTTT-PPP.parquet``."""

    location: str
    prefix: str = "part"
    maxcount: int = 100000
    maxsize: float = 512 << 20
    compression: str = "none"  # media is already compressed; "zstd" or "snappy" for text-heavy data

    def options(self) -> dict[str, Any]:
        return {"kind": "parquet", "prefix": self.prefix, "maxcount": self.maxcount, "maxsize": self.maxsize,
                "compression": self.compression}

    def file_url(self, task: int, part: int) -> str:
        return join(self.location, f"{self.prefix}-{task:06d}-{part:03d}.parquet")

    def manifest_url(self, task: int) -> str:
        return join(self.location, "_tasks", f"{self.prefix}-{task:06d}.json")

    def _flush(self, task: int, part: int, rows: list[dict[str, Any]]) -> ShardInfo:
        pa = _pyarrow()
        names = sorted({k for row in rows for k in row if not k.startswith("__")})
        columns = {"__key__": pa.array([row["__key__"] for row in rows], pa.string())}
        for name in names:
            columns[name] = pa.array([_bytes(row.get(name)) for row in rows], pa.binary())
        buffer = io.BytesIO()
        pa.parquet.write_table(pa.table(columns), buffer, compression=self.compression)
        data = buffer.getvalue()
        url = self.file_url(task, part)
        if is_remote(url):
            sink = open_for_write(url)
            sink.write(data)
            sink.close()
        else:
            os.makedirs(os.path.dirname(url) or ".", exist_ok=True)
            write_file(url, data, "the Parquet file")
        return ShardInfo(url, len(rows), len(data))

    def write(self, task: int, samples: Iterable[dict[str, Any]]) -> list[ShardInfo]:
        done: list[ShardInfo] = []
        rows: list[dict[str, Any]] = []
        size = 0
        for sample in samples:
            rows.append(sample)
            size += sum(len(v) for k, v in sample.items() if not k.startswith("__") and v is not None)
            if len(rows) >= self.maxcount or size >= self.maxsize:
                done.append(self._flush(task, len(done), rows))
                rows, size = [], 0
        if rows:
            done.append(self._flush(task, len(done), rows))
        return done

    def finish(self, shards: list[ShardInfo]) -> str | None:
        return None
