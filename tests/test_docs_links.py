"""The README reads right wherever it is shown (GitHub, PyPI, a mirror), and the site lists each page once.

- README.md links with absolute URLs only, and each one into this repository names a file that exists
  (``https://github.com/shardstream/shardstream/blob/main/PATH``, ``https://raw.githubusercontent.com/...``);
  on the site, scripts/mkdocs_hooks.py rewrites them to the site's own pages, where ``mkdocs build --strict``
  checks them again (tests/test_docs.py).
- The README is a front page: at most 250 lines.
- docs/*.md link with relative paths to files that exist.
- mkdocs.yml's nav lists every page once.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FRONT_PAGE_LINES = 250
#: inline links and images ``[text](target)`` / ``![alt](target)``, and reference definitions ``[id]: target``
_INLINE = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _hooks():
    spec = importlib.util.spec_from_file_location("_mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:  # mkdocs not installed: the constants are read from the text
        pytest.skip("pip install 'shardstream[docs]'")
    return module


def links(path: pathlib.Path) -> list[str]:
    """Every link target of a markdown file, outside fenced code blocks."""
    text = _FENCE.sub("", path.read_text())
    return _INLINE.findall(text) + _REFERENCE.findall(text)


def test_the_readme_links_with_absolute_urls_only():
    relative = [t for t in links(README) if not re.match(r"^(https?:|mailto:|#)", t)]
    assert relative == [], f"README.md must link with absolute URLs (it is shown outside the repository): {relative}"


def test_the_readmes_links_into_the_repository_exist():
    hooks = _hooks()
    missing = []
    for target in links(README):
        path = hooks.repo_target(target.partition("#")[0], "README.md")
        if path is None or (ROOT / path).exists():
            continue
        missing.append(target)
    assert missing == [], f"README.md links to files that do not exist: {missing}"
    assert any(t.startswith(hooks.PREFIXES[1]) for t in links(README)), "the README shows a screenshot"


def test_the_readme_is_a_front_page():
    lines = len(README.read_text().splitlines())
    assert lines <= FRONT_PAGE_LINES, f"README.md has {lines} lines; move sections into docs/ (at most 250)"


def test_the_pages_link_to_files_that_exist():
    hooks = _hooks()
    broken = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        here = page.relative_to(ROOT).as_posix()
        for target in links(page):
            path = hooks.repo_target(target.partition("#")[0], here) if target.partition("#")[0] else None
            if path is None or target.startswith(hooks.PREFIXES) or (ROOT / path).exists():
                continue
            broken.append(f"{here}: {target}")
    assert broken == []


def test_the_nav_lists_each_page_once():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    listed = list(pages(config["nav"]))
    assert sorted({p for p in listed if listed.count(p) > 1}) == []
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(on_disk - set(listed)) == [], "pages missing from mkdocs.yml's nav"
