"""What becomes a cursor: a pipeline's source (:func:`source_cursor`) and the plain iterable a stage is called on
(:func:`as_cursor`), as torchdata's adapters wrap anything into a node.

>>> as_cursor([1, 2]).state_dict()
{'items': 0}
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .context import Context, Source
from .cursors import Cursor, DelegateCursor, IndexCursor, ReplayCursor

__all__ = ["as_cursor", "source_cursor"]


def _is_dataloader(source: Any) -> bool:
    data = sys.modules.get("torch.utils.data")
    return data is not None and isinstance(source, data.DataLoader)


def as_cursor(items: Iterable[Any], name: str = "the input", *, positions: bool = True) -> Cursor:
    """``items`` as the input of a stage's cursor: a cursor stays itself, a list, tuple or range is an
    :class:`IndexCursor` (``positions=False``: iterated once, like anything else), anything else is iterated once
    (its position cannot be saved).

    >>> as_cursor([1, 2]).state_dict(), next(as_cursor(iter("ab")))
    ({'items': 0}, 'a')
    """
    if isinstance(items, Cursor):
        return items
    if positions and isinstance(items, (list, tuple, range)):
        return IndexCursor(items)
    return DelegateCursor(None, items, name, "it is a plain iterable; run the stage in a DataPipeline to save "
                          "its position")


def source_cursor(source: Any, open_fn: Callable[[], Iterator[Any]], ctx: Context | None = None) -> Cursor:
    """The cursor of a pipeline's source (``open_fn`` iterates it the way the pipeline does, with ``ctx``).

    A source that makes its own cursor says so with a ``cursor(ctx)`` method (a :class:`Source` such as a mix,
    a :class:`~shardstream.pipeline.DataPipeline`); a ``None`` result falls back to the rules below.

    >>> source_cursor(range(3), lambda: iter(range(3))).state_dict()
    {'items': 0}
    """
    name = getattr(source, "__name__", None) or type(source).__name__
    make = getattr(source, "cursor", None)
    if callable(make) and (ctx is not None or not isinstance(source, Source)):
        cursor = make(ctx)
        if cursor is not None:
            return cursor
    if isinstance(source, (list, tuple, range)):
        return IndexCursor(source)
    if callable(getattr(source, "state_dict", None)) and callable(getattr(source, "load_state_dict", None)):
        return DelegateCursor(source, source, name)
    if _is_dataloader(source):
        dataset = source.dataset
        if source.num_workers == 0 and callable(getattr(dataset, "state_dict", None)):
            return DelegateCursor(dataset, source, name)
        # worker processes do not say where they are: the position is the batches handed out, and restoring
        # iterates the DataLoader again up to there (the same batches when the dataset's order is a function
        # of its seed and epoch, as shardstream's are)
        return ReplayCursor(open_fn, f"the {name} (replayed to its position)")
    if isinstance(source, Iterator):
        return DelegateCursor(None, source, name, "a one-shot iterator cannot be read again; give the pipeline an "
                              "iterable it can re-iterate (a list, a Source, a function returning an iterator)")
    return ReplayCursor(open_fn, f"the source {name}")
