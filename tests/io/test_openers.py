"""The opener registry and the local openers: paths, file: URLs, '-' (stdin), pipe:CMD."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from shardstream.errors import ConfigError, MissingDependencyError, OpenError
from shardstream.io import (
    finish_stream,
    get_opener,
    gopen,
    known_schemes,
    open_url,
    register_opener,
    split_scheme,
    unregister_opener,
)
from shardstream.io.pipe import PipeStream


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "shard.bin"
    path.write_bytes(b"0123456789")
    return path


def test_paths_and_file_urls_open_the_same_file(data_file, monkeypatch):
    monkeypatch.chdir(data_file.parent)
    for url in (str(data_file), data_file, "shard.bin", "file:shard.bin", f"file://{data_file}", data_file.as_uri()):
        with open_url(url) as f:
            assert f.read() == b"0123456789", url


def test_file_url_with_escapes(tmp_path):
    path = tmp_path / "a b.tar"
    path.write_bytes(b"x")
    with open_url(path.as_uri()) as f:
        assert f.read() == b"x"


def test_missing_file_is_an_open_error_naming_the_url(tmp_path):
    url = str(tmp_path / "nope.tar")
    with pytest.raises(OpenError) as info:
        open_url(url)
    assert info.value.url == url and url in str(info.value)
    assert isinstance(info.value, OSError)


def test_unknown_scheme_lists_what_is_supported():
    with pytest.raises(OpenError) as info:
        open_url("nosuch://bucket/shard.tar")
    message = str(info.value)
    assert "'nosuch'" in message and "'pipe:'" in message and "'file:'" in message and "stdin" in message
    assert "'s3:'" in message and "'https:'" in message


def test_remote_schemes_are_registered_lazily():
    assert get_opener("https://example.com/a.tar").__name__ == "open_http"


def test_a_relative_path_that_looks_like_a_url_opens_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data:2024").mkdir()
    (tmp_path / "data:2024" / "x.tar").write_bytes(b"ok")
    with open_url("data:2024/x.tar") as f:
        assert f.read() == b"ok"


def test_split_scheme():
    assert split_scheme("PIPE:cat x") == ("pipe", "cat x")
    assert split_scheme("c:\\data\\x.tar") == ("", "c:\\data\\x.tar")
    assert split_scheme("rel/x.tar") == ("", "rel/x.tar")


def test_lazy_registration_with_install_hint():
    register_opener("fakeremote", "shardstream_no_such_module.sub:open_it", extra="fakeremote")
    try:
        assert "fakeremote" in known_schemes()
        with pytest.raises(MissingDependencyError) as info:
            open_url("fakeremote://bucket/x.tar")
        assert "pip install 'shardstream[fakeremote]'" in str(info.value)
        with pytest.raises(ConfigError):
            register_opener("fakeremote", "x.y:z")
        register_opener("fakeremote", lambda url: open(os.devnull, "rb"), replace=True)
        with open_url("fakeremote://x") as f:
            assert f.read() == b""
    finally:
        unregister_opener("fakeremote")
    assert "fakeremote" not in known_schemes()


def test_bad_registrations():
    with pytest.raises(ConfigError):
        register_opener("x", "a:b")  # one letter would be a drive letter
    with pytest.raises(ConfigError):
        register_opener("good", "no_colon")


def test_gopen_reads_and_writes(data_file, tmp_path):
    with gopen(str(data_file)) as f:
        assert f.read() == b"0123456789"
    with gopen(str(tmp_path / "w.bin"), "wb") as f:  # webdataset's write modes (issue 12)
        f.write(b"abc")
    with gopen(f"pipe:cat >> {tmp_path / 'w.bin'}", "wb") as f:
        f.write(b"def")
    assert (tmp_path / "w.bin").read_bytes() == b"abcdef"
    with pytest.raises(ConfigError):
        gopen(str(data_file), "ab")


def test_stdin_dash(data_file):
    code = "import sys; from shardstream.io import open_url; f = open_url('-'); sys.stdout.write(f.read().decode())"
    with open(data_file, "rb") as stdin:
        out = subprocess.run([sys.executable, "-c", code], stdin=stdin, capture_output=True, check=True)
    assert out.stdout == b"0123456789"


# -- pipe: ----------------------------------------------------------------------------------------------------


def test_pipe_reads_the_command_output(data_file):
    with open_url(f"pipe:cat {data_file}") as f:
        assert f.read(4) == b"0123"
        assert f.read() == b"456789"
        assert f.read() == b""


def test_pipe_nonzero_exit_names_url_status_and_stderr():
    url = "pipe:printf partial; echo 'curl: (22) 404 Not Found' >&2; exit 22"
    f = open_url(url)
    assert f.read(7) == b"partial"
    with pytest.raises(OpenError) as info:
        f.read(100)
    message = str(info.value)
    assert info.value.url == url and url in message
    assert "status 22" in message and "404 Not Found" in message
    f.close()


def test_pipe_failure_is_reported_by_finish_even_if_the_reader_stopped_reading():
    f = open_url("pipe:printf abc; exit 1")
    assert f.read(3) == b"abc"
    with pytest.raises(OpenError, match="status 1"):
        finish_stream(f)
    f.close()


def test_pipe_stderr_tail_is_bounded():
    f = open_url("pipe:head -c 100000 /dev/zero | tr '\\0' e >&2; echo END >&2; exit 5")
    with pytest.raises(OpenError) as info:
        f.read()
    assert "END" in str(info.value) and len(str(info.value)) < 2500
    f.close()


def test_pipe_closed_early_kills_the_command_and_its_children():
    f = open_url("pipe:while true; do echo xxxxxxxx; done | cat")
    assert isinstance(f, PipeStream)
    assert f.read(9) == b"xxxxxxxx\n"
    pgid = f._proc.pid
    f.close()
    assert f._proc.poll() is not None
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the pipe's process group is still alive after close()")


def test_empty_pipe_command():
    with pytest.raises(OpenError):
        open_url("pipe:   ")
