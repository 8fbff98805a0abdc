"""Plain files read through memory-mapped windows (``WindowBuffer``): when it is chosen, that it gives what
``FileBuffer`` gives, that it maps one bounded window at a time, and what it does with a file cut while read."""

import io
import os
import types
import weakref

import pytest

from shardstream import _native
from shardstream.samples import group_samples
from shardstream.tar import TarStreamWriter, buffers, iter_tar, reader as tar_reader

pytestmark = pytest.mark.skipif(not buffers._HAVE_PREADV, reason="plain files are read as streams here")


@pytest.fixture
def archive(tmp_path):
    members = [(f"s{i:04d}.{ext}", os.urandom(n)) for i in range(60) for ext, n in (("txt", 250 + i), ("cls", 3))]
    members.insert(70, ("big.bin", os.urandom(tar_reader._DIRECT_MIN + 777)))  # one copy, by take_direct
    members.insert(91, ("mid.bin", os.urandom(70_000)))  # across windows
    path = tmp_path / "shard.tar"
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for name, data in members:
            tw.add(name, data)
    return path, members


def kind_for(path):
    with open(path, "rb") as f:
        return type(buffers.source_for(f, 1 << 20))


def test_the_setting_and_the_walk_choose_the_buffer(archive, monkeypatch, tmp_path):
    path, _ = archive
    monkeypatch.delenv("SHARDSTREAM_MMAP", raising=False)
    monkeypatch.delenv("SHARDSTREAM_NO_EXTENSIONS", raising=False)
    monkeypatch.setattr(buffers, "MAP_WINDOWS", None)
    monkeypatch.setattr(_native, "extension", types.SimpleNamespace(PREFETCH_AHEAD=1024))
    assert kind_for(path) is buffers.WindowBuffer  # default: maps where the C walk prefetches
    monkeypatch.setenv("SHARDSTREAM_MMAP", "0")
    assert kind_for(path) is buffers.FileBuffer  # the setting turns maps off
    monkeypatch.setattr(buffers, "MAP_WINDOWS", True)
    assert kind_for(path) is buffers.FileBuffer  # whatever the module switch says
    monkeypatch.delenv("SHARDSTREAM_MMAP")
    assert kind_for(path) is buffers.WindowBuffer
    monkeypatch.setattr(buffers, "MAP_WINDOWS", None)
    monkeypatch.setenv("SHARDSTREAM_NO_EXTENSIONS", "1")
    assert kind_for(path) is buffers.FileBuffer  # the Python walk does not prefetch
    monkeypatch.delenv("SHARDSTREAM_NO_EXTENSIONS")
    monkeypatch.setattr(_native, "extension", types.SimpleNamespace())  # a walk without the prefetch
    assert kind_for(path) is buffers.FileBuffer
    monkeypatch.setattr(_native, "extension", None)  # no extension
    assert kind_for(path) is buffers.FileBuffer
    monkeypatch.setattr(buffers, "MAP_WINDOWS", True)
    empty = tmp_path / "empty.tar"
    empty.write_bytes(b"")
    assert kind_for(empty) is buffers.FileBuffer  # nothing to map
    assert type(buffers.source_for(io.BytesIO(path.read_bytes()), 1 << 20)) is buffers.StreamBuffer


@pytest.mark.parametrize("bufsize", [512, 5000, 1 << 16, 1 << 20])
@pytest.mark.parametrize("accelerate", [False, True] if _native.extension is not None else [False])
def test_the_same_members_and_samples_as_read_by_offset(archive, monkeypatch, bufsize, accelerate):
    path, members = archive
    got = {}
    for mapped in (False, True):
        monkeypatch.setattr(buffers, "MAP_WINDOWS", mapped)
        monkeypatch.delenv("SHARDSTREAM_MMAP", raising=False)
        with open(path, "rb") as f:
            f.seek(0)
            got[mapped] = list(iter_tar(f, "shard.tar", bufsize=bufsize, accelerate=accelerate))
        with open(path, "rb") as f:
            samples = list(group_samples(iter_tar(f, "shard.tar", bufsize=bufsize, accelerate=accelerate)))
        assert len(samples) == 62
    assert got[True] == got[False]
    assert [(n, d) for n, d, _ in got[True]] == members


def test_reading_from_an_unaligned_start(archive, monkeypatch, tmp_path):
    """A file object positioned after a prefix: the windows start at the page before it, offsets from it."""
    path, members = archive
    prefixed = tmp_path / "prefixed.bin"
    prefixed.write_bytes(b"x" * 1000 + path.read_bytes())
    monkeypatch.setattr(buffers, "MAP_WINDOWS", True)
    with open(prefixed, "rb") as f:
        f.seek(1000)
        assert type(buffers.source_for(f, 4096)) is buffers.WindowBuffer
        got = list(iter_tar(f, "prefixed", bufsize=4096))
    with open(path, "rb") as f:
        assert got == list(iter_tar(f, "shard.tar", bufsize=4096))


def test_one_bounded_window_is_mapped_at_a_time(archive):
    """Each window is about bufsize (a page more at most, or what a fill asks for), and is unmapped once the
    buffer moved on: reading a whole file maps no more of it at once than FileBuffer's buffer holds."""
    path, _ = archive
    bufsize, page = 1 << 14, buffers.mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as f:
        src = buffers.WindowBuffer(f, f.fileno(), 0, bufsize)
        windows = []
        while src.fill(512):
            assert len(src.buf) <= bufsize
            window = src.buf.obj
            assert isinstance(window, buffers.mmap.mmap) and len(window) <= bufsize + page
            windows.append(weakref.ref(window))
            del window
            assert sum(w() is not None for w in windows) == 1  # only the current one
            src.pos = len(src.buf)
        assert len(windows) == -(-path.stat().st_size // bufsize)
        assert src.fill(1) is False and src.eof


def test_a_file_cut_below_its_mapped_window_is_read_not_touched(archive):
    """A file found shorter at a fill than what is mapped of it: what is left is read with pread (touching the
    map past the new end would kill the process with SIGBUS), and the file ends where it now ends."""
    path, _ = archive
    payload = path.read_bytes()
    with open(path, "rb") as f:
        src = buffers.WindowBuffer(f, f.fileno(), 0, 1 << 14)
        assert src.fill(512) and len(src.buf) == 1 << 14
        src.pos = 4096
        os.truncate(path, 6000)
        assert src.fill(1 << 14) is False and src.eof
        assert bytes(src.buf[src.pos :]) == payload[4096:6000] and not isinstance(src.buf.obj, buffers.mmap.mmap)


def test_a_truncated_shard_gives_the_same_error_and_members(archive, monkeypatch, tmp_path):
    path, _ = archive
    outcomes = {}
    for cut in (50_000, 200_000, 1_200_000):
        short = tmp_path / f"short{cut}.tar"
        short.write_bytes(path.read_bytes()[:cut])
        for mapped in (False, True):
            monkeypatch.setattr(buffers, "MAP_WINDOWS", mapped)
            members = []
            with open(short, "rb") as f, pytest.raises(tar_reader.TarFormatError) as error:
                members.extend(iter_tar(f, "short.tar", bufsize=1 << 15))
            outcomes[mapped] = members, str(error.value)
        assert outcomes[True] == outcomes[False]


def test_a_file_that_cannot_be_mapped_is_read_with_pread(archive, monkeypatch):
    path, members = archive

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(buffers.mmap, "mmap", refuse)
    monkeypatch.setattr(buffers, "MAP_WINDOWS", True)
    with open(path, "rb") as f:
        assert [(n, d) for n, d, _ in iter_tar(f, "shard.tar", bufsize=4096)] == members
