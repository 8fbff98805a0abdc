"""Building shard indexes: by scanning headers (:func:`index_shard`), while writing (:func:`indexed_shard_writer`),
and exporting DALI index files (:func:`write_dali_index`).

Members become samples by the same rule and the same checks as in streaming (:func:`~shardstream.samples.
group_samples`): a member without extension, a duplicate extension or an interleaved key raise the same typed
errors, or are skipped under a skipping ``handler`` (then the index skips exactly what a stream would).
Compressed shards cannot be indexed (their offsets do not allow random access): decompress them first.

>>> from shardstream.writer import ShardWriter
>>> with indexed_shard_writer("part-%03d.tar", maxcount=2) as sink:
...     for i in range(3):
...         _ = sink.write({"__key__": f"s{i}", "txt": "hello", "cls": i})
>>> from shardstream.indexed import ShardIndex
>>> ShardIndex.load("part-001.tar").keys()
['s2']
>>> index_shard("part-000.tar", save=False) == ShardIndex.load("part-000.tar")
True
"""

from __future__ import annotations

import os
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Any

from ..errors import ConfigError
from ..io.files import write_file
from ..samples import DEFAULT_RULE, Handler, KeyRule, RuleSpec, group_samples
from ..tar.compress import compression
from ..tar.index import IndexEntry, format_dali_index, scan_members
from ..writer import ShardWriter
from .shardindex import _U32, ShardIndex, fingerprint, rule_spec
from .source import LocalSource, local_path

__all__ = ["index_from_entries", "index_shard", "indexed_shard_writer", "write_dali_index", "write_indexes"]


def _local(shard: str | os.PathLike[str], doing: str) -> str:
    path = local_path(shard)
    if path is None:
        raise ConfigError(
            f"{doing} needs a local shard, not {os.fspath(shard)!r}: random access reads local files (copy the "
            "shard, index it, and keep the index next to it)"
        )
    return path


def _refuse_compressed(source: LocalSource) -> None:
    kind = compression(source.read(0, 10))
    if kind is not None:
        raise ConfigError(
            f"shard {source.url!r} is {kind}-compressed: a compressed tar cannot be read at random offsets, so it "
            "cannot be indexed; decompress it (e.g. `gunzip -k`, `zstd -d`) and index the plain .tar"
        )


def _grouped(
    entries: Iterable[IndexEntry], url: str, rule: RuleSpec, handler: Handler | None
) -> Iterator[tuple[str, list[tuple[str, IndexEntry]]]]:
    """``(key, [(ext, entry), ...])`` per sample, grouped exactly as streaming groups them."""
    members = ((entry[0], entry, entry[1]) for entry in entries)
    for sample in group_samples(members, url, rule=rule, handler=handler):
        fields = iter(sample.items())
        next(fields), next(fields)  # __key__, __url__
        yield sample["__key__"], list(fields)


def _fast_arrays(entries: list[IndexEntry], split: Callable[[str], tuple[str, str | None]]) -> tuple | None:
    """The index arrays of well-formed samples in one pass, or None at anything irregular (a missing or
    repeated extension, a repeated key, an extension starting with ``__``): :func:`group_samples` then decides."""
    ext_ids: dict[str, int] = {}
    offsets, sizes, starts, ids = array("Q"), array("Q"), array(_U32), array(_U32)
    keys: list[str] = []
    seen: set[str] = set()
    current: str | None = None
    fields: list[str] = []
    for name, offset, size in entries:
        key, ext = split(name)
        if not ext or ext[:2] == "__":
            return None
        if key != current:
            if key in seen:
                return None
            seen.add(key)
            keys.append(key)
            starts.append(len(ids))
            current, fields = key, [ext]
        elif ext in fields:
            return None
        else:
            fields.append(ext)
        ext_id = ext_ids.get(ext)
        if ext_id is None:
            ext_id = ext_ids[ext] = len(ext_ids)
        ids.append(ext_id)
        offsets.append(offset)
        sizes.append(size)
    starts.append(len(ids))
    encoded = [key.encode("utf-8", "surrogateescape") for key in keys]
    key_ends = array(_U32, [0])
    key_ends.extend(accumulate(map(len, encoded)))
    return list(ext_ids), offsets, sizes, starts, key_ends, ids, b"".join(encoded)


def _index(entries: list[IndexEntry], source: LocalSource, rule: RuleSpec, handler: Handler | None) -> ShardIndex:
    split = (rule if isinstance(rule, KeyRule) else KeyRule(rule) if rule is not None else DEFAULT_RULE).split
    fprint = fingerprint(source)
    arrays = _fast_arrays(entries, split)
    if arrays is not None:
        return ShardIndex(source.url, source.size, fprint, *rule_spec(rule), *arrays)
    samples = (
        (key, [(ext, entry[1], entry[2]) for ext, entry in fields])
        for key, fields in _grouped(entries, source.url, rule, handler)
    )
    return ShardIndex.from_samples(samples, url=source.url, size=source.size, fingerprint=fprint, rule=rule)


