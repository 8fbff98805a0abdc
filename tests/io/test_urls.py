"""The URL rule is decided once (shardstream.io.urls) and every reader agrees on it.

Each case names a URL and the local file it must reach (or the error it must raise); the same case is read
through streaming (``open_url``), random access (``open_source``), the command line (``shardstream info``)
and the writer (``TarWriter``), so no layer can drift from the others again.
"""

from __future__ import annotations

import os
import pathlib
import tracemalloc

import pytest

from shardstream.cli import main
from shardstream.errors import ConfigError, OpenError, ShardstreamError
from shardstream.indexed import open_source
from shardstream.io import open_url
from shardstream.io.urls import _count, braceexpand, expand_inputs, expand_urls, local_path, split_scheme
from shardstream.writer import TarWriter

# (what the user writes, relative to the test directory; the file it names, relative to it) ---------------------
# "{here}" is the absolute test directory, as a URL path
CASES = [
    pytest.param("file://{here}/x%20y.tar", "x y.tar", id="file-url-percent-decoded"),
    pytest.param("file://localhost{here}/plain.tar", "plain.tar", id="file-localhost"),
    pytest.param("file:rel/x.tar", "rel/x.tar", id="file-relative"),
    pytest.param("rel/x.tar", "rel/x.tar", id="plain-relative-path"),
    pytest.param("{here}/plain.tar", "plain.tar", id="plain-absolute-path"),
    pytest.param("data:2024/x.tar", "data:2024/x.tar", id="existing-path-that-looks-like-a-url"),
]


