"""``iter_samples(chunks=True, columns=request)`` (the C ``scan_columns`` run mode, which the pipeline's reader
uses for fused batch plans) against the dict grouping: the same samples at the same places, each either a row of
its wanted fields converted (only when the sample fits: the fields, only them with ``exact``, simple values)
or its dict (whose row the stages make, as the reference does here); the same errors, warnings and stats."""

from __future__ import annotations

import io
import re
import tarfile
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shardstream.codecs import Decoder
from shardstream.errors import SampleFormatError, TarFormatError
from shardstream.reading import ColumnBatches, ColumnRequest, ColumnRun, iter_samples
from shardstream.reading_accel import column_grouper
from shardstream.samples import SampleStats, group_samples
from shardstream.tar import iter_tar

needs_c = pytest.mark.skipif(column_grouper() is None, reason="C extension not built or turned off")

_INT = re.compile(rb"[+-]?[0-9]{1,18}")


def _convert(value: bytes, mode: int):
    """The value a simple conversion gives (None when the value is not simple): the spec of scan_columns' modes."""
    if mode == 0:
        return value
    if mode == 1:
        try:
            return value.decode()
        except UnicodeDecodeError:
            return None
    return int(value) if _INT.fullmatch(value) else None


def _expected(sample: dict, fields, modes, exact):
    names = [k for k in sample if k[:2] != "__"]
    if any(f not in sample for f in fields) or (exact and len(names) != len(fields)):
        return sample
    row = [_convert(sample[f], m) for f, m in zip(fields, modes, strict=True)]
    return sample if None in row else ("row", row)


RUNS: list[int] = []  # the rows of each ColumnRun the fast path made


def _outcome(data: bytes, want, *, fast: bool, handler=None, bufsize: int = 1 << 20):
    stats, items, error = SampleStats(), [], None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if fast:
                request = ColumnRequest()
                request.want = want
                for chunk in iter_samples(io.BytesIO(data), "t.tar", handler=handler, stats=stats, bufsize=bufsize,
                                          accelerate=True, chunks=True, columns=request):
                    if isinstance(chunk, ColumnRun):
                        assert chunk.rows == len(chunk.columns[0]) > 0
                        RUNS.append(chunk.rows)
                        items.extend(("row", list(r)) for r in zip(*chunk.columns, strict=True))
                    else:  # samples the C grouping did not make rows of (or did not group): the stages' path
                        items.extend(_expected(s, *want) for s in chunk)
            else:
                members = iter_tar(io.BytesIO(data), "t.tar", accelerate=False)
                items.extend(_expected(s, *want) for s in group_samples(members, "t.tar", handler=handler,
                                                                         stats=stats))
        except (TarFormatError, SampleFormatError) as e:
            error = (type(e).__name__, str(e))
    return items, error, [str(w.message) for w in caught], stats


def _sample(i: int, kind: str):
    txt, cls = f"text {i}".encode(), str(i).encode()
    fields = {"txt": txt, "cls": cls}
    if kind == "missing":
        del fields["cls"]
    elif kind == "extra":
        fields["json"] = b"[1]"
    elif kind == "bad utf-8":
        fields["txt"] = b"\xff\xfe"
    elif kind == "spaced int":
        fields["cls"] = b" 7"
    elif kind == "underscore int":
        fields["cls"] = b"1_0"
    elif kind == "long int":
        fields["cls"] = b"1" * 19
    elif kind == "18 digits":
        fields["cls"] = b"-" + b"9" * 18
    elif kind == "signed int":
        fields["cls"] = b"-007"
    elif kind == "upper case":
        fields = {"TXT": txt, "cls": cls}
    elif kind == "big":
        fields["bin"] = bytes(1 << 20)
    return [(f"{i:04d}.{ext}", data) for ext, data in fields.items()]


KINDS = ["clean", "missing", "extra", "bad utf-8", "spaced int", "underscore int", "long int", "18 digits", "signed int",
         "upper case", "big"]
WANTS = [(("txt", "cls"), b"\x01\x03", True), (("txt", "cls"), b"\x01\x03", False), (("cls",), b"\x00", False),
         (("cls", "txt"), b"\x03\x00", True)]


@needs_c
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("want", WANTS, ids=["exact", "superset", "one", "reordered"])
def test_one_awkward_sample_among_clean_ones(kit, kind, want):
    members = [m for i in range(12) for m in _sample(i, kind if i in (0, 5, 11) else "clean")]
    data = kit.make_tar(members, tarfile.GNU_FORMAT)
    for bufsize in (512, 3000, 1 << 20):
        RUNS.clear()
        assert _outcome(data, want, fast=True, bufsize=bufsize) == _outcome(data, want, fast=False)
        assert RUNS or kind == "big"  # the clean samples came as rows (after a big member, Python groups)


