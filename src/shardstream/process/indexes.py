"""The indexes of a shard a task just wrote, from what its writer recorded (no scan of the shard).

A :class:`~shardstream.writer.ShardWriter` with ``record_index=True`` keeps, per shard, the keys, field names,
data offsets and sizes it wrote (:class:`~shardstream.writer.records.WrittenIndex`). From them this module writes
the sidecar index (``.ssidx``, equal to what :func:`~shardstream.indexed.index_shard` builds by scanning) and
the DALI index (``.idx``, equal to :func:`~shardstream.indexed.write_dali_index`'s), reading back only the
fingerprint's bytes. :func:`shard_indexes` also gives the shard's entry of the dataset index
(:class:`~shardstream.indexed.ShardEntry`: samples, size, fingerprint), so the job writes ``dataset.json`` from
what its tasks hand back, without reading the sidecars again. Where the default key rule would read a member otherwise than the writer wrote it (a key
with a dot in its last part, a field starting with ``__``, a key written twice in the shard, whitespace that
DALI's format cannot hold), it falls back to those scanning functions, so the result is always theirs.

>>> from shardstream.writer import ShardWriter
>>> with ShardWriter("rec-%03d.tar", record_index=True) as sink:
...     _ = sink.write({"__key__": "a", "txt": "x", "CLS": "1"})
>>> write_shard_indexes(sink.shards[0], sink.index_records[sink.shards[0]])
('rec-000.tar.ssidx', 'rec-000.idx')
>>> print(open("rec-000.idx").read(), end="")
v1.2 1
cls 512 1 a.CLS txt 1536 1 a.txt
"""

from __future__ import annotations

from array import array
from itertools import accumulate

from ..indexed import ShardEntry, ShardIndex, fingerprint, index_shard, write_dali_index
from ..indexed.shardindex import _U32, rule_spec
from ..indexed.source import LocalSource
from ..io.files import write_file
from ..samples import DEFAULT_RULE
from ..tar.index import DALI_VERSION
from ..writer.records import WrittenIndex

__all__ = ["shard_indexes", "write_shard_indexes"]


def _extensions(record: WrittenIndex) -> dict[tuple[str, ...], tuple[str, ...]] | None:
    """Per set of field names, the extensions the default rule reads; None where it reads a sample otherwise."""
    split = DEFAULT_RULE.split
    exts: dict[tuple[str, ...], tuple[str, ...]] = {}
    for fields in set(record.fields):
        got = tuple(split("k." + field)[1] or "" for field in fields)
        if any(not e or e[:2] == "__" or len(e.split()) != 1 for e in got) or len(set(got)) != len(got):
            return None
        exts[fields] = got
    keys = record.keys
    if len(set(keys)) != len(keys):
        return None
    joined = "".join(keys)
    if "." not in joined and [joined] == joined.split(maxsplit=1):  # no dot, no whitespace: every key is fine
        return exts
    for key in keys:  # the rule must split KEY.FIELD at the dot the writer put there (and DALI needs no spaces)
        if split(key + ".x")[0] != key or len(key.split()) != 1:
            return None
    return exts


def _dali_text(record: WrittenIndex, exts: dict[tuple[str, ...], tuple[str, ...]]) -> str:
    """DALI's index text (what :func:`~shardstream.tar.index.format_dali_index` writes for these members),
    one line per sample from a template per set of fields: ``EXT OFFSET SIZE KEY.FIELD`` per member."""
    def escaped(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    if len(exts) == 1:  # one set of fields: each line from columns (key, then offset and size per field)
        ((names, got),) = exts.items()
        n, offsets, sizes = len(names), record.offsets, record.sizes
        line = " ".join(f"{escaped(e)} {{{2 * j + 1}}} {{{2 * j + 2}}} {{0}}.{escaped(name)}"
                        for j, (e, name) in enumerate(zip(got, names, strict=True))) + "\n"  # fmt: skip
        columns = [column for j in range(n) for column in (offsets[j::n], sizes[j::n])]
        return f"{DALI_VERSION} {len(record.keys)}\n" + "".join(map(line.format, record.keys, *columns))
    templates = {names: " ".join(f"{escaped(e)} {{}} {{}} {{k}}.{escaped(n)}" for e, n in zip(got, names, strict=True))
                 + "\n" for names, got in exts.items()}  # fmt: skip
    offsets, sizes, at = record.offsets, record.sizes, 0
    lines = []
    for key, names in zip(record.keys, record.fields, strict=True):
        n = len(names)
        values = [0] * (2 * n)
        values[0::2], values[1::2] = offsets[at : at + n], sizes[at : at + n]
        lines.append(templates[names].format(*values, k=key))
        at += n
    return f"{DALI_VERSION} {len(lines)}\n" + "".join(lines)


def write_shard_indexes(path: str, record: WrittenIndex) -> tuple[str, str]:
    """Write the sidecar and DALI indexes of the local shard ``path`` that ``record`` describes; returns their
    paths. Both are written all or nothing (a temporary name renamed into place)."""
    entry, dali = shard_indexes(path, record)
    return entry.index, dali


def shard_indexes(path: str, record: WrittenIndex) -> tuple[ShardEntry, str]:
    """:func:`write_shard_indexes`, returning the shard's dataset index entry (what
    :func:`~shardstream.indexed.index_dataset` reads back from the sidecar) and the DALI index's path."""
    dali = (path[: -len(".tar")] if path.endswith(".tar") else path) + ".idx"
    exts = _extensions(record)
    if exts is None:  # the rule reads these members otherwise: the scanning builders decide
        scanned = index_shard(path)
        sidecar = scanned.save()
        write_dali_index(path, dali)
        return ShardEntry(path, sidecar, len(scanned), scanned.size, scanned.fingerprint), dali
    with LocalSource(path) as source:
        size, fprint = source.size, fingerprint(source)
    keys, fields = record.keys, record.fields
    ext_ids: dict[str, int] = {}
    ids_of = {names: [ext_ids.setdefault(e, len(ext_ids)) for e in exts[names]]  # numbered as first met
              for names in dict.fromkeys(fields)}  # fmt: skip
    ids, starts, key_ends = array(_U32), array(_U32, [0]), array(_U32, [0])
    if len(ids_of) == 1:  # one set of fields: its ids, sample after sample
        ids.extend(next(iter(ids_of.values())) * len(fields))
    else:
        for names in fields:
            ids.extend(ids_of[names])
    starts.extend(accumulate(map(len, fields)))
    blob = "".join(keys).encode("utf-8", "surrogateescape")
    lengths = map(len, keys) if len(blob) == sum(map(len, keys)) else (len(k.encode("utf-8", "surrogateescape"))
                                                                      for k in keys)  # fmt: skip
    key_ends.extend(accumulate(lengths))
    index = ShardIndex(path, size, fprint, *rule_spec(None), list(ext_ids), record.offsets, record.sizes, starts,
                       key_ends, ids, blob)  # fmt: skip
    sidecar = index.save()
    text = _dali_text(record, exts)
    write_file(dali, text.encode("utf-8", "surrogateescape"), "the DALI index")
    return ShardEntry(path, sidecar, len(keys), size, fprint), dali
