"""shardstream installs like any package: the sdist, a platform wheel and the pure-Python wheel are built here
(as ``python -m build`` does: the platform wheel from the sdist), their contents checked, and the wheels installed
into a fresh virtual environment where a smoke test (scripts/smoke_wheel.py, also cibuildwheel's test-command)
imports shardstream, writes a shard and reads it back.

Offline-friendly: the builds use the installed setuptools (``--no-isolation``); the fresh environment gets its
core dependencies the way pip finds them here (the pip cache, the configured index).
"""

from __future__ import annotations

import email
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: build outputs and local environments: never part of a source distribution
NOT_SOURCE = (".git", ".venv*", "build", "dist", "site", "*.egg-info", "__pycache__", "*.so", "*.pyd",
              ".pytest_cache", ".hypothesis", "demo-shards", "bench-data")

pytest.importorskip("build", reason="pip install 'shardstream[test]' (the `build` frontend)")


def run(*cmd: str | os.PathLike[str], cwd: os.PathLike[str] | None = None, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on the path (PYTHONPATH=src would shadow what was installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SHARDSTREAM_NO_EXTENSIONS")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, pathlib.Path]:
    """``{"sdist", "platform", "pure"}``: built from a copy of this checkout (nothing is written into it)."""
    tmp = tmp_path_factory.mktemp("dists")
    tree = tmp / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    build = (sys.executable, "-m", "build", "--no-isolation")
    # the sdist, then the platform wheel from the unpacked sdist (what `python -m build` does)
    run(*build, "--outdir", tmp / "dist", tree, env=clean_env())
    (sdist,) = (tmp / "dist").glob("*.tar.gz")
    (platform,) = (tmp / "dist").glob("*.whl")
    # the pure-Python wheel, from the sdist too
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    run(*build, "--wheel", "--outdir", tmp / "pure", unpacked, env=clean_env(SHARDSTREAM_NO_EXTENSIONS="1"))
    (pure,) = (tmp / "pure").glob("*.whl")
    return {"sdist": sdist, "platform": platform, "pure": pure}


def test_the_sdist_has_the_license_and_the_whole_test_suite(dists):
    with tarfile.open(dists["sdist"]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
        top = tar.getnames()[0].split("/")[0]
        metadata = email.message_from_bytes(tar.extractfile(f"{top}/PKG-INFO").read())
    assert {"LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "setup.py", "mkdocs.yml"} <= names
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "src" / "shardstream" / "_native").glob("_scan*.[ch]")}
    assert "src/shardstream/_native/_scan.c" in sources and "src/shardstream/_native/_scan.h" in sources
    assert sources - names == set(), "C sources of the accelerator missing from the sdist"
    tests = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")}
    assert tests - names == set(), "test files missing from the sdist"
    docs = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*") if p.is_file()}
    assert docs - names == set(), "documentation pages missing from the sdist"
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc"))], "build outputs in the sdist"
    assert metadata["License-Expression"] == "BSD-3-Clause" and metadata["License-File"] == "LICENSE"


def _wheel(path: pathlib.Path) -> tuple[set[str], email.message.Message, email.message.Message]:
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        wheel = email.message_from_bytes(z.read(f"{info}/WHEEL"))
        metadata = email.message_from_bytes(z.read(f"{info}/METADATA"))
    return names, wheel, metadata


def test_the_pure_wheel_is_py3_none_any_without_compiled_code(dists):
    names, wheel, _ = _wheel(dists["pure"])
    assert dists["pure"].name.endswith("-py3-none-any.whl")
    assert wheel["Tag"] == "py3-none-any" and wheel["Root-Is-Purelib"] == "true"
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c", ".h"))]
    assert {"shardstream/py.typed", "shardstream/tar/reader.py", "shardstream/viewer/static/index.html"} <= names
    assert {"shardstream/_native/__init__.py", "shardstream/_native/_scan.pyi"} <= names  # the loader and the types


def test_the_platform_wheel_has_the_extension(dists):
    names, wheel, _ = _wheel(dists["platform"])
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert dists["platform"].name.split("-")[2] == tag and wheel["Root-Is-Purelib"] == "false"
    assert [n for n in names if n.startswith("shardstream/_native/_scan.") and n.endswith((".so", ".pyd"))]
    assert not [n for n in names if n.endswith((".c", ".h"))], "the C source belongs in the sdist only"
    assert "shardstream/_native/_scan.pyi" in names
    assert not [n for n in names if n.startswith("tests/")]


def test_the_metadata_declares_pythons_license_urls_and_ranges(dists):
    _, _, metadata = _wheel(dists["platform"])
    assert metadata["Requires-Python"] == ">=3.10"
    classifiers = metadata.get_all("Classifier")
    assert [c for c in classifiers if c.startswith("Programming Language :: Python :: 3.")] == [
        f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)
    ]
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert {url.split(",")[0] for url in metadata.get_all("Project-URL")} >= {"Homepage", "Documentation",
                                                                               "Source", "Issues", "Changelog"}
    requires = metadata.get_all("Requires-Dist")
    assert 'torch>=2.1; extra == "torch"' in requires
    pinned = [r for r in requires if "==" in r.split(";")[0]]
    assert pinned == [], f"pins belong in the dev setup (Makefile), not in the package metadata: {pinned}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> pathlib.Path:
    """A fresh virtual environment (no system site-packages, no pip of its own: this pip installs into it)."""
    path = tmp_path_factory.mktemp("venv") / "env"
    run(sys.executable, "-m", "venv", "--without-pip", path)
    return path / ("Scripts" if os.name == "nt" else "bin") / "python"


def smoke(python: pathlib.Path, cwd: pathlib.Path, *flags: str) -> dict:
    r = run(python, ROOT / "scripts" / "smoke_wheel.py", *flags, cwd=cwd, env=clean_env())
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_wheels_install_and_work_in_a_fresh_environment(dists, venv, tmp_path):
    pip = (sys.executable, "-m", "pip", "--python", venv, "install", "--quiet", "--disable-pip-version-check")
    run(*pip, dists["platform"], env=clean_env())
    result = smoke(venv, tmp_path, "--accelerated")
    assert result["accelerated"] is True and result["samples"] == 20
    site = pathlib.Path(result["file"]).resolve()
    assert venv.parent.parent.resolve() in site.parents, f"imported from {site}, not from the fresh environment"
    # the console script works from the installed wheel
    script = venv.parent / ("shardstream.exe" if os.name == "nt" else "shardstream")
    assert run(script, "--version", env=clean_env()).stdout.strip() == f"shardstream {result['version']}"

    # the same environment with the pure-Python wheel instead: same results, no C walk
    run(*pip, "--force-reinstall", "--no-deps", dists["pure"], env=clean_env())
    result = smoke(venv, tmp_path, "--pure")
    assert result["accelerated"] is False and result["samples"] == 20


def test_the_cibuildwheel_configuration_builds_cpython_310_to_313_on_three_platforms():
    cibuildwheel = shutil.which("cibuildwheel", path=str(pathlib.Path(sys.executable).parent))
    if cibuildwheel is None:
        pytest.skip("pip install 'shardstream[test]' (cibuildwheel)")
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    assert "smoke_wheel.py --accelerated" in config["test-command"]
    assert config["environment"]["SHARDSTREAM_REQUIRE_EXTENSIONS"] == "1"
    for platform, expected in [("linux", {"manylinux_x86_64", "musllinux_x86_64"}),
                               ("macos", {"macosx_x86_64", "macosx_arm64"}), ("windows", {"win_amd64"})]:
        r = run(cibuildwheel, "--print-build-identifiers", "--platform", platform, cwd=ROOT, env=clean_env())
        identifiers = set(r.stdout.split())
        assert identifiers == {f"cp3{minor}-{arch}" for minor in (10, 11, 12, 13) for arch in expected}, platform


def test_every_extra_is_on_the_install_page_and_asks_for_a_range():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    page = (ROOT / "docs" / "install.md").read_text()
    table = "\n".join(line for line in page.splitlines() if line.startswith("| `"))
    assert [name for name in extras if f"`{name}`" not in table] == [], "extras missing from docs/install.md's table"
    pins = [(name, req) for name, reqs in extras.items() for req in reqs if "==" in req]
    assert pins == [], "pins belong in the Makefile's dev setup"
