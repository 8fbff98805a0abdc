"""mypy is clean over src/ without the optional packages whose types it would otherwise check against.

``cbor2``, ``zstandard`` and ``crc32c`` ship type information; without them mypy sees ``Any``
(``ignore_missing_imports``), and a ``# type: ignore`` needed only with them becomes an unused-ignore error.
tests/test_lint.py runs mypy in this environment (with them: the dev setup installs them); this test runs it as in an
environment without them: an interpreter whose site-packages holds every package of this one but those three
(symlinks, nothing downloaded). By hand::

    python -m venv --without-pip /tmp/noextras
    for p in "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"/*; do
        case "$(basename "$p")" in
            cbor2*|zstandard*|crc32c*) ;;
            *) ln -s "$p" /tmp/noextras/lib/python3.*/site-packages/;;
        esac
    done
    python -m mypy --python-executable /tmp/noextras/bin/python
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import sysconfig
import venv

import pytest

import shardstream

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = pathlib.Path(shardstream.__file__).parent
#: the optional packages with type information that src/ imports (each behind an ImportError fallback)
TYPED_EXTRAS = ("cbor2", "zstandard", "crc32c")


def _without_extras(where: pathlib.Path) -> pathlib.Path:
    """A Python whose site-packages links every entry of this interpreter's but the typed extras (and this
    package's own editable install); its executable."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    python = where / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    target = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                         capture_output=True, text=True, check=True).stdout.strip())
    skip = (*TYPED_EXTRAS, "shardstream", "__editable__")
    for here in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        for entry in pathlib.Path(here).iterdir():
            if not entry.name.startswith(skip) and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)
    return python


def test_mypy_finds_nothing_in_src_without_the_typed_extras(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (it is in the `test` extra)")
    python = _without_extras(tmp_path / "noextras")
    hidden = subprocess.run([str(python), "-c", f"import importlib.util as u; print([m for m in {TYPED_EXTRAS!r} "
                             "if u.find_spec(m)])"], capture_output=True, text=True, check=True).stdout.strip()
    assert hidden == "[]", hidden
    # the cache tests/test_lint.py's run leaves (mypy rechecks what the missing packages change: 60 s -> 20 s)
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"),
                             "--python-executable", str(python), "--config-file", str(ROOT / "pyproject.toml"),
                             str(SRC)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
