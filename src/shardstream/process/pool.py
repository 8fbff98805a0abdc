"""The local engine's process pool: ``workers`` processes, one pipe each, driven from the caller's thread.

A call is pickled once and sent down the pipe of an idle worker; its result (or its error, with the worker's
traceback as the error's cause) comes back on the same pipe. :meth:`ProcessPool.wait` waits on the busy pipes
and on every worker's exit at once, so the pool needs no thread of its own: the main process of a job only wakes
when a call ends (``concurrent.futures.ProcessPoolExecutor`` runs a manager thread and a feeder thread that wake
for every call and result, ~0.3 ms of CPU each on a busy machine). A worker that dies (killed, out of memory)
fails only the call it was running, with :class:`WorkerDied`, and a new worker takes its place.

>>> pool = ProcessPool(2)
>>> futures = [pool.submit(pow, 2, n) for n in range(5)]
>>> while not all(f.done() for f in futures):
...     _ = pool.wait(futures, timeout=1.0)
>>> [f.result() for f in futures]
[1, 2, 4, 8, 16]
>>> pool.shutdown()
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import multiprocessing
import pickle
import time
import traceback
import weakref
from multiprocessing import connection
from typing import Any

__all__ = ["ProcessPool", "WorkerDied"]

_STOP = b""


class WorkerDied(cf.BrokenExecutor):
    """The worker process running a call exited before answering (killed, out of memory, ``os._exit``)."""


class _RemoteTraceback(Exception):
    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


def _answer(fn: Any, args: tuple[Any, ...]) -> bytes:
    try:
        return pickle.dumps((True, fn(*args)), pickle.HIGHEST_PROTOCOL)
    except BaseException as e:  # noqa: BLE001 - every error goes back to the caller, the worker lives on
        text = "".join(traceback.format_exception(e))
        try:
            return pickle.dumps((False, (e, text)), pickle.HIGHEST_PROTOCOL)
        except Exception:  # an error that does not pickle: its type, message and traceback as text
            return pickle.dumps((False, (RuntimeError(f"{type(e).__name__}: {e}"), text)), pickle.HIGHEST_PROTOCOL)


def _serve(pipe: Any, initializer: Any, initargs: tuple[Any, ...], inherited: list[Any]) -> None:
    """A worker: run the calls that come down ``pipe`` until the pool says stop (or goes away). ``inherited``: the
    pool's ends of the pipes, copied into this process by a fork; closed, so that each pipe ends with the pool."""
    for end in inherited:
        end.close()
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            job = pipe.recv_bytes()
        except (EOFError, OSError):
            return
        if job == _STOP:
            return
        try:
            fn, args = pickle.loads(job)
        except BaseException as e:  # noqa: BLE001 - a call that does not unpickle here fails, not the worker
            answer = _answer(_raise, (e,))
        else:
            answer = _answer(fn, args)
        try:
            pipe.send_bytes(answer)
        except OSError:  # the pool went away while the call ran
            return


def _raise(error: BaseException) -> None:
    raise error


class _Worker:
    def __init__(self, context: Any, initializer: Any, initargs: tuple[Any, ...], others: list[_Worker]):
        self.pipe, theirs = context.Pipe(duplex=True)
        forked = context.get_start_method() == "fork"  # a forked worker holds copies of the pool's ends
        inherited = [self.pipe, *(w.pipe for w in others)] if forked else []
        self.process = context.Process(target=_serve, args=(theirs, initializer, initargs, inherited),
                                       name="shardstream-worker")  # fmt: skip
        self.process.start()
        theirs.close()
        self.future: cf.Future | None = None


_live: weakref.WeakSet[ProcessPool] = weakref.WeakSet()


@atexit.register
def _at_exit() -> None:
    """A pool never shut down: its workers read the end of their pipes and stop, so that the interpreter's wait for
    its child processes (multiprocessing's exit handler, which runs after this one) ends."""
    for pool in list(_live):
        for worker in pool._workers:
            worker.pipe.close()


