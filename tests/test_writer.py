"""TarWriter and ShardWriter: webdataset-compatible writing, deterministic, all-or-nothing, exact shard sizes."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import random
import re
import tarfile

import numpy as np
import PIL.Image
import pytest

import shardstream.writer.tarwriter as writer_module  # where TarWriter opens its files (_open_file)
from shardstream.errors import ConfigError, EncodeError, ShardstreamError, WriteError
from shardstream.tar.accel import member_packer
from shardstream.tar.writer import RECORDSIZE
from shardstream.writer import ShardInfo, ShardWriter, TarWriter


def samples(n: int, start: int = 0, size: int = 250) -> list[dict]:
    rng = random.Random(start)
    return [
        {"__key__": f"s{i:06d}", "txt": "".join(rng.choice("abcdef ") for _ in range(size)), "cls": str(i % 10)}
        for i in range(start, start + n)
    ]


def read_tar(data_or_path) -> list[tuple[str, bytes]]:
    tf = (
        tarfile.open(fileobj=io.BytesIO(data_or_path))
        if isinstance(data_or_path, bytes)
        else tarfile.open(data_or_path)
    )
    with tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf]


def listdir(path) -> list[str]:
    return sorted(os.listdir(path))


def jpeg_bytes() -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(np.arange(48 * 32 * 3, dtype=np.uint8).reshape(48, 32, 3)).save(out, format="JPEG")
    return out.getvalue()


# -- TarWriter -------------------------------------------------------------------------------------------------


def test_path_target_appears_only_on_close(tmp_path):
    dest = tmp_path / "dest.tar"
    sink = TarWriter(str(dest))
    sink.write(samples(1)[0])
    names = listdir(tmp_path)
    assert names != ["dest.tar"] and len(names) == 1 and names[0].startswith(".dest.tar.") and names[0].endswith(".tmp")
    sink.close()
    assert listdir(tmp_path) == ["dest.tar"]
    assert [name for name, _ in read_tar(str(dest))] == ["s000000.cls", "s000000.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert dest.stat().st_mode & 0o777 == 0o666 & ~umask  # like open(path, "wb"), not mkstemp's 0o600


def test_webdataset_readme_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sink = TarWriter("dest.tar")
    for index, (input, output) in enumerate([(b"in0", b"out0"), (b"in1", b"out1")]):
        sink.write({"__key__": "sample%06d" % index, "input.pyd": input, "output.pyd": output})
    sink.close()
    assert [n for n, _ in read_tar("dest.tar")] == [
        "sample000000.input.pyd", "sample000000.output.pyd", "sample000001.input.pyd", "sample000001.output.pyd",
    ]  # fmt: skip


def test_members_in_sorted_field_order_and_bytes_pass_through(tmp_path):
    jpeg = jpeg_bytes()
    sample = {"txt": "é", "__key__": "dir/k", "jpg": jpeg, "a.seg.png": b"\x89PNG", "cls": "1", "Z": b"z"}
    with TarWriter(str(tmp_path / "o.tar"), encoder=False) as sink:
        sink.write(sample)
    got = read_tar(str(tmp_path / "o.tar"))
    assert [n for n, _ in got] == ["dir/k.Z", "dir/k.a.seg.png", "dir/k.cls", "dir/k.jpg", "dir/k.txt"]
    assert dict(got)["dir/k.jpg"] == jpeg and dict(got)["dir/k.txt"] == "é".encode()


def test_file_object_written_directly_and_left_open():
    stream = io.BytesIO()
    with TarWriter(stream) as sink:
        written = sink.write(samples(1)[0])
    assert not stream.closed
    assert written == 2 * 512 + 512 + 512  # two headers, 250 bytes padded, 1 byte padded
    assert len(stream.getvalue()) == RECORDSIZE == sink.bytes_written


def test_same_samples_same_bytes(tmp_path):
    outputs = []
    for run in range(2):
        for suffix in ("tar", "tar.gz"):
            with TarWriter(str(tmp_path / f"{run}.{suffix}")) as sink:
                for sample in samples(50):
                    sink.write(sample)
            outputs.append((tmp_path / f"{run}.{suffix}").read_bytes())
    assert outputs[0] == outputs[2] and outputs[1] == outputs[3]
    assert gzip.decompress(outputs[1]) == outputs[0]


def test_gzip_header_has_no_time_and_no_name(tmp_path):
    with TarWriter(str(tmp_path / "named-file.tgz")) as sink:
        sink.write(samples(1)[0])
    head = (tmp_path / "named-file.tgz").read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08" and head[3] == 0 and head[4:8] == bytes(4)  # no FNAME flag, mtime 0


@pytest.mark.parametrize(
    "name, compress, magic",
    [
        ("o.tar", None, b"s000000"),
        ("o.tar.gz", None, b"\x1f\x8b"),
        ("o.tgz", None, b"\x1f\x8b"),
        ("o.tar.gz", False, b"s000000"),
        ("o.tar", True, b"\x1f\x8b"),
        ("o.tar", "gz", b"\x1f\x8b"),
        ("o.tar.bz2", None, b"BZh"),
        ("o.tar", "xz", b"\xfd7zXZ"),
        ("o.tar.zst", None, b"\x28\xb5\x2f\xfd"),
        ("o.tar", "zstd", b"\x28\xb5\x2f\xfd"),
    ],
)
def test_compression(tmp_path, name, compress, magic):
    expected = io.BytesIO()
    with TarWriter(expected) as sink:
        for sample in samples(20):
            sink.write(sample)
    with TarWriter(str(tmp_path / name), compress=compress) as sink:
        for sample in samples(20):
            sink.write(sample)
    data = (tmp_path / name).read_bytes()
    assert data.startswith(magic)
    assert sink.compressed_bytes in (None, len(data))
    if magic[:2] == b"\x28\xb5":
        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
        assert data == expected.getvalue()
    else:
        assert read_tar(data) == read_tar(expected.getvalue())


def test_compressed_file_object():
    stream = io.BytesIO()
    with TarWriter(stream, compress="gz") as sink:
        sink.write(samples(1)[0])
    assert not stream.closed and gzip.decompress(stream.getvalue())[:7] == b"s000000"
    assert sink.compressed_bytes == len(stream.getvalue())


def test_bad_compress_value():
    with pytest.raises(ConfigError, match="compress"):
        TarWriter(io.BytesIO(), compress="lz4")


def test_encoder_true_encodes_arrays_images_ints_and_objects():
    image = PIL.Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8))
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    stream = io.BytesIO()
    with TarWriter(stream) as sink:
        sink.write({"__key__": "k", "cls": 3, "npy": array, "png": image, "json": {"a": [1, 2]}, "jpg": array / 12})
    got = dict(read_tar(stream.getvalue()))
    assert got["k.cls"] == b"3" and json.loads(got["k.json"]) == {"a": [1, 2]}
    assert np.array_equal(np.load(io.BytesIO(got["k.npy"])), array)
    assert PIL.Image.open(io.BytesIO(got["k.png"])).size == (8, 8)
    assert PIL.Image.open(io.BytesIO(got["k.jpg"])).format == "JPEG"


def test_encoder_false_rejects_non_bytes():
    sink = TarWriter(io.BytesIO(), encoder=False)
    with pytest.raises(EncodeError, match="cls"):
        sink.write({"__key__": "k", "cls": 3})
    sink.write({"__key__": "k", "cls": "3"})  # the refused sample wrote nothing; the archive goes on


def test_custom_encoder_gets_the_sample_and_errors_name_the_key():
    stream = io.BytesIO()
    with TarWriter(stream, encoder=lambda s: {"txt": s["__key__"].upper()}) as sink:
        sink.write({"__key__": "abc", "x": object()})
    assert read_tar(stream.getvalue()) == [("abc.txt", b"ABC")]

    def broken(sample):
        raise KeyError("nope")

    with pytest.raises(EncodeError, match="'abc'") as info:
        TarWriter(io.BytesIO(), encoder=broken).write({"__key__": "abc"})
    assert isinstance(info.value.__cause__, KeyError)


def test_keep_meta():
    sample = {"__key__": "k", "__url__": "http://x", "_note": "n", "txt": "t"}
    for keep, names in ((False, ["k.txt"]), (True, ["k._note", "k.txt"])):  # __url__: the reader's, never data
        stream = io.BytesIO()
        with TarWriter(stream, keep_meta=keep) as sink:
            sink.write(sample)
        assert [n for n, _ in read_tar(stream.getvalue())] == names


@pytest.mark.parametrize(
    "sample, match",
    [
        ({"txt": "x"}, "__key__"),
        ({"__key__": "", "txt": "x"}, "__key__"),
        ({"__key__": 3, "txt": "x"}, "__key__"),
        ({"__key__": "a\0b", "txt": "x"}, "__key__"),
        ({"__key__": "k", ".jpg": b"x"}, "'jpg'"),
        ({"__key__": "k", "": b"x"}, "field"),
        ({"__key__": "k", "a/b": b"x"}, "field"),
        ({"__key__": "k", 5: b"x"}, "field 5"),
    ],
)
def test_invalid_samples(sample, match):
    with pytest.raises(EncodeError, match=match):
        TarWriter(io.BytesIO()).write(sample)


def test_missing_key_error_says_what_to_do():
    with pytest.raises(ValueError, match="needs a unique key"):  # EncodeError is a ValueError, like webdataset's
        TarWriter(io.BytesIO()).write({"txt": "x"})


def test_repeated_key_refused_and_archive_intact():
    stream = io.BytesIO()
    with TarWriter(stream) as sink:
        sink.write({"__key__": "a", "txt": "1"})
        with pytest.raises(EncodeError, match="'a'.*previous"):
            sink.write({"__key__": "a", "cls": "2"})
        sink.write({"__key__": "b", "txt": "3"})
        sink.write({"__key__": "a", "txt": "4"})  # not consecutive: allowed (readers see a new sample)
    assert [n for n, _ in read_tar(stream.getvalue())] == ["a.txt", "b.txt", "a.txt"]


def test_record_index_offsets_match_tarfile():
    stream = io.BytesIO()
    with TarWriter(stream, record_index=True) as sink:
        for sample in samples(5):
            sink.write(sample)
    with tarfile.open(fileobj=io.BytesIO(stream.getvalue())) as tf:
        offsets = [(m.name, m.offset_data, m.size) for m in tf]
    flat = [(f"{key}.{field}", offset, size) for key, fields in sink.index_entries for field, offset, size in fields]
    assert flat == offsets


def test_exception_in_with_block_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError):
        with TarWriter(str(tmp_path / "dest.tar")) as sink:
            sink.write(samples(1)[0])
            raise RuntimeError("interrupted")
    assert listdir(tmp_path) == []


def test_abort_and_writes_after_close(tmp_path):
    sink = TarWriter(str(tmp_path / "dest.tar"))
    sink.write(samples(1)[0])
    sink.abort()
    assert listdir(tmp_path) == []
    with pytest.raises(ConfigError):
        sink.write(samples(1, 1)[0])
    sink.close()  # nothing to do
    assert listdir(tmp_path) == []


def test_unclosed_writer_cleans_up_its_temporary_file(tmp_path):
    sink = TarWriter(str(tmp_path / "dest.tar"))
    sink.write(samples(1)[0])
    with pytest.warns(ResourceWarning):
        del sink
        import gc

        gc.collect()
    assert listdir(tmp_path) == []


class DiskFull(io.RawIOBase):
    """A file that accepts ``room`` bytes, then fails as a full disk does."""

    def __init__(self, inner, room):
        self.inner, self.room = inner, room

    def writable(self):
        return True

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.inner.write(data)

    def close(self):
        self.inner.close()
        super().close()


@pytest.mark.parametrize("room", [0, 4096, 3 * 2**20])
def test_disk_full_raises_write_error_and_leaves_nothing(tmp_path, monkeypatch, room):
    real = writer_module._open_file
    monkeypatch.setattr(writer_module, "_open_file", lambda fd: DiskFull(real(fd), room))
    dest = str(tmp_path / "dest.tar")
    with pytest.raises(WriteError) as info:
        with TarWriter(dest) as sink:
            for sample in samples(20_000):
                sink.write(sample)
    error = info.value
    assert isinstance(error, OSError) and isinstance(error, ShardstreamError)
    assert error.errno == errno.ENOSPC and error.url == dest and dest in str(error)
    assert isinstance(error.__cause__, OSError)
    assert listdir(tmp_path) == []


def test_disk_full_on_a_caller_stream():
    class Named(DiskFull):
        name = "/some/stream.tar"

    with pytest.raises(WriteError, match="/some/stream.tar"):
        with TarWriter(Named(io.BytesIO(), 100)) as sink:
            sink.write(samples(1)[0])
            sink.close()


def test_mtime_none_and_webdataset_arguments():
    stream = io.BytesIO()
    with TarWriter(stream, user="u", group="g", mode=0o640, mtime=None, format="PAX_FORMAT") as sink:
        sink.write(samples(1)[0])
    with tarfile.open(fileobj=io.BytesIO(stream.getvalue())) as tf:
        info = tf.getmembers()[0]
    assert (info.uname, info.gname, info.mode) == ("u", "g", 0o640) and info.mtime > 1_600_000_000


@pytest.mark.parametrize("target", ["http://host/x.tar", "ftp://host/x.tar"])
def test_unwritable_url_targets_refused_with_a_hint(target):
    with pytest.raises(ConfigError, match="post="):
        TarWriter(target)


def test_a_missing_folder_is_made(tmp_path):
    with ShardWriter(str(tmp_path / "new" / "deeper" / "s-%d.tar"), maxcount=1) as sink:
        sink.write(samples(1)[0])
    assert listdir(tmp_path / "new" / "deeper") == ["s-0.tar"]


def test_a_folder_that_cannot_be_made_is_a_write_error(tmp_path):
    (tmp_path / "a-file").write_bytes(b"")
    with pytest.raises(WriteError, match="could not create the folder of .*a-file") as info:
        TarWriter(tmp_path / "a-file" / "a.tar")  # a pathlib.Path works like a str
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST)
    assert listdir(tmp_path) == ["a-file"]


def test_stdout_target(capsysbinary):
    with TarWriter("-") as sink:
        sink.write(samples(1)[0])
    out = capsysbinary.readouterr().out
    assert len(out) == RECORDSIZE and [n for n, _ in read_tar(out)] == ["s000000.cls", "s000000.txt"]


def test_encoder_dict_of_functions():
    stream = io.BytesIO()
    with TarWriter(stream, encoder={"foo": lambda value: b"F" + bytes(value)}) as sink:
        sink.write({"__key__": "k", "foo": [1, 2], "cls": 4})
    assert read_tar(stream.getvalue()) == [("k.cls", b"4"), ("k.foo", b"F\x01\x02")]


def test_file_url_prefix(tmp_path):
    with TarWriter(f"file:{tmp_path}/a.tar") as sink:
        sink.write(samples(1)[0])
    assert listdir(tmp_path) == ["a.tar"]


# -- ShardWriter -----------------------------------------------------------------------------------------------


def read_shards(paths) -> list[str]:
    return [name for path in paths for name, _ in read_tar(path)]


def test_maxcount_splits_and_records(tmp_path):
    pattern = str(tmp_path / "out-%06d.tar")
    posted = []
    with ShardWriter(pattern, maxcount=4, post=lambda p: posted.append((p, os.path.exists(p)))) as sink:
        for sample in samples(10):
            sink.write(sample)
    expected = [pattern % i for i in range(3)]
    assert sink.shards == expected and posted == [(p, True) for p in expected]
    assert [(info.samples, info.bytes) for info in sink.shard_info] == [
        (4, os.path.getsize(p)) for p in expected[:2]
    ] + [(2, os.path.getsize(expected[2]))]
    assert isinstance(sink.shard_info[0], ShardInfo) and sink.total == 10
    assert read_shards(expected) == [n for s in samples(10) for n in (s["__key__"] + ".cls", s["__key__"] + ".txt")]
    assert listdir(tmp_path) == [os.path.basename(p) for p in expected]


def test_maxsize_counts_real_bytes(tmp_path):
    rng = random.Random(0)
    data = [
        {"__key__": f"k{i:04d}", "bin": os.urandom(rng.choice([0, 1, 100, 511, 512, 513, 5000, 30_000]))}
        for i in range(300)
    ]
    maxsize = 100_000
    with ShardWriter(str(tmp_path / "s-%04d.tar"), maxsize=maxsize) as sink:
        for sample in data:
            sink.write(sample)
    sizes = [os.path.getsize(p) for p in sink.shards]
    assert len(sizes) > 3 and all(size <= maxsize for size in sizes)
    assert [info.bytes for info in sink.shard_info] == sizes
    assert read_shards(sink.shards) == [s["__key__"] + ".bin" for s in data]
    assert sum(info.samples for info in sink.shard_info) == len(data)


def test_maxsize_shards_are_greedy(tmp_path):
    # 10 samples of exactly 4 blocks each (header + 3 data blocks = 2048 bytes): 4 fit below 10240 - 1024 bytes
    data = [{"__key__": f"k{i}", "bin": bytes(1536)} for i in range(10)]
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxsize=RECORDSIZE) as sink:
        for sample in data:
            sink.write(sample)
    assert [info.samples for info in sink.shard_info] == [4, 4, 2]
    assert all(os.path.getsize(p) == RECORDSIZE for p in sink.shards)


def test_oversized_sample_gets_a_shard_of_its_own(tmp_path):
    data = [{"__key__": "a", "bin": b"x"}, {"__key__": "b", "bin": bytes(50_000)}, {"__key__": "c", "bin": b"y"}]
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxsize=20_000) as sink:
        for sample in data:
            sink.write(sample)
    assert [info.samples for info in sink.shard_info] == [1, 1, 1]
    assert os.path.getsize(sink.shards[1]) > 20_000 and os.path.getsize(sink.shards[0]) <= 20_000


def test_start_shard_brace_pattern_and_webdataset_attributes(tmp_path):
    with ShardWriter(str(tmp_path / "x-{shard:03d}.tar"), maxcount=3, start_shard=7) as sink:
        for sample in samples(4):
            sink.write(sample)
        assert (sink.shard, sink.count, sink.total) == (9, 1, 4)
        assert sink.fname == str(tmp_path / "x-008.tar") and sink.size > 0
    assert sink.shards == [str(tmp_path / "x-007.tar"), str(tmp_path / "x-008.tar")]


def test_no_samples_no_files(tmp_path):
    with ShardWriter(str(tmp_path / "s-%d.tar")) as sink:
        pass
    assert sink.shards == [] and listdir(tmp_path) == []


def test_exception_mid_shard_keeps_only_completed_shards(tmp_path):
    with pytest.raises(RuntimeError):
        with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=3) as sink:
            for sample in samples(7):
                sink.write(sample)
            raise RuntimeError("stop")
    assert listdir(tmp_path) == ["s-0.tar", "s-1.tar"]
    assert sink.total == 6 and len(read_shards([tmp_path / "s-0.tar", tmp_path / "s-1.tar"])) == 12


def test_disk_full_mid_series(tmp_path, monkeypatch):
    real = writer_module._open_file
    opened = []

    def open_file(fd):
        opened.append(fd)
        return DiskFull(real(fd), 2**40 if len(opened) < 3 else 10_000)

    monkeypatch.setattr(writer_module, "_open_file", open_file)
    with pytest.raises(WriteError, match="s-2.tar") as info:
        with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=100) as sink:
            for sample in samples(1000):
                sink.write(sample)
    assert info.value.errno == errno.ENOSPC
    assert listdir(tmp_path) == ["s-0.tar", "s-1.tar"]
    assert sink.shards == [str(tmp_path / "s-0.tar"), str(tmp_path / "s-1.tar")]


def test_repeated_key_does_not_lose_the_shard(tmp_path):
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=10) as sink:
        sink.write({"__key__": "a", "txt": "1"})
        with pytest.raises(EncodeError):
            sink.write({"__key__": "a", "txt": "2"})
        sink.write({"__key__": "b", "txt": "3"})
    assert read_shards(sink.shards) == ["a.txt", "b.txt"]


class Upload(io.BytesIO):
    """A stream like fsspec's remote files: its content is published on close(), dropped by discard()."""

    published: dict = {}

    def __init__(self, path):
        super().__init__()
        self.path = path

    def close(self):
        if not self.closed:
            Upload.published[self.path] = self.getvalue()
        super().close()

    def discard(self):
        super().close()


