"""shardstream extract: files written as KEY.EXT, nothing ever written outside the destination."""

from __future__ import annotations

import io
import os
import tarfile

from cli_helpers import members, run_cli

from shardstream.cli import main
from shardstream.cli.extract import unsafe_reason, write_member


def hostile_tar(path) -> None:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in [("ok/a.txt", b"fine"), ("../up.txt", b"evil"), ("/abs/root.txt", b"evil"),
                           ("x/../../up2.txt", b"evil"), ("win\\path.txt", b"evil"), ("./dot/b.txt", b"fine"),
                           ("link/c.txt", b"through a link")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("sym.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)


def test_extracts_every_field(inputs):
    assert run_cli("extract", "a.tar", "-o", "out") == 0
    for name, data in members("a.tar"):
        assert (inputs / "out" / name).read_bytes() == data


def test_fields_and_limit(inputs):
    assert run_cli("extract", "dataset.tar", "-o", "out", "--fields", "cls, txt", "--limit", "3") == 0
    assert sorted(os.listdir(inputs / "out")) == [f"d{i:06d}.{e}" for i in range(3) for e in ("cls", "txt")]


def test_hostile_names_are_refused(inputs, tmp_path, capsys):
    hostile_tar(inputs / "hostile.tar")
    outside = tmp_path / "outside"
    outside.mkdir()
    (inputs / "dest").mkdir()
    os.symlink(outside, inputs / "dest" / "link")  # a link already in the destination
    assert main(["extract", "hostile.tar", "-o", "dest"]) == 1
    err = capsys.readouterr().err
    for name in ("../up.txt", "/abs/root.txt", "x/../../up2.txt", "win\\path.txt", "link/c.txt"):
        assert f"refused {name!r}" in err, name
    assert (inputs / "dest/ok/a.txt").read_bytes() == b"fine"
    assert (inputs / "dest/dot/b.txt").read_bytes() == b"fine"
    assert os.listdir(outside) == [] and not (inputs / "up.txt").exists() and not (inputs / "up2.txt").exists()
    assert not os.path.lexists(inputs / "dest/sym.txt")  # links are never created


def test_existing_files_and_overwrite(inputs, capsys, tmp_path):
    assert run_cli("extract", "a.tar", "-o", "out") == 0
    assert run_cli("extract", "a.tar", "-o", "out") == 1
    assert "exists" in capsys.readouterr().err
    assert run_cli("extract", "a.tar", "-o", "out", "--overwrite") == 0
    target = tmp_path / "secret"
    target.write_bytes(b"keep")
    os.remove(inputs / "out/a000000.txt")
    os.symlink(target, inputs / "out/a000000.txt")
    assert run_cli("extract", "a.tar", "-o", "out", "--overwrite") == 1  # never writes through a link
    assert target.read_bytes() == b"keep"


def test_helpers(tmp_path):
    assert unsafe_reason("a/b.txt") is None and unsafe_reason("C:/x.txt") == "absolute path"
    assert unsafe_reason("") == "empty name or NUL"
    (tmp_path / "file").write_bytes(b"")
    assert "not a directory" in write_member(str(tmp_path), "file/x.txt", b"")
    assert write_member(str(tmp_path), "deep/er/x.txt", b"1") is None
    assert (tmp_path / "deep/er/x.txt").read_bytes() == b"1"
