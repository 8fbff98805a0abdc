"""``Content-Range``: the one parser of the byte ranges servers answer with (the remote readers and the viewer),
and the two answers to a ``Range`` request that carry no range: :class:`RangeNotSatisfiable` (416: nothing from
that offset on) and :class:`RangeIgnored` (200: the whole object, refused unread by a stream told to).

A header that makes no sense (not ``bytes FIRST-LAST/TOTAL``, negative, reversed, past its total, beyond what a
file offset can be) is a ValueError that quotes it and says what is wrong; callers turn it into their
:class:`~shardstream.errors.OpenError` (or retry it, as a header block cut short reads the same).

>>> split_status_line("bytes 100-199/1000")
(100, 1000)
>>> unsatisfied_total("bytes */1000")
1000
"""

from __future__ import annotations

import re

from ..errors import OpenError

__all__ = ["RangeIgnored", "RangeNotSatisfiable", "parse_content_range", "split_status_line", "unsatisfied_total"]

_CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19}|\*)", re.IGNORECASE)
_UNSATISFIED = re.compile(r"bytes \*/(\d{1,19})", re.IGNORECASE)
_MAX_OFFSET = (1 << 63) - 1  # a byte offset beyond this is no file's


class RangeNotSatisfiable(OpenError):
    """A part asked for bytes from beyond the end of the object (HTTP 416); ``total`` is its size if stated."""

    def __init__(self, message: str, url: str, total: int | None):
        super().__init__(message, url=url)
        self.total = total


class RangeIgnored(OpenError):
    """A request for bytes from an offset other than 0 got the whole object (HTTP 200) while its stream was told
    not to read through it (``ranged_only``): its connection was closed with the body unread."""


def parse_content_range(content_range: str) -> tuple[int, int, int | None]:
    """``"bytes FIRST-LAST/TOTAL"`` -> ``(FIRST, LAST, TOTAL)`` (TOTAL None for ``*``). A ValueError that quotes the
    header and says what is wrong when it is malformed, negative, reversed (FIRST > LAST), past its total
    (LAST >= TOTAL) or beyond 2**63 - 1.

    >>> parse_content_range("bytes 0-1048575/*")
    (0, 1048575, None)
    >>> parse_content_range("bytes 5-3/10")
    Traceback (most recent call last):
    ...
    ValueError: bad Content-Range 'bytes 5-3/10': the first byte (5) is after the last (3)
    """
    text = content_range.strip()
    match = _CONTENT_RANGE.fullmatch(text)
    if match is None:
        raise ValueError(f"bad Content-Range {text[:100]!r}: not 'bytes FIRST-LAST/TOTAL' with byte offsets (digits) "
                         "and a TOTAL that is a number or '*'")
    first, last = int(match.group(1)), int(match.group(2))
    total = None if match.group(3) == "*" else int(match.group(3))
    if max(last, total or 0) > _MAX_OFFSET:
        raise ValueError(f"bad Content-Range {text!r}: offsets beyond 2**63 - 1")
    if first > last:
        raise ValueError(f"bad Content-Range {text!r}: the first byte ({first}) is after the last ({last})")
    if total is not None and last >= total:
        raise ValueError(f"bad Content-Range {text!r}: the last byte ({last}) is not within the total ({total})")
    return first, last, total


def split_status_line(content_range: str) -> tuple[int, int | None]:
    """``"bytes START-END/TOTAL"`` -> ``(START, TOTAL)`` (TOTAL None for ``*``); ValueError if malformed (see
    :func:`parse_content_range`)."""
    first, _, total = parse_content_range(content_range)
    return first, total


def unsatisfied_total(content_range: str | None) -> int | None:
    """The size a 416 answer states (``bytes */TOTAL``), if it states one."""
    match = _UNSATISFIED.fullmatch((content_range or "").strip())
    return int(match.group(1)) if match is not None and int(match.group(1)) <= _MAX_OFFSET else None