def test_opener_streams_closed_per_shard_and_discarded_on_error():
    Upload.published = {}
    posted = []
    with pytest.raises(RuntimeError):
        with ShardWriter("mem://s-%d.tar.gz", maxcount=2, opener=Upload, post=posted.append) as sink:
            for sample in samples(5):
                sink.write(sample)
            raise RuntimeError
    assert sorted(Upload.published) == posted == ["mem://s-0.tar.gz", "mem://s-1.tar.gz"]
    assert sink.shards == posted and [info.samples for info in sink.shard_info] == [2, 2]
    assert len(read_tar(gzip.decompress(Upload.published["mem://s-1.tar.gz"]))) == 4  # .gz inferred from the name


@pytest.mark.parametrize("suffix", ["tar.gz", "tar.zst"])
def test_compressed_shards_within_maxsize(tmp_path, suffix):
    data = [{"__key__": f"k{i:04d}", "txt": os.urandom(600).hex(), "cls": str(i)} for i in range(400)]
    maxsize = 60_000
    with ShardWriter(str(tmp_path / f"s-%d.{suffix}"), maxsize=maxsize) as sink:
        for sample in data:
            sink.write(sample)
    sizes = [os.path.getsize(p) for p in sink.shards]
    assert len(sizes) > 4 and all(maxsize * 0.9 < size <= maxsize for size in sizes[:-1]) and sizes[-1] <= maxsize
    assert [info.bytes for info in sink.shard_info] == sizes
    if suffix == "tar.gz":
        assert len(read_shards(sink.shards)) == 800


