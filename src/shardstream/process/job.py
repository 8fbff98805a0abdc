"""A job: many tasks on one engine, with resuming, retries, failure reports, progress and the final indexes.

:func:`run_tasks` is the engine-agnostic loop; :func:`map_dataset` builds the tasks for a WebDataset input
(one task per input shard) and runs them.

>>> import shardstream as wds
>>> with wds.ShardWriter("in-%06d.tar", maxcount=5) as sink:
...     for i in range(10):
...         _ = sink.write({"__key__": f"s{i:03d}", "txt": f"text {i}"})
>>> def shout(sample):
...     return {"txt": sample["txt"].upper()}
>>> result = map_dataset("in-{000000..000001}.tar", "upper", shout, engine="inline")
>>> result.samples, [s.path for s in result.shards]
(10, ['upper/part-000000-000.tar', 'upper/part-000001-000.tar'])
>>> next(iter(wds.WebDataset(result.urls)))["txt"]
b'TEXT 0'
"""

from __future__ import annotations

import dataclasses
import glob
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import ConfigError, ProcessingError
from ..io.urls import expand_inputs
from ..logs import progress_bar
from ..redact import redacting_logger
from ..writer import ShardInfo
from .engines import Engine, make_engine, run_calls
from .outputs import Output, TarOutput, is_remote
from .sources import ShardSource, Skip, TaskSource
from .tasks import Task, TaskResult, load_complete

log = redacting_logger(__name__)

__all__ = ["EngineSession", "JobResult", "TaskFailure", "map_dataset", "run_in_session", "run_tasks"]


@dataclasses.dataclass(frozen=True)
class TaskFailure:
    """A task that failed after all its attempts: its input, the last error (type and message) and traceback."""

    index: int
    url: str
    error: str
    attempts: int
    traceback: str = ""

    def __str__(self) -> str:
        return f"task {self.index} ({self.url}): {self.error} (after {self.attempts} attempts)"


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What a job wrote: the shards (in task and part order), counts, skipped records, the dataset index."""

    shards: tuple[ShardInfo, ...]
    samples_in: int
    samples: int
    skipped: tuple[tuple[str, Skip], ...]
    tasks: int
    reused: int
    index: str | None
    failures: tuple[TaskFailure, ...] = ()
    #: CPU seconds spent in the tasks this run executed (and in planning calls run on the workers, such as listing
    #: an ImageFolder's classes), per worker (``host:pid``); reused tasks count nothing
    worker_cpu: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def urls(self) -> list[str]:
        """The output shard paths or URLs, in order (ready for ``WebDataset``)."""
        return [s.path for s in self.shards]


class _Bar:
    def __init__(self, show: bool | None, total: int, engine: Engine):
        self.samples = self.shards = 0
        self.bar = progress_bar(show, total, unit=" tasks", desc=f"{engine.name} x{engine.workers}")

    def update(self, tasks: int = 0, samples: int = 0, shards: int = 0) -> None:
        self.samples += samples
        self.shards += shards
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.samples:,} samples, {self.shards} shards", refresh=False)
            self.bar.update(tasks)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _remove_temporaries(output: Output, tasks: Sequence[Task]) -> None:
    """Temporary files of attempts that died (a killed worker) in a local output directory: shards, indexes and
    manifests (``.NAME.XXXX.tmp``, :mod:`shardstream.io.files`; ``NAME.PID.tmp`` from older versions)."""
    location = getattr(output, "location", None)
    prefix = getattr(output, "prefix", None)
    if location is None or prefix is None or is_remote(location):
        return
    base, name = glob.escape(location), glob.escape(prefix)
    patterns = (f".{name}-*.tmp", f"{name}-*.tmp", os.path.join("_tasks", f"{name}-*.tmp"))
    for path in (p for pattern in patterns for p in glob.glob(os.path.join(base, pattern))):
        try:
            os.unlink(path)
        except OSError:
            pass


class EngineSession:
    """An engine started when first needed (:meth:`get`) and closed by :meth:`close`, shared by a job's planning
    calls and its tasks; ``cpu`` counts the CPU seconds of the planning calls per worker."""

    def __init__(self, engine: str | Engine | None = None, *, workers: int | None = None,
                 scheduler: str | None = None):  # fmt: skip
        self.spec, self.workers, self.scheduler = engine, workers, scheduler
        self.engine: Engine | None = None
        self.cpu: dict[str, float] = {}

    def get(self) -> Engine:
        if self.engine is None:
            engine = make_engine(self.spec, workers=self.workers, scheduler=self.scheduler)
            engine.start()
            self.engine = engine
        return self.engine

    def map(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        """``fn(*args)`` for each of ``calls`` on the engine's workers (see :func:`.engines.run_calls`)."""
        return run_calls(self.get(), fn, calls, self.cpu)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def run_tasks(tasks: Sequence[Task], engine: str | Engine | None = None, *, workers: int | None = None,
              scheduler: str | None = None, retries: int = 2, progress: bool | None = None,
              overwrite: bool = False, raise_on_failure: bool = True) -> JobResult:
    """Run ``tasks`` on an engine (see :func:`~shardstream.process.engines.make_engine`).

    Tasks whose manifest shows a complete earlier run are skipped (``overwrite=True`` redoes them); a task
    that raises is retried up to ``retries`` times; the tasks that still fail are listed in a
    :class:`~shardstream.errors.ProcessingError` raised at the end (after every other task ran), or in
    ``JobResult.failures`` with ``raise_on_failure=False``. The output's indexes are written when all tasks
    succeeded.
    """
    session = EngineSession(engine, workers=workers, scheduler=scheduler)
    try:
        return run_in_session(tasks, session, retries=retries, progress=progress, overwrite=overwrite,
                              raise_on_failure=raise_on_failure)  # fmt: skip
    finally:
        session.close()


