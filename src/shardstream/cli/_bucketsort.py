"""The external sort behind ``shardstream shuffle`` (one process, and each bucket of ``-j N``): samples numbered
``(random number, position)`` come out sorted by that pair, in bounded memory, through temporary shards when they
do not fit (see :mod:`shardstream.cli.shuffle`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from ..samples import KeyRule
from ..writer import TarWriter
from ._common import shard_samples

__all__ = ["RAW_RULE", "Sorter", "read_bucket"]

_OVERHEAD = 256  # bytes counted per sample and per field on top of the data (dict, key, strings)
RAW_RULE = KeyRule("first-dot", lowercase=False)  # temporary shards: synthetic keys without dots


def _size(sample: dict[str, Any]) -> int:
    return _OVERHEAD * len(sample) + sum(len(v) for k, v in sample.items() if isinstance(v, (bytes, str)))


class Sorter:
    """The external sort by random numbers (see the module docstring)."""

    def __init__(self, memory: int, buckets: int, tmpdir: str | None):
        self.memory, self.buckets, self.tmpdir = memory, max(2, buckets), tmpdir
        self.spilled = 0  # scatter passes made
        self._count = 0  # temporary shards made (for unique names)
        self._directory: tempfile.TemporaryDirectory[str] | None = None  # made on the first scatter

    def cleanup(self) -> None:
        """Remove the temporary directory (and whatever is left in it)."""
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None

    def sort(self, items: Iterator[tuple[int, int, dict[str, Any]]], lo: int, hi: int) -> Iterator[dict[str, Any]]:
        """Yield the samples of ``items`` (numbers in ``[lo, hi)``) sorted by ``(number, position)``."""
        buffer: list[tuple[int, int, dict[str, Any]]] = []
        used = 0
        for item in items:
            buffer.append(item)
            used += _size(item[2])
            if used > self.memory and len(buffer) > 1 and hi - lo > 1:
                break
        else:
            buffer.sort(key=lambda t: (t[0], t[1]))
            for _, _, sample in buffer:
                yield sample
            return
        buffer.reverse()  # drained from the end below, so the memory is given back as the scatter goes
        paths = self._scatter(_drain(buffer, items), lo, hi)
        k = len(paths)  # bucket j holds the numbers n with (n - lo) * k // (hi - lo) == j: [edges[j], edges[j + 1])
        edges = [lo - (-(hi - lo) * j // k) for j in range(k + 1)]
        for path, a, b in zip(paths, edges, edges[1:], strict=False):
            try:
                yield from self.sort(read_bucket(path), a, b)
            finally:
                os.unlink(path)

    def _scatter(self, items: Iterable[tuple[int, int, dict[str, Any]]], lo: int, hi: int) -> list[str]:
        self.spilled += 1
        if self._directory is None:
            self._directory = tempfile.TemporaryDirectory(prefix="shardstream-shuffle-", dir=self.tmpdir)
        n_buckets = min(self.buckets, hi - lo)
        paths = []
        writers: list[TarWriter] = []
        try:
            for _ in range(n_buckets):
                self._count += 1
                paths.append(os.path.join(self._directory.name, f"bucket-{self._count:06d}.tar"))
                writers.append(TarWriter(paths[-1], encoder=False, keep_meta=True))
            for number, position, sample in items:
                fields = {name: v for name, v in sample.items() if name not in ("__key__", "__url__")}
                writers[(number - lo) * n_buckets // (hi - lo)].write(
                    {"__key__": f"{number:016x}{position:016x}", "__origkey__": sample["__key__"], **fields}
                )
            for w in writers:
                w.close()
        except BaseException:
            for w in writers:
                w.abort()
            raise
        return paths


def _drain(buffer: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    while buffer:
        yield buffer.pop()
    yield from rest


def read_bucket(path: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    for sample in shard_samples(path, RAW_RULE):
        synthetic = sample.pop("__key__")
        del sample["__url__"]
        original = sample.pop("__origkey__")
        yield int(synthetic[:16], 16), int(synthetic[16:], 16), {"__key__": original.decode("utf-8"), **sample}