def test_bz2_shards_approximate(tmp_path):
    with ShardWriter(str(tmp_path / "s-%d.tar.bz2"), maxcount=150) as sink:
        for sample in samples(400):
            sink.write(sample)
    assert [info.samples for info in sink.shard_info] == [150, 150, 100]
    assert [info.bytes for info in sink.shard_info] == [os.path.getsize(p) for p in sink.shards]


def test_record_index_per_shard(tmp_path):
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=2, record_index=True) as sink:
        for sample in samples(3):
            sink.write(sample)
    assert list(sink.index_entries) == sink.shards
    assert [key for key, _ in sink.index_entries[sink.shards[1]]] == ["s000002"]


def test_progress_bar(tmp_path, capsys):
    with ShardWriter(str(tmp_path / "s-%d.tar"), progress=True, verbose=1) as sink:
        for sample in samples(3):
            sink.write(sample)
    err = capsys.readouterr().err
    assert "3" in err and "INFO: writing" in err and "INFO: finished" in err


@pytest.mark.parametrize(
    "args, kw",
    [
        (("s.tar",), {}),
        (("s-%d.tar",), {"maxcount": 0}),
        (("s-%d.tar",), {"maxsize": 0}),
        (("s-%d.tar",), {"compress": "lz4"}),
        (("s-%d.tar",), {"post": "not callable"}),
        (("s-%d-%d.tar",), {}),
    ],
)
def test_shardwriter_bad_arguments(tmp_path, monkeypatch, args, kw):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError):
        ShardWriter(*args, **kw)
    assert listdir(tmp_path) == []


