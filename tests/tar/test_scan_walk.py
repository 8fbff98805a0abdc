"""The C header walk (``_scan.scan``, ``_scan.scan_samples``) on single hand-made headers against the pure-Python
reading of the same block (``header.parse_header`` and the Python walk).

The invariant of ``_scan_walk.c``: the C walk never accepts a header that Python reads differently; it may only stop
earlier and leave the header to Python. Its fast paths (the writer forms of the size and checksum fields read a
word at a time, the SIMD block sum that also finds zero blocks, the SIMD name and prefix lengths) must give exactly
Python's values, and the writer forms must be accepted (else the fast paths would never run).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from shardstream import _native
from shardstream.errors import TarFormatError
from shardstream.samples import DEFAULT_RULE
from shardstream.tar.header import parse_header

pytestmark = pytest.mark.skipif(_native.extension is None, reason="C extension not built (setup.py build_ext)")

OCTAL_MAX = 8**11 - 1  # the largest size the writer form (11 digits and a NUL) holds


def padded(size: int) -> int:
    return (size + 511) & ~511


def python_size(block: bytes) -> int | None:
    """The size Python reads from a header block, or None where it refuses the header."""
    try:
        return parse_header(block).size
    except TarFormatError:
        return None


def c_declared(block: bytes) -> int | None:
    """What the C walk reads from a lone header of a regular file with no data after it: the padded size it asks
    for (0 when it takes a member of size 0), or None where it leaves the header to Python."""
    samples, pos, current, _key, need = _native.extension.scan_samples(
        block, 0, "t.tar", set(), None, None, DEFAULT_RULE.split
    )
    assert samples == []
    if pos == 0:
        assert current is None and need >= 0
        return need - 512 if need else None
    assert pos == 512 and current is not None and need == 512  # a member of size 0, then the next header
    return 0


def c_members(data: bytes) -> tuple[list[tuple[str, bytes, int]], int]:
    return _native.extension.scan(data, 0, 0)  # type: ignore[no-any-return]


def python_members(data: bytes, kit) -> list[tuple[str, bytes, int]]:
    return kit.run(data, accelerate=False).members  # type: ignore[no-any-return]


def with_size_field(kit, field: bytes, name: bytes = b"a.bin") -> bytes:
    """A header whose 12-byte size field is ``field``, its checksum in the writer form."""
    return kit.raw_header(name, field)


def with_checksum_field(kit, form: bytes, value: int | None = None, name: bytes = b"a.txt", size: int = 3) -> bytes:
    """A header whose checksum field is ``form % value`` (value: the right checksum unless given)."""
    block = bytearray(kit.raw_header(name, size))
    right = kit.block_checksum(block)
    block[148:156] = form % (right if value is None else value)
    assert len(block) == 512
    return bytes(block)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(0, OCTAL_MAX))
def test_size_in_the_writer_form_reads_as_python_does(kit, size):
    block = kit.raw_header(b"a.bin", size)
    assert python_size(block) == size
    assert c_declared(block) == padded(size)  # accepted, and every digit above the last three


@pytest.mark.parametrize("digit", range(8))
@pytest.mark.parametrize("place", range(11))
def test_each_digit_of_the_size(kit, place, digit):
    size = digit * 8**place + (8**place - 1) // 7  # the digit, and a 1 in every lower place
    block = kit.raw_header(b"a.bin", size)
    assert python_size(block) == size and c_declared(block) == padded(size)
    if size < 1 << 16:  # the exact size, low digits included: a member with its data
        data = block + kit.pad(bytes(size))
        assert c_members(data) == ([("a.bin", bytes(size), 512)], 512 + padded(size))


@pytest.mark.parametrize(
    "form",
    [
        b"%011o\0",  # the writer form
        b"%011o ",  # ended by a space
        b"%012o",  # 12 digits, no end
        b"%010o\0\0",
        b"%010o \0",
        b" %010o\0",  # leading spaces
        b"  %09o \0",
        b"%o\0",  # a short number, NUL padded
        b"%o ",  # a short number, space and NUL padded
        b"%07o\0    ",
        b"%011o\x01",  # garbage where the NUL belongs
        b"%011o/",
        b"%011o8",
        b"%010o8\0",
        b"%010o\x00x",  # junk after the NUL: ignored
        b"\x80\0\0\0\0\0\0\0%04o",  # base-256 (the digits are bytes of the number)
    ],
)
@pytest.mark.parametrize("size", [0, 1, 0o777, 0o1000, 0o7654321, 0o17777777])
def test_size_field_forms(kit, form, size):
    text = form % size
    if len(text) > 12:
        pytest.skip("the number does not fit this form")
    text = text.ljust(12, b"\0")
    block = with_size_field(kit, text)
    expected = python_size(block)
    got = c_declared(block)
    assert got is None or (expected is not None and got == padded(expected)), (text, got, expected)
    if text == b"%011o\0" % size:
        assert got == padded(size)  # the writer form never goes to Python


@pytest.mark.parametrize(
    "field",
    [b"\0" * 12, b" " * 12, b" " * 11 + b"\0", b"\0" + b"7" * 11, b"8" + b"\0" * 11, b"\x80" + bytes(10) + b"\x05",
     b"\xff" * 12, b"00000000000\x80", b"7777777777\x807"],
)
def test_odd_size_fields(kit, field):
    block = with_size_field(kit, field)
    expected = python_size(block)
    got = c_declared(block)
    assert got is None or (expected is not None and got == padded(expected)), (field, got, expected)


@settings(max_examples=200, deadline=None)
@given(name=st.binary(min_size=1, max_size=100).filter(lambda n: 0 not in n), size=st.integers(0, 600))
def test_checksum_in_the_writer_form_is_accepted(kit, name, size):
    block = kit.raw_header(name, size)  # every checksum value these names give, its 6 digits read a word at a time
    data = block + kit.pad(b"x" * size) + kit.END
    python = python_members(data, kit)
    assert c_members(data) == (python, 512 + padded(size))


@pytest.mark.parametrize(
    "form",
    [b"%06o\0 ", b"%07o\0", b"%06o\0\0", b"%06o  ", b"%06o \0", b" %06o\0", b"  %05o\0", b"%08o", b"%o\0", b"%o ",
     b"%06o\0\x01", b"%06o\x01 ", b"%06o\0\t", b"\x80\0\0\0\0%03o"],
)
@pytest.mark.parametrize("off_by", [0, 1, -1, 8, 64, 0o100000])
def test_checksum_field_forms(kit, form, off_by):
    block = bytearray(kit.raw_header(b"a.txt", 3))
    text = form % (kit.block_checksum(block) + off_by)
    if len(text) > 8:
        pytest.skip("the number does not fit this form")
    block[148:156] = text.ljust(8, b"\0")
    data = bytes(block) + kit.pad(b"abc") + kit.END
    python = python_members(data, kit) if python_size(bytes(block)) is not None else []
    members, pos = c_members(data)
    assert members == python[: len(members)] and pos == (1024 if members else 0), (text, members, python)
    if off_by == 0 and form == b"%06o\0 ":
        assert members == [("a.txt", b"abc", 512)]  # the writer form never goes to Python
    if off_by:
        assert members == []  # a wrong checksum: Python raises


def test_a_wrong_digit_in_the_checksum_stops_the_walk(kit):
    block = kit.raw_header(b"some/sample.txt", 5)
    for place in range(6):
        for digit in b"01234567":
            bad = bytearray(block)
            if bad[148 + place] == digit:
                continue
            bad[148 + place] = digit
            data = bytes(bad) + kit.pad(b"hello") + kit.END
            assert python_size(bytes(bad)) is None
            assert c_members(data) == ([], 0)


def test_signed_checksum(kit):
    name = b"caf\xe9-\xff\x80\xfe.txt"
    block = bytearray(kit.raw_header(name, 2))
    signed = sum(b - 256 if b > 127 else b for b in block[:148] + block[156:]) + 256
    assert signed != kit.block_checksum(block)
    block[148:156] = b"%06o\0 " % signed
    data = bytes(block) + kit.pad(b"zz") + kit.END
    assert c_members(data) == (python_members(data, kit), 1024) != ([], 1024)


@settings(max_examples=200, deadline=None)
@given(offset=st.sampled_from([*range(265, 345), *range(500, 512)]), value=st.integers(1, 255))
def test_every_byte_of_the_block_is_summed(kit, offset, value):
    """Bytes the reader does not read (owner names, device numbers, padding) still count in the checksum."""
    block = bytearray(kit.raw_header(b"a.txt", 1))
    block[offset] = value
    stale = bytes(block)
    block[148:156] = b"%06o\0 " % kit.block_checksum(block)
    assert c_members(bytes(block) + kit.pad(b"1") + kit.END) == ([("a.txt", b"1", 512)], 1024)
    assert python_size(stale) is None and c_members(stale + kit.pad(b"1") + kit.END) == ([], 0)


def test_zero_block_stops_the_walk(kit):
    data = kit.entry(b"a.txt", b"1") + bytes(512) + kit.entry(b"b.txt", b"2") + kit.END
    assert c_members(data) == ([("a.txt", b"1", 512)], 1024)


@pytest.mark.parametrize("offset", [0, 1, 99, 100, 124, 148, 155, 156, 257, 345, 400, 499, 500, 511])
@pytest.mark.parametrize("value", [1, ord("0"), ord(" "), 0x80, 0xFF])
def test_blocks_with_one_byte_set_are_left_to_python(kit, offset, value):
    block = bytearray(512)
    block[offset] = value
    expected = python_size(bytes(block))
    members, pos = c_members(bytes(block) + bytes(512) + kit.END)
    assert expected is None  # no checksum is right
    assert (members, pos) == ([], 0)


def test_header_with_an_empty_name_is_not_a_zero_block(kit):
    data = kit.entry(b"", b"data") + kit.entry(b"\0junk", b"more") + kit.END
    python = python_members(data, kit)
    assert python == [("", b"data", 512), ("", b"more", 1536)]
    assert c_members(data) == (python, 2048)


@pytest.mark.parametrize("length", [*range(0, 20), 31, 32, 33, 47, 48, 63, 64, 79, 80, 95, 96, 97, 98, 99, 100])
@pytest.mark.parametrize("prefix", [b"", b"p", b"d" * 15, b"d" * 16, b"d" * 17, b"e" * 154, b"e" * 155])
@pytest.mark.parametrize("magic", [b"ustar\x0000", b"ustar  \x00", b"\0" * 8, b"ustar\x00 \x00"])
def test_name_and_prefix_lengths(kit, length, prefix, magic):
    name = (b"n" * length)[:-4] + b".txt" if length >= 5 else b"n" * length
    block = bytearray(kit.raw_header(name, 1, magic=magic, prefix=prefix))
    # bytes Python does not read (the mode, the padding): a NUL one byte past the name's end and past the prefix's
    block[100:108] = b"0\0\0\0\0\0\0\0"
    block[500:502] = b"x\0"
    block[148:156] = b"%06o\0 " % kit.block_checksum(block)
    data = bytes(block) + kit.pad(b"1") + kit.entry(b"tail.txt", b"2") + kit.END
    python = python_members(data, kit)
    expected_name = (prefix + b"/" + name if prefix and magic[:6] == b"ustar\0" else name).decode()
    assert python[0] == (expected_name, b"1", 512)
    assert c_members(data) == (python, 2048)


@pytest.mark.parametrize("junk", [b"\0x", b"\0" + b"y" * 50, b"\0\0z"])
def test_bytes_after_the_nul_of_the_name_and_prefix_are_ignored(kit, junk):
    block = bytearray(kit.raw_header(b"name.txt", 1, prefix=b"pre"))
    block[8 : 8 + len(junk)] = junk
    block[348 : 348 + len(junk)] = junk
    block[148:156] = b"%06o\0 " % kit.block_checksum(block)
    data = bytes(block) + kit.pad(b"1") + kit.END
    python = python_members(data, kit)
    assert python == [("pre/name.txt", b"1", 512)]
    assert c_members(data) == (python, 1024)


@pytest.mark.parametrize("typeflag", [b"\0", b"0"])
def test_v7_directory_with_a_full_name(kit, typeflag):
    name = b"d" * 99 + b"/"
    data = kit.raw_header(name, 0, typeflag, magic=b"\0" * 8) + kit.entry(b"a.txt", b"1") + kit.END
    python = python_members(data, kit)
    assert python == ([("a.txt", b"1", 1024)] if typeflag == b"\0" else [(name.decode(), b"", 512), ("a.txt", b"1", 1024)])
    assert c_members(data) == (python, 1536)
