"""Opening a dataset for the viewer: what the user named -> local, uncompressed shards with random-access indexes.

- :func:`expand_dataset`: shard paths and URLs, ``{000..009}`` brace patterns, globs, directories (their
  ``*.tar*`` files) and dataset index files (``.json``) -> the list of shards (and the index each JSON names).
- :class:`ShardOpener`: one shard -> :class:`OpenShard` (a local plain tar and its index). The shard's sidecar
  ``NAME.tar.ssidx`` is used when it is fresh and was built with the same key rule; otherwise the headers are
  scanned into an index in memory (nothing is written beside the data). A remote http(s) shard with an index
  (its sidecar next to it, or the one a dataset JSON names) is read in place with ranged requests
  (:mod:`.remote`); other remote shards are downloaded once into the shard cache; a compressed one is
  decompressed into a temporary directory (removed by ``close``). Problems
  (a stale sidecar, a broken shard, a missing class list) are collected in ``problems``, never fatal.

>>> from shardstream.writer import TarWriter
>>> for n in range(2):
...     with TarWriter(f"part-{n}.tar") as sink:
...         _ = sink.write({"__key__": f"k{n}", "txt": "x"})
>>> expand_dataset(["part-{0..1}.tar"])
([('part-0.tar', None), ('part-1.tar', None)], '')
>>> with ShardOpener() as opener:
...     shard = opener.open("part-1.tar", None, first=1, number=1)
...     shard.index.key(0), shard.first, opener.problems
('k1', 1, [])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

from ..config import get_settings
from ..errors import ConfigError, OpenError, SampleFormatError, StaleIndexError, TarFormatError
from ..indexed import DatasetIndex, ShardIndex, index_shard, open_source, sidecar_path
from ..io import open_url
from ..io.cache import ShardCache
from ..io.urls import expand_inputs, local_path
from ..samples import KeyRule
from ..tar import open_tar_stream
from ..tar.compress import compression
from .remote import RangeSource, ranged

__all__ = ["OpenShard", "ShardOpener", "expand_dataset"]


def _parent(url: str) -> str:
    path = local_path(url)
    return os.path.dirname(path) if path is not None else url.rpartition("/")[0]


def expand_dataset(inputs: Sequence[str], allow_commands: bool = False
                   ) -> tuple[list[tuple[str, str | None]], str | None]:
    """``([(shard url, index path or None), ...], where the class list would be)`` from what the user named
    (``allow_commands``: a dataset index may name ``pipe:CMD`` shards)."""
    shards: list[tuple[str, str | None]] = []
    base: str | None = None
    for arg in inputs:
        if arg == "-":
            raise ConfigError("the viewer needs files or URLs, not '-' (standard input)")
        if arg.endswith(".json"):
            shards.extend((entry.url, entry.index) for entry in DatasetIndex.load(arg, allow_commands=allow_commands).shards)
            base = _parent(arg) if base is None else base
            continue
        names = expand_inputs([arg], directories=True, globs=True)
        shards.extend((name, None) for name in names)
        base = _parent(names[0]) if base is None else base
    if not shards:
        raise ConfigError("no shards to view")
    return shards, base


class OpenShard:
    """One shard ready for random access: the url the user gave, what is read (a local plain tar, or the remote
    URL itself when ``remote``: ranged reads), its index, its first sample's number in the dataset and its own
    number."""

    __slots__ = ("url", "path", "index", "first", "number", "remote")

    def __init__(self, url: str, path: str, index: ShardIndex, first: int, number: int, remote: bool = False):
        self.url, self.path, self.index, self.first, self.number = url, path, index, first, number
        self.remote = remote

    def __repr__(self) -> str:
        return f"OpenShard({self.url!r}, samples={len(self.index)}, first={self.first})"


class ShardOpener:
    """Opens shards for the viewer (see the module docstring); ``problems`` lists what went wrong, one line each.

    :param cache_dir: where remote shards are downloaded (default ``SHARDSTREAM_CACHE_DIR``, else the temporary
        directory)
    :param rule: the key rule (default WebDataset's)
    """

    def __init__(self, cache_dir: str | None = None, rule: KeyRule | None = None):
        self.cache_dir, self.rule = cache_dir, rule
        self.problems: list[str] = []
        self._tmp: str | None = None

    def _workdir(self) -> str:
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="shardstream-view-")
        return self._tmp

    def local_copy(self, url: str) -> str:
        """A local, uncompressed file with the shard's bytes (the shard itself when it is one)."""
        path = local_path(url)
        if path is None:
            directory = self.cache_dir or get_settings().cache_dir or os.path.join(self._workdir(), "cache")
            path = ShardCache(directory).fetch(url)
        with open(path, "rb") as f:
            kind = compression(f.read(10))
        if kind is None:
            return path
        target = os.path.join(self._workdir(), f"{len(os.listdir(self._workdir()))}.tar")
        with open(path, "rb") as f, open_tar_stream(f) as plain, open(target, "wb") as out:
            shutil.copyfileobj(plain, out, 1 << 20)
        return target

    def open(self, url: str, index_url: str | None, *, first: int, number: int) -> OpenShard | None:
        """The shard ready for reads, or None (and a line in ``problems``) when it cannot be read at all.
        Samples that are ill-formed (no extension, a repeated field...) are skipped and reported."""
        def skip(e: BaseException) -> bool:
            self.problems.append(str(e))
            return True

        try:
            remote = self._remote(url, index_url, first, number)
            if remote is not None:
                return remote
            path = self.local_copy(url)
            index = self._sidecar(url, path, index_url)
            if index is None:
                index = index_shard(path, rule=self.rule, handler=skip, save=False)
        except (TarFormatError, OpenError, SampleFormatError) as e:
            self.problems.append(f"shard {url!r} skipped: {e}")
            return None
        return OpenShard(url, path, index, first, number)

    def _remote(self, url: str, index_url: str | None, first: int, number: int) -> OpenShard | None:
        """A remote http(s) shard with an index beside it (or named by the dataset JSON) is read with ranged
        requests (:mod:`.remote`): nothing is downloaded but the index. None when that does not apply."""
        if local_path(url) is not None or not ranged(url):
            return None
        where = index_url or sidecar_path(url)
        try:
            with open_url(where) as f:
                data = f.read()
        except (OSError, ConfigError):
            return None  # no index there: downloaded into the cache instead
        try:
            index = ShardIndex.from_bytes(data, url, where)
            source = RangeSource(url)
            try:
                index.check(source, where)
            finally:
                source.close()
        except (StaleIndexError, OpenError) as e:
            self.problems.append(f"{e} (downloaded and indexed instead)")
            return None
        rule = self.rule or KeyRule()
        if (index.rule, index.lowercase) != (rule.rule or "first-dot", rule.lowercase):
            return None
        return OpenShard(url, url, index, first, number, remote=True)

    def _sidecar(self, url: str, path: str, index_url: str | None) -> ShardIndex | None:
        """The shard's own index, when there is one, it matches the shard and was built with our key rule."""
        index_path = index_url if index_url is not None and local_path(url) is not None else sidecar_path(path)
        if local_path(index_path) is None or not os.path.exists(index_path):
            return None
        try:
            index = ShardIndex.load(path, index_path)
            with contextlib.closing(open_source(path)) as source:
                index.check(source)
        except (StaleIndexError, OpenError) as e:
            self.problems.append(f"{e} (indexed in memory instead)")
            return None
        rule = self.rule or KeyRule()
        return index if (index.rule, index.lowercase) == (rule.rule or "first-dot", rule.lowercase) else None

    def classes(self, classes: str | None, base: str | None) -> list[str] | None:
        """The class names: from ``classes`` (a path or URL), else from ``classes.txt`` in ``base`` if it exists."""
        explicit = classes is not None
        if classes is None and base is not None:
            classes = os.path.join(base, "classes.txt") if local_path(base) is not None else f"{base}/classes.txt"
            if local_path(classes) is not None and not os.path.exists(classes):
                return None
        if classes is None:
            return None
        try:
            with open_url(classes) as f:
                text = f.read(16 << 20).decode("utf-8", "replace")
        except (OSError, ConfigError) as e:
            if explicit:
                raise
            self.problems.append(f"no class list: {e}")
            return None
        return [line.strip() for line in text.splitlines()]

    def close(self) -> None:
        """Remove the temporary directory (downloads without a cache directory, decompressed copies)."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> ShardOpener:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
