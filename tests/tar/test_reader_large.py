"""Large members read from plain files take a one-copy path (one pread into their bytes): same results."""

import io
import os
import tarfile

import pytest

from shardstream.errors import TarFormatError
from shardstream.tar import TarStreamWriter, buffers, filebuffers, iter_tar, reader as tar_reader

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


@pytest.mark.parametrize("preadv", [True, False])
def test_the_one_copy_path_is_taken_for_plain_files(archive, monkeypatch, preadv):
    """Big members are read straight into their bytes: by offset (FileBuffer), or by the stream where os.preadv is
    missing (StreamBuffer); the same members either way."""
    path, members = archive
    monkeypatch.setattr(buffers, "_HAVE_PREADV", preadv and buffers._HAVE_PREADV)
    kind = buffers.FileBuffer if buffers._HAVE_PREADV else buffers.StreamBuffer
    calls = []
    original = kind.take_direct

    def spy(self, *args):
        result = original(self, *args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(kind, "take_direct", spy)
    for buffering in (-1, 0):
        calls.clear()
        with open(path, "rb", buffering=buffering) as f:
            assert [(n, d) for n, d, _ in iter_tar(f, str(path))] == members
        assert calls and any(calls), buffering


def test_big_members_are_not_read_twice(archive, monkeypatch):
    """After a big member, the next read asks for the next header only: the bytes read from the file are the
    archive's, plus at most one buffer's worth at the start (and a few KiB after each big member)."""
    if not buffers._HAVE_PREADV:
        pytest.skip("os.preadv is missing")
    path, _ = archive
    read = []
    preadv, pread = os.preadv, os.pread

    def counting_preadv(fd, views, offset):
        got = preadv(fd, views, offset)
        read.append(got)
        return got

    def counting_pread(fd, size, offset):
        data = pread(fd, size, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(buffers.os, "preadv", counting_preadv)
    monkeypatch.setattr(buffers.os, "pread", counting_pread)
    with open(path, "rb") as f:
        list(iter_tar(f, str(path), bufsize=1 << 16))
    assert sum(read) <= path.stat().st_size + (1 << 16) + 2 * filebuffers._AFTER_DIRECT


def test_the_stream_position_is_left_alone(archive):
    """A plain file is read by offset: its own position (and buffer) are not used, so a caller's file object
    is as it was."""
    path, members = archive
    with open(path, "rb") as f:
        assert [(n, d) for n, d, _ in iter_tar(f, str(path))] == members
        assert f.tell() == 0


def test_a_file_object_only_the_reader_holds_stays_open(archive):
    """``iter_tar(open(path, "rb"))``: the reader keeps the file object (and so its descriptor) alive."""
    path, members = archive
    assert [(n, d) for n, d, _ in iter_tar(open(path, "rb"), str(path))] == members  # noqa: SIM115


def test_a_file_closed_while_it_is_read_is_not_read_by_its_old_descriptor(archive):
    path, _ = archive
    f = open(path, "rb")  # noqa: SIM115
    members = iter_tar(f, str(path), bufsize=512)
    next(members)
    f.close()
    with pytest.raises(ValueError, match="closed file"):
        list(members)