def test_an_aborted_compressed_shard_gets_no_bytes_later():
    import gc

    stream = io.BytesIO()
    sink = TarWriter(stream, compress="gz")
    sink.write({"__key__": "a", "txt": "x" * 10_000})
    sink.abort()
    before = stream.getvalue()
    del sink
    gc.collect()
    assert stream.getvalue() == before  # no gzip trailer written into the caller's stream at garbage collection


# -- the C member packer and its pure-Python twin ----------------------------------------------------------------


def _pack_all(accelerate: bool, monkeypatch, seed: int) -> tuple[bytes, list]:
    from shardstream.tar import reader
    from shardstream.tar.writer import TarStreamWriter

    monkeypatch.setattr(reader, "USE_ACCELERATOR", accelerate)
    r = random.Random(seed)
    out = io.BytesIO()
    offsets = []
    with TarStreamWriter(out, mtime=1234567, mode=0o640, uname="someone", gname="group") as tw:
        for i in range(300):
            members = [((f"k{i}/" + "é" * r.randrange(0, 3) + "x" * r.randrange(1, 110)).encode(),
                        r.randbytes(r.choice([0, 1, 511, 512, 513, r.randrange(3000)])))
                       for _ in range(r.randrange(1, 4))]  # fmt: skip
            if i % 17 == 0:  # a name that needs a prefix or a PAX record, data written without a copy
                members.append(((f"d{i}/" * 40 + "long.bin").encode(), bytearray(r.randbytes(300_000))))
            if i % 5 == 0:  # other bytes-like data (a memoryview, a numpy array)
                members.append((f"k{i}.npy".encode(), np.arange(i, dtype=np.int16)))
            offsets.append(tw.add_many(members))
    return out.getvalue(), offsets


