"""A Griffe extension for the API reference (mkdocs.yml): the docstrings' reST habits, read as Markdown.

- Doctest examples (``>>>`` lines and their output, run by tests/test_docs.py) have no Markdown fences; their
  output would read as text or links. Each run of doctest lines (a ``>>>`` line up to the next blank line) is
  wrapped in a ``pycon`` fence at its own indentation.
- Sphinx roles (``:class:`X```, ``:func:`~a.b.f```) become code spans (``X``, ``f``).
- A paragraph ending in ``::`` (a reST literal block follows, indented) ends in ``:``; Markdown shows the
  indented block as code too.
"""
from __future__ import annotations

import re
from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """Each run of doctest lines (``>>>`` up to a blank line) between ```` ```pycon ```` / ```` ``` ```` fences."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`~?([^`]+)`")


def markdown(text: str) -> str:
    """A docstring as Markdown.

    >>> markdown("See :func:`~shardstream.tar.iter_members`, e.g.::")
    'See `iter_members`, e.g.:'
    """
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1] if m.group(0).count('~') else m.group(1)}`", text)
    text = re.sub(r"(?m)(\S)::$", r"\1:", text)
    return fence_doctests(text)


class DoctestsAsCode(griffe.Extension):
    """Every docstring as Markdown (:func:`markdown`) before it is rendered."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