@needs_c
@pytest.mark.parametrize("handler", [None, lambda e: True, lambda e: False], ids=["raise", "skip", "stop"])
@pytest.mark.parametrize("case", ["duplicate key", "out of order", "repeated field", "truncated", "no extension"])
def test_grouping_errors_and_stops_are_the_dict_paths(kit, case, handler):
    members = [m for i in range(8) for m in _sample(i, "clean")]
    if case == "duplicate key":
        members += _sample(3, "clean")
    elif case == "out of order":
        members = members[8:] + members[:8]
    elif case == "repeated field":
        members.insert(5, ("0002.txt", b"again"))
    elif case == "no extension":
        members.insert(7, ("README", b"x"))
    data = kit.make_tar(members, tarfile.GNU_FORMAT)
    if case == "truncated":
        data = data[: len(data) // 2 + 100]
    for want in WANTS:
        assert _outcome(data, want, fast=True, handler=handler) == _outcome(data, want, fast=False, handler=handler)


@st.composite
def archive_members(draw):
    n = draw(st.integers(0, 14))
    members = []
    for i in range(n):
        key = draw(st.sampled_from([f"{i:03d}", f"{i:03d}", "007", "dir/x"]))
        for ext in draw(st.lists(st.sampled_from(["txt", "cls", "json", "TXT", "cls"]), max_size=4)):
            value = draw(st.sampled_from([b"12", b"-3", b" 7", b"1_0", b"\xff", b"caf\xc3\xa9", b"", b"9" * 19, b"9" * 18]))
            members.append((f"{key}.{ext}", value))
    return members


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(archive_members(), st.sampled_from(WANTS), st.sampled_from([None, lambda e: True]),
       st.sampled_from([512, 1 << 20]))
def test_random_archives(kit, members, want, handler, bufsize):
    data = kit.make_tar(members, tarfile.GNU_FORMAT)
    assert _outcome(data, want, fast=True, handler=handler, bufsize=bufsize) == \
        _outcome(data, want, fast=False, handler=handler)


def _decoded_batches(datas, batch_size: int, *, fast: bool, handler=None, bufsize: int = 1 << 20):
    """The batches of ColumnBatches(decoder=...) (fast), or ``decode_columns`` of the Python path's bytes batches;
    then the error raised, if any."""
    decoder, out = Decoder(), []
    if fast:
        batches = ColumnBatches(batch_size, handler=handler, bufsize=bufsize, accelerate=True, decoder=decoder)
    else:
        batches = ColumnBatches(batch_size, handler=handler, accelerate=False)
    finish = (lambda b: b) if fast else decoder.decode_columns
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n, data in enumerate(datas):
                try:
                    out.extend(finish(b) for b in batches.read(io.BytesIO(data), f"s{n}.tar"))
                except TarFormatError as e:
                    out.append((type(e).__name__, str(e)))
            last = batches.flush()
            if last is not None:
                out.append(finish(last))
    except Exception as e:  # noqa: BLE001 - compared between the two paths
        out.append((type(e).__name__, str(e)))
    return out


@needs_c
@pytest.mark.parametrize("kind", KINDS + ["bad json"])
def test_decoded_column_batches_equal_decode_columns(kit, kind):
    def members(i):
        if kind == "bad json":
            return _sample(i, "clean") + [(f"{i:04d}.json", b"{" if i == 5 else b"[1]")]
        return _sample(i, kind if i in (0, 5, 11) else "clean")

    datas = [kit.make_tar([m for i in numbers for m in members(i)], tarfile.GNU_FORMAT)
             for numbers in (range(12), range(12, 15))]
    decoded = False
    for batch_size in (1, 4, 5, 64):
        for bufsize in (512, 1 << 20):
            want = _decoded_batches(datas, batch_size, fast=False)
            assert _decoded_batches(datas, batch_size, fast=True, bufsize=bufsize) == want
            decoded = decoded or any(isinstance(b, dict) and b["cls"][0].__class__ is int for b in want if "cls" in b)
    assert decoded or kind == "bad utf-8"  # (its first sample cannot be decoded: an error before any batch)


@needs_c
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(archive_members(), min_size=1, max_size=3), st.sampled_from([1, 3, 8]),
       st.sampled_from([None, lambda e: True]))
def test_random_decoded_column_batches(kit, member_lists, batch_size, handler):
    datas = [kit.make_tar(members, tarfile.GNU_FORMAT) for members in member_lists]
    assert _decoded_batches(datas, batch_size, fast=True, handler=handler) == \
        _decoded_batches(datas, batch_size, fast=False, handler=handler)
