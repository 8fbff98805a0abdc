"""The bytes a conversion writes are pinned: these digests were taken from the per-sample write path before the
batch (columnar) path existed, so the batch path must write the same shards and indexes, byte for byte.

Each case converts a small input made here (JSON Lines, CSV, Parquet) whose rows cover what decides the bytes:
keys given, generated and made safe, str/int/bool/float/bytes/None values, a column whose type changes between
rows, and shard cuts by count and by size in the middle of a batch."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random

import pytest

from shardstream.convert import convert

WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta"]


def _rows(count: int, seed: int) -> list[dict]:
    r = random.Random(seed)
    return [{"__key__": f"{i:06d}", "caption": " ".join(r.choice(WORDS) for _ in range(r.randrange(1, 40))),
             "label": r.randrange(1000)} for i in range(count)]  # fmt: skip


def _make(tmp_path, case: str) -> str:
    folder = tmp_path / "in"
    folder.mkdir()
    if case == "jsonl":  # the benchmark's shape
        rows = _rows(3000, 0)
    elif case == "jsonl-mixed":  # no __key__ here and there, dotted keys, a column that changes type, bools, None
        rows = _rows(2500, 1)
        for i, row in enumerate(rows):
            if i % 7 == 0:
                del row["__key__"]
            elif i % 11 == 0:
                row["__key__"] = f"dir/k.{i}"
            if 1000 <= i < 1010:
                row["label"] = "ten"
            if i % 13 == 0:
                row["flag"] = i % 2 == 0
            if i % 17 == 0:
                row["caption"] = None
            if i == 1234:
                row = rows[i] = {"__key__": "empty", "caption": None}
            row["score"] = i / 8 if i > 2000 else None
    else:
        rows = _rows(2000, 2)
    if case.startswith("jsonl"):
        path = folder / "rows.jsonl"
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    elif case == "csv":
        path = folder / "rows.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "caption", "label"])
            writer.writerows([[row["__key__"], row["caption"], row["label"]] for row in rows])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        blobs = [b"\xff\xd8\xff\xe0" + bytes([i % 256]) * (i % 700) for i in range(len(rows))]
        path = folder / "rows.parquet"
        pq.write_table(pa.table({"caption": [r["caption"] for r in rows], "label": [r["label"] for r in rows],
                                 "image": blobs}), path, row_group_size=300)  # fmt: skip
    return str(path)


OPTIONS = {"jsonl": {"per_task": 1100, "maxcount": 400}, "jsonl-mixed": {"per_task": 900, "maxsize": 300_000},
           "csv": {"per_task": 700, "key": "id", "maxsize": 200_000},
           "parquet": {"per_task": 750, "maxsize": 250_000}}  # fmt: skip
EXPECTED = {  # case -> (samples, skipped, (shards + DALI indexes, digest)), taken from the per-sample path
    # (re-taken when the label column became `cls` and the one image column `jpg`; the batch path agreed)
    "csv": (2000, 0, (68, "e31e7814315d8f36d21707034fb46fe9")),
    "jsonl": (3000, 0, (16, "0f271c12a8626d1867f19f0c0dd77d90")),
    "jsonl-mixed": (2499, 1, (42, "59b0809dad5a297fbc4bccd7c4420fd7")),
    "parquet": (2000, 0, (54, "2664ded51e1a1bd5c70d125c967e2593")),
}


def _digest(out: str) -> tuple[int, str]:
    """How many shards and DALI indexes there are, and one digest of their names and bytes."""
    digest, count = hashlib.sha256(), 0
    for name in sorted(os.listdir(out)):
        if name.endswith((".tar", ".idx")):
            with open(os.path.join(out, name), "rb") as f:
                digest.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
            count += 1
    return count, digest.hexdigest()[:32]


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_conversion_bytes_are_pinned(tmp_path, case):
    src = _make(tmp_path, case)
    options = dict(OPTIONS[case])
    result = convert(src, str(tmp_path / "out"), engine="inline", progress=False, **options)
    got = _digest(str(tmp_path / "out"))
    if os.environ.get("SHARDSTREAM_PRINT_DIGESTS"):
        print(f"\n{case!r}: ({result.samples}, {len(result.skipped)}, {got!r}),")
    assert (result.samples, len(result.skipped), got) == EXPECTED[case]


def test_table_sources_hand_uniform_rows_over_as_one_batch(tmp_path):
    """The batch path is taken where the rows allow it, and gives the samples the row-by-row path gives."""
    from shardstream.convert.tables import CsvSource
    from shardstream.writer import SampleBatch

    src = _make(tmp_path, "jsonl")
    source = CsvSource(src, jsonl=True, first=0)
    items = list(source.batches())
    assert [type(item) for item in items] == [SampleBatch]
    def as_bytes(sample: dict) -> dict:  # the batch leaves str for the writer to encode (as UTF-8)
        return {k: v.encode() if isinstance(v, str) and k != "__key__" else v for k, v in sample.items()}

    assert list(map(as_bytes, items[0].samples())) == list(map(as_bytes, source.samples()))
    assert items[0].fields == ("caption.txt", "cls") and len(items[0].keys) == 3000


def test_table_sources_fall_back_to_rows_where_columns_differ(tmp_path):
    from shardstream.convert.tables import CsvSource
    from shardstream.process import Skip

    src = _make(tmp_path, "jsonl-mixed")
    source = CsvSource(src, jsonl=True)
    items = list(source.batches())
    assert all(isinstance(item, (dict, Skip)) for item in items)
    assert items == list(source.samples())
