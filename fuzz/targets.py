"""What a fuzzed input is fed to, and what counts as a finding.

Allowed outcomes: a result, or an error from shardstream's tree (:class:`~shardstream.errors.ShardstreamError`).
Findings: any other exception, a typed error caused by ``MemoryError`` or ``RecursionError`` (but for the depth
guard of ``json``'s C decoder, which refuses documents nested deeper than the recursion limit), a crash (the
process dies: the driver sees it), a hang (an input running longer than the alarm), or a difference between
paths that must agree: the C and pure-Python header walks, streamed and memory-mapped reads, short reads, the C sample
grouping and the Python one, the index scan and the reader, compressed and plain.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import tempfile
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from shardstream.codecs import decode_field
from shardstream.errors import ShardstreamError
from shardstream.indexed import DatasetIndex, ShardIndex
from shardstream.io.trust import runs_command
from shardstream.samples import iter_samples
from shardstream.tar import accelerated, iter_members
from shardstream.tar.compress import iter_tar
from shardstream.tar.index import scan_members
from shardstream.tar.reader import iter_members_mapped
from shardstream.testing import ShortReads

try:
    import zstandard
except ImportError:  # pragma: no cover - the zstd extra
    zstandard = None


class Finding(Exception):
    """An outcome the library must never produce (see the module docstring)."""


def outcome(run: Callable[[], Any], allowed: tuple[type[BaseException], ...] = (ShardstreamError,)) -> tuple:
    """``("ok", result, warnings)`` or ``("error", type name, message)`` for an error of an ``allowed`` type (by
    default any of shardstream's tree); a :class:`Finding` for anything else."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = run()
        except allowed as e:
            cause = e.__cause__
            if isinstance(cause, MemoryError) or (isinstance(cause, RecursionError) and not _depth_guard(cause)):
                raise Finding(f"typed error hiding {type(cause).__name__}: {e}") from e
            return ("error", type(e).__name__, str(e))
        except Exception as e:
            raise Finding(f"untyped {type(e).__name__}: {e}") from e
    return ("ok", result, [str(w.message) for w in caught])


def _depth_guard(error: RecursionError) -> bool:
    """Whether ``error`` is the depth guard of a C parser (``json``'s decoder refuses data nested deeper than the
    recursion limit), not a runaway recursion of shardstream's own."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.replace("\\", "/").endswith("json/decoder.py")


def _same(label: str, first: tuple, second: tuple) -> None:
    if first != second:
        raise Finding(f"{label} differ:\n  {str(first)[:400]}\n  {str(second)[:400]}")


def _members(data: bytes, accelerate: bool) -> tuple:
    return outcome(lambda: list(iter_members(io.BytesIO(data), "f.tar", accelerate=accelerate)))


def check_tar(data: bytes, rng: random.Random) -> None:
    """Every reader of a tar over ``data``: the same members, errors and warnings by every path."""
    paths = [False, True] if accelerated() else [False]
    reference = _members(data, False)
    for accelerate in paths:
        _same("C and Python walks", reference, _members(data, accelerate))
        mapped = outcome(lambda: [(n, bytes(v), o)
                                  for n, v, o in iter_members_mapped(data, "f.tar", accelerate=accelerate)])
        _same("streamed and mapped reads", reference, mapped)
        grouped = outcome(lambda: list(iter_samples(io.BytesIO(data), "f.tar", accelerate=accelerate)))
        if accelerate:
            _same("C and Python sample grouping", outcome(lambda: list(iter_samples(io.BytesIO(data), "f.tar",
                                                                                accelerate=False))), grouped)
        scanned = outcome(lambda: scan_members(data, "f.tar", accelerate=accelerate))
        if reference[0] == "ok" and data[:2] != b"\x1f\x8b":
            expected = [(name, offset, len(body)) for name, body, offset in reference[1]]
            _same("index scan and reader", ("ok", expected, reference[2]), scanned)
    step = rng.choice([1, 7, 511, 513, 4096])
    short = outcome(lambda: list(iter_members(ShortReads(data, step), "f.tar", bufsize=512)))
    _same(f"short reads ({step} bytes)", reference, short)
    if rng.random() < 0.3:
        check_compressed(data, reference, rng)


def check_compressed(data: bytes, reference: tuple, rng: random.Random) -> None:
    kinds = {"gz": lambda b: gzip.compress(b, 1, mtime=0), "bz2": lambda b: bz2.compress(b, 1),
             "xz": lambda b: lzma.compress(b, preset=0)}  # fmt: skip
    if zstandard is not None:
        kinds["zst"] = zstandard.ZstdCompressor(level=1).compress
    kind = rng.choice(sorted(kinds))
    packed = kinds[kind](data)
    if rng.random() < 0.3:  # a truncated or corrupted compressed stream: a typed error, never anything else
        cut = packed[:rng.randrange(len(packed) + 1)] if rng.random() < 0.5 else packed[:-4] + rng.randbytes(4)
        outcome(lambda: list(iter_tar(io.BytesIO(cut), "f.tar." + kind)))
        return
    got = outcome(lambda: list(iter_tar(io.BytesIO(packed), "f.tar")))
    if reference[0] == "ok" or got[0] == "ok":
        _same(f"{kind}-compressed and plain", reference, got)


def check_sidecar(data: bytes, rng: random.Random) -> None:
    """A sidecar index either loads into arrays that stay inside the shard, or raises StaleIndexError."""
    loaded = outcome(lambda: ShardIndex.from_bytes(data, "s.tar"))
    if loaded[0] != "ok":
        return
    index = loaded[1]
    for i in range(len(index)):
        index.key(i)
        for _, offset, size in index.members(i):
            if offset + size > index.size:
                raise Finding(f"index member past the shard: {offset}+{size} > {index.size}")


_TMP = tempfile.mkdtemp(prefix="shardstream-fuzz-")


def check_dataset_index(data: bytes, rng: random.Random) -> None:
    """A dataset index loads (naming no command) or raises a typed error."""
    path = os.path.join(_TMP, "ds.json")
    with open(path, "wb") as f:
        f.write(data)
    loaded = outcome(lambda: DatasetIndex.load(path))
    if loaded[0] == "ok":
        for shard in loaded[1].shards:
            if runs_command(shard.url) or runs_command(shard.index):
                raise Finding(f"a dataset index naming a command was accepted: {shard}")
            if shard.samples < 0 or shard.size < 0:
                raise Finding(f"negative counts accepted: {shard}")


def check_field(ext: str, data: bytes, rng: random.Random) -> None:
    """A field decodes, or raises a typed error."""
    outcome(lambda: decode_field(ext, data, imagespec=rng.choice(["rgb8", "l", "pil"])))
