"""What the shard readers tell the openers: the shard they open next, so that it is opened ahead exactly.

A reading loop takes the next item of its shard list *before* reading the current shard (:func:`with_next`) and
opens the current one through a :class:`~shardstream.io.prefetch.Lookahead` naming the next; a checkpointed
cursor reads one shard at a time, so it takes the next item of its upstream ahead (:class:`UpstreamAhead`, whose
mark stays the one before that item) and hands the reading loop a :class:`OneShard` that says what follows.

>>> [(a, b is END) for a, b in with_next(["a.tar", "b.tar"])]
[('a.tar', False), ('b.tar', True)]
>>> url_of({"url": "s3://b/x.tar"}), opened_as({"nourl": 1})
('s3://b/x.tar', None)
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...io.prefetch import Lookahead
from ...io.rewrite import rewrite_url
from ..cursors import Cursor

__all__ = ["END", "OneShard", "UpstreamAhead", "opened_as", "url_of", "with_next"]

END = object()  # no item: the shard list has ended


def url_of(item: Any) -> str:
    """The URL of a shard-list item: ``{"url": ...}``, a string or a path."""
    if isinstance(item, dict):
        return os.fspath(item["url"])
    return os.fspath(item)


def opened_as(item: Any) -> str | None:
    """The URL an opener gets for a shard-list item (after the URL rewrite rules); None if it has none."""
    try:
        return rewrite_url(url_of(item))
    except Exception:  # noqa: BLE001 - the reader reports it when it opens that item
        return None


def with_next(source: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """``(item, the item after it or END)`` for each item of ``source``: the next one is taken before the current
    one is read (an error taking it is raised after the current one, as without the look ahead)."""
    items = iter(source)
    item = next(items, END)
    while item is not END:
        try:
            following, error = next(items, END), None
        except Exception as e:  # noqa: BLE001 - raised below, in its turn
            following, error = END, e
        yield item, following
        if error is not None:
            raise error
        item = following


class OneShard:
    """A cursor's current shard as a shard list of one item, which says what the cursor reads after it
    (``following()``: the next item, or END) so that its reader can open that shard ahead, through the
    cursor's ``lookahead`` (one for all its shards)."""

    def __init__(self, item: Any, following: Callable[[], Any], lookahead: Lookahead):
        self.item, self.following, self.lookahead = item, following, lookahead

    def __iter__(self) -> Iterator[Any]:
        return iter((self.item,))


class _Failed:
    def __init__(self, error: Exception):
        self.error = error


class UpstreamAhead:
    """A cursor's upstream with its next item taken ahead (:meth:`peek`), while :meth:`mark` is still the mark
    before it; ``lookahead`` opens that item's shard ahead, and is closed when ``owner`` is dropped."""

    def __init__(self, upstream: Cursor, owner: object):
        self.upstream = upstream
        self.lookahead = Lookahead()
        self._peeked: tuple[Any, Any] | None = None  # (the upstream's mark before it, the next item)
        weakref.finalize(owner, self.lookahead.close)

    def peek(self) -> Any:
        """The next item (END at the end), taken now and given again by :meth:`take`."""
        if self._peeked is None:
            mark = self.upstream.mark()
            try:
                item = next(self.upstream, END)
            except Exception as e:  # noqa: BLE001 - raised when the cursor moves to it
                item = _Failed(e)
            self._peeked = (mark, item)
        item = self._peeked[1]
        return END if isinstance(item, _Failed) else item

    def take(self) -> tuple[Any, Any]:
        """``(the upstream's mark before it, the next item or END)``."""
        if self._peeked is None:
            return self.upstream.mark(), next(self.upstream, END)
        (mark, item), self._peeked = self._peeked, None
        if isinstance(item, _Failed):
            raise item.error
        return mark, item

    def mark(self) -> Any:
        """The upstream's mark before the next item."""
        return self.upstream.mark() if self._peeked is None else self._peeked[0]

    def forget(self) -> None:
        """The upstream moves elsewhere (a restore): the item taken ahead is no longer next."""
        self._peeked = None

    def one_shard(self, item: Any) -> OneShard:
        """``item`` as a source that tells its reader what comes next."""
        return OneShard(item, self.peek, self.lookahead)
