"""What a writer wrote, kept as numbers for building indexes (``record_index=True``; internal).

A :class:`WrittenIndex` holds, per sample, its key and its field names (one shared tuple per set of fields),
and per member its data offset and size in two integer arrays: a few bytes per member, no tuple per member.
:meth:`WrittenIndex.entries` gives the documented ``(key, [(field, data_offset, size), ...])`` lists.

>>> record = WrittenIndex()
>>> record.add("a", ("cls", "txt"), [512, 1536], [1, 5])
>>> record.entries(), len(record)
([('a', [('cls', 512, 1), ('txt', 1536, 5)])], 1)
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableMapping, Sequence

__all__ = ["EntriesView", "WrittenIndex"]

Entry = tuple[str, list[tuple[str, int, int]]]


class WrittenIndex:
    """Keys, field names, data offsets and sizes of the samples written to one tar, in order."""

    __slots__ = ("keys", "fields", "offsets", "sizes")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.fields: list[tuple[str, ...]] = []
        self.offsets = array("Q")
        self.sizes = array("Q")

    def add(self, key: str, fields: tuple[str, ...], offsets: Sequence[int], sizes: Sequence[int]) -> None:
        """Record one sample: its key, its field names and the offsets and sizes of their data."""
        self.keys.append(key)
        self.fields.append(fields)
        self.offsets.extend(offsets)
        self.sizes.extend(sizes)

    def add_many(self, keys: list[str], fields: tuple[str, ...], offsets: Sequence[int], sizes: Sequence[int]) -> None:
        """Record samples that all have the fields ``fields`` (offsets and sizes member after member)."""
        self.keys += keys
        self.fields += [fields] * len(keys)
        self.offsets.extend(offsets)
        self.sizes.extend(sizes)

    def __len__(self) -> int:
        return len(self.keys)

    def entries(self) -> list[Entry]:
        """``(key, [(field, data_offset, size), ...])`` per sample."""
        out: list[Entry] = []
        offsets, sizes, at = self.offsets, self.sizes, 0
        for key, fields in zip(self.keys, self.fields, strict=True):
            out.append((key, [(field, offsets[at + i], sizes[at + i]) for i, field in enumerate(fields)]))
            at += len(fields)
        return out

    def members(self) -> Iterator[tuple[str, str, int, int]]:
        """``(key, field, data_offset, size)`` per member, in archive order."""
        offsets, sizes, at = self.offsets, self.sizes, 0
        for key, fields in zip(self.keys, self.fields, strict=True):
            for field in fields:
                yield key, field, offsets[at], sizes[at]
                at += 1


class EntriesView(MutableMapping[str, list[Entry]]):
    """``ShardWriter.index_entries``: shard path -> entries lists, made on access from the :class:`WrittenIndex`
    per shard (removing a shard's entries removes its record: memory stays bounded)."""

    def __init__(self, records: dict[str, WrittenIndex]):
        self.records = records

    def __getitem__(self, path: str) -> list[Entry]:
        return self.records[path].entries()

    def __setitem__(self, path: str, value: list[Entry]) -> None:
        raise TypeError("index_entries is filled by the writer")

    def __delitem__(self, path: str) -> None:
        del self.records[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return repr(dict(self.items()))
