"""Every code example in the README, the docs and the docstrings runs, and the documentation site builds.

- ```python blocks of README.md and docs/**/*.md run in order, one namespace per file, in a fresh temp directory.
  A block whose info string names a peer library (```python {peer="litdata"}```: the code of the library a
  migration guide starts from) runs as a script in that peer's venv (``.venv-peers-NAME``, made by
  ``make bench-peers``), in the same directory, after the page's earlier blocks; without that venv it is not run
  and the page's test is skipped once its other blocks have passed, naming the block and the reason.
- ```console blocks run their ``$ `` lines in a shell (with the venv's bin first on PATH), except the two set-up
  commands ``make demo`` / ``make test`` (the demo has its own test; ``make test`` is this very suite).
- doctest examples in every module of the package run.
- the site (mkdocs.yml: these pages and the API reference from the docstrings) builds with warnings as errors.
"""

from __future__ import annotations

import doctest
import importlib
import os
import pathlib
import pkgutil
import re
import subprocess
import sys

import pytest

import shardstream

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
SETUP_COMMANDS = {"make demo", "make test"}
#: fenced blocks that are shown, not run: program output and file contents
SHOWN = {"text"}
#: the rest of a page from this line on needs a service (``<!-- needs: s3 -->``), provided by its own test
NEEDS = re.compile(r"^<!-- needs: (\w+) -->$", re.M)
#: the info string of a python block that a peer library runs: ```python {peer="litdata" title="litdata"}```
PEER = re.compile(r'\bpeer="([^"]*)"')
PY_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
#: the peers whose venvs the migration guides' blocks run in (benchmarks/peers/setup.sh makes them)
PEERS = ("litdata", "streaming")
#: where the peer venvs are: the repository root, or the folder named by this variable (a worktree's venvs)
PEER_VENVS = pathlib.Path(os.environ.get("SHARDSTREAM_PEER_VENVS") or ROOT)


def page_text(path: pathlib.Path, *, services: bool = False) -> str:
    """The page's markdown; without ``services``, only what comes before a ``needs`` line."""
    text = path.read_text()
    needs = NEEDS.search(text)
    return text[:needs.start()] if needs and not services else text


def blocks(path: pathlib.Path, lang: str, *, services: bool = False) -> list[str]:
    """The page's blocks of ``lang``, in order; without ``services``, only those before a ``needs`` line."""
    return [body for kind, body in FENCE.findall(page_text(path, services=services)) if kind == lang]


def python_blocks(path: pathlib.Path) -> list[tuple[str | None, str]]:
    """The page's python blocks before any ``needs`` line, in order, each with the peer that runs it (None: this
    venv, in process)."""
    return [(peer.group(1) if (peer := PEER.search(info)) else None, body)
            for info, body in PY_FENCE.findall(page_text(path))]


def peer_python(peer: str) -> pathlib.Path | None:
    """The python of the peer's venv, or None when that venv was not made."""
    python = PEER_VENVS / f".venv-peers-{peer}" / "bin" / "python"
    return python if python.exists() else None


#: mosaicml-streaming imports torchvision's dataset classes on ``import streaming`` and uses none of them here; the
#: peers venv has no torchvision (no build matches its torch), so a stub package stands in for it
_TORCHVISION_STUB = {
    "__init__.py": "from . import datasets, transforms\n",
    "datasets.py": "class VisionDataset:\n    pass\n\n\nclass CIFAR10(VisionDataset):\n    pass\n",
    "transforms/__init__.py": "from . import functional\n",
    "transforms/functional.py": "to_tensor = None\n",
}


def _peer_path(peer: str, python: pathlib.Path, stubs: pathlib.Path) -> list[str]:
    """What the peer's scripts import besides their venv: this tree's shardstream (as if installed next to the
    peer) and, for a venv without torchvision, its stub."""
    path = [str(ROOT / "src")]
    if peer == "streaming":
        probe = subprocess.run([python, "-c", "import torchvision"], capture_output=True, timeout=120)
        if probe.returncode != 0:
            for name, text in _TORCHVISION_STUB.items():
                (stubs / "torchvision" / name).parent.mkdir(parents=True, exist_ok=True)
                (stubs / "torchvision" / name).write_text(text)
            path.append(str(stubs))
    return path


