"""Issue 18, item 8: a finished shard reaches the disk before it is renamed into place, and the rename after.

The order of the system calls is what makes a power loss safe: fsync(temporary file), rename, fsync(directory).
"""

from __future__ import annotations

import os
import stat

import pytest

from shardstream.writer import ShardWriter, TarWriter


@pytest.fixture
def calls(monkeypatch):
    """The fsync and rename calls, in order: ``("fsync", "file"|"dir")`` and ``("replace", final name)``."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        seen.append(("fsync", "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"))
        return real_fsync(fd)

    def replace(src, dst):
        seen.append(("replace", os.path.basename(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_a_shard_is_synced_before_and_after_its_rename(tmp_path, calls):
    with TarWriter(str(tmp_path / "a.tar")) as sink:
        sink.write({"__key__": "k", "txt": "x"})
    assert calls == [("fsync", "file"), ("replace", "a.tar"), ("fsync", "dir")]


def test_every_shard_of_a_series_is_synced(tmp_path, calls):
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=2) as sink:
        for i in range(5):
            sink.write({"__key__": f"k{i}", "txt": "x"})
    assert [c for c in calls if c[0] == "replace"] == [("replace", f"s-{i}.tar") for i in range(3)]
    assert calls.count(("fsync", "file")) == 3 and calls.count(("fsync", "dir")) == 3


@pytest.mark.parametrize("how", ["argument", "setting"])
def test_fsync_can_be_turned_off(tmp_path, calls, monkeypatch, how):
    if how == "setting":
        monkeypatch.setenv("SHARDSTREAM_FSYNC", "0")
    with ShardWriter(str(tmp_path / "s-%d.tar"), maxcount=2, **({"fsync": False} if how == "argument" else {})) as s:
        for i in range(3):
            s.write({"__key__": f"k{i}", "txt": "x"})
    assert [c[0] for c in calls] == ["replace", "replace"]


def test_streams_are_not_synced(calls):
    import io

    with TarWriter(io.BytesIO()) as sink:
        sink.write({"__key__": "k", "txt": "x"})
    assert calls == []
