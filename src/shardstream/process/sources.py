"""Where the samples of one task come from: a :class:`TaskSource` per task, picklable and opened in the worker.

A source describes its input (``url``, ``describe()``) and yields sample dicts from :meth:`TaskSource.samples`.
What it cannot turn into a sample it yields as a :class:`Skip` (the key, or a position, and the reason): the
task writes no sample for it and reports it in the job's result, so nothing is dropped silently.

A source may also have ``batches()``: the same records, as :class:`~shardstream.writer.SampleBatch` columns
(and sample dicts and Skips where a run of rows cannot be one), in the same order. A task without a function
reads those, and its writer packs many samples at a time; the shards are the same, byte for byte.

Converters (:mod:`shardstream.convert`) define sources for other formats; :class:`ShardSource` reads one
WebDataset shard (any URL the library reads), members as ``bytes``, grouped by the key rule.

>>> from shardstream.writer import TarWriter
>>> with TarWriter("src-000000.tar") as sink:
...     _ = sink.write({"__key__": "a", "txt": "hello"})
>>> [s["txt"] for s in ShardSource("src-000000.tar").samples()]
[b'hello']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ..io import finish_stream, open_url
from ..samples import KeyRule, group_samples
from ..tar import iter_tar

__all__ = ["ShardSource", "Skip", "TaskSource"]


@dataclasses.dataclass(frozen=True)
class Skip:
    """An input record that could not be made into a sample: ``key`` (or a position) and ``reason``.

    >>> Skip("row 7", "column 'image' is empty")
    Skip(key='row 7', reason="column 'image' is empty")
    """

    key: str
    reason: str


@runtime_checkable
class TaskSource(Protocol):
    """The input of one task: ``url`` names it in reports, ``describe()`` identifies it for resuming (it changes
    when the input changes), ``samples()`` yields sample dicts or :class:`Skip` records. Must be picklable."""

    @property
    def url(self) -> str: ...  # pragma: no cover - protocol (read-only: sources are frozen dataclasses)

    def describe(self) -> str: ...  # pragma: no cover - protocol

    def samples(self) -> Iterator[dict[str, Any] | Skip]: ...  # pragma: no cover - protocol


@dataclasses.dataclass(frozen=True)
class ShardSource:
    """One WebDataset shard read sequentially: samples ``{"__key__", "__url__", ext: bytes, ...}``.

    ``rule`` is the key rule (``"first-dot"``, ``"last-dot"``, a regular expression); extensions keep their
    case, since the members are copied into new shards as they are.
    """

    url: str
    rule: str = "first-dot"

    def describe(self) -> str:
        return f"shard {self.url} rule={self.rule}"

    def samples(self) -> Iterator[dict[str, Any]]:
        stream = open_url(self.url)
        try:
            yield from group_samples(iter_tar(stream, self.url), self.url, rule=KeyRule(self.rule, lowercase=False))
            finish_stream(stream)
        finally:
            stream.close()
