"""The engine-agnostic unit of work: a :class:`Task` reads one input, applies the function, writes its outputs.

A task is a picklable value (source, function, output, options), so any engine can run it anywhere:
:func:`run_task` is all a worker executes. It returns a :class:`TaskResult` (outputs, counts, skipped records)
after writing the task's manifest, the mark that the task is complete (see :mod:`.outputs`).

The function, by ``per``:

- ``"sample"``: ``fn(sample) -> dict | list of dicts | None``: a dict replaces the sample (its ``__key__`` is
  kept when the dict has none), a list gives several samples (their keys must differ), ``None`` drops it;
- ``"shard"``: ``fn(samples) -> iterable of samples``, called once with the task's whole input stream.

An error in the function fails the task (and names the input and the sample key) unless
``on_error="skip"``, which records the sample as skipped with the error and goes on.

>>> from shardstream.process.outputs import TarOutput
>>> from shardstream.process.sources import Skip
>>> class Three:
...     url = "three"
...     def describe(self): return "three"
...     def samples(self):
...         yield from ({"__key__": f"k{i}", "txt": f"t{i}"} for i in range(2))
...         yield Skip("k2", "unreadable")
>>> result = run_task(Task(0, Three(), TarOutput("tasks-out"), fn=None))
>>> result.samples, [s.key for s in result.skipped], [s.path for s in result.shards]
(2, ['k2'], ['tasks-out/part-000000-000.tar'])
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..errors import ConfigError, add_context
from ..indexed import ShardEntry
from ..writer import SampleBatch, ShardInfo
from .outputs import Output, is_remote, read_text, write_text
from .sources import Skip, TaskSource

__all__ = ["Task", "TaskResult", "job_fingerprint", "load_complete", "run_task"]

MANIFEST_FORMAT = "shardstream-task"

#: where a task reports progress (``report(samples)``); set by engines in their workers
_reporter: Callable[[int], None] | None = None


def set_reporter(reporter: Callable[[int], None] | None) -> None:
    """Install the progress callback of this worker process (engines call it)."""
    global _reporter
    _reporter = reporter


def _name_of(fn: Any) -> str:
    if fn is None:
        return "identity"
    describe = getattr(fn, "describe", None)
    if callable(describe):
        return str(describe())
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def job_fingerprint(source: TaskSource, output: Output, fn: Any, per: str, version: str) -> str:
    """A digest of everything that decides a task's outputs: the input, the output options, the function (by
    name; pass ``version=`` to invalidate earlier outputs after changing its code) and ``per``."""
    text = json.dumps([source.describe(), output.options(), _name_of(fn), per, version], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Task:
    """Task ``index``: read ``source``, apply ``fn`` (``per`` sample or shard), write into ``output``."""

    index: int
    source: TaskSource
    output: Output
    fn: Callable[..., Any] | None = None
    per: str = "sample"
    on_error: str = "raise"
    version: str = ""

    def fingerprint(self) -> str:
        return job_fingerprint(self.source, self.output, self.fn, self.per, self.version)


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """What a completed task wrote: its shards, samples read and written, records skipped, seconds taken."""

    index: int
    url: str
    shards: tuple[ShardInfo, ...]
    samples_in: int
    samples: int
    skipped: tuple[Skip, ...]
    seconds: float = 0.0
    reused: bool = False
    #: CPU seconds of the thread that ran the task, and the worker it ran on (``host:pid``)
    cpu: float = 0.0
    worker: str = ""
    #: the dataset index entries of the shards, where the output writes them (:meth:`TarOutput.write_indexed`);
    #: empty for a task reused from an earlier run (the job then reads the sidecars)
    entries: tuple[ShardEntry, ...] = ()

    def to_json(self, fingerprint: str) -> str:
        doc = {
            "format": MANIFEST_FORMAT, "version": 1, "task": self.index, "input": self.url,
            "fingerprint": fingerprint, "samples_in": self.samples_in, "samples": self.samples,
            "shards": [list(s) for s in self.shards], "skipped": [[s.key, s.reason] for s in self.skipped],
        }  # fmt: skip
        return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TaskResult:
        doc = json.loads(text)
        if doc.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a task manifest")
        return cls(int(doc["task"]), str(doc["input"]), tuple(ShardInfo(*s) for s in doc["shards"]),
                   int(doc["samples_in"]), int(doc["samples"]), tuple(Skip(*s) for s in doc["skipped"]),
                   reused=True)  # fmt: skip


def load_complete(task: Task) -> TaskResult | None:
    """The result of ``task`` from an earlier run, if its manifest says it completed with the same input and
    options and (for local outputs) its shards are all there with their recorded sizes; else None."""
    text = read_text(task.output.manifest_url(task.index))
    if text is None:
        return None
    try:
        if json.loads(text).get("fingerprint") != task.fingerprint():
            return None
        result = TaskResult.from_json(text)
    except (ValueError, KeyError, TypeError):
        return None
    for shard in result.shards:
        if not is_remote(shard.path):
            try:
                if os.path.getsize(shard.path) != shard.bytes:
                    return None
            except OSError:
                return None
    return result


class _Counts:
    def __init__(self) -> None:
        self.read = self.written = self.unreported = 0
        self.skipped: list[Skip] = []
        self.last = time.monotonic()

    def wrote(self, samples: int = 1) -> None:
        self.written += samples
        self.unreported += samples
        if (samples > 1 or self.unreported & 255 == 0) and _reporter is not None and time.monotonic() - self.last > 0.5:
            self.flush()

    def flush(self) -> None:
        if _reporter is not None and self.unreported:
            _reporter(self.unreported)
        self.unreported, self.last = 0, time.monotonic()


def _inputs(task: Task, counts: _Counts, batches: bool = False) -> Iterator[Any]:
    """The source's samples (or, with ``batches``, its :class:`SampleBatch` columns and samples); Skips counted."""
    for item in task.source.batches() if batches else task.source.samples():  # type: ignore[attr-defined]
        if item.__class__ is SampleBatch:
            counts.read += len(item.keys)
        elif isinstance(item, Skip):
            counts.skipped.append(item)
            continue
        else:
            counts.read += 1
        yield item


