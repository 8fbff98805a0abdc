"""Writing shards to pipe: commands and the choice of remote sink (fsspec stores are tested against S3)."""

from __future__ import annotations

import tarfile

import pytest

from shardstream.errors import ConfigError, WriteError
from shardstream.io.remote_write import PipeSink, open_for_write
from shardstream.writer import ShardWriter, TarWriter


def test_tarwriter_to_a_pipe(tmp_path):
    out = tmp_path / "piped.tar"
    with TarWriter(f"pipe:cat > {out}") as sink:
        sink.write({"__key__": "a", "txt": "hello"})
    with tarfile.open(out) as tf:
        assert tf.getnames() == ["a.txt"]


def test_shardwriter_to_pipes(tmp_path):
    with ShardWriter(f"pipe:gzip -c > {tmp_path}/s-%02d.tar.gz", maxcount=2, compress=False) as sink:
        for i in range(5):
            sink.write({"__key__": f"k{i}", "txt": str(i)})
    assert len(sink.shards) == 3
    with tarfile.open(tmp_path / "s-01.tar.gz") as tf:
        assert tf.getnames() == ["k2.txt", "k3.txt"]


def test_failing_command_is_a_write_error_naming_its_stderr(tmp_path):
    sink = TarWriter("pipe:cat > /dev/null; echo 'upload refused' >&2; exit 4")
    sink.write({"__key__": "a", "txt": "x"})
    with pytest.raises(WriteError, match="status 4.*upload refused"):
        sink.close()


def test_command_that_stops_reading_is_a_write_error():
    sink = TarWriter("pipe:head -c 10 > /dev/null; echo gone >&2")
    with pytest.raises(WriteError, match="command"):
        for i in range(50):
            sink.write({"__key__": f"k{i}", "bin": b"x" * 200_000})
        sink.close()


def test_abort_kills_the_command(tmp_path):
    sink = TarWriter(f"pipe:sleep 30; cat > {tmp_path}/never.tar")
    proc = sink._remote._proc
    sink.write({"__key__": "a", "txt": "x"})
    sink.abort()
    assert proc.poll() is not None and not (tmp_path / "never.tar").exists()


def test_unsupported_targets_are_config_errors():
    for url in ("http://host/x.tar", "ftp://host/x.tar"):
        with pytest.raises(ConfigError, match="post="):
            TarWriter(url)
    with pytest.raises(ConfigError, match="empty command"):
        open_for_write("pipe:  ")


def test_sink_context_manager_discards_on_error(tmp_path):
    with pytest.raises(KeyError):
        with open_for_write(f"pipe:sleep 30; cat > {tmp_path}/x") as sink:
            assert isinstance(sink, PipeSink)
            sink.write(b"data")
            raise KeyError("stop")
    assert sink._proc.poll() is not None


def test_a_pipe_sink_dropped_unclosed_is_collected_and_its_command_killed():
    """Its stderr reader holds the pipe, not the sink: dropping the sink runs its finalizer (kill and reap)."""
    import gc

    from shardstream.io.remote_write import PipeSink

    sink = PipeSink("pipe:sleep 60", "sleep 60; cat > /dev/null")
    proc = sink._proc
    del sink
    gc.collect()
    assert proc.returncode is not None  # killed and waited for by the finalizer
