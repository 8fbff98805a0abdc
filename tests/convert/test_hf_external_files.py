"""Image and audio columns that name files instead of holding their bytes (what ``datasets.load_dataset`` on
local files stores: ``{"bytes": None, "path": ...}``) are converted with the files' bytes, never dropped; a file
that cannot be read skips its row naming the column, and the path goes through the library's trust rules."""

from __future__ import annotations

import wave

import pytest
from convert_helpers import image_bytes

import shardstream as wds
import shardstream.utils
from shardstream.convert import convert
from shardstream.convert.fields import column_field
from shardstream.convert.tables import row_sample
from shardstream.errors import ConfigError, UnsafeURLError
from shardstream.process import Skip

datasets = pytest.importorskip("datasets")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No look-up on the Hub: the tests read only the files they write."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets.disable_progress_bars()


def _imagefolder(root):
    files = {"cat/0.png": image_bytes(1, "PNG"), "cat/1.jpg": image_bytes(2), "dog/0.png": image_bytes(3, "PNG")}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def _fields(sample):
    return {k: v for k, v in sample.items() if not k.startswith("__")}


def test_load_dataset_imagefolder_keeps_the_image_bytes(tmp_path):
    files = _imagefolder(tmp_path / "imgs")
    ds = datasets.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train",
                               cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert ds.data.table.column("image").to_pylist()[0]["bytes"] is None  # the shape this is about
    result = convert(ds, str(tmp_path / "out"), engine="inline")
    assert result.samples == 3 and not result.skipped
    got = sorted(sorted(_fields(s).items()) for s in wds.WebDataset(result.urls))
    want = sorted([("cls", b"1" if rel.startswith("dog") else b"0"), (rel.rsplit(".", 1)[1], data)]
                  for rel, data in files.items())  # fmt: skip
    assert got == want


def test_an_audio_column_naming_files_keeps_the_audio_bytes(tmp_path):
    paths = []
    for n in range(2):
        paths.append(str(tmp_path / f"{n}.wav"))
        with wave.open(paths[-1], "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000), w.writeframes(bytes([n]) * 64)
    ds = datasets.Dataset.from_dict({"audio": paths, "label": [0, 1]}).cast_column("audio", datasets.Audio(decode=False))
    ds = ds.map(lambda row: row, cache_file_name=str(tmp_path / "audio.arrow"))  # backed by an Arrow file
    assert ds.data.table.column("audio").to_pylist()[0] == {"bytes": None, "path": paths[0]}
    result = convert(ds, str(tmp_path / "out"), engine="inline")
    assert result.samples == 2 and not result.skipped
    got = sorted(wds.WebDataset(result.urls).to_tuple("cls", "wav"))
    assert got == [(b"0", open(paths[0], "rb").read()), (b"1", open(paths[1], "rb").read())]


def test_a_missing_file_skips_its_row_naming_the_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq  # noqa: PLC0415 - optional, after importorskip

    (tmp_path / "there.png").write_bytes(image_bytes(0, "PNG"))
    (tmp_path / "sub").mkdir()
    structs = [{"bytes": None, "path": "there.png"}, {"bytes": None, "path": "gone.png"},
               {"bytes": None, "path": "sub"}]  # fmt: skip
    pq.write_table(pa.table({"photo": structs, "n": [0, 1, 2]}), tmp_path / "t.parquet")
    result = convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), engine="inline")
    assert result.samples == 1  # a relative path is taken from the table's folder
    assert next(iter(wds.WebDataset(result.urls)))["png"] == image_bytes(0, "PNG")
    reasons = sorted(skip.reason for _, skip in result.skipped)
    assert reasons == ["column 'photo': 'sub' is not a regular file",
                       "column 'photo': cannot read the file 'gone.png': No such file or directory"]  # fmt: skip


def test_paths_go_through_the_trust_rules(tmp_path, monkeypatch):
    row = {"image": {"bytes": None, "path": f"pipe:touch {tmp_path}/pwned"}}
    with pytest.raises(UnsafeURLError, match="runs a shell command"):
        row_sample(row, "k", base=str(tmp_path))
    assert not (tmp_path / "pwned").exists()
    stdin = row_sample({"image": {"bytes": None, "path": "-"}}, "k")
    assert stdin == Skip("k", "column 'image': '-' (standard input) is not a file")
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr(shardstream.utils, "enforce_security", True)  # secure mode: no local files
    with pytest.raises(ConfigError, match="secure mode"):
        row_sample({"image": {"bytes": None, "path": str(tmp_path / "a.png")}}, "k")


def test_column_field_never_drops_a_struct_that_names_a_file():
    assert column_field("image", {"bytes": None, "path": None}) is None  # a missing value: no field
    with pytest.raises(ConfigError, match="'image'.*'cat/1.png'"):
        column_field("image", {"bytes": None, "path": "cat/1.png"})


def test_a_dataset_in_memory_says_to_save_it_first(tmp_path):
    datasets = pytest.importorskip("datasets")
    in_memory = datasets.Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]})
    with pytest.raises(ConfigError, match=r"lives in memory.*save_to_disk\(PATH\)"):
        convert(in_memory, str(tmp_path / "out"), engine="inline")
