"""The sidecar index of one shard: per sample its key, per member its extension, data offset and size.

A shard ``NAME.tar`` has its index next to it in ``NAME.tar.ssidx`` (:func:`sidecar_path`), a small binary file
(no pickle) that loads in well under a millisecond per 10,000 samples. All integers are little-endian::

    bytes 0-5     magic b"SSIDX\\n"
    bytes 6-7     uint16 format version (1)
    bytes 8-11    uint32 H, the length of the JSON header
    12 .. 12+H    JSON header, UTF-8, padded with spaces so that 12 + H is a multiple of 8:
                  {"format": "shardstream-shard-index", "version": 1, "shard": <file name when indexed>,
                   "size": <shard bytes>, "fingerprint": <32 hex digits>, "rule": "first-dot", "lowercase": true,
                   "samples": S, "members": M, "extensions": [<ext>, ...]}
    then, back to back: uint64 offsets[M]   data offset of each member, in archive order
                        uint64 sizes[M]     data size of each member
                        uint32 starts[S+1]  members of sample i are starts[i] .. starts[i+1]-1
                        uint32 key_ends[S+1] key i is keys[key_ends[i] : key_ends[i+1]] (key_ends[0] = 0)
                        uint32 ext_ids[M]   index of each member's extension in "extensions"
                        keys                UTF-8 (surrogateescape) key bytes, concatenated

The **fingerprint** is BLAKE2b (16-byte digest) of the shard's size (8 bytes little-endian), its first 64 KiB
and its last 64 KiB: a few reads, not a pass over the shard, that survive a copy (unlike mtimes) and catch
shards rewritten with other samples, appended to or truncated. It does not catch an in-place edit of member
bytes in the middle of a shard that keeps its size; shards are written once (rebuild the index after such an
edit). The index also records the key rule it was built with (``rule``, ``lowercase``).

>>> idx = ShardIndex.from_samples([("a", [("cls", 512, 1), ("txt", 1536, 5)])], url="s.tar", size=10240,
...                               fingerprint="0" * 32)
>>> ShardIndex.from_bytes(idx.to_bytes(), "s.tar").members(0)
[('cls', 512, 1), ('txt', 1536, 5)]
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import OpenError, StaleIndexError
from ..io.files import write_file
from ..samples import KeyRule
from .source import ByteSource, open_source

__all__ = ["SIDECAR_SUFFIX", "ShardIndex", "fingerprint", "rebuild_hint", "rule_spec", "sidecar_path"]

SIDECAR_SUFFIX = ".ssidx"
MAGIC = b"SSIDX\n"
VERSION = 1
FORMAT = "shardstream-shard-index"
FINGERPRINT_SPAN = 64 << 10
_U32 = "I" if array("I").itemsize == 4 else "L"
_PREFIX = struct.Struct("<6sHI")


def sidecar_path(shard: str | os.PathLike[str]) -> str:
    """Where the index of ``shard`` lives: next to it, ``+ ".ssidx"``.

    >>> sidecar_path("data/train-000001.tar")
    'data/train-000001.tar.ssidx'
    """
    return os.fspath(shard) + SIDECAR_SUFFIX


def rebuild_hint(shard: str) -> str:
    return f"rebuild it with shardstream.indexed.index_shard({shard!r}) or `shardstream index {shard}`"


def fingerprint(source: ByteSource) -> str:
    """The content fingerprint of an open shard (see the module docstring), as 32 hex digits."""
    size = source.size
    digest = hashlib.blake2b(size.to_bytes(8, "little"), digest_size=16)
    digest.update(source.view(0, min(size, FINGERPRINT_SPAN)))
    if size > FINGERPRINT_SPAN:
        start = max(FINGERPRINT_SPAN, size - FINGERPRINT_SPAN)
        digest.update(source.view(start, size - start))
    return digest.hexdigest()


def rule_spec(rule: Any) -> tuple[str, bool]:
    """How a key rule is recorded in an index: ``(name, lowercase)``; regexes as ``"re:PATTERN"``.

    >>> rule_spec(None), rule_spec(KeyRule("last-dot", lowercase=False))
    (('first-dot', True), ('last-dot', False))
    """
    rule = rule if isinstance(rule, KeyRule) else KeyRule(rule)
    spec = rule.rule
    if spec is None or spec in ("first-dot", "last-dot"):
        return spec or "first-dot", rule.lowercase
    if isinstance(spec, str):
        return "re:" + spec, rule.lowercase
    pattern = getattr(spec, "pattern", None)
    if isinstance(pattern, str):
        return "re:" + pattern, rule.lowercase
    return "callable:" + getattr(spec, "__qualname__", type(spec).__qualname__), rule.lowercase


def _ints(code: str, data: bytes | memoryview) -> array:
    values = array(code)
    values.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover - the file is little-endian
        values.byteswap()
    return values


def _le(values: array) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _header(header: Any) -> dict[str, Any]:
    """The JSON header of an index file, each field of the expected type (else a ValueError saying which)."""
    if not isinstance(header, dict):
        raise ValueError(f"the header is a JSON {type(header).__name__}, not an object")
    for name in ("size", "samples", "members"):
        value = header.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
            raise ValueError(f"header field {name!r} is {value!r}, not a count")
    if header["samples"] >= 1 << 32 or header["members"] >= 1 << 32:
        raise ValueError("more samples or members than an index holds (2**32)")
    extensions = header.get("extensions")
    if not isinstance(extensions, list) or not all(isinstance(e, str) for e in extensions):
        raise ValueError("header field 'extensions' is not a list of strings")
    if not all(isinstance(header.get(n), str) for n in ("fingerprint", "rule")) or not isinstance(
        header.get("lowercase"), bool
    ):
        raise ValueError("header fields 'fingerprint', 'rule' and 'lowercase' have the wrong types")
    return header


def _check_arrays(header: dict[str, Any], offsets: array, sizes: array, starts: array, key_ends: array,
                  ext_ids: array, keys: int) -> None:  # fmt: skip
    """Raise ValueError unless the arrays describe members inside the shard, in archive order: a corrupt index
    whose header still matches the shard must never return other bytes (or fail with IndexError later)."""
    import numpy as np  # noqa: PLC0415 - numpy loads only where arrays are built

    off, size = np.frombuffer(offsets, np.uint64), np.frombuffer(sizes, np.uint64)
    first, ends = np.frombuffer(starts, np.uint32), np.frombuffer(key_ends, np.uint32)
    if first[0] != 0 or first[-1] != header["members"] or np.any(first[1:] < first[:-1]):
        raise ValueError("the sample starts are not increasing from 0 to the member count")
    if ends[0] != 0 or ends[-1] != keys or np.any(ends[1:] < ends[:-1]):
        raise ValueError("the key ends are not increasing from 0 to the length of the keys")
    if len(ext_ids) and int(np.frombuffer(ext_ids, np.uint32).max()) >= len(header["extensions"]):
        raise ValueError("a member's extension number is past the list of extensions")
    if len(off):
        limit = np.uint64(header["size"])
        if np.any(off > limit) or np.any(size > limit - off):
            raise ValueError(f"a member's data lies past the end of the shard ({header['size']} bytes)")
        if np.any(off[1:] < off[:-1] + size[:-1]):
            raise ValueError("member data overlaps or is out of archive order")


class ShardIndex:
    """The index of one shard (see the module docstring for the file format). ``len(index)`` is its samples.

    ``offsets``, ``sizes``, ``starts``, ``key_ends``, ``ext_ids`` are :class:`array.array` (fast ``[i]``).
    """

    __slots__ = ("url", "size", "fingerprint", "rule", "lowercase", "extensions", "offsets", "sizes", "starts",
                 "key_ends", "ext_ids", "_keys", "_key_map")  # fmt: skip

    def __init__(self, url: str, size: int, fingerprint: str, rule: str, lowercase: bool, extensions: Sequence[str],
                 offsets: array, sizes: array, starts: array, key_ends: array, ext_ids: array,
                 keys: bytes):  # fmt: skip
        self.url, self.size, self.fingerprint, self.rule, self.lowercase = url, size, fingerprint, rule, lowercase
        self.extensions = tuple(sys.intern(e) for e in extensions)  # one object per name in every shard: the batch
        # reader compares the fields of samples of different shards by identity first
        self.offsets, self.sizes, self.starts, self.key_ends, self.ext_ids = offsets, sizes, starts, key_ends, ext_ids
        self._keys = keys
        self._key_map: dict[str, int] | None = None

    @classmethod
    def from_samples(cls, samples: Iterable[tuple[str, Sequence[tuple[str, int, int]]]], *, url: str, size: int,
                     fingerprint: str, rule: Any = None) -> ShardIndex:  # fmt: skip
        """Build from ``(key, [(ext, data_offset, size), ...])`` per sample, in archive order."""
        ext_ids: dict[str, int] = {}
        offsets, sizes, starts, key_ends, ids = array("Q"), array("Q"), array(_U32, [0]), array(_U32, [0]), array(_U32)
        keys = bytearray()
        for key, members in samples:
            keys += key.encode("utf-8", "surrogateescape")
            key_ends.append(len(keys))
            for ext, offset, length in members:
                ids.append(ext_ids.setdefault(ext, len(ext_ids)))
                offsets.append(offset)
                sizes.append(length)
            starts.append(len(offsets))
        name, lowercase = rule_spec(rule)
        return cls(url, size, fingerprint, name, lowercase, list(ext_ids), offsets, sizes, starts, key_ends, ids,
                   bytes(keys))  # fmt: skip

    # -- reading ---------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.starts) - 1

    def key(self, i: int) -> str:
        ends = self.key_ends
        return self._keys[ends[i] : ends[i + 1]].decode("utf-8", "surrogateescape")

    def keys(self) -> list[str]:
        return [self.key(i) for i in range(len(self))]

    @property
    def key_bytes(self) -> bytes:
        """Every sample's key, UTF-8, end to end (``key_ends[i]`` is where key ``i`` ends): for column readers.

        >>> ShardIndex.from_samples([("a", []), ("bc", [])], url="x.tar", size=0, fingerprint="").key_bytes
        b'abc'
        """
        return self._keys

    def find(self, key: str) -> int:
        """The position of the sample with ``key`` (KeyError if there is none)."""
        if self._key_map is None:
            self._key_map = {k: i for i, k in reversed(list(enumerate(self.keys())))}
        return self._key_map[key]

    def members(self, i: int) -> list[tuple[str, int, int]]:
        """``[(ext, data_offset, size), ...]`` of sample ``i``."""
        exts, ids, offsets, sizes = self.extensions, self.ext_ids, self.offsets, self.sizes
        return [(exts[ids[m]], offsets[m], sizes[m]) for m in range(self.starts[i], self.starts[i + 1])]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardIndex):
            return NotImplemented
        same = ("size", "fingerprint", "rule", "lowercase")
        return all(getattr(self, a) == getattr(other, a) for a in same) and self._content() == other._content()

    def _content(self) -> tuple:
        return [self.key(i) for i in range(len(self))], [self.members(i) for i in range(len(self))]

    def __repr__(self) -> str:
        return f"ShardIndex({self.url!r}, samples={len(self)}, members={len(self.offsets)}, size={self.size})"

    # -- freshness --------------------------------------------------------------------------------------------

    def check(self, source: ByteSource, index_url: str | None = None, *, also: str | None = None) -> None:
        """Raise :class:`~shardstream.errors.StaleIndexError` unless ``source`` is the shard this index describes.

        ``also`` is appended to the message (e.g. what else to rebuild)."""
        if source.size != self.size:
            change = f"its size changed from {self.size} to {source.size} bytes"
        elif fingerprint(source) != self.fingerprint:
            change = "its content changed (fingerprint of its first and last 64 KiB)"
        else:
            return
        where = index_url or sidecar_path(self.url)
        raise StaleIndexError(
            f"the index {where!r} of shard {self.url!r} is stale: {change} since it was indexed; "
            f"{rebuild_hint(self.url)}" + (f"; {also}" if also else ""),
            url=self.url,
        )

    # -- the file format --------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        header = {
            "format": FORMAT, "version": VERSION, "shard": os.path.basename(self.url), "size": self.size,
            "fingerprint": self.fingerprint, "rule": self.rule, "lowercase": self.lowercase, "samples": len(self),
            "members": len(self.offsets), "extensions": list(self.extensions),
        }  # fmt: skip
        text = json.dumps(header, ensure_ascii=False).encode()
        text += b" " * (-(_PREFIX.size + len(text)) % 8)
        arrays = (self.offsets, self.sizes, self.starts, self.key_ends, self.ext_ids)
        return b"".join([_PREFIX.pack(MAGIC, VERSION, len(text)), text, *map(_le, arrays), self._keys])

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, shard_url: str, index_url: str | None = None) -> ShardIndex:
        """Parse an index file's bytes; anything malformed raises :class:`~shardstream.errors.StaleIndexError`."""
        where = index_url or sidecar_path(shard_url)
        try:
            magic, version, length = _PREFIX.unpack_from(data, 0)
            if magic != MAGIC:
                raise ValueError("not a shardstream shard index (bad magic bytes)")
            if version != VERSION:
                raise ValueError(f"index format version {version}; this shardstream reads version {VERSION}")
            header = _header(json.loads(bytes(data[_PREFIX.size : _PREFIX.size + length])))
            samples, members = header["samples"], header["members"]
            pos = _PREFIX.size + length
            parts = []
            for code, count in (("Q", members), ("Q", members), (_U32, samples + 1), (_U32, samples + 1),
                                (_U32, members)):  # fmt: skip
                end = pos + count * array(code).itemsize
                if end > len(data):
                    raise ValueError(f"the file ends at byte {len(data)}, before its arrays do ({end})")
                parts.append(_ints(code, data[pos:end]))
                pos = end
            keys = bytes(data[pos:])
            offsets, sizes, starts, key_ends, ext_ids = parts
            _check_arrays(header, offsets, sizes, starts, key_ends, ext_ids, len(keys))
            return cls(shard_url, header["size"], header["fingerprint"], header["rule"], header["lowercase"],
                       header["extensions"], offsets, sizes, starts, key_ends, ext_ids, keys)  # fmt: skip
        except (ValueError, KeyError, TypeError, IndexError, RecursionError, struct.error) as e:
            raise StaleIndexError(
                f"the index {where!r} of shard {shard_url!r} is unreadable ({e}); {rebuild_hint(shard_url)}",
                url=shard_url,
            ) from e

    def save(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the index file (atomically: a temporary file renamed into place); returns its path."""
        target = os.fspath(path) if path is not None else sidecar_path(self.url)
        write_file(target, self.to_bytes(), "the shard index")
        return target

    @classmethod
    def load(cls, shard_url: str, index_url: str | None = None) -> ShardIndex:
        """Read the index of ``shard_url`` (from ``index_url``, default its sidecar)."""
        index_url = index_url or sidecar_path(shard_url)
        try:
            source = open_source(index_url)
        except OpenError as e:
            if e.errno != errno.ENOENT:
                raise
            err = OpenError(
                f"shard {shard_url!r} has no index ({index_url!r} does not exist); build it with "
                f"shardstream.indexed.index_shard({shard_url!r}) or `shardstream index {shard_url}`",
                url=shard_url,
            )
            err.errno = e.errno
            raise err from None
        try:
            data = source.read(0, source.size)
        finally:
            source.close()
        return cls.from_bytes(data, shard_url, index_url)
