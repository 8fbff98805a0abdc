"""A shard that is not a tar at all (a JPEG named .tar, a server's error page, a Parquet file, an empty file) is a
NotATarError saying what it looks like and what to do, from every walk: C and Python, streamed, from a file, mapped
(the ``read`` fixture compares them all), and through the dataset's fast reader and the index scan."""

from __future__ import annotations

import gzip
import random

import pytest

import shardstream as wds
from shardstream.errors import NotATarError, TarFormatError
from shardstream.tar import reader
from shardstream.tar.header import not_a_tar
from shardstream.tar.index import scan_file


def _noise(n: int) -> bytes:
    return random.Random(n).randbytes(n)


KINDS = [
    pytest.param(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + _noise(4000), "a JPEG image", "check the URL", id="jpeg"),
    pytest.param(b"\x89PNG\r\n\x1a\n" + _noise(900), "a PNG image", "check the URL", id="png"),
    pytest.param(b"\x1f\x8b\x08\x00" + _noise(700), "gzip-compressed data", "decompress", id="gzip"),
    pytest.param(b"PK\x03\x04" + _noise(2000), "a zip archive", "shardstream convert", id="zip"),
    pytest.param(b"PAR1" + _noise(3000), "a Parquet file", "shardstream convert", id="parquet"),
    pytest.param(b"<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head></html>\n" * 10,
                 "an HTML page", "the server answered with a page", id="html-error-page"),
    pytest.param(b"<html><body>Forbidden</body></html>", "an HTML page", "credentials", id="short-html-page"),
    pytest.param(b'<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>', "an XML document",
                 "the server answered", id="s3-error-answer"),
    pytest.param(b'{"path": "a.jpg", "label": 3}\n' * 40, "JSON", "shardstream convert", id="json-lines"),
    pytest.param(b"path,label\nimages/a.jpg,3\n" * 40, "text", "shardstream convert", id="csv"),
    pytest.param(b"", "an empty stream", "check the URL", id="empty"),
]


@pytest.mark.parametrize("data, looks_like, fix", KINDS)
def test_every_walk_says_what_the_file_looks_like(read, data, looks_like, fix):
    got = read(data, url="photos/cat.tar")
    error = got.error
    assert isinstance(error, NotATarError) and isinstance(error, TarFormatError) and not got.members
    assert looks_like in error.looks_like and fix in str(error)
    assert str(error).startswith("not a tar file: ") and "'photos/cat.tar'" in str(error) and error.offset == 0
    assert "corrupt" not in str(error) and "garbage" not in str(error)


@pytest.mark.parametrize("accelerate", [True, False], ids=["c-walk", "python-walk"])
def test_the_dataset_and_the_index_say_it_too(tmp_path, monkeypatch, accelerate):
    monkeypatch.setattr(reader, "USE_ACCELERATOR", accelerate)
    jpeg = tmp_path / "cat.tar"
    jpeg.write_bytes(b"\xff\xd8\xff\xe0" + _noise(5000))
    with pytest.raises(NotATarError, match=r"not a tar file: it starts like a JPEG image \(shard '.*cat.tar'\)"):
        list(wds.WebDataset(str(jpeg), shardshuffle=False))
    with pytest.raises(NotATarError, match="JPEG"):
        scan_file(jpeg)
    inner = tmp_path / "photo.tar.gz"  # compressed, and not a tar inside: said of what is inside
    inner.write_bytes(gzip.compress(b"\x89PNG\r\n\x1a\n" + _noise(2000)))
    with pytest.raises(NotATarError, match="a PNG image"):
        list(wds.WebDataset(str(inner), shardshuffle=False))


def test_a_damaged_tar_stays_a_damaged_tar(read, kit):
    data = bytearray(kit.make_tar([("a.txt", b"1")]))
    data[148:156] = b"1234567\0"  # a wrong checksum in the first header: a tar, damaged
    error = read(bytes(data)).error
    assert type(error) is TarFormatError and "checksum" in str(error)
    assert not_a_tar(bytes(data[:512])) is None
    cut = read(bytes(data[:100])).error  # the first header cut short (the name only): truncated, not "text"
    assert type(cut) is TarFormatError and "truncated tar header" in str(cut)


def test_a_handler_skips_it_and_names_it(tmp_path):
    page = tmp_path / "page.tar"
    page.write_bytes(b"<html><body>404 Not Found</body></html>")
    with pytest.warns(UserWarning, match="not a tar file: it starts like an HTML page"):
        assert list(wds.WebDataset(str(page), shardshuffle=False, handler=wds.warn_and_continue,
                                   empty_check=False)) == []


def test_unknown_bytes_keep_the_tar_error(read):
    error = read(bytes(range(256)) * 4).error
    assert type(error) is TarFormatError