def index_shard(
    shard: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
    accelerate: bool | None = None,
    save: bool = True,
) -> ShardIndex:
    """Index a local shard by scanning its headers (member data is not read) and save its sidecar.

    ``output`` defaults to :func:`~shardstream.indexed.sidecar_path` of the shard; ``save=False`` only returns
    the index. ``rule`` and ``handler`` as in streaming; ``accelerate`` as in
    :func:`~shardstream.tar.iter_members`.

    >>> from shardstream.writer import TarWriter
    >>> with TarWriter("one.tar") as sink:
    ...     _ = sink.write({"__key__": "a", "txt": "x", "cls": 1})
    >>> index_shard("one.tar")
    ShardIndex('one.tar', samples=1, members=2, size=10240)
    """
    url = os.fspath(shard)
    with LocalSource(_local(shard, "indexing"), url) as source:
        _refuse_compressed(source)
        entries = scan_members(source.buffer, url, accelerate=accelerate)
        index = _index(entries, source, rule, handler)
    if save:
        index.save(output)
    return index


def index_from_entries(
    shard: str | os.PathLike[str],
    entries: Iterable[tuple[str, Iterable[tuple[str, int, int]]]],
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
) -> ShardIndex:
    """The index of a shard just written, from its writer's ``index_entries`` (no scan; equal to :func:`index_shard`).

    ``entries`` are ``(key, [(field, data_offset, size), ...])`` as :class:`~shardstream.writer.TarWriter`
    records them with ``record_index=True``; member names are rebuilt as ``key + "." + field`` and split by
    ``rule``, so a key that the rule would cut elsewhere gives the same samples as reading the shard.
    """
    url = os.fspath(shard)
    members = [(f"{key}.{field}", offset, size) for key, fields in entries for field, offset, size in fields]
    with LocalSource(_local(shard, "indexing"), url) as source:
        _refuse_compressed(source)
        return _index(members, source, rule, handler)


def write_indexes(sink: Any, *, rule: RuleSpec = None) -> list[str]:
    """Save the sidecars of every shard a closed ``ShardWriter(..., record_index=True)`` wrote; returns their paths."""
    if getattr(sink, "index_entries", None) is None:
        raise ConfigError("write_indexes needs a ShardWriter created with record_index=True")
    return [index_from_entries(path, entries, rule=rule).save() for path, entries in sink.index_entries.items()]


class _SaveIndex:
    """``post=`` hook of :func:`indexed_shard_writer`: save the finished shard's sidecar, then the user's post."""

    def __init__(self, rule: RuleSpec, post: Callable[[str], Any] | None):
        self.rule, self.post = rule, post
        self.sink: Callable[[], Any] = lambda: None

    def __call__(self, path: str) -> None:
        sink = self.sink()
        entries = sink.index_entries.pop(path)  # the writer keeps no entries for finished shards: bounded memory
        index_from_entries(path, entries, rule=self.rule).save()
        if self.post is not None:
            self.post(path)


def indexed_shard_writer(
    pattern: str, *, rule: RuleSpec = None, post: Callable[[str], Any] | None = None, **kw: Any
) -> Any:
    """A :class:`~shardstream.writer.ShardWriter` that saves each shard's sidecar index as the shard is finished.

    The index comes from the offsets the writer records (``record_index=True``): nothing is read back but the
    fingerprint's 128 KiB. ``post`` (yours) is called after the sidecar is saved. Shards must be local and
    uncompressed. Other arguments go to ``ShardWriter``.
    """
    if kw.get("compress") not in (None, False, ""):
        raise ConfigError(f"indexed shards cannot be compressed (compress={kw['compress']!r}): write plain .tar")
    hook = _SaveIndex(rule, post)
    sink = ShardWriter(pattern, post=hook, record_index=True, **kw)
    hook.sink = weakref.ref(sink)
    return sink


def write_dali_index(
    shard: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
) -> str:
    """Write NVIDIA DALI's webdataset index (format v1.2) of a local shard; returns its path.

    ``output`` defaults to the shard's path with ``.tar`` replaced by ``.idx`` (as DALI's ``wds2idx.py``).
    Extensions are split by ``rule`` (default: ours, lower-cased; DALI's own tool keeps their case: pass
    ``rule=KeyRule(lowercase=False)`` for mixed-case extensions).

    >>> from shardstream.writer import TarWriter
    >>> with TarWriter("d.tar") as sink:
    ...     _ = sink.write({"__key__": "sample0000", "cls": 1, "txt": "some text"})
    >>> print(open(write_dali_index("d.tar")).read(), end="")
    v1.2 1
    cls 512 1 sample0000.cls txt 1536 9 sample0000.txt
    """
    url = os.fspath(shard)
    if output is None:
        output = (url[:-4] if url.endswith(".tar") else url) + ".idx"
    with LocalSource(_local(shard, "a DALI index"), url) as source:
        _refuse_compressed(source)
        entries = scan_members(source.buffer, url)
    samples = (
        [(ext, offset, size, name) for ext, (name, offset, size) in fields]
        for _, fields in _grouped(entries, url, rule, handler)
    )
    text = format_dali_index(samples, url)
    write_file(output, text.encode("utf-8", "surrogateescape"), "the DALI index")
    return os.fspath(output)
