"""``iter_samples`` (the C walk-and-group pass) gives exactly ``group_samples(iter_tar(...))``: samples, errors,
warnings and stats, on valid and hostile archives (duplicates, interleaved keys, no extension, ``__`` fields,
non-ASCII names, extended headers, big members, truncation), through every stream kind and buffer size."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream import _native
from shardstream.errors import SampleFormatError, TarFormatError
from shardstream.samples import (
    ColumnBatches,
    KeyRule,
    SampleStats,
    group_samples,
    iter_samples,
)
from shardstream.tar import iter_tar, reader
from shardstream.tar.writer import TarStreamWriter
from shardstream.testing import ShortReads

needs_c = pytest.mark.skipif(
    not hasattr(_native.extension, "scan_samples"), reason="C extension not built (setup.py build_ext)"
)



def skip(exc: BaseException) -> bool:
    return True


def stop(exc: BaseException) -> bool:
    return False


def outcome(data: bytes, *, fast: bool, stream: str = "bytes", bufsize: int = 1 << 20, **kw):
    """(samples, error, warnings, stats) of reading ``data`` with iter_samples (fast) or the reference path."""
    stats = SampleStats()
    samples, error = [], None
    with warnings.catch_warnings(record=True) as caught, tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("always")
        if stream == "file":
            path = os.path.join(tmp, "t.tar")
            with open(path, "wb") as f:
                f.write(data)
            source = open(path, "rb")  # noqa: SIM115 - closed below
        else:
            source = io.BytesIO(data) if stream == "bytes" else ShortReads(data)
        try:
            if fast:
                it = iter_samples(source, "t.tar", stats=stats, bufsize=bufsize, accelerate=True, **kw)
            else:
                members = iter_tar(source, "t.tar", bufsize=bufsize, accelerate=False)
                it = group_samples(members, "t.tar", stats=stats, **kw)
            for sample in it:
                samples.append(sample)
        except (TarFormatError, SampleFormatError) as e:
            error = (type(e).__name__, str(e))
        finally:
            source.close()
    return samples, error, [str(w.message) for w in caught], stats


def as_bytes(sample: dict) -> dict:
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in sample.items()}


def same(data: bytes, **kw):
    """Assert the C pass, the zero-copy pass (from a file) and the reference agree; return the reference's outcome."""
    want = outcome(data, fast=False, **kw)
    got = outcome(data, fast=True, **kw)
    assert got[1:] == want[1:]
    assert got[0] == want[0]
    assert [list(s) for s in got[0]] == [list(s) for s in want[0]]  # field order too
    mapped = outcome(data, fast=True, zero_copy=True, **dict(kw, stream="file"))
    assert mapped[1:] == want[1:]
    assert [as_bytes(s) for s in mapped[0]] == want[0]
    assert [list(s) for s in mapped[0]] == [list(s) for s in want[0]]
    plain = data[:2] != b"\x1f\x8b"
    assert all(isinstance(v, memoryview) == plain for s in mapped[0] for k, v in s.items() if k[:2] != "__")
    return want


