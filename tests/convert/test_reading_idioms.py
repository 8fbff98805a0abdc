"""The output of every converter reads with the usual idioms: ``.to_tuple("jpg", "cls")`` (the one file/image
column named by its extension, the one integer label column ``cls``, other columns keeping their names), and
``fields=`` / ``--fields`` overrides the names. Each test builds its own small input."""

from __future__ import annotations

import csv
import json

import pytest
from convert_helpers import example, image_bytes

import shardstream as wds
from shardstream.cli import main
from shardstream.convert import convert
from shardstream.convert.tfrecord import frame_record
from shardstream.errors import MissingFieldError
from shardstream.pipeline import getfirst
from shardstream.samples import KeyRule

LABELS = [0, 2, 1, 2]


@pytest.fixture
def images(tmp_path) -> list[bytes]:
    """Four JPEGs, also as files img/0.jpg ... img/3.jpg under tmp_path."""
    data = [image_bytes(i) for i in range(len(LABELS))]
    (tmp_path / "img").mkdir()
    for i, jpeg in enumerate(data):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(jpeg)
    return data


def rows(with_caption: bool = True) -> list[dict]:
    return [{"file": f"img/{i}.jpg", "label": label, **({"caption": f"photo {i}"} if with_caption else {})}
            for i, label in enumerate(LABELS)]  # fmt: skip


def write_table(path, records: list[dict], delimiter: str = ",") -> str:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(records[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(records)
    return str(path)


def make_csv(tmp_path, images):
    return write_table(tmp_path / "labels.csv", rows())


def make_tsv(tmp_path, images):
    return write_table(tmp_path / "labels.tsv", rows(), "\t")


def make_jsonl(tmp_path, images):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({"image_path": r["file"], "label": r["label"], "caption": r["caption"]}) + "\n"
                            for r in rows()))  # fmt: skip
    return str(path)


def make_parquet(tmp_path, images):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq  # noqa: PLC0415 - optional, after importorskip

    pq.write_table(pa.table({"image": images, "label": LABELS, "caption": [f"photo {i}" for i in range(4)]}),
                   tmp_path / "photos.parquet")  # fmt: skip
    return str(tmp_path / "photos.parquet")


def make_hf(tmp_path, images):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b", "c"]),
                                  "caption": datasets.Value("string")})  # fmt: skip
    ds = datasets.Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in images], "label": LABELS,
                                     "caption": [f"photo {i}" for i in range(4)]}, features=features)  # fmt: skip
    ds.save_to_disk(str(tmp_path / "hf"))
    return str(tmp_path / "hf")


def make_tfrecord(tmp_path, images):
    records = [example({"image/encoded": jpeg, "image/format": b"jpeg", "image/class/label": label})
               for jpeg, label in zip(images, LABELS, strict=True)]  # fmt: skip
    (tmp_path / "train.tfrecord").write_bytes(b"".join(map(frame_record, records)))
    return str(tmp_path / "train.tfrecord")


def make_imagefolder(tmp_path, images):
    for i, (jpeg, label) in enumerate(zip(images, LABELS, strict=True)):
        (tmp_path / "folder" / f"class{label}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "folder" / f"class{label}" / f"{i}.jpg").write_bytes(jpeg)
    return str(tmp_path / "folder")


def make_shards(tmp_path, images):
    """Shards made by another converter, re-sharded."""
    return convert(make_csv(tmp_path, images), str(tmp_path / "first"), engine="inline").urls


def make_parquet_of_shards(tmp_path, images):
    """Shards written back as Parquet (a column per field), converted again."""
    shards = convert(make_csv(tmp_path, images), str(tmp_path / "first"), engine="inline").urls
    return convert(shards, str(tmp_path / "pq"), to="parquet", engine="inline").urls


MAKERS = {"csv": make_csv, "tsv": make_tsv, "jsonl": make_jsonl, "parquet": make_parquet, "hf": make_hf,
          "tfrecord": make_tfrecord, "imagefolder": make_imagefolder, "shards": make_shards,
          "parquet-of-shards": make_parquet_of_shards}  # fmt: skip


def pairs(urls) -> list[tuple[bytes, int]]:
    return sorted(wds.WebDataset(urls, shardshuffle=False).decode().to_tuple("jpg", "cls"))


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_to_tuple_jpg_cls_reads_every_converters_output(tmp_path, images, kind):
    src = MAKERS[kind](tmp_path, images)
    result = convert(src, str(tmp_path / "out"), engine="inline")
    assert result.samples == 4 and not result.skipped
    want = sorted(zip(images, LABELS, strict=True)) if kind != "imagefolder" else sorted(
        zip(images, [sorted(set(LABELS)).index(label) for label in LABELS], strict=True))  # classes numbered from 0
    assert pairs(result.urls) == want
    if kind not in ("imagefolder", "tfrecord"):  # other columns keep their names
        captions = [s["caption.txt"] for s in wds.WebDataset(result.urls, shardshuffle=False).decode()]
        assert sorted(captions) == [f"photo {i}" for i in range(4)]


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet", "hf", "tfrecord", "imagefolder"])
def test_fields_overrides_the_names(tmp_path, images, kind):
    src = MAKERS[kind](tmp_path, images)
    image = {"csv": "file", "jsonl": "image_path", "tfrecord": "image_encoded", "imagefolder": "jpg"}.get(kind, "image")
    label = {"tfrecord": "image_class_label", "imagefolder": "cls"}.get(kind, "label")
    result = convert(src, str(tmp_path / "out"), engine="inline", fields={image: "photo.jpg", label: "target.cls"})
    got = sorted(wds.WebDataset(result.urls, shardshuffle=False).decode().to_tuple("photo.jpg", "target.cls"))
    assert [jpeg for jpeg, _ in got] == sorted(images)
    assert all("jpg" not in s and "cls" not in s for s in wds.WebDataset(result.urls))


def test_the_command_line_output_of_a_labels_csv_reads_as_jpg_and_cls(tmp_path, images, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "labels.csv", [{"file": r["file"], "label": r["label"]} for r in rows()])
    assert main(["convert", "labels.csv", "-o", "out/", "--engine", "inline"]) == 0
    assert pairs(sorted(str(p) for p in (tmp_path / "out").glob("*.tar"))) == sorted(zip(images, LABELS, strict=True))
    assert main(["convert", "labels.csv", "-o", "named/", "--engine", "inline",
                 "--fields", "file=image.jpg,label=label.cls"]) == 0  # fmt: skip
    sample = next(iter(wds.WebDataset(sorted(str(p) for p in (tmp_path / "named").glob("*.tar")))))
    assert {"image.jpg", "label.cls"} <= set(sample) and "jpg" not in sample


def test_a_malformed_fields_option_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "labels.csv", [{"file": "x.jpg", "label": 1}])
    assert main(["convert", "labels.csv", "-o", "out/", "--engine", "inline", "--fields", "file"]) == 2
    assert "--fields 'file': expected COLUMN=FIELD" in capsys.readouterr().err


