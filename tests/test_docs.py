"""Every code example in the README, the docs and the docstrings runs, and the documentation site builds.

- ```python blocks of README.md and docs/**/*.md run in order, one namespace per file, in a fresh temp directory.
  The blocks after a ``<!-- needs: s3 -->`` line need an S3 store: tests/io/test_docs_on_s3.py runs the whole page
  with the suite's RadosGW.
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


def blocks(path: pathlib.Path, lang: str, *, services: bool = False) -> list[str]:
    """The page's blocks of ``lang``, in order; without ``services``, only those before a ``needs`` line."""
    text = path.read_text()
    needs = NEEDS.search(text)
    if needs and not services:
        text = text[:needs.start()]
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def with_blocks(lang: str) -> list[pathlib.Path]:
    return [path for path in DOCS if blocks(path, lang)]


def test_every_example_is_python_or_console():
    """A fenced block of another kind, or without one, would not run: every opening fence names python, console
    or text."""
    other = []
    for path in DOCS:
        fences = [line[3:].strip() for line in path.read_text().splitlines() if line.startswith("```")]
        other += [(path.name, kind or "(none)") for kind in fences[::2] if kind not in {"python", "console", *SHOWN}]
    assert other == []


@pytest.mark.parametrize("path", with_blocks("python"), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(path, tmp_path, monkeypatch):
    code = blocks(path, "python")
    if not code:
        pytest.skip(f"{path.name} has no python examples")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for i, body in enumerate(code):
        try:
            exec(compile(body, f"{path.name}[python block {i}]", "exec"), namespace)
        except Exception as e:  # pragma: no cover - failure path
            raise AssertionError(f"{path.name} python block {i} failed:\n{body}") from e


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
