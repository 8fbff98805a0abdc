"""webdataset's module paths are one set, from one table: ``shardstream._WEBDATASET_MODULES``.

``import shardstream.filters`` works where webdataset code has ``import webdataset.filters``. The top-level modules
that exist for that reason (all of the table but ``writer``, shardstream's own package) say so on their first line,
hold webdataset's names only (no shardstream API lives only there), and are the only modules of the package that
do no more than re-export. tests/test_layers.py checks that nothing else in the package imports them.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import shardstream

SRC = pathlib.Path(shardstream.__file__).parent
#: the table's modules that are files at the top (``writer`` is a package: shardstream's TarWriter/ShardWriter)
PATHS = sorted(name for name in shardstream._WEBDATASET_MODULES if (SRC / f"{name}.py").is_file())


def _own_names(path: pathlib.Path) -> list[str]:
    """The public names a module defines itself (``def``, ``class``, assignment), not those it imports."""
    names: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_")]


def _declares_a_path(path: pathlib.Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.startswith(f"webdataset's ``{path.stem}`` module")


def test_the_table_is_the_set_of_modules_that_declare_a_webdataset_path():
    declaring = sorted(p.stem for p in SRC.glob("*.py") if _declares_a_path(p))
    assert declaring == PATHS
    assert (SRC / "writer" / "__init__.py").is_file() and "writer" in shardstream._WEBDATASET_MODULES


@pytest.mark.parametrize("name", shardstream._WEBDATASET_MODULES)
def test_each_path_imports_as_in_webdataset(name):
    module = importlib.import_module(f"shardstream.{name}")
    assert module.__name__ == f"shardstream.{name}"
    if name in shardstream._PIPELINE_MODULES:  # `wds.filters.map`; `wds.gopen` is the function, as in webdataset
        assert getattr(shardstream, name) is module


@pytest.mark.parametrize("name", PATHS)
def test_each_path_holds_webdataset_names_only(name):
    """Its ``__all__`` and every public name it defines are names of webdataset's module of the same path."""
    webdataset_module = importlib.import_module(f"{pytest.importorskip('webdataset').__name__}.{name}")
    module = importlib.import_module(f"shardstream.{name}")
    foreign = [n for n in [*module.__all__, *_own_names(SRC / f"{name}.py")] if not hasattr(webdataset_module, n)]
    assert foreign == [], f"shardstream.{name} holds names webdataset.{name} lacks: give them a home of their own"


def _only_reexports(path: pathlib.Path) -> bool:
    """A module whose body is its docstring, imports, ``__all__`` and ``if TYPE_CHECKING:`` blocks."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        return False
    return True


def test_no_module_but_a_webdataset_path_is_only_a_reexport():
    """A module kept alive for an old import path is deleted, not kept (a package's ``__init__`` may re-export)."""
    shims = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                   if p.name not in ("__init__.py", "__main__.py") and _only_reexports(p)
                   and not (p.parent == SRC and p.stem in PATHS))
    assert shims == []


def test_the_reexport_check_sees_a_shim(tmp_path):
    shim = tmp_path / "old.py"
    shim.write_text('"""Moved."""\n\nfrom .new import thing\n\n__all__ = ["thing"]\n')
    real = tmp_path / "real.py"
    real.write_text('"""Real."""\n\nfrom .new import thing\n\nTHING = thing()\n')
    assert _only_reexports(shim) and not _only_reexports(real)
