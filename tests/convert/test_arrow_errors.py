"""Parquet and Arrow files that pyarrow cannot read (garbage, truncated, a corrupt row group) are
RecordFormatErrors naming the file, and the row group or record batch where one is read, at planning as in a
task; never a raw pyarrow error."""

from __future__ import annotations

import dataclasses
import json

import pytest

from shardstream.convert import convert, plan
from shardstream.errors import ProcessingError, RecordFormatError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _table(rows: int = 300):
    return pa.table({"n": list(range(rows)), "blob": [b"x" * 50 + bytes([i % 256]) for i in range(rows)]})


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "good.parquet"
    pq.write_table(_table(), path, row_group_size=100, compression="snappy")
    return path


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_broken_parquet_file_fails_planning_with_a_typed_error(tmp_path, parquet, damage):
    data = parquet.read_bytes()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes({"garbage": b"PAR1" + bytes(range(256)) * 4, "truncated": data[:-30], "empty": b""}[damage])
    with pytest.raises(RecordFormatError, match="not a Parquet file") as info:
        plan(str(broken))
    assert info.value.url == str(broken) and "re-download or re-export" in str(info.value)
    with pytest.raises(RecordFormatError, match="not a Parquet file"):
        convert(str(broken), str(tmp_path / "out"), engine="inline")


def test_a_corrupt_row_group_fails_its_task_naming_the_row_group(tmp_path, parquet):
    chunk = pq.ParquetFile(parquet).metadata.row_group(1).column(1)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(parquet.read_bytes())
    data[start + 20 : start + chunk.total_compressed_size - 4] = b"\xab" * (chunk.total_compressed_size - 24)
    parquet.write_bytes(bytes(data))
    [source] = plan(str(parquet))  # the footer is intact: planning reads only the footer
    with pytest.raises(RecordFormatError, match=r"cannot read row groups 0 to 2 \(rows from 0\)") as info:
        list(source.samples())  # one batch of up to 1,024 rows spans the three row groups
    assert info.value.url == str(parquet)
    with pytest.raises(RecordFormatError, match=r"cannot read row group 1 \(rows from 100\)"):
        list(dataclasses.replace(source, batch_rows=50).samples())
    with pytest.raises(ProcessingError, match="RecordFormatError"):
        convert(str(parquet), str(tmp_path / "out"), engine="inline", retries=0)


def _saved_dataset(tmp_path, data: bytes):
    """A ``save_to_disk`` folder whose one Arrow file holds ``data``."""
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "data-00000-of-00001.arrow").write_bytes(data)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return folder


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_broken_arrow_file_fails_planning_with_a_typed_error(tmp_path, damage):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _table().schema) as writer:
        for batch in _table().to_batches(max_chunksize=100):
            writer.write_batch(batch)
    data = sink.getvalue().to_pybytes()
    folder = _saved_dataset(tmp_path, b"\xff" * 64 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(RecordFormatError, match="not an Arrow file") as info:
        convert(str(folder), str(tmp_path / "out"), engine="inline")
    assert info.value.url.endswith("data-00000-of-00001.arrow")


def test_a_truncated_arrow_stream_in_a_task_names_the_record_batch(tmp_path):
    from shardstream.convert import ArrowSource  # noqa: PLC0415 - beside its one use

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _table().schema) as writer:
        for batch in _table().to_batches(max_chunksize=100):
            writer.write_batch(batch)
    data = sink.getvalue().to_pybytes()
    path = tmp_path / "cut.arrow"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(RecordFormatError, match=r"cannot read record batch \d+ \(rows from \d+") as info:
        list(ArrowSource(str(path)).samples())
    assert info.value.url == str(path)