class ProcessPool:
    """``workers`` processes of ``context`` (multiprocessing's; default: the platform's start method), each
    running ``initializer(*initargs)`` first. :meth:`submit` returns a :class:`concurrent.futures.Future`;
    :meth:`wait` moves calls along (call it until the futures you need are done)."""

    def __init__(self, workers: int, context: Any = None, initializer: Any = None, initargs: tuple[Any, ...] = ()):
        self._context = context or multiprocessing.get_context()
        self._init = (initializer, initargs)
        self._workers: list[_Worker] = []
        for _ in range(workers):
            self._workers.append(_Worker(self._context, initializer, initargs, self._workers))
        self._idle = list(reversed(self._workers))
        self._queue: collections.deque[tuple[cf.Future, bytes]] = collections.deque()
        _live.add(self)

    def submit(self, fn: Any, *args: Any) -> cf.Future:
        future: cf.Future = cf.Future()
        try:
            payload = pickle.dumps((fn, args), pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            future.set_exception(e)
            return future
        self._queue.append((future, payload))
        self._dispatch()
        return future

    def _dispatch(self) -> None:
        while self._idle and self._queue:
            future, payload = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            worker = self._idle.pop()
            worker.future = future
            try:
                worker.pipe.send_bytes(payload)
            except OSError:  # it died while idle: the call fails like one it was running (the job retries it)
                self._settle(worker)

    def _replace(self, worker: _Worker) -> None:
        worker.pipe.close()
        worker.process.join(timeout=1)
        fresh = _Worker(self._context, *self._init, [w for w in self._workers if w is not worker])
        self._workers[self._workers.index(worker)] = fresh
        if worker in self._idle:
            self._idle.remove(worker)
        self._idle.append(fresh)

    def _settle(self, worker: _Worker) -> None:
        """Take in the answer of ``worker`` (ready to read, or exited); a worker that died is replaced."""
        if self._read(worker):
            self._idle.append(worker)
        else:
            self._replace(worker)

    def _read(self, worker: _Worker) -> bool:
        """Read the answer of ``worker`` into its future; False when the worker died (its call fails)."""
        future, worker.future = worker.future, None
        try:
            ok, value = pickle.loads(worker.pipe.recv_bytes())
        except (EOFError, OSError):
            worker.process.join(timeout=1)
            if future is not None:
                code = worker.process.exitcode
                future.set_exception(WorkerDied(f"the worker process running this call died (exit code {code}); "
                                                "a new one took its place"))  # fmt: skip
            return False
        if future is None:  # pragma: no cover - an answer nobody asked for
            return True
        if ok:
            future.set_result(value)
        else:
            error, text = value
            error.__cause__ = _RemoteTraceback(text)
            future.set_exception(error)
        return True

    def wait(self, futures: list[cf.Future], timeout: float) -> list[cf.Future]:
        """The futures of ``futures`` that are done, after taking in every answer already there and waiting up to
        ``timeout`` seconds for one of them if none is done."""
        deadline = time.monotonic() + timeout
        left = 0.0  # first, only what is there already
        while True:
            self._pump(left)
            done = [f for f in futures if f.done()]
            left = deadline - time.monotonic()
            if done or left <= 0 or not (self._queue or any(w.future is not None for w in self._workers)):
                return done

    def _pump(self, timeout: float) -> None:
        """Take in the answers (and the exits of workers) within ``timeout`` seconds; give idle workers calls."""
        busy = {w.pipe: w for w in self._workers if w.future is not None}
        exits = {w.process.sentinel: w for w in self._workers}
        for ready in connection.wait([*busy, *exits], timeout=timeout):
            worker = busy.get(ready) or exits[ready]
            if worker in self._workers:  # not settled already (its pipe and its exit both ready)
                self._settle(worker)
        self._dispatch()

    def shutdown(self) -> None:
        """Cancel the calls not started, let the running ones end (their futures get their answers), stop the
        workers and wait for them."""
        while self._queue:
            self._queue.popleft()[0].cancel()
        workers, self._workers, self._idle = self._workers, [], []
        for worker in workers:
            try:
                worker.pipe.send_bytes(_STOP)  # read after the current call's answer is sent
            except OSError:
                pass
        for worker in workers:
            if worker.future is not None:
                self._read(worker)
            worker.process.join()
            worker.pipe.close()