@pytest.mark.parametrize("seed", [0, 1])
def test_c_member_packer_writes_the_bytes_of_the_python_loop(monkeypatch, seed):
    if member_packer() is None:
        pytest.skip("the C extension is not built")
    fast, fast_offsets = _pack_all(True, monkeypatch, seed)
    slow, slow_offsets = _pack_all(False, monkeypatch, seed)
    assert fast == slow and fast_offsets == slow_offsets
    with tarfile.open(fileobj=io.BytesIO(fast)) as archive:  # and Python's tarfile reads every member back
        members = archive.getmembers()
        flat = [offset for offsets in fast_offsets for offset in offsets]
        assert [m.offset_data for m in members] == flat
        assert all(m.mode == 0o640 and m.uname == "someone" and m.mtime == 1234567 for m in members)


def test_c_member_packer_leaves_what_it_cannot_take_to_python():
    pack = member_packer()
    if pack is None:
        pytest.skip("the C extension is not built")
    template = bytes(512)
    buf = bytearray(b"x")
    for members in ([(b"", b"a")], [(b"a\0b", b"a")], [(b"n" * 101, b"a")], [("str", b"a")], [(b"a", 5)],
                    [(b"a", bytes(10))] * 2 + [(b"big", bytes(64))]):  # fmt: skip
        assert pack(buf, 0, template, members, 64) is None
        assert buf == b"x"  # all or nothing
    assert pack(buf, 7, template, [(b"a", b"1"), (b"b", bytes(600))], 64 << 10) == [519, 1543]
    assert len(buf) == 1 + 512 * 5