def _per_sample(task: Task, samples: Iterable[Mapping[str, Any]], counts: _Counts) -> Iterator[Mapping[str, Any]]:
    fn = task.fn
    for sample in samples:
        if fn is None:
            yield sample
            continue
        key = sample.get("__key__")
        try:
            out = fn(sample)
        except Exception as e:
            if task.on_error == "skip":
                counts.skipped.append(Skip(str(key), f"{type(e).__name__}: {e}"))
                continue
            raise add_context(e, url=task.source.url, key=key) from None
        if out is None:
            continue
        for item in [out] if isinstance(out, Mapping) else out:
            if "__key__" not in item:
                item = {**item, "__key__": key}
            yield item


def run_task(task: Task) -> TaskResult:
    """Run one task: read, apply, write, index, then write its manifest. Raises on failure (nothing partial is
    left under a final name; the engine retries or reports it)."""
    if task.per not in ("sample", "shard"):
        raise ConfigError(f"per must be 'sample' or 'shard', got {task.per!r}")
    start, cpu = time.monotonic(), time.thread_time()
    counts = _Counts()
    # without a function, a table source hands its rows over by column, and the writer packs many at a time
    batches = task.fn is None and hasattr(task.source, "batches") and getattr(task.output, "batches", False)
    samples: Iterable[Mapping[str, Any]] = _inputs(task, counts, batches)
    if task.per == "shard" and task.fn is not None:
        samples = task.fn(samples)
    elif task.fn is not None:
        samples = _per_sample(task, samples, counts)

    def counted() -> Iterator[Mapping[str, Any]]:
        for sample in samples:
            yield sample
            counts.wrote(len(sample.keys) if sample.__class__ is SampleBatch else 1)

    write_indexed = getattr(task.output, "write_indexed", None)
    if write_indexed is not None:
        shards, entries = write_indexed(task.index, counted())
    else:
        shards, entries = task.output.write(task.index, counted()), []
    counts.flush()
    write_text(task.output.manifest_url(task.index), TaskResult(
        task.index, task.source.url, tuple(shards), counts.read, counts.written, tuple(counts.skipped)
    ).to_json(task.fingerprint()))  # fmt: skip
    return TaskResult(task.index, task.source.url, tuple(shards), counts.read, counts.written, tuple(counts.skipped),
                      time.monotonic() - start, cpu=time.thread_time() - cpu,
                      worker=f"{socket.gethostname()}:{os.getpid()}", entries=tuple(entries))  # fmt: skip
