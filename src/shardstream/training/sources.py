"""What a :class:`~shardstream.training.TrainingDataset` reads: shards with an index, or shards streamed.

:func:`resolve` turns what the user gave into the shard sample counts and a reader:

- **indexed** (random access): an :class:`~shardstream.indexed.IndexedDataset`, a dataset index (``.json``) or
  shard URLs. Local shards without a sidecar index are indexed on the fly by a header scan (member data is not
  read; the sidecar is saved next to the shard, or in a private temporary folder when that directory is
  read-only). Remote shards need their sidecars next to them and a registered byte source
  (:func:`shardstream.indexed.register_source`), or ``cache_dir=``: then they are downloaded into the shard cache
  once and indexed there.
- **stream** (read front to back): shard URLs of any scheme the library opens; the sample count of each shard
  comes from ``lengths=``, a dataset index, a fresh sidecar, or one counting pass over the shard.

>>> from shardstream.writer import ShardWriter
>>> with ShardWriter("part-%02d.tar", maxcount=3) as sink:
...     for i in range(5):
...         _ = sink.write({"__key__": f"k{i}", "cls": i})
>>> resolve("part-{00..01}.tar", stream=True).lengths, resolve("part-{00..01}.tar").lengths
((3, 2), (3, 2))
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, OpenError, StaleIndexError
from ..indexed import DatasetIndex, IndexedDataset, ShardEntry, ShardIndex, index_shard, sidecar_path
from ..indexed.shardindex import rule_spec
from ..indexed.source import open_source
from ..io.cache import cache_opener
from ..io.packed import PackedUrls
from ..io.urls import expand_urls, local_path
from ..logs import progress_bar
from ..pipeline.stages import reading
from ..redact import redacting_logger

__all__ = ["PackedUrls", "Resolved", "resolve"]

log = redacting_logger(__name__)


@dataclasses.dataclass
class Resolved:
    """Sample counts per shard, and either a random-access ``reader`` or the ``urls`` to stream."""

    lengths: tuple[int, ...]
    reader: IndexedDataset | None = None
    urls: Sequence[str] = ()


def _fetched(urls: list[str], cache_dir: Any) -> list[str]:
    if cache_dir is None:
        return urls
    cache = cache_opener(cache_dir)
    return [url if local_path(url) is not None else cache.fetch(url) for url in urls]  # type: ignore[union-attr]


def _private_index_path(shard: str) -> str:
    folder = os.path.join(tempfile.gettempdir(), "shardstream-index")
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.blake2b(os.path.abspath(shard).encode(), digest_size=8).hexdigest()
    return os.path.join(folder, f"{os.path.basename(shard)}.{digest}.ssidx")


def _fresh_index(shard: str, where: str, rule: Any, checked: list | None = None) -> ShardIndex | None:
    """The index of ``shard`` at ``where`` when it is there, describes the shard and has the key rule; the
    identity of the file it was checked against is appended to ``checked``."""
    try:
        index = ShardIndex.load(shard, where)
        source = open_source(shard)
        try:
            index.check(source)
            identity = getattr(source, "identity", None)
        finally:
            source.close()
    except (OpenError, StaleIndexError, OSError):
        return None
    if (index.rule, index.lowercase) != rule_spec(rule):
        return None
    if checked is not None:
        checked.append(identity)
    return index


def _entry(shard: str, rule: Any) -> tuple[ShardEntry, ShardIndex, Any]:
    """The shard's index entry, building the sidecar (or a private copy) when missing or stale; with the index
    and the identity of the file it was checked against (None: not checked here)."""
    if local_path(shard) is None:  # remote: its sidecar must exist next to it
        index = ShardIndex.load(shard)
        return ShardEntry(shard, sidecar_path(shard), len(index), index.size, index.fingerprint), index, None
    for private in (False, True):  # the private path only when the sidecar does not do (it makes a folder)
        where = _private_index_path(shard) if private else sidecar_path(shard)
        checked: list = []
        fresh = _fresh_index(shard, where, rule, checked)
        if fresh is not None:
            return ShardEntry(shard, where, len(fresh), fresh.size, fresh.fingerprint), fresh, checked[0]
    index = index_shard(shard, rule=rule, save=False)
    try:
        where = index.save()
    except OSError:  # a read-only dataset directory
        where = index.save(_private_index_path(shard))
    log.info("built the index of %s (%d samples): %s", shard, len(index), where)
    return ShardEntry(shard, where, len(index), index.size, index.fingerprint), index, None


def _count(url: str, rule: Any, opener: Any) -> int:
    """Samples in a shard: from a fresh sidecar, else by reading it once."""
    if local_path(url) is not None:
        index = _fresh_index(url, sidecar_path(url), rule)
        if index is not None:
            return len(index)
    return sum(1 for _ in reading.tarfile_samples([url], keys=rule, opener=opener))


def _each(shards: list[str], progress: bool | None, desc: str, fn: Any) -> list[Any]:
    """``[fn(shard) for shard in shards]`` with a progress bar (see :func:`~shardstream.logs.progress_bar`)."""
    bar = progress_bar(progress, len(shards), desc=desc, unit=" shards")
    if bar is None:
        return [fn(shard) for shard in shards]
    try:
        results = []
        for shard in shards:
            results.append(fn(shard))
            bar.update(1)
        return results
    finally:
        bar.close()


def _given_lengths(lengths: Any, urls: Sequence[str]) -> tuple[int, ...]:
    if isinstance(lengths, Mapping):
        missing = [url for url in urls if url not in lengths]
        if missing:
            raise ConfigError(f"lengths= gives no sample count for {len(missing)} shards, e.g. {missing[0]!r}")
        lengths = [lengths[url] for url in urls]
    counts = tuple(int(n) for n in lengths)
    if len(counts) != len(urls):
        raise ConfigError(f"lengths= has {len(counts)} sample counts for {len(urls)} shards")
    return counts


def resolve(source: Any, *, stream: bool = False, lengths: Sequence[int] | Mapping[str, int] | None = None,
            cache_dir: Any = None, rule: Any = None, opener: Any = None, allow_commands: bool = False,
            progress: bool | None = False) -> Resolved:
    """Resolve ``source`` for indexed reading, or for streaming when ``stream`` (see the module docstring);
    ``progress``: a progress bar of the shards indexed or counted (see :func:`~shardstream.logs.progress_bar`)."""
    if isinstance(source, IndexedDataset):
        if stream:
            raise ConfigError("an IndexedDataset is read by random access: pass shard URLs for shuffle='stream'")
        return Resolved(tuple(source.shard_lengths), reader=source)
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    if text is not None and text.endswith(".json"):
        if stream:
            index = DatasetIndex.load(text, allow_commands=allow_commands)
            return Resolved(tuple(s.samples for s in index.shards), urls=PackedUrls([s.url for s in index.shards]))
        reader = IndexedDataset(text, rule=rule)
        return Resolved(tuple(reader.shard_lengths), reader=reader)
    packed = PackedUrls.of_pattern(source) if stream and lengths is not None and isinstance(source, str) else source
    if stream and lengths is not None and isinstance(packed, PackedUrls) and len(packed):
        return Resolved(_given_lengths(lengths, packed), urls=packed)  # a long list kept packed: no str per URL
    urls = expand_urls(source)
    if not urls:
        raise ConfigError(f"no shards in {source!r}")
    if stream:
        if lengths is not None:
            return Resolved(_given_lengths(lengths, urls), urls=PackedUrls(urls))
        counts = tuple(_each(urls, progress, "counting", lambda url: _count(url, rule, opener)))
        return Resolved(counts, urls=PackedUrls(urls))
    local = _fetched(urls, cache_dir)
    remote = [url for url in local if local_path(url) is None]
    try:
        found = _each(local, progress, "indexing", lambda shard: _entry(shard, rule))
    except (OpenError, ConfigError) as e:
        if not remote:
            raise
        raise ConfigError(
            f"cannot read {remote[0]!r} by random access ({e}); give cache_dir= to download the shards into the "
            "shard cache and index them there, index them next to the data, or use shuffle='stream'"
        ) from e
    reader = IndexedDataset(DatasetIndex(tuple(entry for entry, _, _ in found), *rule_spec(rule)), rule=rule)
    for number, (_, loaded, identity) in enumerate(found):  # loaded and checked once, not again when read
        reader.adopt(number, loaded, identity)
    return Resolved(tuple(reader.shard_lengths), reader=reader)