class _Text(str):
    pass


def test_the_encoders_fast_path_gives_what_the_general_path_gives():
    from shardstream.writer.encoding import SampleEncoder

    values = [b"bytes", "text", 7, True, {"a": [1]}, [1.5], bytearray(b"ba"), memoryview(b"mv"), _Text("sub"), None]
    r = random.Random(0)
    for encoder in (True, False):
        fast, general = SampleEncoder(encoder=encoder), SampleEncoder(encoder=encoder)
        for i in range(400):
            fields = r.sample(["cls", "txt", "json", "bin", "x.gz", "seg.png"], r.randrange(1, 4))
            sample = {"__key__": f"s{i}", **{f: r.choice(values) for f in fields}}
            try:
                expected = general._encode(sample)
            except EncodeError as e:
                with pytest.raises(EncodeError, match=re.escape(str(e))):
                    fast.encode(sample)
                continue
            got = fast.encode(sample)
            assert got.key == expected.key and got.fields == expected.fields and got.nbytes == expected.nbytes
            assert [(m, bytes(d)) for m, d in got.members] == [(m, bytes(d)) for m, d in expected.members]


# -- write_batch: samples by column, the same shards as write() -------------------------------------------------


def _batches(seed: int) -> list:
    from shardstream.writer import SampleBatch

    r = random.Random(seed)
    out, number = [], 0
    for size in (1, 7, 300, 40, 1):
        keys = [f"k{number + i:05d}" + ("é" if i % 5 == 0 else "") for i in range(size)]
        number += size
        text = ["x" * r.randrange(0, 1500) for _ in keys]
        blobs = [bytes([i % 256]) * r.choice((0, 1, 511, 512, 513, 4000, 300_000)) for i in range(size)]
        out.append(SampleBatch(keys, ("txt", "bin"), [text, blobs]))
    out.append(SampleBatch([f"z{i}" for i in range(50)], ("cls",), [[b"%d" % i for i in range(50)]]))
    return out


