"""``pipe:`` shards read in part: the stopped reading closes the stream, reaps the command, and the interpreter
exits cleanly (a daemon thread draining the command's stderr once aborted the exit: "Fatal Python error:
_enter_buffered_busy", status 134)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import shardstream
from shardstream.tar import TarStreamWriter

#: the package under test on the child's path, whatever its working directory
_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (os.path.dirname(os.path.dirname(shardstream.__file__)), os.environ.get("PYTHONPATH", "")) if p))


@pytest.fixture
def big_shard(tmp_path):
    """A ~1 MB shard: ``cat`` is still writing it (blocked on the full pipe) when the reader stops after 3."""
    path = tmp_path / "c-00.tar"
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for i in range(100):
            tw.add(f"{i:05d}.bin", bytes([i]) * 10_000)
            tw.add(f"{i:05d}.cls", b"%d" % i)
    return path


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=_ENV, capture_output=True,
                          text=True, timeout=120)


def _gone(pid: int) -> bool:
    """Whether process ``pid`` no longer runs (absent, or a zombie that is not ours)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("how", ["dropped", "kept_until_exit"])
def test_partly_read_pipe_shard_then_exit_is_clean(big_shard, tmp_path, how):
    """An iteration stopped after 3 samples (the iterator dropped, or kept in a global until exit): exit status
    0, no fatal error, and the command is not left running."""
    keep = "" if how == "kept_until_exit" else "del it"
    out = _run(f"""
        import itertools, shardstream as wds
        it = iter(wds.WebDataset("pipe:echo $$ > cmd.pid; exec cat c-00.tar", shardshuffle=False))
        print(len(list(itertools.islice(it, 3))))
        {keep}
    """, big_shard.parent)
    assert "Fatal Python error" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3"]
    assert _gone(int((tmp_path / "cmd.pid").read_text()))


def test_stopped_pipe_iteration_closes_the_stream_and_reaps_the_command(big_shard):
    """``close()`` on the iteration (or its collection) kills and reaps the command: no child is left."""
    out = _run("""
        import gc, itertools, os, shardstream as wds
        for stop in ("close", "collect"):
            it = iter(wds.WebDataset("pipe:exec cat c-00.tar", shardshuffle=False))
            assert len(list(itertools.islice(it, 3))) == 3
            if stop == "close":
                it.close()
            else:
                del it
                gc.collect()
            try:
                print(stop, "child left:", os.waitpid(-1, os.WNOHANG))
            except ChildProcessError:
                print(stop, "no child")
    """, big_shard.parent)
    assert out.returncode == 0 and "Fatal Python error" not in out.stderr, out.stderr
    assert out.stdout.splitlines() == ["close no child", "collect no child"]


def test_pipe_stream_collected_unclosed_kills_its_command(big_shard):
    """A PipeStream dropped without close() is collected (its stderr thread does not keep it alive) and killed."""
    out = _run("""
        import gc, os
        from shardstream.io import open_url
        f = open_url("pipe:exec cat c-00.tar")
        assert len(f.read(100)) > 0
        pid = f._proc.pid
        del f
        gc.collect()
        try:
            print("child left:", os.waitpid(-1, os.WNOHANG))
        except ChildProcessError:
            print("no child")
    """, big_shard.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["no", "child"]
