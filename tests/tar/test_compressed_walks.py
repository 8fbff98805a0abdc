"""The C and the pure-Python walks agree on damaged compressed shards and on streams that break.

Samples, sample chunks, column batches and members, then the error (type, message, offset, member, notes, partial
sample) and warnings: the same whichever walk reads, wherever the decompression error surfaces (inside a member,
between members, after the end of the archive: a bad checksum, a cut trailer) and whatever the buffer size.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import warnings
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from shardstream import _native
from shardstream.errors import ShardstreamError, TarFormatError
from shardstream.reading import ColumnBatches, iter_samples
from shardstream.tar import TarStreamWriter
from shardstream.tar.compress import iter_tar

try:
    import zstandard
except ImportError:  # pragma: no cover - the zstd extra
    zstandard = None

pytestmark = pytest.mark.skipif(_native.extension is None, reason="C extension not built (setup.py build_ext)")

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gz": lambda b: gzip.compress(b, 1, mtime=0),
    "xz": lambda b: lzma.compress(b, preset=0),
    "bz2": lambda b: bz2.compress(b, 1),
}
if zstandard is not None:
    COMPRESS["zst"] = zstandard.ZstdCompressor(level=1).compress


def tar_of(members: Iterable[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with TarStreamWriter(out) as tw:
        for name, data in members:
            tw.add(name, data)
    return out.getvalue()


def outcome(read: Callable[[], Iterable[Any]]) -> tuple:
    """What a read gave: its items, then the error's every detail, and the warnings."""
    items: list[Any] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            items.extend(read())
            error = None
        except (ShardstreamError, OSError) as e:
            error = (type(e).__name__, str(e), getattr(e, "offset", None), getattr(e, "member", None),
                     getattr(e, "__notes__", None), getattr(e, "partial_sample", None), type(e.__cause__).__name__)
    return items, error, [str(w.message) for w in caught]


def readers(make: Callable[[], io.IOBase], url: str, bufsize: int) -> dict[str, Callable[[bool], Callable[[], Any]]]:
    """Every way to read a shard, by name: each takes ``accelerate`` and gives a read."""
    return {
        "samples": lambda acc: lambda: iter_samples(make(), url, accelerate=acc, bufsize=bufsize),
        "samples, handler goes on": lambda acc: lambda: iter_samples(make(), url, accelerate=acc, bufsize=bufsize,
                                                                    handler=lambda exn: True),
        "chunks": lambda acc: lambda: [s for c in iter_samples(make(), url, accelerate=acc, bufsize=bufsize,
                                                               chunks=True) for s in c],
        "batches": lambda acc: lambda: ColumnBatches(3, accelerate=acc, bufsize=bufsize).read(make(), url),
        "members": lambda acc: lambda: iter_tar(make(), url, accelerate=acc, bufsize=bufsize),
    }


def assert_walks_agree(data: bytes, url: str = "s.tar.gz", bufsize: int = 1 << 20,
                       make: Callable[[], io.IOBase] | None = None) -> tuple:
    """Read ``data`` every way with both walks; each way must give the same outcome. Returns the samples'."""
    make = make or (lambda: io.BytesIO(data))
    for how, read in readers(make, url, bufsize).items():
        python, c = outcome(read(False)), outcome(read(True))
        assert c == python, f"{how} ({url}, bufsize {bufsize}): the C walk differs"
    return outcome(readers(make, url, bufsize)["samples"](False))


SHARD = tar_of((f"s{i}.{ext}", random.Random(i).randbytes(size)) for i in range(4) for ext, size in (("txt", 700), ("cls", 3)))
SAMPLE = 2560  # bytes of one sample in SHARD: a header, 700 bytes padded to 1024, a header, 3 bytes padded to 512


# -- the inputs the differential fuzzing found --------------------------------------------------------------------


def test_bad_gzip_checksum_after_the_last_member():
    """The whole archive decompresses, then the CRC fails: the C walk gave the last sample, Python did not (its
    members end with the error, so the last sample is incomplete and travels as the error's partial sample)."""
    packed = bytearray(gzip.compress(SHARD, 6, mtime=0))
    packed[-8] ^= 0xFF  # the CRC32 of the trailer
    samples, error, _ = assert_walks_agree(bytes(packed))
    assert [s["__key__"] for s in samples] == ["s0", "s1", "s2"]
    assert error[0] == "TarFormatError" and "CRC check failed" in error[1] and error[5]["__key__"] == "s3"