@pytest.mark.parametrize(("columns", "names"), [
    pytest.param({"image_path": "img/0.jpg", "mask_path": "img/1.jpg", "label": 1},
                 {"image.jpg", "mask.jpg", "cls"}, id="two file columns keep COLUMN.EXT"),
    pytest.param({"file": "img/0.jpg", "fine_label": 1, "coarse_label": 0},
                 {"jpg", "fine_label.txt", "coarse_label.txt"}, id="two label columns keep their names"),
    pytest.param({"file": "img/0.jpg", "label": "cat"}, {"jpg", "label.txt"}, id="a label that is no integer"),
    pytest.param({"file": "img/0.jpg", "jpg": "already", "target": 3}, {"file.jpg", "jpg", "cls"},
                 id="a column already named jpg"),
])
def test_ambiguous_tables_keep_column_names(tmp_path, images, columns, names):
    src = write_table(tmp_path / "t.csv", [columns])
    result = convert(src, str(tmp_path / "out"), engine="inline")
    (sample,) = wds.WebDataset(result.urls)
    assert {k for k in sample if not k.startswith("__")} == names


ASKS = ["jpg", "jgp", "png", "cls", "txt", "label", "image"]


def samples_of_every_converter(tmp_path, images):
    for kind, make in sorted(MAKERS.items()):
        yield from wds.WebDataset(convert(make(tmp_path / kind, images), str(tmp_path / kind / "out"),
                                          engine="inline").urls)  # fmt: skip
    two = write_table(tmp_path / "two.csv", [{"image_path": "img/0.jpg", "mask_path": "img/1.jpg", "label": 1}])
    yield from wds.WebDataset(convert(two, str(tmp_path / "two"), engine="inline").urls)
    yield from wds.WebDataset(convert(two, str(tmp_path / "dotted"), engine="inline",  # every field dotted
                                      fields={"label": "label.cls"}).urls)  # fmt: skip
    one = write_table(tmp_path / "one.csv", [{"image_path": "img/0.jpg"}])
    yield from wds.WebDataset(convert(one, str(tmp_path / "one"), engine="inline", fields={"image_path": "x.jpg"}).urls)


def test_a_missing_field_in_converter_output_gives_advice_that_holds(tmp_path, images):
    """For a field the output lacks, the error names the field to ask for; where it advises another key rule
    (``keys='last-dot'``), that rule keeps each sample whole (it never splits a sample in two)."""
    for kind in MAKERS:
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "img").symlink_to(tmp_path / "img")
    seen = advised = 0
    for sample in samples_of_every_converter(tmp_path, images):
        fields = [k for k in sample if not k.startswith("__")]
        for ask in ASKS:
            if ask in sample:
                continue
            with pytest.raises(MissingFieldError) as caught:
                getfirst(sample, ask)
            error = caught.value
            assert error.suggestion is None or error.suggestion in fields
            if "last-dot" in str(error):
                keys = {KeyRule("last-dot").split(f"{sample['__key__']}.{field}")[0] for field in fields}
                assert len(keys) == 1, (fields, str(error))
                advised += 1
            seen += 1
    assert seen > 40 and advised > 0
    with pytest.raises(MissingFieldError, match=r"did you mean 'jpg'\?"):
        getfirst({"__key__": "k", "jpg": b"", "cls": b"1", "caption.txt": b""}, "jgp")
    with pytest.raises(MissingFieldError, match=r"did you mean 'image.jpg'\?") as caught:
        getfirst({"__key__": "k", "image.jpg": b"", "mask.png": b"", "cls": b"1"}, "jpg")
    assert "last-dot" not in str(caught.value)


def test_tfrecord_lists_under_a_label_name_keep_their_names(tmp_path):
    from shardstream.convert.tfrecord import _feature_field, _feature_names  # noqa: PLC0415 - internals

    for values, name in (([b"\xff\x00", b"\xfe"], "label.msgpack"), ([1, 2], "label.json")):
        names = _feature_names({"label": values}, {})
        assert names == {"label": "<label>"} and _feature_field("label", values, names)[0] == name
