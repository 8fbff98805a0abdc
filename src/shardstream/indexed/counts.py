"""Samples per shard without reading the shards: from a dataset index, else from each shard's sidecar header.

:class:`ShardCounts` is what ``len(WebDataset(urls))`` and ``WebDataset(..., equalize=True)`` ask. A shard's count
comes from what it was given (a dataset index's ``samples``), else from the first bytes of its sidecar index
(``NAME.tar.ssidx``, see :mod:`.shardindex`): the fixed prefix and the JSON header, never the shard. A local
sidecar whose recorded shard size differs from the shard's size on disk is stale and gives no count. A remote
sidecar is fetched through the opener of its scheme (an HTTP GET, an S3 read...: the header only, then the
stream is closed); a missing one gives no count. ``pipe:`` shards give no count (nothing named by a URL runs a
command to be counted). No count raises ``TypeError``, what ``len()`` raises for an object without a length.

>>> from shardstream.indexed import indexed_shard_writer
>>> with indexed_shard_writer("counted-%03d.tar", maxcount=2) as sink:
...     for i in range(3):
...         _ = sink.write({"__key__": f"s{i}", "cls": i})
>>> ShardCounts()(sink.shards)
{'counted-000.tar': 2, 'counted-001.tar': 1}
>>> ShardCounts()(["nowhere.tar"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
TypeError: the samples of shard 'nowhere.tar' are not known: it has no sidecar index ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ShardstreamError
from ..io import open_url
from ..io.trust import runs_command
from ..io.urls import local_path, split_scheme
from .shardindex import _PREFIX, MAGIC, sidecar_path

__all__ = ["ShardCounts", "sidecar_samples"]


def _unknown(url: str, why: str) -> TypeError:
    return TypeError(f"the samples of shard {url!r} are not known: {why}; index the shards (`shardstream index "
                     "SHARDS` or shardstream.indexed.index_dataset) or declare a length with .with_length(n)")


def _read_header(stream: Any, where: str) -> dict[str, Any]:
    prefix = stream.read(_PREFIX.size)
    magic, _version, size = _PREFIX.unpack(prefix) if len(prefix) == _PREFIX.size else (b"", 0, 0)
    if magic != MAGIC:
        raise ValueError(f"{where} is not a shardstream shard index")
    doc = json.loads(stream.read(size))
    if not isinstance(doc, dict):
        raise ValueError(f"{where} has no JSON header")
    return doc


def sidecar_samples(url: str) -> int:
    """The samples of shard ``url`` as its sidecar index says (its header only), or ``TypeError``.

    >>> sidecar_samples("nowhere.tar")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: the samples of shard 'nowhere.tar' are not known: it has no sidecar index ...
    """
    url = os.fspath(url)
    index = sidecar_path(url)
    path = local_path(url)
    if path is None and (runs_command(url) or not split_scheme(url)[0]):
        raise _unknown(url, "it is read through a command or a stream, which is never run just to count it")
    try:
        stream = open(sidecar_path(path), "rb") if path is not None else open_url(index)
    except (OSError, ShardstreamError) as e:
        raise _unknown(url, f"it has no sidecar index ({index!r}: {e})") from None
    try:
        doc = _read_header(stream, index)
        samples, size = int(doc["samples"]), doc.get("size")
    except (ValueError, KeyError, TypeError, OSError, ShardstreamError) as e:
        raise _unknown(url, f"its sidecar index {index!r} is unreadable ({e})") from None
    finally:
        stream.close()
    if path is not None:
        try:
            actual = os.path.getsize(path)
        except OSError as e:
            raise _unknown(url, f"the shard cannot be found ({e})") from None
        if size != actual:
            raise _unknown(url, f"its sidecar index {index!r} is stale (it says {size} bytes, the shard has "
                                f"{actual}); rebuild it")
    return samples


class ShardCounts:
    """Samples per shard URL: those ``known`` (a dataset index's), the others read from sidecar headers once and
    remembered (the object is pickled into DataLoader workers with what it has read).

    >>> ShardCounts({"a.tar": 3})(["a.tar", "a.tar"])
    {'a.tar': 3}
    """

    def __init__(self, known: Mapping[str, int] | None = None):
        self.known = dict(known or {})

    def __call__(self, urls: Iterable[str]) -> dict[str, int]:
        """The count of every URL in ``urls`` (a ``TypeError`` names the first one that has none)."""
        for url in dict.fromkeys(urls):
            if url not in self.known:
                self.known[url] = sidecar_samples(url)
        return self.known

    def __repr__(self) -> str:
        return f"ShardCounts({len(self.known)} known)"
