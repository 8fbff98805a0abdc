"""The local engine's pool (process/pool.py): answers in any order, errors with the worker's traceback, a worker
that dies fails only its call and is replaced, calls not started are cancelled at shutdown."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from shardstream.process.engines import Engine, LocalEngine, run_calls
from shardstream.process.pool import ProcessPool, WorkerDied


def _slow(seconds, value):
    time.sleep(seconds)
    return value


def _fail(message):
    raise ValueError(message)


def _die(_):
    os.kill(os.getpid(), signal.SIGKILL)


def _unpicklable(_):
    return threading.Lock()


def _pid(_):
    return os.getpid()


def _settle(pool, futures, seconds=30):
    deadline = time.monotonic() + seconds
    while not all(f.done() for f in futures):
        assert time.monotonic() < deadline, "the pool did not answer"
        pool.wait([f for f in futures if not f.done()], timeout=1.0)


@pytest.fixture
def pool():
    pool = ProcessPool(2)
    yield pool
    pool.shutdown()


def test_answers_come_back_to_their_calls_whatever_the_order(pool):
    futures = [pool.submit(_slow, 0.05 * (n % 3), n) for n in range(9)]
    _settle(pool, futures)
    assert [f.result() for f in futures] == list(range(9))


def test_an_error_comes_back_with_the_workers_traceback(pool):
    (future,) = [pool.submit(_fail, "bad row 7")]
    _settle(pool, [future])
    with pytest.raises(ValueError, match="bad row 7") as caught:
        future.result()
    assert "_fail" in str(caught.value.__cause__)  # the remote traceback names the function that raised
    other = pool.submit(_unpicklable, None)  # an answer that cannot be sent back is an error too
    _settle(pool, [other])
    assert isinstance(other.exception(), Exception)
    again = pool.submit(_slow, 0, "alive")
    _settle(pool, [again])
    assert again.result() == "alive"


def test_a_dead_worker_fails_only_its_call_and_is_replaced(pool):
    first = [pool.submit(_pid, None) for _ in range(4)]
    _settle(pool, first)
    doomed = pool.submit(_die, None)
    others = [pool.submit(_slow, 0.02, n) for n in range(6)]
    _settle(pool, [doomed, *others])
    assert isinstance(doomed.exception(), WorkerDied)
    assert [f.result() for f in others] == list(range(6))
    after = [pool.submit(_pid, None) for _ in range(6)]
    _settle(pool, after)
    pids = {w.process.pid for w in pool._workers}
    assert len(pids) == 2 and pids - {f.result() for f in first}  # a new worker took the dead one's place
    assert {f.result() for f in after} <= pids


def test_shutdown_cancels_the_calls_not_started():
    pool = ProcessPool(1)
    running = pool.submit(_slow, 0.3, "done")
    pool.wait([running], timeout=0.05)
    queued = pool.submit(_slow, 0, "never")
    pool.shutdown()
    assert queued.cancelled() and running.result() == "done"


def test_a_pool_never_shut_down_does_not_hold_the_interpreter_at_exit():
    code = "from shardstream.process.pool import ProcessPool\npool = ProcessPool(2)\nprint(pool.submit(abs, -3) is not None)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env={**os.environ})
    assert done.returncode == 0 and done.stdout.strip() == b"True", done.stderr


def test_run_calls_on_an_engine_without_calls_of_its_own_runs_them_here():
    class Bare(Engine):  # a user's engine from before Engine.call: its wait knows only its own handles
        def wait(self, handles, timeout):
            raise AssertionError("not for calls")

    cpu = {}
    assert run_calls(Bare(), divmod, [(7, 2), (9, 4)], cpu) == [(3, 1), (2, 1)]
    assert list(cpu) == [f"{socket.gethostname()}:{os.getpid()}"]
    engine = LocalEngine(2)
    engine.start()
    try:
        cpu = {}
        assert run_calls(engine, divmod, [(7, 2), (9, 4), (1, 1)], cpu) == [(3, 1), (2, 1), (1, 0)]
        assert cpu and str(os.getpid()) not in {w.rsplit(":", 1)[1] for w in cpu}
    finally:
        engine.close()
