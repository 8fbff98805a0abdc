"""Archives written by the GNU ``tar`` command (gnu, posix and ustar formats) read like Python's tarfile reads them."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

TAR = shutil.which("tar")
pytestmark = pytest.mark.skipif(TAR is None, reason="the tar command is not installed")

FILES = {
    "s0000.txt": b"first sample text",
    "s0000.cls": b"3",
    "sub/s0001.txt": b"x" * 1000,
    "sub/s0001.cls": b"",
    "sub/" + "deep/" * 25 + "s0002.txt": b"long path",
    "sub/" + "n" * 150 + ".txt": b"long basename",
    "unicode-été.json": '{"a": "é"}'.encode(),
    "sub/" + "p" * 70 + "/" + "q" * 60 + ".txt": b"ustar prefix",
}
#: Names that ustar can store (in the name field, or split into prefix and name).
USTAR_NAMES = sorted(name for name in FILES if len(name.encode()) <= 100 or name.startswith("sub/ppp"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tree")
    for name, data in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.symlink("s0000.txt", root / "link-to-s0000")
    return root


def gnu_tar(root, fmt: str, names: list[str]) -> bytes:
    out = subprocess.run(
        [TAR, f"--format={fmt}", "--sort=name", "-cf", "-", "-C", str(root), *names],
        check=True,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    return out.stdout


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_gnu_tar_formats(fmt, tree, members, kit):
    data = gnu_tar(tree, fmt, sorted(os.listdir(tree)))
    got = members(data)
    assert got == kit.reference(data)
    assert sorted((name, payload) for name, payload, _ in got) == sorted(FILES.items())


def test_gnu_tar_ustar_format(tree, members, kit):
    data = gnu_tar(tree, "ustar", USTAR_NAMES)
    got = members(data)
    assert got == kit.reference(data)
    assert [(name, payload) for name, payload, _ in got] == [(n, FILES[n]) for n in USTAR_NAMES]
