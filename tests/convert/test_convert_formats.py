"""Each converter on real files of its format: original bytes kept, keys carried, what cannot be converted
reported; the results read back with WebDataset."""

from __future__ import annotations

import csv
import gzip
import json
import os

import pytest
from convert_helpers import image_bytes

from shardstream.convert import convert, detect, plan
from shardstream.errors import ConfigError, ProcessingError, RecordFormatError
from shardstream.process import ShardSource


def read(result):
    return [s for url in result.urls for s in ShardSource(url).samples()]


def test_parquet_binary_columns_keep_their_bytes(tmp_path, jpegs):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"id": [f"img{i}" for i in range(12)], "image": jpegs, "label": [i % 3 for i in range(12)],
                      "score": [i / 2 for i in range(12)], "caption": [f"a photo {i}" if i != 5 else None for i in range(12)]})
    pq.write_table(table, tmp_path / "photos.parquet", row_group_size=5)
    result = convert(str(tmp_path / "photos.parquet"), str(tmp_path / "out"), key="id", per_task=5, engine="local",
                     workers=2)
    assert result.tasks == 3 and result.samples == 12
    samples = read(result)
    assert [s["__key__"] for s in samples] == [f"img{i}" for i in range(12)]
    assert [s["jpg"] for s in samples] == jpegs
    assert samples[4]["cls"] == b"1" and samples[4]["score.json"] == b"2.0" and samples[4]["caption.txt"] == b"a photo 4"
    assert "caption.txt" not in samples[5]  # a null is no field


def test_hf_dataset_saved_to_disk_keeps_image_bytes(tmp_path, jpegs):
    datasets = pytest.importorskip("datasets")
    png = image_bytes(99, "PNG")
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": b, "path": f"{i}.jpg"} for i, b in enumerate(jpegs)] + [{"bytes": png, "path": None}],
         "label": list(range(13))},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")}))
    ds.save_to_disk(str(tmp_path / "hf"), num_shards=2)
    assert detect(str(tmp_path / "hf")) == "hf"
    result = convert(str(tmp_path / "hf"), str(tmp_path / "out"), engine="inline")
    samples = read(result)
    assert [s["__key__"] for s in samples] == [f"{i:08d}" for i in range(13)]  # numbered across the Arrow files
    assert [s["jpg"] for s in samples[:12]] == jpegs and samples[12]["png"] == png
    assert samples[3]["cls"] == b"3"


def test_hf_dataset_dict_needs_a_split_and_dataset_objects_convert(tmp_path):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a", "b"]}),
                               "test": datasets.Dataset.from_dict({"text": ["c"]})})
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ConfigError, match="split"):
        convert(str(tmp_path / "dd"), str(tmp_path / "out"), engine="inline")
    result = convert(str(tmp_path / "dd"), str(tmp_path / "out"), split="test", engine="inline")
    assert [s["text"] for s in read(result)] == [b"c"]
    loaded = datasets.load_from_disk(str(tmp_path / "dd" / "train"))
    assert [s["text"] for s in read(convert(loaded, str(tmp_path / "obj"), engine="inline"))] == [b"a", b"b"]


def write_tfrecords(path, jpegs, compress=False):
    tfrecord = pytest.importorskip("tfrecord")
    plain = str(path) + ".plain" if compress else str(path)
    writer = tfrecord.TFRecordWriter(plain)
    for i, jpeg in enumerate(jpegs):
        writer.write({"image/encoded": (jpeg, "byte"), "image/class/label": (i % 4, "int"),
                      "bbox": ([0.25, 0.5, -1.0], "float"), "name": (f"im{i}".encode(), "byte"),
                      "tags": ([b"x", b"y"], "byte")})
    writer.close()
    if compress:
        with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
            dst.write(src.read())
        os.remove(plain)


@pytest.mark.parametrize("name", ["a.tfrecord", "a.tfrecord.gz"])
def test_tfrecord_examples_written_by_the_tfrecord_package(tmp_path, jpegs, name):
    write_tfrecords(tmp_path / name, jpegs, compress=name.endswith(".gz"))
    result = convert(str(tmp_path / name), str(tmp_path / "out"), key="name", engine="inline")
    samples = read(result)
    assert [s["__key__"] for s in samples] == [f"im{i}" for i in range(12)]
    first = samples[1]
    assert first["jpg"] == jpegs[1] and first["cls"] == b"1" and first["name.bin"] == b"im1"
    assert json.loads(first["bbox.json"]) == [0.25, 0.5, -1.0] and json.loads(first["tags.json"]) == ["x", "y"]