def run_peer_block(peer: str, python: pathlib.Path, body: str, where: pathlib.Path, name: str) -> None:
    """Run one block as a script (a file: a peer's worker processes may re-import ``__main__``) in ``where``."""
    stubs = where.parent / f"{where.name}-peer-stubs"
    script = stubs / f"{name}.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(body)
    extra = _peer_path(peer, python, stubs)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*extra, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    r = subprocess.run([str(python), str(script)], cwd=where, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{name} (peer {peer}) exited {r.returncode}:\n{body}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def with_blocks(lang: str) -> list[pathlib.Path]:
    return [path for path in DOCS if blocks(path, lang)]


def test_every_example_is_python_or_console():
    """A fenced block of another kind, or without one, would not run: every opening fence names python, console
    or text."""
    other = []
    for path in DOCS:
        fences = [line[3:].strip() for line in path.read_text().splitlines() if line.startswith("```")]
        kinds = [(info.split(maxsplit=1) or [""])[0] for info in fences[::2]]
        other += [(path.name, kind or "(none)") for kind in kinds if kind not in {"python", "console", *SHOWN}]
    assert other == []


def test_every_peer_block_names_a_known_peer():
    """A ``peer=`` naming no venv the set-up makes would be skipped for ever: peers are the ones of PEERS."""
    named = {(path.name, peer) for path in DOCS for peer, _ in python_blocks(path) if peer is not None}
    assert {(page, peer) for page, peer in named if peer not in PEERS} == set()


@pytest.mark.parametrize("path", with_blocks("python"), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(path, tmp_path, monkeypatch):
    code = python_blocks(path)
    if not code:
        pytest.skip(f"{path.name} has no python examples")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    not_run = []
    for i, (peer, body) in enumerate(code):
        name = f"{path.name}[python block {i}]"
        if peer is not None:
            python = peer_python(peer)
            if python is None:
                not_run.append(f"block {i} (peer {peer}: no {PEER_VENVS / f'.venv-peers-{peer}'}; `make bench-peers`)")
            else:
                run_peer_block(peer, python, body, tmp_path, f"{path.stem}-block-{i}")
            continue
        try:
            exec(compile(body, name, "exec"), namespace)
        except Exception as e:  # pragma: no cover - failure path
            raise AssertionError(f"{name} failed:\n{body}") from e
    if not_run:
        pytest.skip(f"{path.name}: the other blocks ran; not run: {', '.join(not_run)}")


_PEER_PAGE = """# A page

```python
open("mine.txt", "w").write("from the docs venv")
```

```python {peer="litdata" title="litdata"}
import sys

if __name__ == "__main__":
    import shardstream  # importable there too, as if installed next to the peer
    open("theirs.txt", "w").write(open("mine.txt").read() + " via " + sys.executable)
```

```python
ran = True
```
"""


def _fake_peer_venv(root: pathlib.Path, peer: str) -> pathlib.Path:
    """A stand-in for ``.venv-peers-PEER``: its bin/python is this interpreter."""
    (root / f".venv-peers-{peer}" / "bin").mkdir(parents=True)
    (root / f".venv-peers-{peer}" / "bin" / "python").symlink_to(sys.executable)
    return root / f".venv-peers-{peer}" / "bin" / "python"


def test_a_peer_block_runs_in_its_venv_after_the_blocks_before_it(tmp_path, monkeypatch):
    page, venvs, work = tmp_path / "page.md", tmp_path / "venvs", tmp_path / "work"
    page.write_text(_PEER_PAGE)
    work.mkdir()
    python = _fake_peer_venv(venvs, "litdata")
    monkeypatch.setattr(sys.modules[__name__], "PEER_VENVS", venvs)
    assert [peer for peer, _ in python_blocks(page)] == [None, "litdata", None]
    test_python_examples_run(page, work, monkeypatch)
    assert (work / "theirs.txt").read_text() == f"from the docs venv via {python}"


def test_a_peer_block_without_its_venv_is_skipped_naming_it(tmp_path, monkeypatch):
    page, work = tmp_path / "page.md", tmp_path / "work"
    page.write_text(_PEER_PAGE.replace("ran = True", "open('after.txt', 'w').write('ran')"))
    work.mkdir()
    monkeypatch.setattr(sys.modules[__name__], "PEER_VENVS", tmp_path / "nowhere")
    with pytest.raises(pytest.skip.Exception, match=r"not run: block 1 \(peer litdata: no .*venv-peers-litdata"):
        test_python_examples_run(page, work, monkeypatch)
    assert (work / "mine.txt").exists() and (work / "after.txt").exists() and not (work / "theirs.txt").exists()


def test_a_failing_peer_block_fails_the_page(tmp_path, monkeypatch):
    page, venvs, work = tmp_path / "page.md", tmp_path / "venvs", tmp_path / "work"
    page.write_text(_PEER_PAGE.replace('open("theirs.txt"', 'open("missing/theirs.txt"'))
    work.mkdir()
    _fake_peer_venv(venvs, "litdata")
    monkeypatch.setattr(sys.modules[__name__], "PEER_VENVS", venvs)
    with pytest.raises(AssertionError, match=r"page-block-1 \(peer litdata\) exited 1"):
        test_python_examples_run(page, work, monkeypatch)


@pytest.mark.parametrize("path", with_blocks("console"), ids=lambda p: str(p.relative_to(ROOT)))
def test_console_examples_run(path, tmp_path):
    commands = [
        line[2:]
        for body in blocks(path, "console")
        for line in body.splitlines()
        if line.startswith("$ ") and line[2:].strip() not in SETUP_COMMANDS
    ]
    if not commands:
        pytest.skip(f"{path.name} has no console examples to run")
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for cmd in commands:
        r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{path.name}: `{cmd}` exited {r.returncode}\n{r.stdout}\n{r.stderr}"


def test_readme_starts_with_the_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    first = FENCE.search(text)
    assert first is not None
    lines = [ln.removeprefix("$ ").strip() for ln in first.group(2).splitlines() if ln.strip()]
    assert lines == ["make demo", "make test"]


def _modules():
    for info in pkgutil.walk_packages(shardstream.__path__, "shardstream."):
        yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"


# -- the documentation site ----------------------------------------------------------------------------------


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason="pip install 'shardstream[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="pip install 'shardstream[docs]'")
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    pages = {p.parent.relative_to(site).as_posix() for p in site.rglob("index.html")}
    assert {".", "training", "performance", "architecture", "logging", "api/writer", "api/pipeline"} <= pages
    # the API reference is generated from the docstrings of the public surface
    reference = "".join((site / "api" / page / "index.html").read_text() for page in (
        "shardstream", "writer", "pipeline", "tar", "codecs", "io", "indexed", "training", "cli"))
    for name in ("errors.ShardstreamError", "config.Settings", "logs.log_to_stderr", "writer.ShardWriter",
                 "dataset.WebDataset", "pipeline.DataPipeline", "loader.WebLoader", "tar.iter_members",
                 "codecs.Decoder", "io.gopen", "indexed.IndexedDataset", "training.TrainingLoader", "cli.main"):
        name = f"shardstream.{name}"
        assert f'id="{name}"' in reference, f"{name} is missing from the API reference"
    assert "language-pycon" in reference or 'class="gp">&gt;&gt;&gt;' in reference  # examples shown as code
    # the README became the home page; its links to docs/*.md point at the pages
    home = (site / "index.html").read_text()
    assert 'href="training/"' in home and 'href="docs/' not in home


def test_docstrings_read_as_markdown_on_the_site():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        griffe_doctests = importlib.import_module("griffe_doctests") if importlib.util.find_spec("griffe") else None
    finally:
        sys.path.pop(0)
    if griffe_doctests is None:
        pytest.skip("pip install 'shardstream[docs]'")
    text = "Add::\n\n    >>> 1 + 1\n    2\n\nSee :class:`~shardstream.writer.ShardWriter` and :func:`f`."
    assert griffe_doctests.markdown(text).splitlines() == [
        "Add:", "", "    ```pycon", "    >>> 1 + 1", "    2", "    ```", "", "See `ShardWriter` and `f`."]
