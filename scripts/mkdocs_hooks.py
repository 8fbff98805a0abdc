"""mkdocs hooks (mkdocs.yml ``hooks:``): the README is the site's home page, and links keep working on both sides.

The README links with absolute URLs only (a page: ``https://github.com/shardstream/shardstream/blob/main/docs/X.md``,
an image: ``https://raw.githubusercontent.com/shardstream/shardstream/main/docs/img/X.png``), so it reads right on
GitHub, on PyPI and anywhere else. docs/*.md link to each other with relative paths, and to source files with paths
relative to where they lie in the repository. On the site the README becomes ``index.md``, and each link is
rewritten: a link to a file under ``docs/`` (absolute or relative) becomes a link to that page or image on the site,
so the site is self-contained and ``mkdocs build --strict`` checks every such link (a missing page is left for
mkdocs to report, never turned silently into a link elsewhere); a relative link to any other file of the
repository becomes a link to it in the source repository (``repo_url``).
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
REPO = "https://github.com/shardstream/shardstream"
#: absolute URLs of the repository's files, as the README writes them: pages (blob) and images (raw)
PREFIXES = (f"{REPO}/blob/main/", "https://raw.githubusercontent.com/shardstream/shardstream/main/")
_LINK = re.compile(r"\]\((?!mailto:|#)([^)\s]+)\)")


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(ROOT / "README.md")))
    return files


def _repo_path(page_src_uri: str, docs_dir: str) -> str:
    """Where the page's markdown lies in the repository (``README.md``, ``docs/training.md``...)."""
    if page_src_uri == "index.md":
        return "README.md"
    return posixpath.join(Path(docs_dir).resolve().relative_to(ROOT).as_posix(), page_src_uri)


def repo_target(link: str, here: str) -> str | None:
    """The repository path a link points at (``docs/training.md``), from ``here`` (the linking file's repository
    path); None for a link outside the repository.

    >>> repo_target("https://github.com/shardstream/shardstream/blob/main/docs/faq.md", "README.md")
    'docs/faq.md'
    >>> repo_target("../src/shardstream/errors.py", "docs/configuration.md"), repo_target("https://example.com", "x")
    ('src/shardstream/errors.py', None)
    """
    for prefix in PREFIXES:
        if link.startswith(prefix):
            return link[len(prefix):]
    if re.match(r"^[a-z][a-z0-9+.-]*:", link):
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(here), link))


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    docs = Path(config["docs_dir"]).resolve().relative_to(ROOT).as_posix()
    here = _repo_path(page.file.src_uri, config["docs_dir"])
    from_dir = posixpath.dirname(page.file.src_uri) or "."

    def rewrite(match: re.Match[str]) -> str:
        link, _, anchor = match.group(1).partition("#")
        anchor = f"#{anchor}" if anchor else ""
        path = repo_target(link, here)
        if path is None:
            return match.group(0)
        if path == "README.md":
            site = "index.md"
        elif path.startswith(docs + "/"):
            site = path[len(docs) + 1:]
        elif link.startswith(PREFIXES):
            return match.group(0)  # already a link into the source repository
        else:  # a file that is not a page: link to it in the source repository
            return f"]({config['repo_url'].rstrip('/')}/blob/main/{path}{anchor})"
        return f"]({posixpath.relpath(site, from_dir)}{anchor})"

    return _LINK.sub(rewrite, markdown)
