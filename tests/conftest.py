"""Suite-wide fixtures."""

import multiprocessing

import pytest

from shardstream.logs import stop_logging_to_stderr


@pytest.fixture(autouse=True)
def _no_stderr_log_handler_leaks():
    """``verbose=True`` and ``SHARDSTREAM_VERBOSE`` add a stderr handler to the ``shardstream`` logger for the
    rest of the process; a test that asks for one must not change what later tests see on stderr."""
    yield
    stop_logging_to_stderr()


def _answer_in(queue, fn, args):
    queue.put(fn(*args))


@pytest.fixture
def forked():
    """``forked(fn, *args)``: ``fn(*args)`` run in a child process made by ``fork`` (what a DataLoader worker is on
    Linux: it inherits the parent's open files, pools and caches), its answer returned; the child must exit
    cleanly. Skips where there is no ``fork``."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")

    def run(fn, *args, timeout: float = 60):
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_answer_in, args=(queue, fn, args))
        child.start()
        try:
            got = queue.get(timeout=timeout)
        finally:
            child.join(timeout)
        assert child.exitcode == 0
        return got

    return run