def _shard_bytes(sink: ShardWriter) -> list:
    return [(os.path.basename(p), open(p, "rb").read()) for p in sink.shards]


@pytest.mark.parametrize("maxcount, maxsize", [(100000, 3e9), (64, 3e9), (100000, 200_000.5), (3, 9000),
                                               (100000, 25 * RECORDSIZE), (17, 1_000_000)])  # fmt: skip
def test_write_batch_writes_what_write_writes(tmp_path, maxcount, maxsize):
    batches = _batches(maxcount)
    got = {}
    for how in ("batch", "sample"):
        (tmp_path / how).mkdir()
        with ShardWriter(str(tmp_path / how / "s-%04d.tar"), maxcount=maxcount, maxsize=maxsize,
                         record_index=True) as sink:  # fmt: skip
            sink.write({"__key__": "first", "txt": "a sample before the batches"})
            for batch in batches:
                if how == "batch":
                    sink.write_batch(batch)
                else:
                    for sample in batch.samples():
                        sink.write(sample)
        got[how] = (_shard_bytes(sink), sink.shard_info, sink.index_entries and dict(sink.index_entries), sink.total)
    batch, sample = got["batch"], got["sample"]
    assert batch[0] == sample[0]
    assert len(batch[0]) > 1 or (maxcount, maxsize) == (100000, 3e9)
    assert [(os.path.basename(s.path), s.samples, s.bytes) for s in batch[1]] == [
        (os.path.basename(s.path), s.samples, s.bytes) for s in sample[1]]
    assert list(batch[2].values()) == list(sample[2].values()) and batch[3] == sample[3] == 400