def test_xz_cut_after_all_the_data():
    """An xz stream cut before its end marker, with every tar byte out: the same as a bad checksum."""
    packed = lzma.compress(SHARD, preset=0)
    samples, error, _ = assert_walks_agree(packed[:-20], "s.tar.xz")
    assert len(samples) == 3 and "xz data" in error[1] and error[5]["__key__"] == "s3"


def _cut_inside(packed: bytes, low: int, high: int) -> bytes:
    """The longest head of the gzip stream ``packed`` whose data ends between tar offsets ``low`` and ``high``."""
    for cut in range(len(packed), 0, -1):
        if low < len(zlib.decompressobj(31).decompress(packed[:cut])) < high:
            return packed[:cut]
    raise AssertionError("no such cut")


@pytest.mark.parametrize("bufsize", [512, 4096, 1 << 20])
def test_gzip_cut_inside_a_member_names_it_and_its_offset(bufsize):
    """Cut inside the third sample's text: the C walk reported the member but no offset (None), Python its
    header's offset."""
    packed = _cut_inside(gzip.compress(SHARD, 1, mtime=0), 2 * SAMPLE + 512 + 100, 2 * SAMPLE + 512 + 600)
    samples, error, _ = assert_walks_agree(packed, bufsize=bufsize)
    assert [s["__key__"] for s in samples] == ["s0", "s1"]
    assert error[:1] + error[2:4] == ("TarFormatError", 2 * SAMPLE, "s2.txt")


class _Breaks(io.RawIOBase):
    """``data`` until ``at``, then a connection reset."""

    def __init__(self, data: bytes, at: int):
        self.data, self.at, self.pos = data, at, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos >= self.at:
            raise ConnectionResetError("connection reset by peer")
        n = min(len(b), self.at - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


@pytest.mark.parametrize("at", [100, SAMPLE + 10, SAMPLE + 512 + 100, 3 * SAMPLE, 3 * SAMPLE + 1536 + 5])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gz"])
def test_a_stream_that_breaks(at, compressed):
    """A connection reset: the C walk added the member it was reading to the error where Python's walk, which meets
    the reset reading a header, adds none (and the reverse): now the same error, with the same details."""
    data = gzip.compress(SHARD, 1, mtime=0) if compressed else SHARD
    at = min(at, len(data) - 1)
    _, error, _ = assert_walks_agree(data, bufsize=512, make=lambda: io.BufferedReader(_Breaks(data, at), 700))
    assert error[0] == "ConnectionResetError"


# -- a seeded differential run over damaged compressed shards -----------------------------------------------------


def _damaged(rng: random.Random) -> tuple[bytes, str]:
    members = [(f"k{i:03d}.{ext}", rng.randbytes(rng.choice([0, 1, 100, 511, 512, 513, 3000])))
               for i in range(rng.randrange(1, 8)) for ext in rng.sample(["txt", "cls", "json"], rng.randrange(1, 3))]
    kind = rng.choice(sorted(COMPRESS))
    packed = bytearray(COMPRESS[kind](tar_of(members)))
    how = rng.random()
    if how < 0.4:  # cut
        del packed[rng.randrange(len(packed) + 1):]
    elif how < 0.8:  # bytes changed
        for _ in range(rng.randrange(1, 4)):
            packed[rng.randrange(len(packed))] = rng.randrange(256)
    else:  # bytes lost
        at = rng.randrange(len(packed))
        del packed[at : at + rng.randrange(1, 64)]
    return bytes(packed), kind


@pytest.mark.parametrize("seed", range(4))
def test_seeded_damaged_compressed_shards(seed):
    rng = random.Random(seed)
    errors = 0
    for _ in range(25):
        data, kind = _damaged(rng)
        _, error, _ = assert_walks_agree(data, f"s.tar.{kind}", rng.choice([512, 4096, 1 << 20]))
        errors += error is not None
    assert errors > 10  # the damage is mostly seen (some changed bytes fall where no check looks)


def test_errors_stay_typed():
    """The error of a damaged compressed shard is a TarFormatError naming the shard, by either walk."""
    packed = gzip.compress(SHARD, 1, mtime=0)
    for accelerate in (False, True):
        with pytest.raises(TarFormatError, match="s.tar.gz"):
            list(iter_samples(io.BytesIO(packed[: len(packed) // 2]), "s.tar.gz", accelerate=accelerate))