def run_in_session(tasks: Sequence[Task], session: EngineSession, *, retries: int = 2, progress: bool | None = None,
                   overwrite: bool = False, raise_on_failure: bool = True) -> JobResult:
    """:func:`run_tasks` on ``session``'s engine (started if any task is to run; the caller closes it)."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"retries must be an int >= 0, got {retries!r}")
    if not tasks:
        raise ConfigError("the job has no tasks: the input is empty")
    outputs = {id(t.output) for t in tasks}
    if len({t.index for t in tasks}) != len(tasks) or len(outputs) != 1:
        raise ConfigError("tasks must have distinct indexes and one output")
    results: dict[int, TaskResult] = {}
    todo = []
    for task in tasks:
        done = None if overwrite else load_complete(task)
        if done is None:
            todo.append(task)
        else:
            log.info("task %d (%s): complete already (its manifest is current), not run again", task.index,
                     task.source.url)
            results[task.index] = done
    failures: list[TaskFailure] = []
    if todo:
        _loop(session.get(), todo, retries, progress, results, failures, len(tasks) - len(todo))
        _remove_temporaries(tasks[0].output, todo)
    return _finish(tasks, results, failures, raise_on_failure, session.cpu)


def _loop(engine: Engine, todo: list[Task], retries: int, progress: bool | None, results: dict[int, TaskResult],
          failures: list[TaskFailure], reused: int) -> None:
    bar = _Bar(progress, len(todo) + reused, engine)
    bar.update(tasks=reused)
    attempts = {t.index: 0 for t in todo}
    log.info("running %d tasks on %s (%d complete already)", len(todo), type(engine).__name__, reused)
    running = {_start(engine, t, 1): t for t in todo}
    try:
        while running:
            for handle in engine.wait(list(running), timeout=0.5):
                task = running.pop(handle)
                attempts[task.index] += 1
                try:
                    result = engine.outcome(handle)
                except Exception as e:
                    engine.recover(e)
                    if attempts[task.index] <= retries:
                        log.warning("task %d (%s) failed on attempt %d of %d (%s: %s); retrying", task.index,
                                    task.source.url, attempts[task.index], retries + 1, type(e).__name__, e)
                        running[_start(engine, task, attempts[task.index] + 1)] = task
                        continue
                    log.error("task %d (%s) failed after %d attempts: %s: %s", task.index, task.source.url,
                              attempts[task.index], type(e).__name__, e)
                    text = "".join(traceback.format_exception(e))
                    failures.append(TaskFailure(task.index, task.source.url, f"{type(e).__name__}: {e}",
                                                attempts[task.index], text))  # fmt: skip
                    bar.update(tasks=1)
                    continue
                log.info("task %d (%s) finished: %d samples read, %d written, %d shards, %.2f s", task.index,
                         task.source.url, result.samples_in, result.samples, len(result.shards), result.seconds)
                results[task.index] = result
                bar.update(tasks=1, shards=len(result.shards))
            bar.update(samples=engine.drain())
    finally:
        bar.close()


def _start(engine: Engine, task: Task, attempt: int) -> Any:
    log.debug("task %d (%s): started%s", task.index, task.source.url, f" (attempt {attempt})" if attempt > 1 else "")
    return engine.submit(task)


def _worker_cpu(results: list[TaskResult], planning: dict[str, float]) -> dict[str, float]:
    cpu = dict(planning)
    for r in results:
        if not r.reused:
            cpu[r.worker] = cpu.get(r.worker, 0.0) + r.cpu
    return cpu


def _finish(tasks: Sequence[Task], results: dict[int, TaskResult], failures: list[TaskFailure],
            raise_on_failure: bool, planning: dict[str, float]) -> JobResult:
    ordered = [results[t.index] for t in tasks if t.index in results]
    shards = tuple(s for r in ordered for s in r.shards)
    output = tasks[0].output
    entries = [e for r in ordered for e in r.entries]
    if failures:
        index = None
    elif hasattr(output, "write_indexed") and len(entries) == len(shards):  # every shard's entry came back
        finish: Any = output.finish  # an output with write_indexed takes the entries (TarOutput.finish)
        index = finish(list(shards), entries)
    else:
        index = output.finish(list(shards))
    result = JobResult(
        shards=shards, samples_in=sum(r.samples_in for r in ordered), samples=sum(r.samples for r in ordered),
        skipped=tuple((r.url, s) for r in ordered for s in r.skipped), tasks=len(tasks),
        reused=sum(r.reused for r in ordered), index=index, failures=tuple(sorted(failures, key=lambda f: f.index)),
        worker_cpu=_worker_cpu(ordered, planning),
    )  # fmt: skip
    if failures and raise_on_failure:
        shown = "; ".join(str(f) for f in result.failures[:5]) + (" ..." if len(failures) > 5 else "")
        raise ProcessingError(f"{len(failures)} of {len(tasks)} tasks failed: {shown}; the other tasks are "
                              "complete, and running the job again redoes only the failed ones",
                              failures=list(result.failures), result=result)  # fmt: skip
    return result


def _shard_urls(inputs: str | Iterable[str]) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [os.fspath(inputs)]
    return expand_inputs([os.fspath(item) for item in inputs])  # the one rule for brace patterns


def map_dataset(
    inputs: str | Iterable[str] | Iterable[TaskSource],
    output: str | Output,
    fn: Callable[..., Any] | None = None,
    *,
    per: str = "sample",
    engine: str | Engine | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    maxcount: int = 100000,
    maxsize: float = 3e9,
    prefix: str = "part",
    compress: bool | str | None = None,
    index: bool = True,
    retries: int = 2,
    on_error: str = "raise",
    version: str = "",
    rule: str = "first-dot",
    progress: bool | None = None,
    overwrite: bool = False,
) -> JobResult:
    """Apply ``fn`` to every sample (``per="sample"``) or every shard (``per="shard"``) of a dataset and write
    new shards under ``output`` (a directory or a URL prefix such as ``s3://bucket/out``), one task per input.

    ``inputs``: shard URLs (a brace pattern ``"in-{000000..000099}.tar"``, a list) or task sources of any
    format (see :mod:`shardstream.convert`). ``fn`` must be picklable (a module-level function) for the
    ``"local"`` and ``"dask"`` engines; samples arrive as read (``bytes`` per field) and are written as
    :class:`~shardstream.writer.TarWriter` writes them (bytes unchanged, other values encoded by extension).
    ``on_error="skip"`` records a sample whose function raised as skipped instead of failing its task.
    The other arguments are those of :class:`~shardstream.process.outputs.TarOutput` and :func:`run_tasks`.
    """
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if isinstance(output, str):
        output = TarOutput(output, prefix=prefix, maxcount=maxcount, maxsize=maxsize, compress=compress, index=index)
    items = list(inputs) if not isinstance(inputs, (str, os.PathLike)) else [inputs]
    sources = [item if isinstance(item, TaskSource) else None for item in items]
    if any(s is None for s in sources):
        sources = [ShardSource(url, rule) for url in _shard_urls(items)]  # type: ignore[arg-type]
    tasks = [Task(i, source, output, fn, per, on_error, version) for i, source in enumerate(sources)]  # type: ignore
    return run_tasks(tasks, engine, workers=workers, scheduler=scheduler, retries=retries, progress=progress,
                     overwrite=overwrite)  # fmt: skip
