"""Large members read from plain files take a one-copy path (seek back, read the member): same results."""

import io
import os
import tarfile

import pytest

from shardstream.errors import TarFormatError
from shardstream.tar import TarStreamWriter, iter_tar
from shardstream.tar import reader as tar_reader

BIG = tar_reader._DIRECT_MIN + 12345  # not a multiple of 512: padding follows


@pytest.fixture
def archive(tmp_path):
    members = [
        ("a.txt", b"small"),
        ("a.bin", os.urandom(BIG)),
        ("b.bin", os.urandom(3 * BIG)),
        ("b.txt", b"after the big ones"),
    ]
    path = tmp_path / "big.tar"
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for name, data in members:
            tw.add(name, data)
    return path, members


def offsets(path):
    with tarfile.open(path) as tf:
        return [m.offset_data for m in tf.getmembers()]


@pytest.mark.parametrize("bufsize", [512, 4096, 1 << 20])
@pytest.mark.parametrize("buffering", [-1, 0])
def test_big_members_from_files_match_the_stream_path(archive, bufsize, buffering):
    path, members = archive
    with open(path, "rb", buffering=buffering) as f:
        got = list(iter_tar(f, str(path)))
    assert [(n, d) for n, d, _ in got] == members
    assert [o for _, _, o in got] == offsets(path)
    streamed = list(iter_tar(io.BytesIO(path.read_bytes()), str(path)))  # not a file: the buffered path
    assert got == streamed


@pytest.mark.parametrize("cut", ["in data", "in padding"])
def test_truncated_big_member_in_a_file_raises(archive, tmp_path, cut):
    path, members = archive
    data = path.read_bytes()
    start = offsets(path)[1]
    end = start + BIG + (100 if cut == "in padding" else -100)
    short = tmp_path / "short.tar"
    short.write_bytes(data[:end])
    with open(short, "rb") as f, pytest.raises(TarFormatError, match="truncated") as info:
        list(iter_tar(f, str(short)))
    assert info.value.offset == start - 512 and "short.tar" in str(info.value)


def test_file_not_at_position_zero(archive):
    """A caller's file object positioned after a prefix: offsets are relative to where reading starts."""
    path, members = archive
    payload = path.read_bytes()
    prefixed = path.with_name("prefixed.bin")
    prefixed.write_bytes(b"x" * 1000 + payload)
    with open(prefixed, "rb") as f:
        f.seek(1000)
        got = list(iter_tar(f, "prefixed"))
    assert [(n, d) for n, d, _ in got] == members
    assert [o for _, _, o in got] == offsets(path)


def test_the_one_copy_path_is_taken_for_plain_files(archive, monkeypatch):
    path, members = archive
    calls = []
    original = tar_reader.StreamBuffer.take_direct

    def spy(self, *args):
        result = original(self, *args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(tar_reader.StreamBuffer, "take_direct", spy)
    for buffering in (-1, 0):
        calls.clear()
        with open(path, "rb", buffering=buffering) as f:
            list(iter_tar(f, str(path)))
        assert calls and any(calls), buffering