@pytest.fixture
def here(tmp_path, monkeypatch) -> pathlib.Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _shard(path: pathlib.Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with TarWriter(str(path)) as sink:
        sink.write({"__key__": key, "txt": key})


def _url(template: str, here: pathlib.Path) -> str:
    return template.format(here=here.as_posix())


@pytest.mark.parametrize("template, name", CASES)
def test_every_reader_reaches_the_same_file(template, name, here, capsys):
    key = "k-" + name.removesuffix(".tar").replace("/", "-").replace(":", "-").replace(" ", "-")
    _shard(here / name, key=key)
    url = _url(template, here)
    expected = (here / name).read_bytes()

    assert os.path.samefile(local_path(url), here / name)
    with open_url(url) as stream:  # streaming
        assert stream.read() == expected
    source = open_source(url)  # random access (indexed)
    try:
        assert source.read(0, source.size) == expected
    finally:
        source.close()
    assert expand_inputs([url]) == [url]  # the CLI names it as given (no brace, no glob)
    capsys.readouterr()
    assert main(["info", url]) == 0
    assert key in capsys.readouterr().out


@pytest.mark.parametrize("template, name", CASES[:3])
def test_the_writer_writes_where_the_readers_read(template, name, here):
    (here / "rel").mkdir()
    url = _url(template, here)
    with TarWriter(url) as sink:
        sink.write({"__key__": "w", "txt": "written"})
    assert (here / name).exists()
    with open_url(url) as stream:
        assert stream.read() == (here / name).read_bytes()


def test_a_file_url_naming_a_host_is_an_error_everywhere(here, capsys):
    url = "file://server/share/a.tar"
    with pytest.raises(ConfigError, match="server"):
        local_path(url)
    with pytest.raises(ConfigError, match="file://server/share/a.tar"):
        open_url(url)
    with pytest.raises(ConfigError, match="file://server/share/a.tar"):
        open_source(url)
    with pytest.raises(ConfigError, match="file://server/share/a.tar"):
        TarWriter(url)
    capsys.readouterr()
    assert main(["info", url]) != 0
    assert "file://server/share/a.tar" in capsys.readouterr().err


def test_a_url_of_an_unknown_scheme_that_does_not_exist_is_not_local(here):
    assert local_path("data:2024/missing.tar") is None
    with pytest.raises(OpenError, match="no opener"):
        open_url("data:2024/missing.tar")
    with pytest.raises(ConfigError, match="no byte source"):
        open_source("data:2024/missing.tar")


@pytest.mark.parametrize(
    "url, expected",
    [
        ("C:/data/a.tar", ("", "C:/data/a.tar")),
        ("c:\\data\\a.tar", ("", "c:\\data\\a.tar")),
        ("S3://bucket/a.tar", ("s3", "//bucket/a.tar")),
        ("pipe:cat a.tar", ("pipe", "cat a.tar")),
        ("-", ("", "-")),
    ],
)
def test_schemes_and_windows_drive_letters(url, expected):
    assert split_scheme(url) == expected


def test_drive_letters_are_paths_and_remote_urls_and_stdin_are_not_local():
    assert local_path("C:/data/a.tar") == "C:/data/a.tar"
    assert local_path("s3://bucket/a.tar") is None
    assert local_path("pipe:cat a.tar") is None
    assert local_path("-") is None


def test_stdin_is_not_read_at_offsets():
    with pytest.raises(ShardstreamError, match="standard input"):
        open_source("-")


def test_brace_patterns_and_joined_lists():
    assert expand_urls("s-{00..02}.tar::t.tar") == ["s-00.tar", "s-01.tar", "s-02.tar", "t.tar"]
    assert expand_urls(["a{0..1}.tar", pathlib.Path("b.tar")]) == ["a{0..1}.tar", "b.tar"]
    with pytest.raises(ConfigError):
        expand_urls([1, 2])


def test_inputs_braces_directories_globs_and_stdin(here):
    for name in ("b.tar", "a.tar.gz", "a.tar.ssidx", ".hidden.tar", "notes.txt"):
        (here / "d" / name).parent.mkdir(exist_ok=True)
        (here / "d" / name).write_bytes(b"")
    (here / "odd{1,2}.tar").write_bytes(b"")  # an existing file is never brace-expanded
    assert expand_inputs(["s-{0..1}.tar", "odd{1,2}.tar", "-"]) == ["s-0.tar", "s-1.tar", "odd{1,2}.tar", "-"]
    assert expand_inputs(["d"], directories=True) == [os.path.join("d", "a.tar.gz"), os.path.join("d", "b.tar")]
    assert expand_inputs(["d"]) == ["d"]  # the CLI names directories as they are
    assert expand_inputs(["d/*.tar"], globs=True) == [os.path.join("d", "b.tar")]
    assert expand_inputs(["d/*.tar"]) == ["d/*.tar"]
    with pytest.raises(ConfigError, match="only once"):
        expand_inputs(["-", "-"])
    with pytest.raises(ConfigError, match="names no shard"):
        expand_inputs(["d/*.zip"], globs=True)


@pytest.mark.parametrize("pattern", ["a-{0..99999999}.tar", "{a,b}" * 30, "x{0..9999}{0..9999}", "{" * 5000 + "a" + "}" * 5000])
def test_a_brace_pattern_too_large_is_refused_before_it_is_built(pattern):
    """A spec file is untrusted: a pattern naming 10**8 shards (or nesting 5,000 deep) is a ConfigError naming
    the pattern, raised without building the names (small peak memory)."""
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="brace pattern"):
            braceexpand(pattern)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


@pytest.mark.parametrize("pattern", ["{a,b}{1..3}", "{{a,b},c}x{0..9..2}", "x{}y", "{a}", "{,}", "{a,}{,b}",
                                     "\\{a,b\\}", "{1..1}", "{5..1}", "{-3..3..2}", "{a..e}", "{a,{b,{c,d}}}", "{{}}",
                                     "{a,b}\\{", "}{{a,b}", "s-{000..999}.tar", "{Y..b}", "{a..3}"])
def test_the_count_that_bounds_a_pattern_is_its_length(pattern):
    assert _count(pattern) == len(braceexpand(pattern))
