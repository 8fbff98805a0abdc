"""Engines run tasks: ``"local"`` (a process pool on this machine, the default), ``"dask"`` (Dask distributed:
a scheduler address, a ``Client``, or a ``LocalCluster`` started for the job) and ``"inline"`` (this process,
one task at a time: for debugging). Ray is not provided.

An engine only submits :func:`~shardstream.process.tasks.run_task` calls and hands back their outcomes; retries,
resuming and failure reports are the job's (:mod:`.job`), so they behave the same on every engine. Workers
report samples written through a progress channel the engine drains (a multiprocessing queue; a Dask
``Queue`` on the cluster), so the progress bar counts samples across all machines.

>>> engine = make_engine("inline")
>>> engine.name, engine.workers
('inline', 1)
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pickle
import queue
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, MissingDependencyError
from .pool import ProcessPool
from .tasks import Task, TaskResult, run_task, set_reporter

__all__ = ["DaskEngine", "Engine", "InlineEngine", "LocalEngine", "make_engine", "run_calls"]


class Engine:
    """What the job needs from an engine: ``start``, ``submit(task) -> handle``, ``wait(handles, timeout)``
    (the handles that finished), ``outcome(handle)`` (the result, or raises the task's error), ``drain()``
    (samples reported since the last call), ``close``."""

    name = "engine"
    workers = 1

    def start(self) -> None:
        """Start workers (called once by the job)."""

    def submit(self, task: Task) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A handle of ``fn(*args)`` run where the tasks run (planning work, such as listing the folders of an
        input; ``fn`` must be importable by name there), which :meth:`wait` and :meth:`outcome` take like a task's;
        None when the engine runs no such calls (this base class): :func:`run_calls` then runs them here."""
        return None

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def outcome(self, handle: Any) -> TaskResult:  # pragma: no cover - interface
        raise NotImplementedError

    def drain(self) -> int:
        return 0

    def recover(self, error: BaseException) -> None:
        """Called after a task failed with ``error``, before it is resubmitted (to restart what the failure broke)."""

    def close(self) -> None:
        """Stop what :meth:`start` started."""


class InlineEngine(Engine):
    """Run each task in this process when it is submitted (no parallelism; exceptions keep their traceback)."""

    name = "inline"

    def submit(self, task: Task) -> Any:
        future: cf.Future = cf.Future()
        try:
            future.set_result(run_task(task))
        except Exception as e:
            future.set_exception(e)
        return future

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        return list(handles)

    def outcome(self, handle: Any) -> TaskResult:
        return handle.result()


_queue: Any = None


def _put(samples: int) -> None:
    try:
        _queue.put_nowait(samples)
    except Exception:  # pragma: no cover - progress is best effort
        pass


def _run_pickled(payload: bytes) -> TaskResult:
    """A task pickled by cloudpickle (functions defined in ``__main__``, a notebook or a doc run too)."""
    return run_task(pickle.loads(payload))


def _init_worker(progress: Any) -> None:
    global _queue
    _queue = progress
    set_reporter(_put)


class LocalEngine(Engine):
    """A pool of ``workers`` processes on this machine (default: the number of CPUs; see :mod:`.pool`).

    A worker that dies (killed, out of memory) fails the task it was running, which is retried like a failed
    one, and a new worker takes its place. ``start_method`` is multiprocessing's (default: the platform's).
    Tasks are sent with cloudpickle where it is installed (it comes with ``shardstream[dask]``), so functions
    defined in ``__main__`` or a notebook work; without it, the function must be importable by name.
    """

    name = "local"

    def __init__(self, workers: int | None = None, start_method: str | None = None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
        self.workers = workers or os.cpu_count() or 1
        self._context = multiprocessing.get_context(start_method)
        self._pool: ProcessPool | None = None
        self._progress: Any = None

    def start(self) -> None:
        self._progress = self._context.Queue()
        self._pool = ProcessPool(self.workers, self._context, _init_worker, (self._progress,))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._pool is not None, "start() the engine first"
        return self._pool.submit(fn, *args)

    def submit(self, task: Task) -> Any:
        assert self._pool is not None, "start() the engine first"
        try:  # by value where needed (cloudpickle comes with the dask extra), as Dask sends tasks
            import cloudpickle  # noqa: PLC0415 - optional: shardstream[dask]
        except ImportError:  # pragma: no cover - without it, functions must be importable by name
            return self._pool.submit(run_task, task)
        return self._pool.submit(_run_pickled, cloudpickle.dumps(task))

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        assert self._pool is not None, "start() the engine first"
        return self._pool.wait(handles, timeout)

    def outcome(self, handle: Any) -> TaskResult:
        return handle.result()

    def drain(self) -> int:
        total = 0
        while True:
            try:
                total += self._progress.get_nowait()
            except (queue.Empty, OSError, ValueError):
                return total

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._progress is not None:
            self._progress.close()
            self._progress.join_thread()
            self._progress = None


def _run_on_dask(task: Task, queue_name: str) -> TaskResult:
    """What a Dask worker runs: the task, reporting progress to the job's Dask queue."""
    from distributed import Queue  # noqa: PLC0415 - optional: shardstream[dask]

    channel = Queue(queue_name)
    set_reporter(lambda samples: channel.put(samples))
    try:
        return run_task(task)
    finally:
        set_reporter(None)


class DaskEngine(Engine):
    """Tasks on a Dask distributed cluster: ``address`` of a running scheduler (``"tcp://10.0.0.1:8786"``), an
    existing ``client``, or neither: a ``LocalCluster`` of ``workers`` processes (one thread each) started for
    the job and stopped after it. A worker lost mid-task is handled by Dask (the task is rerun elsewhere);
    task errors are retried by the job. Needs ``pip install 'shardstream[dask]'``.

    ``start_method`` is how that ``LocalCluster`` starts its worker processes (Dask's
    ``distributed.worker.multiprocessing-method``): ``"fork"`` by default where the platform has it, as the
    ``"local"`` engine's pool does on Linux (about 0.3 s instead of 2-3 s for two workers that import Dask and
    shardstream again); ``"spawn"`` or ``"forkserver"`` for libraries that do not survive a fork."""

    name = "dask"

    def __init__(self, address: str | None = None, *, client: Any = None, workers: int | None = None,
                 start_method: str | None = None):  # fmt: skip
        try:
            import distributed  # noqa: F401, PLC0415 - optional: shardstream[dask]
        except ImportError:
            raise MissingDependencyError("the dask engine", "dask", "distributed") from None
        if address is not None and client is not None:
            raise ConfigError("give the dask engine a scheduler address or a client, not both")
        self.address, self.client = address, client
        self._own: list[Any] = []
        self.workers = workers or 2
        self._queue: Any = None
        self._queue_name = f"shardstream-progress-{uuid.uuid4().hex}"
        methods = multiprocessing.get_all_start_methods()
        self.start_method = start_method or ("fork" if "fork" in methods else None)
        if self.start_method is not None and self.start_method not in methods:
            raise ConfigError(f"start_method must be one of {methods}, got {start_method!r}")

    def start(self) -> None:
        from distributed import Client, LocalCluster, Queue  # noqa: PLC0415 - optional: shardstream[dask]

        if self.client is None:
            if self.address is None:
                import dask  # noqa: PLC0415 - optional: shardstream[dask]

                method = self.start_method or dask.config.get("distributed.worker.multiprocessing-method")
                with dask.config.set({"distributed.worker.multiprocessing-method": method}):
                    cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                           dashboard_address=":0")  # fmt: skip
                self._own.append(cluster)
                self.client = Client(cluster)
            else:
                self.client = Client(self.address)
            self._own.insert(0, self.client)
        info = self.client.scheduler_info()
        self.workers = max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))
        self._queue = Queue(self._queue_name, client=self.client)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def submit(self, task: Task) -> Any:
        return self.client.submit(_run_on_dask, task, self._queue_name, pure=False,
                                  key=f"shardstream-task-{task.index}-{uuid.uuid4().hex[:8]}")  # fmt: skip

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        from distributed import wait  # noqa: PLC0415 - optional: shardstream[dask]

        try:
            done, _ = wait(handles, timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def outcome(self, handle: Any) -> TaskResult:
        return handle.result()

    def drain(self) -> int:
        try:
            return sum(self._queue.get(batch=True))
        except Exception:  # pragma: no cover - progress is best effort
            return 0

    def close(self) -> None:
        for thing in self._own:
            thing.close()
        self._own = []


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, str]:
    """``fn(*args)``, the CPU seconds it took and where it ran (``host:pid``): what :func:`run_calls` submits."""
    cpu = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - cpu, f"{socket.gethostname()}:{os.getpid()}"


