"""mkdocs hooks (mkdocs.yml ``hooks:``): the README is the site's home page, and links keep working on both sides.

The README and docs/*.md link to each other and to source files with paths relative to where they lie in the
repository (what GitHub and PyPI show). On the site the README becomes ``index.md`` inside the docs directory,
so each relative link is resolved against the page's place in the repository and rewritten: to the page that
file became on the site, or to the file in the source repository (``repo_url``) when it is not a page.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(ROOT / "README.md")))
    return files


def _repo_path(page_src_uri: str, docs_dir: str) -> str:
    """Where the page's markdown lies in the repository (``README.md``, ``docs/training.md``...)."""
    if page_src_uri == "index.md":
        return "README.md"
    return posixpath.join(Path(docs_dir).resolve().relative_to(ROOT).as_posix(), page_src_uri)


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    docs = Path(config["docs_dir"]).resolve().relative_to(ROOT).as_posix()
    here = _repo_path(page.file.src_uri, config["docs_dir"])

    def rewrite(match: re.Match[str]) -> str:
        target, _, anchor = match.group(1).partition("#")
        anchor = f"#{anchor}" if anchor else ""
        path = posixpath.normpath(posixpath.join(posixpath.dirname(here), target))
        if path == "README.md":
            site = "index.md"
        elif path.startswith(docs + "/") and files.get_file_from_path(path[len(docs) + 1:]) is not None:
            site = path[len(docs) + 1:]
        else:  # a file that is not a page: link to it in the source repository
            return f"]({config['repo_url'].rstrip('/')}/blob/main/{path}{anchor})"
        return f"]({posixpath.relpath(site, posixpath.dirname(page.file.src_uri) or '.')}{anchor})"

    return _LINK.sub(rewrite, markdown)