def tar_of(members, fmt=tarfile.GNU_FORMAT) -> bytes:
    """An archive of (name, data) regular files and (name, None) directories, names as str or raw bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape") as tf:
        for name, data in members:
            if isinstance(name, bytes):
                name = name.decode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


HOSTILE = {
    "clean": [("a.txt", b"1"), ("a.cls", b"2"), ("b.txt", b"3"), ("b.cls", b"4")],
    "duplicate": [("a.txt", b"1"), ("a.txt", b"2"), ("b.txt", b"3")],
    "duplicate in last": [("a.txt", b"1"), ("b.txt", b"2"), ("b.txt", b"3")],
    "interleaved": [("a.txt", b"1"), ("b.txt", b"2"), ("a.cls", b"3"), ("c.txt", b"4")],
    "no extension": [("a.txt", b"1"), ("README", b"2"), ("b.txt", b"3")],
    "empty extension": [("a.txt", b"1"), ("b.", b"2"), ("c.txt", b"3")],
    "dunder key": [("a.__key__", b"1"), ("a.txt", b"2"), ("b.txt", b"3"), ("b.__url__", b"4")],
    "upper case": [("a.TXT", b"1"), ("a.txt", b"2"), ("b.Seg.JPG", b"3")],
    "dots in dirs": [("v1.2/a.txt", b"1"), ("v1.2/a.cls", b"2"), ("d/.hidden", b"3"), (".x", b"4")],
    "non-ascii": [("é/ü.txt", b"1"), ("é/ü.CLS", b"2"), ("ü.TXT", b"3"), ("a.Ü", b"4"), ("a.txt", b"5")],
    "undecodable": [(b"\xff\xfe.txt", b"1"), (b"\xff\xfe.cls", b"2"), (b"x.\xffTXT", b"3")],
    "directories": [("d", None), ("d/a.txt", b"1"), ("d/sub", None), ("d/a.cls", b"2")],
    "long names": [("x" * 150 + ".txt", b"1"), ("x" * 150 + ".cls", b"2"), ("y" * 300 + ".txt", b"3")],
    "empty": [],
    "big member": [("a.txt", b"1"), ("a.bin", bytes(1 << 20) + b"z"), ("b.txt", b"3"), ("c.txt", b"4")],
}


@needs_c
@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("handler", [None, skip, stop], ids=["raise", "skip", "stop"])
@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=["gnu", "pax"])
def test_c_grouping_equals_group_samples(name, handler, fmt):
    data = tar_of(HOSTILE[name], fmt)
    for stream in ("bytes", "short", "file"):
        for bufsize in (512, 1500, 1 << 20):
            same(data, handler=handler, stream=stream, bufsize=bufsize)


@needs_c
@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("handler", [None, skip], ids=["raise", "skip"])
def test_local_path_is_the_last_key_of_every_sample_on_every_path(name, handler, monkeypatch):
    """``local_path``: set in C on the samples the C pass groups, in Python on the rest (the tail Python groups, the
    zero-copy and pure-Python paths); the same samples, in the same key order, as setting it afterwards."""
    data = tar_of(HOSTILE[name])
    want, error, warned, _ = outcome(data, fast=False, handler=handler)
    want = [{**s, "__local_path__": "/data/t.tar"} for s in want]
    runs = [dict(stream=stream, bufsize=bufsize) for stream in ("bytes", "short", "file") for bufsize in (512, 1 << 20)]
    runs.append(dict(stream="file", zero_copy=True))
    for run in runs:
        got = outcome(data, fast=True, handler=handler, local_path="/data/t.tar", **run)
        assert got[1:3] == (error, warned), run
        assert [as_bytes(s) for s in got[0]] == want, run
        assert [list(s) for s in got[0]] == [list(s) for s in want], run
    monkeypatch.setattr(_native, "extension", None)  # no extension: the Python grouping sets it
    got = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got.extend(iter_samples(io.BytesIO(data), "t.tar", handler=handler, local_path="/data/t.tar"))
        except (TarFormatError, SampleFormatError):
            pass
    assert [list(s) for s in got] == [list(s) for s in want] and got == want


@needs_c
def test_a_clean_shard_is_grouped_in_c_to_its_end(monkeypatch):
    data = tar_of([(f"{i:04d}.{ext}", b"%d" % i) for i in range(300) for ext in ("txt", "cls")])
    handed_over = []
    original = reader.walk

    def spy(src, *args, **kw):
        handed_over.append(src.base + src.pos)
        return original(src, *args, **kw)

    monkeypatch.setattr(reader, "walk", spy)
    samples, error, warned, stats = outcome(data, fast=True, bufsize=4096)
    assert len(samples) == stats.samples == 300 and error is None and not warned
    assert handed_over == [300 * 2 * 1024]  # Python only read the end-of-archive marker
    assert samples[7] == {"__key__": "0007", "__url__": "t.tar", "txt": b"7", "cls": b"7"}


@needs_c
def test_truncated_and_corrupt_archives():
    data = tar_of(HOSTILE["clean"] + HOSTILE["long names"])
    for cut in (0, 100, 512, 1000, 1536, 2048, 3000, len(data) - 10240, len(data) - 1024, len(data) - 512):
        same(data[:cut] if cut else b"", stream="short", bufsize=1000)
        same(data[:cut] if cut else b"", stream="file", bufsize=1000)
    corrupt = bytearray(data)
    corrupt[2048 + 148] ^= 1  # a checksum digit of the third header
    same(bytes(corrupt))


@needs_c
def test_compressed_shards():
    data = tar_of(HOSTILE["interleaved"] + [("z.txt", b"9")])
    same(gzip.compress(data), handler=skip)
    same(gzip.compress(data)[:-20], handler=skip)


@needs_c
def test_other_rules_take_the_python_path():
    data = tar_of([("a.b.txt", b"1"), ("a.b.cls", b"2")])
    for rule in ("last-dot", KeyRule(lowercase=False), r"(.*)\.(\w+)$"):
        same(data, rule=rule)
    assert outcome(data, fast=True, rule="last-dot")[0][0]["__key__"] == "a.b"


def test_pure_python_path_without_the_extension(monkeypatch):
    monkeypatch.setattr(_native, "extension", None)
    data = tar_of(HOSTILE["duplicate"])
    samples = list(iter_samples(io.BytesIO(data), "t.tar", handler=skip))
    assert [s["__key__"] for s in samples] == ["b"]


NAMES = st.sampled_from(
    ["a", "b", "c", "d/x", "d.v2/y", "É", "\udcff", "a" * 120]
)
EXTS = st.sampled_from(["txt", "cls", "TXT", "seg.jpg", "", None, "__key__", "ü", "json"])


@st.composite
def archives(draw):
    members = []
    for _ in range(draw(st.integers(0, 14))):
        if draw(st.integers(0, 12)) == 0:
            members.append((draw(NAMES) + "-dir", None))
            continue
        key, ext = draw(NAMES), draw(EXTS)
        size = draw(st.sampled_from([0, 1, 100, 511, 512, 513, 3000]))
        members.append((key if ext is None else f"{key}.{ext}", bytes([len(members) % 256]) * size))
    fmt = draw(st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
    try:
        data = tar_of(members, fmt)
    except ValueError:  # a name too long for ustar
        data = tar_of(members, tarfile.GNU_FORMAT)
    cut = draw(st.one_of(st.none(), st.integers(0, len(data))))
    return data if cut is None else data[:cut]


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=archives(),
    handler=st.sampled_from([None, skip, stop]),
    stream=st.sampled_from(["bytes", "short", "file"]),
    bufsize=st.sampled_from([512, 1100, 1 << 20]),
)
def test_random_archives(data, handler, stream, bufsize):
    same(data, handler=handler, stream=stream, bufsize=bufsize)


@needs_c
def test_writer_output_round_trips():
    out = io.BytesIO()
    with TarStreamWriter(out) as tw:
        for i in range(50):
            tw.add(f"k{i:03d}.jpg", os.urandom(i * 97))
            tw.add(f"k{i:03d}.json", b"{}")
    (samples, error, warned, stats) = same(out.getvalue(), stream="file", bufsize=4096)
    assert len(samples) == 50 and error is None and not warned


def column_reference(datas, batch_size, **kw):
    """Column batches built by hand from the reference path's samples (one shard after the other)."""
    batches, columns = [], {}
    results = [outcome(data, fast=False, **kw) for data in datas]
    for samples, *_ in results:
        for sample in samples:
            if columns and columns.keys() != sample.keys():
                batches.append(columns)
                columns = {}
            if not columns:
                columns = {k: [] for k in sample}
            for k, v in sample.items():
                columns[k].append(v)
            if len(columns["__key__"]) == batch_size:
                batches.append(columns)
                columns = {}
    return batches + ([columns] if columns else []), [r[1:3] for r in results]


