"""The error that iterating something raises, with nothing left holding the iterator (for tests whose iterator
has DataLoader workers).

``pytest.raises`` keeps the traceback, whose frames hold the iterator, in a reference cycle with the test's frame:
the iterator is then freed by the garbage collector, later, in whichever test runs then. torch's DataLoader
iterator freed that way finds its queues already closed and waits 5 s for each worker before it terminates them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def raised(kind: type[BaseException], items: Iterable[Any]) -> BaseException:
    """Iterate ``items`` to the end; return the ``kind`` error it raises, its tracebacks dropped (the iterator is
    freed when this returns). An error of another kind propagates; no error is an ``AssertionError``."""
    try:
        for _ in items:
            pass
    except kind as e:
        error: BaseException | None = e
        while error is not None:
            error.__traceback__ = None
            error = error.__cause__ or error.__context__
        return e
    raise AssertionError(f"iterating did not raise {kind.__name__}")
