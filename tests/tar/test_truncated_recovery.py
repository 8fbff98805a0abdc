"""Issue 12's data loss: a truncated compressed shard gives every complete member before the damage.

The oracle is independent of the reader: decompress the truncated bytes as far as the format allows
(``decompressobj``), and count the members of the full archive whose data ends inside that prefix. For gzip,
bz2 and xz that count is also what the standard library's ``tarfile`` reads.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import tarfile
import zlib

import pytest

from shardstream.errors import TarFormatError
from shardstream.tar.compress import iter_tar

zstandard = pytest.importorskip("zstandard")

#: compress, and a decompressor that turns a truncated stream into its longest decodable prefix
FORMATS = {
    "gz": (lambda b: gzip.compress(b, mtime=0), lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), "r:gz"),
    "bz2": (lambda b: bz2.compress(b, 1), bz2.BZ2Decompressor, "r:bz2"),  # 100 kB blocks: several per shard
    "xz": (lambda b: lzma.compress(b), lzma.LZMADecompressor, "r:xz"),
    "zst": (lambda b: zstandard.ZstdCompressor().compress(b), lambda: zstandard.ZstdDecompressor().decompressobj(),
            None),
}


@pytest.fixture(scope="module")
def archive() -> tuple[bytes, list[tuple[str, int]]]:
    """A 1.6 MB tar of 120 members (incompressible data), and each member's (name, end of data)."""
    rng = random.Random(12)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(120):
            data = rng.randbytes(rng.randrange(2000, 25000))
            info = tarfile.TarInfo(f"s{i // 2:04d}.{'bin' if i % 2 else 'txt'}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
        ends = [(m.name, m.offset_data + m.size) for m in tf]
    return raw, ends


def _prefix(decompressor, data: bytes) -> int:
    out = 0
    for i in range(0, len(data), 4096):
        try:
            out += len(decompressor.decompress(data[i : i + 4096]))
        except Exception:  # noqa: BLE001 - the oracle only needs the length decoded so far
            break
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fraction", [0.3, 0.62, 0.9])
def test_every_complete_member_before_the_damage(archive, fmt, fraction):
    raw, ends = archive
    compress, decompressor, mode = FORMATS[fmt]
    packed = compress(raw)
    cut = packed[: int(len(packed) * fraction)]
    available = _prefix(decompressor(), cut)
    expected = [name for name, end in ends if end <= available]
    assert len(expected) >= 10  # the test means something: many complete members precede the cut

    got = []
    with pytest.raises(TarFormatError, match="truncated"):
        for name, data, _ in iter_tar(io.BytesIO(cut), f"cut.tar.{fmt}"):
            got.append(name)
    assert got == expected

    if mode is not None:  # the standard library agrees (it lists the header of the damaged member as well)
        names = []
        with pytest.raises((tarfile.ReadError, EOFError, OSError, zlib.error, lzma.LZMAError)):
            with tarfile.open(fileobj=io.BytesIO(cut), mode=mode) as tf:
                for member in tf:
                    tf.extractfile(member).read()
                    names.append(member.name)
        assert names == expected
