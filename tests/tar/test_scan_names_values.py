"""The C pass's short cuts on names and values, each against the definition it stands for: member names split by
SSE2 16 bytes a step (key up to the first '.' after the last '/', the extension lower-cased, non-ASCII names to the
Python rule), extensions found again in the cache case-insensitively, keys compared as bytes, ASCII text made into
``str`` without the UTF-8 decoder, and int columns packed for numpy (``fill_int64``) as ``np.array`` makes them."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from shardstream import _native
from shardstream.errors import ShardstreamError
from shardstream.pipeline.stages.batching import _int, scalar_array
from shardstream.samples import group_samples, iter_samples
from shardstream.tar import iter_tar

pytestmark = pytest.mark.skipif(not hasattr(_native.extension, "fill_int64"), reason="C extension not built")
_scan = _native.extension


def outcome(data: bytes, accelerate: bool, bufsize: int = 1 << 20) -> tuple[list[dict], str | None]:
    """The samples of a shard and the error that ended it (its type and message), by one of the two paths."""
    got: list[dict] = []
    try:
        if accelerate:
            got.extend(iter_samples(io.BytesIO(data), "t.tar", bufsize=bufsize, accelerate=True))
        else:
            got.extend(group_samples(iter_tar(io.BytesIO(data), "t.tar", accelerate=False), "t.tar"))
    except ShardstreamError as e:
        return got, f"{type(e).__name__}: {e}"
    return got, None


def names_at_chunk_edges() -> list[str]:
    """Names whose '/' and '.' fall on every side of the 16-byte chunk edges, long ones (GNU, PAX and ustar
    prefix spellings), and extensions in upper and mixed case."""
    out = []
    for width in (1, 7, 13, 14, 15, 16, 17, 30, 31, 32, 33, 47, 95, 99, 120, 200):
        stem = "k" * width
        out.append(f"{stem}.txt")
        out.append(f"d{width}/{stem}.a.b")  # two dots: the extension is "a.b"
        out.append(f"d{width}.x/{stem}.JPG")  # a dot before the last '/' does not count
        out.append(f"{'p' * (width % 17)}.q/r{stem}/s.Cls")
        out.append(f"a.b{stem}/{'d' * 20}.txt")  # the last '/' in a later chunk than the dot before it, the
        # dot after it in the next chunk
    return out


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("bufsize", [1536, 1 << 20])
def test_names_split_as_the_python_rule_does(fmt, bufsize, kit):
    members = []
    for i, name in enumerate(names_at_chunk_edges()):
        try:
            tarfile.TarInfo(f"{i:03d}/{name}").tobuf(fmt)
        except ValueError:
            continue  # too long for a ustar name and prefix
        members.append((f"{i:03d}/{name}", b"%d" % i))
    assert len(members) > 40
    data = kit.make_tar(members, fmt)
    want = outcome(data, accelerate=False)
    assert want[1] is None and len(want[0]) == len(members)
    assert outcome(data, accelerate=True, bufsize=bufsize) == want


@pytest.mark.parametrize("width", [1, 12, 13, 14, 28, 29, 30, 60])
def test_a_dot_before_the_last_slash_is_no_extension(width, kit):
    data = kit.make_tar([("a.txt", b"1"), (f"a.b{'c' * width}/{'d' * 20}", b"2")], tarfile.GNU_FORMAT)
    want = outcome(data, accelerate=False)
    assert want[1] is not None and want[1].startswith("MissingExtensionError")
    assert outcome(data, accelerate=True) == want


@pytest.mark.parametrize("at", [0, 3, 8, 15, 16, 17, 31, 32, 40])
def test_a_name_with_a_non_ascii_byte_anywhere_is_split_by_the_python_rule(at, kit):
    base = "abcdefghijklmnopqrstuvwxyz0123456789abcdef"
    stem = base[:at] + "\u00e9" + base[at:]
    members = [(f"{stem}.txt", b"t"), (f"{stem}.CLS", b"1"), (f"z{stem}/x.\u00e9xt", b"2"), ("zz.txt", b"3")]
    data = kit.make_tar(members, tarfile.PAX_FORMAT)
    want = outcome(data, accelerate=False)
    assert [s["__key__"] for s in want[0]] == [stem, f"z{stem}/x", "zz"]
    assert outcome(data, accelerate=True) == want


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_a_name_with_one_undecodable_byte_anywhere_is_split_by_the_python_rule(fmt, kit):
    members = []
    for at in range(40):
        stem = "".join(chr(97 + (i % 26)) for i in range(40))
        members.append((f"{at:02d}{stem[:at]}\udcff{stem[at:]}.txt", b"x"))  # the byte 0xff alone
    data = kit.make_tar(members, fmt)
    want = outcome(data, accelerate=False)
    assert len(want[0]) == 40 and all("\udcff" in s["__key__"] for s in want[0])
    assert outcome(data, accelerate=True) == want


def test_extension_cache_finds_the_lower_case_string_for_any_spelling(kit):
    """More distinct extensions than the cache holds, in turns and in three spellings each."""
    exts = [f"e{j}" for j in range(11)]
    members = []
    for i in range(40):
        for j, e in enumerate(exts[i % 3: i % 3 + 9]):
            spelled = e.upper() if (i + j) % 3 == 0 else e.capitalize() if (i + j) % 3 == 1 else e
            members.append((f"s{i:03d}.{spelled}", b"%d" % j))
    data = kit.make_tar(members, tarfile.GNU_FORMAT)
    want = outcome(data, accelerate=False)
    got = outcome(data, accelerate=True, bufsize=2048)
    assert got == want and want[1] is None
    assert all(k == k.lower() for s in got[0] for k in s)


@pytest.mark.parametrize("keys", [
    ["a", "ab", "abc", "b"],  # prefixes: the shorter key first
    ["b", "a", "c"],  # out of order, never seen: fine
    ["a", "b", "a"],  # a key seen again: the Python grouping's error
    ["abc", "ab", "abc"],
    ["k\u00e9", "k\u00e9a", "ka"],  # non-ASCII keys: compared as str
])
def test_keys_are_checked_as_the_python_grouping_checks_them(keys, kit):
    data = kit.make_tar([(f"{k}.txt", b"x") for k in keys], tarfile.PAX_FORMAT)
    assert outcome(data, accelerate=True) == outcome(data, accelerate=False)


@pytest.mark.parametrize("stop", [
    ("c", b"x"),  # a member with no extension: the C pass hands the rest of the shard to Python
    ("c.__key__", b"x"),  # a reserved field: the same
])
@pytest.mark.parametrize("again", ["a", "k0500", "zz"])
def test_keys_stored_by_c_are_seen_by_the_python_grouping_that_goes_on(stop, again, kit):
    """C stores the increasing keys as bytes; when Python's grouping takes over mid-shard, a key C stored that
    comes back is still an error there, and a new one is not."""
    members = [("a.txt", b"0")] + [(f"k{i:04d}.txt", b"%d" % i) for i in range(1000)] + [stop, (f"{again}.txt", b"y")]
    data = kit.make_tar(members, tarfile.GNU_FORMAT)
    want = outcome(data, accelerate=False)
    assert want[1] is not None  # the member that stops C is itself an error by default
    for bufsize in (2048, 1 << 20):
        assert outcome(data, accelerate=True, bufsize=bufsize) == want

    def kept(accelerate: bool) -> tuple[list[dict], list[str]]:
        errors: list[str] = []

        def keep_going(exc: BaseException) -> bool:
            errors.append(type(exc).__name__)
            return True

        return list(iter_samples(io.BytesIO(data), "t.tar", accelerate=accelerate, handler=keep_going)), errors

    samples, errors = kept(False)
    assert kept(True) == (samples, errors)
    assert ("InterleavedKeyError" in errors) == (again != "zz"), errors
    assert len(samples) == 1001 + (again == "zz")


def texts() -> list[bytes]:
    """ASCII texts of every length up to 80 (the 32-byte steps, the 8-byte words and the tail), and each with one
    non-ASCII byte, a whole character or a broken one, at each place."""
    out = []
    for n in range(81):
        text = bytes(48 + (i * 7) % 75 for i in range(n))
        out.append(text)
        for at in range(n):
            out.append(text[:at] + "\u00e9".encode() + text[at:])
            out.append(text[:at] + b"\xff" + text[at + 1:])
    return out


@pytest.mark.parametrize("mode", [1, 2])
def test_text_values_equal_the_utf8_decoder(mode):
    values = texts()
    buf = b"".join(values)
    sizes = np.array([len(v) for v in values], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    for i, v in enumerate(values):
        got = _scan.slice_column(buf, offsets, sizes, i, i + 1, mode)
        try:
            want = [v.decode("utf-8", "surrogateescape" if mode == 2 else "strict")]
        except UnicodeDecodeError:
            want = None
        assert got == want, v
        if got is not None:
            assert type(got[0]) is str and got[0].isascii() == v.isascii()


def test_ascii_text_values_are_compact_strings_like_the_decoders():
    value = b"plain ascii text " * 8
    got = _scan.slice_column(value, np.array([0], np.int64), np.array([len(value)], np.int64), 0, 1, 1)[0]
    assert got == value.decode() and got.isascii()
    assert hash(got) == hash(value.decode()) and {got: 1}[value.decode()] == 1
    assert got.encode() == value and got[6:11] == "ascii"


@pytest.mark.parametrize("column", [
    [0, 1, -1, 7],
    [2**63 - 1, -(2**63)],
    [2**63],  # past int64: numpy makes uint64
    [-(2**63) - 1],  # numpy makes an object array or refuses
    [True, 2],  # bools: numpy's ints, not exact ints
    [1, 2.5],
    [1, np.int64(3)],
    [3, 2**70],
])
def test_int_columns_equal_numpy_arrays(column):
    try:
        want = np.array(column)
    except OverflowError as e:
        with pytest.raises(type(e)):
            scalar_array(column)
        return
    got = scalar_array(column)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert got.flags.owndata and got.flags.writeable


def test_int_packer_fills_only_exact_ints_in_range():
    out = np.empty(3, np.int64)
    assert _scan.fill_int64([5, -6, 2**62], out) is True and out.tolist() == [5, -6, 2**62]

    class Int(int):
        pass

    for bad in ([1, Int(2), 3], [1, 2, 2**64], [1, "2", 3]):
        assert _scan.fill_int64(bad, np.empty(3, np.int64)) is False
    with pytest.raises(ValueError, match="one 8-byte item per item"):
        _scan.fill_int64([1, 2], np.empty(3, np.int64))
    with pytest.raises(ValueError, match="one 8-byte item per item"):
        _scan.fill_int64([1, 2], np.empty(2, np.int32))
    with pytest.raises(TypeError):
        _scan.fill_int64((1, 2), np.empty(2, np.int64))
    with pytest.raises((TypeError, BufferError, ValueError)):
        _scan.fill_int64([1, 2], b"x" * 16)  # read-only


def test_numpy_default_int_is_what_the_packer_fills():
    assert np.array([1, 2]).dtype == _int()
