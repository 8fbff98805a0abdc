"""The viewer's access to a dataset: samples by number, listing, filtering by extension, lookup by key.

:class:`ViewerData` opens a dataset once, when the viewer starts (:mod:`.opening`): every shard gets a
random-access index (its sidecar ``NAME.tar.ssidx`` when it is fresh, otherwise one built in memory from a scan
of the headers: nothing is written next to your data); remote shards are downloaded once into the shard cache
(``cache_dir``, or ``SHARDSTREAM_CACHE_DIR``, or a temporary directory removed on :meth:`ViewerData.close`),
unless they are http(s) shards with an index: those are read in place, a field at a time (:mod:`.remote`).
Reads then happen at the index's offsets through read-only memory maps: serving a page reads only the fields it
shows, and filtering by extension is a vectorised pass over the index arrays, not over the data.

Samples are addressed by their number in the dataset and fields by their extension, never by a path: the
viewer reads nothing but the shards it was given (and the class list, ``classes.txt`` beside them).

>>> from shardstream.writer import TarWriter
>>> with TarWriter("pets.tar") as sink:
...     for i in range(5):
...         _ = sink.write({"__key__": f"pet{i}", "cls": i % 2, "txt": f"pet number {i}"})
>>> _ = open("classes.txt", "w").write("cat\\ndog\\n")
>>> with ViewerData(["pets.tar"]) as data:
...     print(len(data), data.key(3), data.find("pet4"), data.classes)
...     print(data.listing(offset=1, limit=1)["items"][0])
5 pet3 4 ['cat', 'dog']
{'index': 1, 'key': 'pet1', 'fields': ['cls', 'txt'], 'thumb': None, 'label': 1, 'class_name': 'dog', \
'caption': 'pet number 1'}
"""

from __future__ import annotations

import random
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..codecs.table import lookup
from ..errors import ConfigError, OpenError
from ..indexed import open_source
from ..indexed.source import ByteSource
from ..samples import KeyRule
from .opening import OpenShard, ShardOpener, expand_dataset
from .remote import RangeSource
from .render import Thumbnails, npy_renderable, thumbnail

__all__ = ["ViewerData"]

_OPEN_SOURCES = 256  # memory maps kept open at once (each holds a file descriptor)
_TEXT_FIELDS = ("txt", "text", "caption", "transcript")


