"""A long shard list kept as two objects: :class:`PackedUrls`.

A million URLs as ``str`` objects take ~90 MB and a reference count each, which every forked DataLoader worker
writes to (and so copies). :class:`PackedUrls` keeps their UTF-8 bytes end to end and where each ends: ~45 MB in
two buffers, shared with forked workers, pickled as two buffers. A brace pattern of one numeric range
(``s3://b/train-{000000..999999}.tar``, the usual shape of a large dataset) is packed without making a ``str``
per URL at all (:meth:`PackedUrls.of_pattern`): a million in a few tens of milliseconds. Both
:class:`~shardstream.training.TrainingDataset` (streamed shard lists) and :func:`~shardstream.spec.load_spec`
(long patterns) keep their lists this way; a URL becomes a ``str`` only when it is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

from .._lazy import lazy_module
from .urls import MAX_NAMES

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # loaded when a list is packed, not when a spec module is imported

__all__ = ["PackedUrls"]

_STRETCH = 4096  # URLs decoded at once when iterating


#: a brace pattern of one numeric range and nothing else to expand (no other brace, escape, ``${VAR}`` or ``::``)
_ONE_RANGE = re.compile(r"^([^{}\\$]*)\{(\d+)\.\.(\d+)\}([^{}\\$]*)$")


class PackedUrls(Sequence[str]):
    """A shard list as two objects whatever its length: the URLs' UTF-8 bytes end to end, and where each ends
    (an int64 array). A million URLs take ~45 MB instead of ~90 MB of ``str`` objects, pickle as two buffers
    (a DataLoader worker's copy), and stay shared with forked workers (no reference count per URL to write).

    >>> urls = PackedUrls(["a.tar", "s3://b/ü.tar"])
    >>> len(urls), urls[1], urls[-2], list(urls) == ["a.tar", "s3://b/ü.tar"]
    (2, 's3://b/ü.tar', 'a.tar', True)
    """

    __slots__ = ("_data", "_ends")

    def __init__(self, urls: Iterable[str]):
        urls = urls if isinstance(urls, (list, tuple)) else list(urls)
        self._data = "".join(urls).encode("utf-8", "surrogateescape")
        sizes = np.fromiter(map(len, urls), dtype=np.int64, count=len(urls))
        if len(self._data) != int(sizes.sum()):  # not all ASCII: count the encoded bytes
            sizes = np.fromiter((len(u.encode("utf-8", "surrogateescape")) for u in urls), dtype=np.int64,
                                count=len(urls))
        self._ends = np.cumsum(sizes)

    @classmethod
    def of_pattern(cls, pattern: str, least: int = 1) -> PackedUrls | None:
        """The URLs of a brace pattern of one numeric range of equal-width ends (``s3://b/train-{000000..999999}.tar``),
        packed without making a ``str`` per URL (a million in a few tens of milliseconds); None for any other
        pattern (expand it with :func:`~shardstream.io.urls.expand_urls`), or one that names fewer than ``least``
        URLs. The same URLs, in the same order.

        >>> list(PackedUrls.of_pattern("s3://b/t-{08..11}.tar"))
        ['s3://b/t-08.tar', 's3://b/t-09.tar', 's3://b/t-10.tar', 's3://b/t-11.tar']
        >>> PackedUrls.of_pattern("t-{1..10}.tar") is None  # ends of different widths: expanded the usual way
        True
        """
        m = _ONE_RANGE.match(pattern)
        if m is None or not pattern.isascii() or "::" in pattern:
            return None
        prefix, first, last, suffix = m.groups()
        start, stop = int(first), int(last)
        if len(first) != len(last) or start > stop or not least <= stop - start + 1 <= MAX_NAMES:
            return None  # other widths, a descending range, too few, or over the cap (expand_urls says why)
        numbers = np.arange(start, stop + 1, dtype=np.int64)
        width, at = len(first), len(prefix)
        rows = np.empty((len(numbers), at + width + len(suffix)), dtype=np.uint8)
        rows[:, :at] = np.frombuffer(prefix.encode(), dtype=np.uint8)
        for k in range(width):  # one digit column at a time: no n x width array of int64
            rows[:, at + k] = numbers // 10 ** (width - 1 - k) % 10 + ord("0")
        rows[:, at + width:] = np.frombuffer(suffix.encode(), dtype=np.uint8)
        packed = cls.__new__(cls)
        packed._data = rows.tobytes()
        packed._ends = np.arange(1, len(numbers) + 1, dtype=np.int64) * rows.shape[1]
        return packed

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self._ends)
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"shard {i} of a list of {n} shards")
        start = int(self._ends[j - 1]) if j else 0
        return self._data[start : int(self._ends[j])].decode("utf-8", "surrogateescape")

    def __iter__(self) -> Iterator[str]:
        """The URLs in order, decoded a few thousand at a time (a whole pass costs about what making the
        list of ``str`` would; memory stays one stretch of URLs)."""
        data, ends, start = self._data, self._ends, 0
        for lo in range(0, len(ends), _STRETCH):
            stretch_ends = ends[lo : lo + _STRETCH].tolist()
            chunk = data[start : stretch_ends[-1]].decode("utf-8", "surrogateescape")
            if len(chunk) == stretch_ends[-1] - start:  # ASCII: byte offsets are character offsets
                at = 0
                for end in stretch_ends:
                    yield chunk[at : end - start]
                    at = end - start
            else:
                for end in stretch_ends:
                    yield data[start:end].decode("utf-8", "surrogateescape")
                    start = end
            start = stretch_ends[-1]

    def __repr__(self) -> str:
        return f"PackedUrls({len(self)} URLs)"

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same URLs in the same order (a tuple or list of them too)."""
        if isinstance(other, PackedUrls):
            return self._data == other._data and bool(np.array_equal(self._ends, other._ends))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))  # as the tuple of the same URLs, which it equals
