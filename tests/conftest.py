"""Suite-wide fixtures."""

import pytest

from shardstream.logs import stop_logging_to_stderr


@pytest.fixture(autouse=True)
def _no_stderr_log_handler_leaks():
    """``verbose=True`` and ``SHARDSTREAM_VERBOSE`` add a stderr handler to the ``shardstream`` logger for the
    rest of the process; a test that asks for one must not change what later tests see on stderr."""
    yield
    stop_logging_to_stderr()