def test_tfrecord_crc_failure_fails_its_task_with_a_typed_error(tmp_path, jpegs):
    write_tfrecords(tmp_path / "bad.tfrecord", jpegs)
    data = bytearray((tmp_path / "bad.tfrecord").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(data))
    with pytest.raises(ProcessingError) as info:
        convert(str(tmp_path / "bad.tfrecord"), str(tmp_path / "out"), engine="inline", retries=0)
    assert "RecordFormatError" in info.value.failures[0].error and "CRC mismatch" in info.value.failures[0].error
    source = plan(str(tmp_path / "bad.tfrecord"))[0]
    with pytest.raises(RecordFormatError, match="bad.tfrecord"):
        list(source.samples())


def test_csv_and_jsonl_with_path_columns_report_missing_files(tmp_path, jpegs):
    (tmp_path / "img").mkdir()
    for i, jpeg in enumerate(jpegs[:4]):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(jpeg)
    rows = [{"id": f"r{i}", "image_path": f"img/{i}.jpg", "label": str(i)} for i in range(5)]  # img/4.jpg is missing
    with open(tmp_path / "rows.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["id", "image_path", "label"])
        writer.writeheader()
        writer.writerows(rows)
    with open(tmp_path / "rows.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    for name in ("rows.csv", "rows.jsonl"):
        result = convert(str(tmp_path / name), str(tmp_path / name.replace(".", "-")), key="id", per_task=2,
                         engine="inline")  # fmt: skip
        assert result.tasks == 3 and result.samples == 4
        samples = read(result)
        assert [s["jpg"] for s in samples] == jpegs[:4] and samples[2]["__key__"] == "r2"
        assert [s["cls"] for s in samples] == [b"0", b"1", b"2", b"3"]
        ((_url, skip),) = result.skipped
        assert skip.key == "r4" and "no file 'img/4.jpg'" in skip.reason


def test_csv_records_with_quoted_newlines_split_between_records(tmp_path):
    with open(tmp_path / "q.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "n"])
        writer.writerows([[f'line one\nline "two" {i}', i] for i in range(7)])
    result = convert(str(tmp_path / "q.csv"), str(tmp_path / "out"), per_task=3, engine="inline")
    assert result.tasks == 3
    assert [s["text"] for s in read(result)] == [f'line one\nline "two" {i}'.encode() for i in range(7)]


def test_imagefolder_keeps_bytes_and_numbers_classes(tmp_path, jpegs):
    for i, jpeg in enumerate(jpegs):
        folder = tmp_path / "pets" / ("cat" if i < 7 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.jpg").write_bytes(jpeg)
    (tmp_path / "pets" / "README").write_text("not an image")
    result = convert(str(tmp_path / "pets"), str(tmp_path / "out"), per_task=5, engine="local", workers=2)
    samples = read(result)
    assert [s["jpg"] for s in samples] == jpegs and [s["cls"] for s in samples] == [b"0"] * 7 + [b"1"] * 5
    assert samples[8]["__key__"] == "dog/008" and result.tasks == 3


def test_shards_to_parquet_and_back_is_exact(tmp_path, jpegs):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pa.table({"jpg": jpegs, "cls": [str(i).encode() for i in range(12)]})
    pq.write_table(table, tmp_path / "in.parquet")
    shards = convert(str(tmp_path / "in.parquet"), str(tmp_path / "shards"), maxcount=5, engine="inline")
    back = convert(shards.urls, str(tmp_path / "pq"), to="parquet", engine="inline")
    got = pa.concat_tables([pq.read_table(u) for u in back.urls])
    assert got.column("jpg").to_pylist() == jpegs and got.column("__key__").to_pylist()[0] == "in-00000000"


def test_detect_and_bad_input(tmp_path):
    assert detect(["x.parquet"]) == "parquet" and detect("d-{0..3}.tfrecords") == "tfrecord"
    with pytest.raises(ConfigError, match="kind="):
        detect("mystery.bin")
    with pytest.raises(ConfigError, match="unknown kind"):
        plan("x", kind="excel")