class ViewerData:
    """Random access to the samples of a dataset, for the viewer (see the module docstring).

    :param inputs: shard paths, URLs, brace patterns, globs, directories or dataset index files (``.json``)
    :param cache_dir: where remote shards are downloaded (default ``SHARDSTREAM_CACHE_DIR``, else a temporary
        directory removed by :meth:`close`)
    :param classes: the class list file (default ``classes.txt`` beside the shards, when there is one)
    :param rule: the key rule (default WebDataset's first-dot rule; sidecars built with another are not used)
    :param thumb_cache: bytes of thumbnails kept in memory (least recently used go first)
    :param allow_commands: let a dataset index name ``pipe:CMD`` shards (runs commands: trusted files only)
    """

    def __init__(self, inputs: Sequence[str], *, cache_dir: str | None = None, classes: str | None = None,
                 rule: Any = None, thumb_cache: int = 64 << 20, allow_commands: bool = False):  # fmt: skip
        self.rule = rule if rule is None or isinstance(rule, KeyRule) else KeyRule(rule)
        self._lock = threading.Lock()
        self._sources: OrderedDict[int, ByteSource] = OrderedDict()
        self._matching: dict[str, np.ndarray] = {}
        self.thumbnails = Thumbnails(thumb_cache)
        self.inputs = list(inputs)
        specs, base = expand_dataset(inputs, allow_commands)
        self._opener = ShardOpener(cache_dir, self.rule)
        self.problems = self._opener.problems
        self.shards: list[OpenShard] = []
        try:
            first = 0
            for url, index_url in specs:
                shard = self._opener.open(url, index_url, first=first, number=len(self.shards))
                if shard is not None:
                    self.shards.append(shard)
                    first += len(shard.index)
            self.classes = self._opener.classes(classes, base)
            if not self.shards:
                raise OpenError("no shard could be read: " + "; ".join(self.problems))
        except BaseException:
            self._opener.close()
            raise
        self._ends = [s.first + len(s.index) for s in self.shards]
        self.extensions = sorted({ext for s in self.shards for ext in s.index.extensions})

    # -- closing ----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the memory maps and remove the temporary directory (downloads and decompressed copies)."""
        with self._lock:
            for source in self._sources.values():
                source.close()
            self._sources.clear()
        self._opener.close()

    def __enter__(self) -> ViewerData:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- samples ----------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def locate(self, i: int) -> tuple[OpenShard, int]:
        """The shard of sample ``i`` and its position there; IndexError when out of range."""
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} is out of range (the dataset has {len(self)} samples)")
        number = bisect_right(self._ends, i)
        shard = self.shards[number]
        return shard, i - shard.first

    def key(self, i: int) -> str:
        shard, j = self.locate(i)
        return shard.index.key(j)

    def members(self, i: int) -> list[tuple[str, int, int]]:
        """``[(extension, offset, size), ...]`` of sample ``i``."""
        shard, j = self.locate(i)
        return shard.index.members(j)

    def read(self, i: int, ext: str, limit: int | None = None) -> bytes:
        """The bytes of field ``ext`` of sample ``i`` (at most ``limit``); KeyError if the sample has none."""
        shard, j = self.locate(i)
        for name, offset, size in shard.index.members(j):
            if name == ext:
                return self._read(shard, offset, size if limit is None else min(size, limit))
        raise KeyError(ext)

    def chunks(self, i: int, ext: str, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The bytes of a field in pieces (for large fields)."""
        shard, j = self.locate(i)
        for name, offset, size in shard.index.members(j):
            if name == ext:
                for start in range(offset, offset + size, chunk):
                    yield self._read(shard, start, min(chunk, offset + size - start))
                return
        raise KeyError(ext)

    def _read(self, shard: OpenShard, offset: int, size: int) -> bytes:
        number = shard.number
        for attempt in range(2):
            with self._lock:
                source = self._sources.get(number)
                if source is None:
                    source = self._sources[number] = RangeSource(shard.path) if shard.remote else open_source(shard.path)
                    while len(self._sources) > _OPEN_SOURCES:
                        self._sources.popitem(last=False)[1].close()
                self._sources.move_to_end(number)
            try:
                return source.read(offset, size)
            except (ValueError, TypeError):  # closed by another thread in between: open it again
                if attempt:
                    raise
        raise AssertionError  # pragma: no cover

    def find(self, key: str) -> int:
        """The number of the (first) sample with ``key``; KeyError if none."""
        for shard in self.shards:
            try:
                return shard.first + shard.index.find(key)
            except KeyError:
                continue
        raise KeyError(key)

    def matching(self, ext: str | None) -> np.ndarray | None:
        """The numbers of the samples that have field ``ext`` (None: every sample). Vectorised over the index."""
        if not ext:
            return None
        if ext not in self.extensions:
            raise ConfigError(f"no field {ext!r} in this dataset (its extensions: {', '.join(self.extensions)})")
        with self._lock:
            found = self._matching.get(ext)
        if found is None:
            parts = []
            for shard in self.shards:
                index = shard.index
                if ext in index.extensions:
                    starts = np.frombuffer(index.starts, dtype=np.uint32).astype(np.int64)
                    owner = np.repeat(np.arange(len(index), dtype=np.int64), np.diff(starts))
                    ids = np.frombuffer(index.ext_ids, dtype=np.uint32)
                    parts.append(np.unique(owner[ids == index.extensions.index(ext)]) + shard.first)
            found = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            with self._lock:
                self._matching[ext] = found
        return found

    def random(self, ext: str | None = None, rng: random.Random | None = None) -> int | None:
        """A random sample number (among those with field ``ext``); None when there is none."""
        rng = rng or random.Random()
        rows = self.matching(ext)
        total = len(self) if rows is None else len(rows)
        if total == 0:
            return None
        k = rng.randrange(total)
        return k if rows is None else int(rows[k])

    def listing(self, offset: int = 0, limit: int = 48, ext: str | None = None, rows: np.ndarray | None = None
                ) -> dict[str, Any]:
        """A page of samples: ``{"total", "offset", "limit", "items": [summary, ...]}`` (see :meth:`summary`);
        only samples with field ``ext``, or only the sample numbers ``rows``, when given."""
        rows = self.matching(ext) if rows is None else rows
        total = len(self) if rows is None else len(rows)
        offset = max(0, min(offset, total))
        numbers = range(offset, min(total, offset + max(0, limit)))
        items = [self.summary(n if rows is None else int(rows[n])) for n in numbers]
        return {"total": total, "offset": offset, "limit": limit, "items": items}

    def summary(self, i: int) -> dict[str, Any]:
        """What a grid tile shows: number, key, fields, the field to thumbnail, class label, a caption."""
        members = self.members(i)
        fields = [ext for ext, _, _ in members]
        item: dict[str, Any] = {"index": i, "key": self.key(i), "fields": fields, "thumb": None}
        codecs = {ext: lookup(ext) for ext in fields}  # (matched extension, codec) or None
        images = [ext for ext, found in codecs.items() if found is not None and found[1].kind == "image"]
        arrays = [ext for ext, found in codecs.items() if found is not None and found[0] == "npy"]
        item["thumb"] = next(iter(images), None) or next(
            (ext for ext in arrays if npy_renderable(self.read(i, ext, 4096))), None)
        if "cls" in fields:
            try:
                item["label"] = int(self.read(i, "cls", 32).strip())
            except ValueError:
                pass
            else:
                if self.classes and 0 <= item["label"] < len(self.classes):
                    item["class_name"] = self.classes[item["label"]]
        text = next((ext for ext in fields if ext in _TEXT_FIELDS), None)
        if text is not None:
            item["caption"] = self.read(i, text, 400).decode("utf-8", "replace")[:160]
        return item

    def thumbnail(self, i: int, ext: str | None = None) -> tuple[bytes, str] | None:
        """``(image bytes, content type)`` of the thumbnail of sample ``i`` (of field ``ext``, default the first
        image), generated on first use and cached; None when the sample has nothing to show as an image."""
        ext = ext or self.summary(i)["thumb"]
        if ext is None:
            return None
        return self.thumbnails.get((i, ext), lambda: thumbnail(ext, self.read(i, ext)))

    def info(self) -> dict[str, Any]:
        """The dataset in one dictionary (``/api/info``)."""
        return {
            "inputs": self.inputs,
            "samples": len(self),
            "shards": [{"url": s.url, "samples": len(s.index)} for s in self.shards],
            "extensions": self.extensions,
            "classes": self.classes,
            "problems": self.problems,
        }

    def __repr__(self) -> str:
        return f"ViewerData({self.inputs!r}, samples={len(self)}, shards={len(self.shards)})"