def test_write_batch_refuses_a_repeated_key_where_write_does(tmp_path):
    from shardstream.writer import SampleBatch

    for keys in (["a", "b", "b", "c"], ["last", "x"]):
        results = []
        for how in ("batch", "sample"):
            path = tmp_path / f"{how}-%d.tar"
            sink = ShardWriter(str(path), maxcount=2)
            sink.write({"__key__": "last", "txt": "x"})
            batch = SampleBatch(keys, ("txt",), [["v"] * len(keys)])
            with pytest.raises(EncodeError, match="same __key__ as the previous sample"):
                if how == "batch":
                    sink.write_batch(batch)
                else:
                    for sample in batch.samples():
                        sink.write(sample)
            sink.close()
            results.append((sink.total, [open(p, "rb").read() for p in sink.shards]))
        assert results[0] == results[1]


@pytest.mark.parametrize("fields, column, error", [
    (("txt.gz",), ["hello"], None),  # the codecs gzip under .gz: the per-sample path
    (("_meta", "txt"), [b"m", b"t"], None),  # metadata fields are dropped: the per-sample path
    (("a/b",), [b"x"], "not a valid field name"),
    (("cls",), [3], None),  # not bytes or str: encoded by the table, sample by sample
])  # fmt: skip
def test_write_batch_falls_back_to_write(tmp_path, fields, column, error):
    from shardstream.writer import SampleBatch

    columns = [[value] * 2 for value in column] if len(fields) == len(column) else [column * 2]
    batch = SampleBatch(["k1", "k2"], fields, columns)
    outs = []
    for how in ("batch", "sample"):
        sink = ShardWriter(str(tmp_path / f"{how}-%d.tar"))
        if error:
            with pytest.raises(EncodeError, match=error):
                sink.write_batch(batch) if how == "batch" else [sink.write(s) for s in batch.samples()]
            sink.abort()
            continue
        with sink:
            sink.write_batch(batch) if how == "batch" else [sink.write(s) for s in batch.samples()]
        outs.append(open(sink.shards[0], "rb").read())
    assert error or outs[0] == outs[1]


def test_write_batch_compressed_shards_match(tmp_path):
    outs = []
    for how in ("batch", "sample"):
        with ShardWriter(str(tmp_path / f"{how}-%d.tar.gz"), maxsize=60_000) as sink:
            for batch in _batches(1)[:3]:
                sink.write_batch(batch) if how == "batch" else [sink.write(s) for s in batch.samples()]
        outs.append([open(p, "rb").read() for p in sink.shards])
    assert outs[0] == outs[1] and len(outs[0]) > 2


def test_write_batch_cuts_shards_at_every_size_limit_where_write_does(tmp_path):
    from shardstream.writer import SampleBatch

    sizes = [(i * 389) % 1100 for i in range(60)]
    batch = SampleBatch([f"s{i:03d}" for i in range(60)], ("bin",), [[b"b" * n for n in sizes]])
    for maxsize in range(9000, 31000, 256):
        counts = []
        for how in ("batch", "sample"):
            with ShardWriter(str(tmp_path / f"{how}-{maxsize}-%d.tar"), maxsize=maxsize) as sink:
                sink.write_batch(batch) if how == "batch" else [sink.write(s) for s in batch.samples()]
            counts.append([(info.samples, info.bytes) for info in sink.shard_info])
        assert counts[0] == counts[1], maxsize
