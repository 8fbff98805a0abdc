"""Samples by column: :class:`SampleBatch`, and how a batch becomes tar members in a few list operations.

A converter that reads a table (JSON Lines, CSV, Parquet, Arrow) has its rows as columns, or close to it. Instead
of one sample dict per row, encoded and written one by one, it hands :meth:`ShardWriter.write_batch
<shardstream.writer.ShardWriter.write_batch>` a :class:`SampleBatch`: the keys, the field names and one list of
values per field. The shards and indexes are the same, byte for byte, as writing each sample with
:meth:`~shardstream.writer.ShardWriter.write`; only the per-sample Python work goes (the members of many samples
are packed by one C call).

>>> batch = SampleBatch(["a", "b"], ("txt", "cls"), [["x", "yz"], [b"1", b"2"]])
>>> list(batch.samples())
[{'__key__': 'a', 'txt': 'x', 'cls': b'1'}, {'__key__': 'b', 'txt': 'yz', 'cls': b'2'}]
>>> packed = pack_batch(batch)
>>> packed.fields, packed.members[:2], packed.nbytes
(('cls', 'txt'), [(b'a.cls', b'1'), (b'a.txt', b'x')], [2048, 2048])
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, islice
from operator import eq
from typing import Any, NamedTuple

from ..tar.writer import PAX_SIZE_LIMIT

__all__ = ["Packed", "SampleBatch", "pack_batch"]

_NAME = 100  # longest member name of one ustar block (longer names take the per-sample path)


class SampleBatch(NamedTuple):
    """Samples with the same fields, by column: sample ``i`` is ``{"__key__": keys[i], fields[j]: columns[j][i]}``.

    Values are bytes or str (written as UTF-8); anything else, or a batch the fast path does not take (a key
    repeated, a field name to check, a name over 100 bytes), is written sample by sample, with the same result.
    """

    keys: list[str]
    fields: tuple[str, ...]
    columns: list[list[Any]]

    def samples(self) -> Iterator[dict[str, Any]]:
        """The batch as sample dicts (what :meth:`ShardWriter.write` would be given)."""
        fields = self.fields
        for i, key in enumerate(self.keys):
            sample = {"__key__": key}
            for field, column in zip(fields, self.columns, strict=True):
                sample[field] = column[i]
            yield sample


class Packed(NamedTuple):
    """A batch ready for :meth:`~shardstream.tar.writer.TarStreamWriter.add_many`: keys, field names in member
    order, ``(member name, data)`` pairs and data sizes (sample after sample), and each sample's tar bytes."""

    keys: list[str]
    fields: tuple[str, ...]
    members: list[tuple[bytes, Any]]
    sizes: list[int]
    nbytes: list[int]


def _valid_field(name: Any, gzip_by_codec: bool) -> bool:
    return (name.__class__ is str and bool(name) and name[0] not in "._" and "/" not in name and "\0" not in name
            and not (gzip_by_codec and name[-2:].lower() == "gz"))  # fmt: skip


def pack_batch(batch: SampleBatch, *, encoder: Any = True, keep_meta: bool = False) -> Packed | None:
    """The members of ``batch`` as a writer with these ``encoder``/``keep_meta`` settings writes them, or None
    where the batch needs the per-sample path (see :class:`SampleBatch`; that path also words the errors)."""
    keys, fields, columns = batch
    if keep_meta or not (encoder is True or encoder is False):
        return None
    n = len(keys)
    if not n or not fields or len(columns) != len(fields) or len(set(fields)) != len(fields):
        return None
    if any(len(column) != n for column in columns) or not all(_valid_field(f, encoder is True) for f in fields):
        return None
    if set(map(type, keys)) != {str} or "" in keys or any(map(eq, keys, islice(keys, 1, None))):
        return None
    joined = "".join(keys)
    if "\0" in joined:
        return None
    if joined.isascii():
        key_bytes = list(map(str.encode, keys))
    else:
        key_bytes = [key.encode("utf-8", "surrogateescape") for key in keys]
    order = sorted(range(len(fields)), key=fields.__getitem__)
    suffixes = [b"." + fields[j].encode("utf-8", "surrogateescape") for j in order]
    if max(map(len, key_bytes)) + max(map(len, suffixes)) > _NAME:
        return None
    datas, lengths = [], []
    for j in order:
        column = columns[j]
        kinds = set(map(type, column))
        if kinds == {str}:
            try:
                column = list(map(str.encode, column))  # UTF-8, strict: as the per-sample path encodes str
            except UnicodeEncodeError:  # the per-sample path raises it at its sample
                return None
        elif kinds != {bytes}:
            return None
        sizes = list(map(len, column))
        if max(sizes) >= PAX_SIZE_LIMIT:
            return None
        datas.append(column)
        lengths.append(sizes)
    names = [[key + suffix for key in key_bytes] for suffix in suffixes]
    if len(order) == 1:
        members = list(zip(names[0], datas[0], strict=True))
        sizes = lengths[0]
        nbytes = [(size + 1023) & -512 for size in sizes]  # a header block, the data, NULs to 512
    else:
        members = list(chain.from_iterable(zip(*(zip(name, data, strict=True) for name, data in zip(names, datas, strict=True)), strict=True)))
        sizes = list(chain.from_iterable(zip(*lengths, strict=True)))
        nbytes = list(map(sum, zip(*([(size + 1023) & -512 for size in column] for column in lengths), strict=True)))
    return Packed(keys, tuple(fields[j] for j in order), members, sizes, nbytes)