def column_batches(datas, batch_size, *, accelerate, handler=None, bufsize=1 << 20):
    batcher = ColumnBatches(batch_size, handler=handler, bufsize=bufsize, accelerate=accelerate)
    batches, ends = [], []
    for data in datas:
        error = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                batches.extend(batcher.read(ShortReads(data), "t.tar"))
            except (TarFormatError, SampleFormatError) as e:
                error = (type(e).__name__, str(e))
        ends.append((error, [str(w.message) for w in caught]))
    last = batcher.flush()
    return batches + ([last] if last else []), ends, batcher.stats


@needs_c
@pytest.mark.parametrize("batch_size", [1, 2, 3, 256])
@pytest.mark.parametrize("handler", [None, skip], ids=["raise", "skip"])
def test_column_batches_equal_batched_samples(batch_size, handler):
    shards = [tar_of(HOSTILE[name]) for name in sorted(HOSTILE)]
    many = 700 if batch_size == 256 else 40  # more than two batches of each size, and a partial one
    shards.append(tar_of([(f"{i:04d}.{ext}", b"%d" % i) for i in range(many) for ext in ("txt", "cls")]))
    shards.append(tar_of(HOSTILE["clean"])[:-1500])  # truncated
    want, ends = column_reference(shards, batch_size, handler=handler, stream="short")
    for accelerate in (True, False):
        for bufsize in (512, 1 << 20):
            got, got_ends, stats = column_batches(shards, batch_size, accelerate=accelerate, handler=handler,
                                                  bufsize=bufsize)
            assert got_ends == ends
            assert got == want
            assert [list(b) for b in got] == [list(b) for b in want]
            assert stats.samples == sum(len(b["__key__"]) for b in want) or handler is None


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shards=st.lists(archives(), min_size=1, max_size=3), batch_size=st.integers(1, 5))
def test_random_column_batches(shards, batch_size):
    want, ends = column_reference(shards, batch_size, handler=skip, stream="short")
    got, got_ends, _ = column_batches(shards, batch_size, accelerate=True, handler=skip, bufsize=1100)
    assert (got, got_ends) == (want, ends)
