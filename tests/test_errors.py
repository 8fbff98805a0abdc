"""The exception tree: builtin bases, context in messages and attributes, chaining via notes."""

import pytest

from shardstream import errors
from shardstream.errors import (
    DecodeError,
    MissingDependencyError,
    OpenError,
    TarFormatError,
    UnsafeDecodeError,
    add_context,
)


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (errors.ConfigError, ValueError),
        (errors.MissingDependencyError, ImportError),
        (errors.TarFormatError, ValueError),
        (errors.SampleFormatError, ValueError),
        (errors.DuplicateFieldError, ValueError),
        (errors.OpenError, OSError),
        (errors.WriteError, OSError),
        (errors.DecodeError, ValueError),
        (errors.UnsafeDecodeError, ValueError),
        (errors.EncodeError, ValueError),
        (errors.WorkerSplitError, RuntimeError),
        (errors.ProcessingError, RuntimeError),
        (errors.RecordFormatError, ValueError),
    ],
)
def test_every_error_is_a_shardstream_error_and_a_builtin(cls, builtin):
    assert issubclass(cls, errors.ShardstreamError)
    assert issubclass(cls, builtin)


def test_every_public_error_is_documented_in_the_tree():
    doc = errors.__doc__
    for name in errors.__all__:
        if name[0].isupper():
            assert name in doc, f"{name} missing from the tree in errors.py's docstring"


def test_tar_format_error_names_shard_and_offset():
    e = TarFormatError("bad header checksum", url="s3://b/shard-000001.tar", offset=10240, member="x.jpg")
    assert e.url == "s3://b/shard-000001.tar" and e.offset == 10240
    msg = str(e)
    assert "shard-000001.tar" in msg and "10240" in msg and "x.jpg" in msg and "re-download" in msg


def test_decode_error_names_everything():
    e = DecodeError("cannot identify image", url="a.tar", key="0001", field="jpg")
    assert (e.url, e.key, e.field) == ("a.tar", "0001", "jpg")
    assert "a.tar" in str(e) and "'0001'" in str(e) and "'jpg'" in str(e)
    assert issubclass(UnsafeDecodeError, DecodeError)


def test_missing_dependency_names_the_extra():
    e = MissingDependencyError("reading s3:// URLs", "s3", "s3fs")
    assert "pip install 'shardstream[s3]'" in str(e) and "s3fs" in str(e)


def test_add_context_keeps_args_and_sets_missing_attributes():
    e = OpenError("connection reset", url=None)
    args = e.args
    add_context(e, url="http://h/x.tar", key="k")
    assert e.args == args
    assert e.url == "http://h/x.tar" and e.key == "k"
    assert any("http://h/x.tar" in n for n in getattr(e, "__notes__", ["http://h/x.tar"]))
    # an attribute already set is not overwritten
    e2 = DecodeError("x", url="first")
    add_context(e2, url="second")
    assert e2.url == "first"
