"""Fused batch plans fed by the tar reader's rows as columns (``ReaderCursor.take_columns`` over the C
``scan_columns``) against the unfused chain, on shards with everything the column rows must leave to the stages:
missing and extra fields, undecodable text, integers ``int()`` reads but the C conversion does not, duplicate keys,
keys out of order, a member of 1 MiB or more, a truncated shard; with every handler; and resumed from the state
after each batch."""

from __future__ import annotations

import io
import tarfile
import warnings

import pytest
from pipeline_data import describe, fused_or_not

import shardstream as wds
from shardstream import reading_accel
from shardstream.codecs import Decoder
from shardstream.errors import StateError
from shardstream.pipeline import reraise_exception, tarfile_to_columns, warn_and_continue
from shardstream.pipeline.context import Context
from shardstream.pipeline.error_handlers import ignore_and_stop
from shardstream.pipeline.iteration import build_chain
from shardstream.pipeline.stages import reading

needs_c = pytest.mark.skipif(reading_accel.column_grouper() is None, reason="C extension not built or turned off")




def _tar(members, cut: int | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    data = out.getvalue()
    return data if cut is None else data[:cut]


def _clean(key: str, i: int):
    return [(f"{key}.txt", f"text {i}".encode()), (f"{key}.cls", str(i % 10).encode())]


def _shards(tmp_path, case: str) -> list[str]:
    members = [m for i in range(14) for m in _clean(f"k{i:02d}", i)]
    cut = None
    if case == "fields":
        members[6:8] = [("k03.txt", b"three")]  # no cls
        members[10:12] = _clean("k05", 5) + [("k05.json", b"[5]")]  # an extra field
    elif case == "values":
        members[5] = ("k02.cls", b" 7")  # int() reads it, the C conversion leaves it
        members[9] = ("k04.cls", b"1_0")
        members[14] = ("k07.txt", b"\xff not utf-8")
        members[17] = ("k08.cls", b"seven")
    elif case == "duplicate key":
        members[20:22] = _clean("k03", 3)
    elif case == "out of order":
        members = members[12:] + members[:12]
    elif case == "big member":
        members.insert(13, ("k06.bin", bytes(1 << 20)))
    elif case == "truncated":
        cut = len(_tar(members)) * 2 // 3 + 100
    paths = []
    for n, data in enumerate([_tar(members, cut), _tar([m for i in range(5) for m in _clean(f"z{i}", i)])]):
        path = tmp_path / f"{case.replace(' ', '-')}-{n}.tar"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


CASES = ["clean", "fields", "values", "duplicate key", "out of order", "big member", "truncated"]


@pytest.mark.parametrize("handler", [reraise_exception, warn_and_continue, ignore_and_stop],
                         ids=["raise", "continue", "stop"])
@pytest.mark.parametrize("idiom", ["decode", "map_tuple"])
@pytest.mark.parametrize("case", CASES)
def test_rows_from_the_reader_equal_the_chain(tmp_path, monkeypatch, case, idiom, handler):
    paths = _shards(tmp_path, case)

    def make():
        ds = wds.WebDataset(paths, shardshuffle=False, handler=handler)
        if idiom == "decode":
            return ds.decode(handler=handler).to_tuple("txt", "cls", handler=handler).batched(3)
        return ds.to_tuple("txt", "cls", handler=handler).map_tuple(bytes.decode, int, handler=handler).batched(3)

    taken = []
    real = reading.ReaderCursor.take_columns

    def spy(self, n, want):
        got = real(self, n, want)
        taken.append(got[0] is not None)
        return got

    monkeypatch.setattr(reading.ReaderCursor, "take_columns", spy)
    fused = fused_or_not(make, False, monkeypatch)
    assert any(taken) or reading_accel.column_grouper() is None, "no rows came as columns"
    assert fused == fused_or_not(make, True, monkeypatch)
    assert fused[0] or fused[2]


def test_a_plan_that_needs_other_fields_reads_dicts(tmp_path, monkeypatch):
    """A decode plan over samples with an extra field: every sample is a misfit, which the reader stops asking
    for as columns after a while; the batches are the chain's."""
    members = [m for i in range(200) for m in _clean(f"k{i:03d}", i) + [(f"k{i:03d}.json", b"[1]")]]
    path = tmp_path / "extra.tar"
    path.write_bytes(_tar(members))

    def make():
        return wds.WebDataset([str(path)], shardshuffle=False).decode().to_tuple("txt", "cls").batched(16)

    assert fused_or_not(make, False, monkeypatch) == fused_or_not(make, True, monkeypatch)


@needs_c
def test_samples_one_by_one_inside_rows_is_refused(tmp_path):
    """The samples of rows taken as columns are not dicts: asking for them one by one inside such rows is an
    error, not a silent skip; after the rows, the samples come one by one again (and the count goes on)."""
    path = tmp_path / "a.tar"
    path.write_bytes(_tar([m for i in range(6) for m in _clean(f"k{i}", i)]))
    cursor = build_chain(wds.DataPipeline(wds.SimpleShardList([str(path)]), wds.tarfile_to_samples()).pipeline,
                         Context(), -1)
    assert isinstance(cursor, reading.ReaderCursor)
    columns, samples = cursor.take_columns(2, (("txt",), b"\x01", False))
    assert (columns, samples) == ([["text 0", "text 1"]], [])
    with pytest.raises(StateError, match="one by one"):
        next(cursor)
    columns, _ = cursor.take_columns(10, (("txt",), b"\x01", False))
    assert columns == [[f"text {i}" for i in range(2, 5)]]  # the last sample is complete only at the shard's end
    assert cursor.state_dict()["sample"] == 5
    assert [s["__key__"] for s in cursor] == ["k5"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_columns_decoded_in_the_reader_equal_decode_columns(tmp_path, case, batch_size):
    """``tarfile_to_columns(n, decode=d)`` gives ``tarfile_to_columns(n)`` + ``map(d.decode_columns)``'s batches and
    error (with the C extension or without)."""
    paths = _shards(tmp_path, case)

    def outcome(*stages):
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out.extend(describe(b) for b in wds.DataPipeline(wds.SimpleShardList(paths), *stages))
            except Exception as exn:  # noqa: BLE001 - compared
                out.append((type(exn).__name__, str(exn)))
        return out

    want = outcome(tarfile_to_columns(batch_size), wds.map(Decoder().decode_columns))
    assert outcome(tarfile_to_columns(batch_size, decode=Decoder())) == want
