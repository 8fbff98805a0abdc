"""DALI index export, checked byte for byte against a reference built here from GNU tar's own listing."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile

import pytest

from shardstream.errors import InterleavedKeyError, SampleFormatError
from shardstream.indexed import write_dali_index
from shardstream.samples import KeyRule
from shardstream.tar.writer import TarStreamWriter
from shardstream.writer import TarWriter

needs_gnu_tar = pytest.mark.skipif(
    shutil.which("tar") is None or b"GNU tar" not in subprocess.run(["tar", "--version"], capture_output=True).stdout,
    reason="needs GNU tar for the independent reference (`tar --list --block-number --verbose`)",
)


def gnu_tar_reference(path: str) -> str:
    """DALI v1.2 text from `tar --list --block-number --verbose`: regular files, data at (block + 1) * 512,
    members grouped by the part of the name before the first dot of the basename (names without spaces).

    GNU tar gives the block of the member's own header for PAX members, but the block of the ``././@LongLink``
    header for GNU ``L`` long names: archives here use ustar and PAX only."""
    listing = subprocess.run(
        ["tar", "--list", "--block-number", "--verbose", "--quoting-style=literal", "--file", path],
        capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C.UTF-8"},
    ).stdout  # fmt: skip
    samples: list[list[str]] = []
    last = None
    for line in listing.splitlines():
        block, rest = line.split(": ", 1)
        if rest.startswith("**"):  # "** Block of NULs **"
            continue
        mode, _owner, size, _date, _time, name = rest.split(None, 5)
        if mode[0] != "-":
            continue
        offset = (int(block.removeprefix("block ")) + 1) * 512
        slash = name.rfind("/")
        dot = name.find(".", slash + 1)
        key, ext = name[:dot], name[dot + 1 :].lower()
        if key != last:
            samples.append([])
            last = key
        samples[-1].append(f"{ext} {offset} {size} {name}")
    return f"v1.2 {len(samples)}\n" + "".join(" ".join(s) + "\n" for s in samples)


@needs_gnu_tar
def test_dali_index_equals_the_gnu_tar_reference(tmp_path):
    path = str(tmp_path / "data.tar")
    with TarWriter(path) as sink:
        for i in range(30):
            key = f"sample{i:04d}" if i % 5 else f"dir/{'deep' * 30}/sample{i:04d}"  # long names: PAX headers
            sink.write({"__key__": key, "cls": i, "txt": "x" * (i * 97), "seg.png": b"\x89PNG" * i})
    output = write_dali_index(path)
    assert output == str(tmp_path / "data.idx")
    ours = open(output, "rb").read()
    assert ours == gnu_tar_reference(path).encode()
    assert ours.startswith(b"v1.2 30\ncls 512 1 dir/") and ours.endswith(b"\n") and b"\r" not in ours


@needs_gnu_tar
def test_dali_index_skips_directories_and_links(tmp_path):
    path = str(tmp_path / "mixed.tar")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("d")
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
        for name, data in [("d/a.JPG", b"jpeg!"), ("d/a.cls", b"3"), ("d/" + "b" * 120 + ".txt", b"long")]:
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tf.addfile(member, io.BytesIO(data))
        link = tarfile.TarInfo("d/link.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "d/a.cls"
        tf.addfile(link)
    text = open(write_dali_index(path, str(tmp_path / "m.idx")), "rb").read()
    assert text == gnu_tar_reference(path).encode()
    assert b"jpg 1024 5 d/a.JPG" in text  # extensions lower-cased by our default rule
    keep_case = open(write_dali_index(path, str(tmp_path / "k.idx"), rule=KeyRule(lowercase=False))).read()
    assert "JPG 1024 5 d/a.JPG" in keep_case


def test_dali_index_refuses_what_it_cannot_write(tmp_path):
    path = str(tmp_path / "bad.tar")
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        tw.add("a b.txt", b"1")
    with pytest.raises(SampleFormatError, match="whitespace") as info:
        write_dali_index(path)
    assert info.value.url == path
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for name in ("a.txt", "b.txt", "a.cls"):
            tw.add(name, b"1")
    with pytest.raises(InterleavedKeyError):
        write_dali_index(path)
