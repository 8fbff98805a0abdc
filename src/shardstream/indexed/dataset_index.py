"""The dataset index: one JSON file listing a dataset's shards, their sample counts and their index files.

A whole dataset then opens with one path (``IndexedDataset("train.json")``), and ``len()`` needs no shard::

    {"format": "shardstream-dataset-index", "version": 1, "rule": "first-dot", "lowercase": true,
     "samples": 30000,
     "shards": [{"url": "train-000000.tar", "index": "train-000000.tar.ssidx", "samples": 10000,
                 "size": 5130240, "fingerprint": "9c0e..."}, ...]}

``url`` and ``index`` are relative to the directory of the JSON file (or absolute paths, or URLs); ``size`` and
``fingerprint`` repeat what each shard's sidecar says (:mod:`.shardindex`), so a sidecar rebuilt for a changed
shard without rebuilding the dataset index is caught too. :func:`index_dataset` (re)builds the sidecars that are
missing or stale and writes the file.

>>> from shardstream.indexed import indexed_shard_writer
>>> with indexed_shard_writer("ds-%03d.tar", maxcount=2) as sink:
...     for i in range(5):
...         _ = sink.write({"__key__": f"s{i}", "cls": i})
>>> ds_index = index_dataset(sink.shards, "ds.json")
>>> len(ds_index), [shard.samples for shard in DatasetIndex.load("ds.json").shards]
(5, [2, 2, 1])
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..errors import ConfigError, OpenError, StaleIndexError
from ..io.files import write_file
from ..io.trust import urls_from_document
from ..logs import progress_bar
from ..redact import redacting_logger
from ..samples import Handler, RuleSpec
from .shardindex import ShardIndex, rule_spec, sidecar_path
from .source import LocalSource, local_path, open_source

if TYPE_CHECKING:
    from . import build
else:
    build = lazy_module("shardstream.indexed.build")  # the writer and the codecs load when an index is built

log = redacting_logger(__name__)

__all__ = ["DatasetIndex", "ShardEntry", "describe", "index_dataset"]

FORMAT = "shardstream-dataset-index"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class ShardEntry:
    """One shard of a dataset index; ``url`` and ``index`` are resolved (usable as they are)."""

    url: str
    index: str
    samples: int
    size: int
    fingerprint: str


@dataclasses.dataclass(frozen=True)
class DatasetIndex:
    """The shards of a dataset, in order, with their sample counts; ``path`` is where it was loaded from."""

    shards: tuple[ShardEntry, ...]
    rule: str = "first-dot"
    lowercase: bool = True
    path: str | None = None

    def __len__(self) -> int:
        return sum(shard.samples for shard in self.shards)

    @classmethod
    def load(cls, url: str | os.PathLike[str], *, allow_commands: bool = False) -> DatasetIndex:
        """Read a dataset index file (a path, ``file:`` URL or any URL with a registered byte source).

        The shard and index URLs it names are checked by :func:`~shardstream.io.trust.urls_from_document`: one
        that runs a command (``pipe:CMD``) raises :class:`~shardstream.errors.UnsafeURLError` unless
        ``allow_commands=True``.
        """
        url = os.fspath(url)
        source = open_source(url)
        try:
            data = source.read(0, source.size)
        finally:
            source.close()
        try:
            doc = json.loads(data)
            result = cls(_entries(url, doc), doc["rule"], doc["lowercase"], url)
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            problem = f"no {e} field" if isinstance(e, KeyError) else str(e)
            raise StaleIndexError(
                f"the dataset index {url!r} is unreadable ({problem}); rebuild it with "
                "shardstream.indexed.index_dataset(shards, output)",
                url=url,
            ) from e
        named = [u for shard in result.shards for u in (shard.url, shard.index)]
        urls_from_document(named, document=url, allow_commands=allow_commands)
        return result

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the JSON file, with shard and index paths relative to its directory where they are local."""
        path = os.fspath(path)
        doc = {
            "format": FORMAT, "version": VERSION, "rule": self.rule, "lowercase": self.lowercase,
            "samples": len(self),
            "shards": [
                {**dataclasses.asdict(s), "url": _relative(path, s.url), "index": _relative(path, s.index)}
                for s in self.shards
            ],
        }  # fmt: skip
        write_file(path, (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8"), "the dataset index")
        return path


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is {value!r}, not a count (an integer >= 0)")
    return value


def _entries(url: str, doc: object) -> tuple[ShardEntry, ...]:
    """The shard entries of a parsed dataset index, every field checked (a ValueError says what is wrong)."""
    if not isinstance(doc, dict):
        raise ValueError(f"the file holds a JSON {type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} version {VERSION} file")
    if not isinstance(doc.get("rule"), str) or not isinstance(doc.get("lowercase"), bool):
        raise ValueError("'rule' must be a string and 'lowercase' true or false")
    shards = doc.get("shards")
    if not isinstance(shards, list):
        raise ValueError(f"'shards' is {type(shards).__name__}, not a list")
    entries = []
    for number, s in enumerate(shards):
        what = f"shard {number}"
        if not isinstance(s, dict):
            raise ValueError(f"{what} is a JSON {type(s).__name__}, not an object")
        for name in ("url", "index", "fingerprint"):
            if not isinstance(s.get(name), str) or not s[name]:
                raise ValueError(f"{what}: {name!r} is {s.get(name)!r}, not a non-empty string")
        entries.append(ShardEntry(_resolve(url, s["url"]), _resolve(url, s["index"]),
                                  _count(s.get("samples"), f"{what}: 'samples'"),
                                  _count(s.get("size"), f"{what}: 'size'"), s["fingerprint"]))  # fmt: skip
    total = doc.get("samples")
    if total is not None and _count(total, "'samples'") != sum(e.samples for e in entries):
        raise ValueError(f"'samples' is {total} but the shards hold {sum(e.samples for e in entries)}")
    return tuple(entries)


def _resolve(base: str, url: str) -> str:
    """``url`` as written in the index at ``base``, made usable from the current directory."""
    if local_path(url) != url or os.path.isabs(url):  # a URL (file: included) or an absolute path
        return url
    if local_path(base) is None:
        return posixpath.join(posixpath.dirname(base), url)
    return os.path.normpath(os.path.join(os.path.dirname(local_path(base) or base), url))


def _relative(index_path: str, url: str) -> str:
    path = local_path(url)
    if path is None or path != url:  # URLs stay as they are
        return url
    start = os.path.dirname(os.path.abspath(index_path))
    return os.path.relpath(os.path.abspath(path), start).replace(os.sep, "/")


def _fresh_sidecar(shard: str, rule: tuple[str, bool]) -> ShardIndex | None:
    """The shard's saved sidecar if it exists, matches the shard and was built with ``rule``; else None."""
    try:
        index = ShardIndex.load(shard)
        with LocalSource(local_path(shard) or shard, shard) as source:
            index.check(source)
    except (OpenError, StaleIndexError):
        return None
    return index if (index.rule, index.lowercase) == rule else None


def index_dataset(
    shards: Iterable[str | os.PathLike[str]] | str,
    output: str | os.PathLike[str],
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
    rebuild: bool = False,
    accelerate: bool | None = None,
    progress: bool | None = None,
) -> DatasetIndex:
    """Write the dataset index ``output`` for local ``shards``, (re)building sidecars that are missing or stale.

    Fresh sidecars built with the same rule are reused (``rebuild=True`` rebuilds them all). Returns the index.
    ``progress``: a progress bar of the shards on stderr (None: when stderr is a terminal; True; False).
    The logger ``shardstream.indexed.dataset_index`` says which sidecars were built (DEBUG) and what was written.

    >>> from shardstream.indexed import indexed_shard_writer
    >>> with indexed_shard_writer("ix-%d.tar", maxcount=2) as sink:
    ...     for i in range(3):
    ...         _ = sink.write({"__key__": f"{i}", "cls": i})
    >>> [shard.samples for shard in index_dataset(sink.shards, "ix.json", progress=False).shards]
    [2, 1]
    """
    paths = [os.fspath(shards)] if isinstance(shards, (str, os.PathLike)) else [os.fspath(s) for s in shards]
    spec = rule_spec(rule)
    entries = []
    built = 0
    bar = progress_bar(progress, len(paths), desc="indexing", unit=" shards")
    try:
        for shard in paths:
            index = None if rebuild else _fresh_sidecar(shard, spec)
            if index is None:
                index = build.index_shard(shard, rule=rule, handler=handler, accelerate=accelerate)
                built += 1
                log.debug("built the index of %s: %d samples", shard, len(index))
            entries.append(ShardEntry(shard, sidecar_path(shard), len(index), index.size, index.fingerprint))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    result = DatasetIndex(tuple(entries), *spec)
    result.save(output)
    log.info("wrote the dataset index %s: %d shards (%d indexes built, %d reused), %d samples", os.fspath(output),
             len(entries), built, len(entries) - built, sum(e.samples for e in entries))
    return dataclasses.replace(result, path=os.fspath(output))


def describe(source: Any, rule: RuleSpec) -> tuple[list[ShardEntry], dict[int, ShardIndex], str | None]:
    """What an :class:`~shardstream.indexed.IndexedDataset` is built from: the shard entries (with counts), the
    indexes already loaded, and the dataset index path, from what was given (a ``.json`` dataset index, a
    :class:`DatasetIndex`, a shard or a list of shards); a key rule other than the indexes' is refused."""
    if isinstance(source, (str, os.PathLike)) and os.fspath(source).endswith(".json"):
        source = DatasetIndex.load(source)
    if isinstance(source, DatasetIndex):
        if rule is not None and rule_spec(rule) != (source.rule, source.lowercase):
            raise StaleIndexError(
                f"the dataset index {source.path!r} was built with the key rule {source.rule!r} (lowercase="
                f"{source.lowercase}), not {rule_spec(rule)[0]!r}: rebuild it with "
                "shardstream.indexed.index_dataset(shards, output, rule=...)",
                url=source.path,
            )
        return list(source.shards), {}, source.path
    shards = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not shards:
        raise ConfigError("IndexedDataset needs a dataset index (.json), a shard, or a list of shards")
    entries, loaded = [], {}
    for number, shard in enumerate(os.fspath(s) for s in shards):
        index = loaded[number] = ShardIndex.load(shard)
        if rule is not None and rule_spec(rule) != (index.rule, index.lowercase):
            raise StaleIndexError(
                f"the index of shard {shard!r} was built with the key rule {index.rule!r}, not "
                f"{rule_spec(rule)[0]!r}: rebuild it with shardstream.indexed.index_shard({shard!r}, rule=...)",
                url=shard,
            )
        entries.append(ShardEntry(shard, sidecar_path(shard), len(index), index.size, index.fingerprint))
    return entries, loaded, None