def run_calls(engine: Engine, fn: Callable[..., Any], calls: list[tuple[Any, ...]],
              cpu: dict[str, float] | None = None) -> list[Any]:
    """``fn(*args)`` for each ``args`` of ``calls`` on the (started) ``engine``, side by side; the results in
    order (the first error raised). Their CPU seconds are added to ``cpu`` per worker."""
    first = engine.call(timed, fn, *calls[0]) if calls else None
    if first is None:  # an engine without calls of its own: here, one after the other
        answers: list[Any] = [timed(fn, *args) for args in calls]
    else:
        handles = [first, *(engine.call(timed, fn, *args) for args in calls[1:])]
        pending = list(handles)
        while pending:
            done = set(engine.wait(pending, timeout=0.5))
            pending = [h for h in pending if h not in done]
        answers = [engine.outcome(handle) for handle in handles]  # timed() triples, not TaskResults
    results = []
    for got in answers:
        result, seconds, worker = got
        if cpu is not None:
            cpu[worker] = cpu.get(worker, 0.0) + seconds
        results.append(result)
    return results


def make_engine(engine: str | Engine | None = None, *, workers: int | None = None,
                scheduler: str | None = None) -> Engine:
    """An engine from a name (``"local"``, ``"dask"``, ``"inline"``) or an :class:`Engine` (returned as is).

    ``scheduler`` (a Dask scheduler address) implies ``"dask"``.
    """
    if isinstance(engine, Engine):
        return engine
    name = engine or ("dask" if scheduler else "local")
    if scheduler and name != "dask":
        raise ConfigError(f"a scheduler address needs engine='dask', not {name!r}")
    if name == "local":
        return LocalEngine(workers)
    if name == "dask":
        return DaskEngine(scheduler, workers=workers)
    if name == "inline":
        return InlineEngine()
    if name == "ray":
        raise ConfigError("the Ray engine is not provided; use engine='dask' (a Dask cluster) or 'local'")
    raise ConfigError(f"unknown engine {name!r}: use 'local', 'dask' or 'inline', or pass an Engine")
