"""What a module of the package imports, read from its AST: THE resolver of relative imports for the tests that
police imports (tests/test_layers.py, tests/native/test_wrappers.py)."""

from __future__ import annotations

import ast
import pathlib

import shardstream

SRC = pathlib.Path(shardstream.__file__).parent


def module_name(path: pathlib.Path) -> str:
    """``src/shardstream/io/http.py`` -> ``shardstream.io.http`` (a package's ``__init__.py``: the package)."""
    parts = ("shardstream",) + path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: pathlib.Path, name: str | None = None) -> list[tuple[int, str, list[str]]]:
    """Every import statement of ``path`` (the module ``name``), anywhere in it (also inside functions):
    ``(line, module, names)``, the module resolved when relative; ``names`` are those of ``from M import a, b``
    (empty for ``import M``, which gives one entry per module)."""
    package = package_of(path, name)
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, imported_module(node, package), [alias.name for alias in node.names]))
    return found


def package_of(path: pathlib.Path, name: str | None = None) -> str:
    """The package that relative imports in ``path`` (the module ``name``) start from."""
    name = module_name(path) if name is None else name
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def imported_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` statement in ``package`` names, resolved when relative."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    return ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
