"""Issue 18, item 4: a header claiming a huge size is a TarFormatError naming the shard and member, never a
MemoryError: a local file's size is checked before anything is read, other streams are read in bounded pieces.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from shardstream.errors import TarFormatError
from shardstream.reading import iter_samples
from shardstream.tar import iter_members
from shardstream.tar.compress import iter_tar
from shardstream.tar.header import checksum

SIZES = [1 << 20, 1 << 33, 1 << 40, (1 << 48) - 1]


def _claiming(size: int) -> bytes:
    """A small tar whose second member's header says ``size`` bytes (GNU base-256 when octal cannot hold it)."""
    header = bytearray(512)
    header[0:9] = b"big.bin\0\0"
    header[100:108], header[108:116], header[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    octal = b"%011o\0" % size
    header[124:136] = octal if len(octal) == 12 else b"\x80" + size.to_bytes(11, "big")
    header[136:148], header[156:157], header[257:265] = b"00000000000\0", b"0", b"ustar\x0000"
    header[148:156] = b"%06o\0 " % checksum(bytes(header))
    first = bytearray(header)
    first[0:9], first[124:136] = b"a.txt\0\0\0\0", b"00000000002\0"
    first[148:156] = b"%06o\0 " % checksum(bytes(first))
    return bytes(first) + b"hi".ljust(512, b"\0") + bytes(header) + bytes(4096)


@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_a_local_file_refuses_a_size_past_its_end(tmp_path, accelerate, size):
    path = tmp_path / "huge.tar"
    path.write_bytes(_claiming(size))
    for read in (lambda f: list(iter_members(f, str(path), accelerate=accelerate)),
                 lambda f: list(iter_samples(f, str(path), accelerate=accelerate)),
                 lambda f: list(iter_tar(f, str(path), accelerate=accelerate))):  # fmt: skip
        with open(path, "rb") as f, pytest.raises(TarFormatError) as info:
            read(f)
        error = info.value
        assert (error.url, error.offset, error.member) == (str(path), 1024, "big.bin")
        assert f"{size} data bytes" in str(error) and f"ends at offset {len(_claiming(size))}" in str(error)


@pytest.mark.parametrize("size", SIZES)
def test_other_streams_report_the_same_error(size):
    with pytest.raises(TarFormatError, match=f"{size} data bytes") as info:
        list(iter_members(io.BytesIO(_claiming(size)), "s.tar"))
    assert info.value.member == "big.bin"


def test_no_memory_is_allocated_for_a_claimed_size(tmp_path):
    path = tmp_path / "huge.tar"
    path.write_bytes(_claiming((1 << 48) - 1))
    code = textwrap.dedent(f"""
        import resource
        from shardstream.errors import TarFormatError
        from shardstream.tar import iter_members
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
        try:
            list(iter_members(open({str(path)!r}, "rb"), "huge.tar"))
        except TarFormatError as e:
            status = open("/proc/self/status").read()  # VmHWM: this process's own peak (ru_maxrss keeps the parent's)
            print("typed", int(status.split("VmHWM:")[1].split()[0]) // 1024)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.split()[0] == "typed", result.stderr[-2000:]
    assert int(result.stdout.split()[1]) < 500  # MB: nothing near the claimed size
