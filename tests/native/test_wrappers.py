"""Only the wrapper modules reach the C extension: no module under ``src/shardstream`` but those of
:data:`shardstream._native.WRAPPERS` (and ``_native`` itself) imports ``shardstream._native`` or its ``_scan``, at
module level or inside a function. The AST of every module is read, so a new import anywhere fails here."""

from __future__ import annotations

import pathlib

import pytest

from import_graph import SRC, import_statements, module_name
from shardstream import _native


def native_imports(path: pathlib.Path, name: str | None = None) -> list[str]:
    """What ``path`` (the module ``name``) imports of ``shardstream._native`` (the package, ``_scan``, or a name from
    them)."""
    found = []
    for line, module, names in import_statements(path, name):
        targets = [module, *(f"{module}.{n}" for n in names)]
        found += [f"{line}: {t}" for t in targets if t == "shardstream._native" or
                  t.startswith("shardstream._native.") or t.rsplit(".", 1)[-1] == "_scan"]
    return found


def test_only_the_wrappers_import_the_extension():
    outside = {}
    for path in sorted(SRC.rglob("*.py")):
        name = module_name(path)
        if name == "shardstream._native" or name.startswith("shardstream._native.") or name in _native.WRAPPERS:
            continue
        if found := native_imports(path):
            outside[name] = found
    assert outside == {}, f"only the wrappers in shardstream._native.WRAPPERS may reach the extension: {outside}"


@pytest.mark.parametrize("wrapper", _native.WRAPPERS)
def test_each_wrapper_exists_and_reaches_the_extension(wrapper):
    path = SRC.joinpath(*wrapper.split(".")[1:]).with_suffix(".py")
    assert path.is_file(), wrapper
    assert native_imports(path), f"{wrapper} is listed as a wrapper but does not reach the extension"


def test_the_checker_sees_every_form_of_import(tmp_path):
    forms = ["from .. import _native", "from .._native import _scan", "import shardstream._native._scan",
             "from shardstream._native import extension", "from . import _scan"]
    for form in forms:
        path = tmp_path / "m.py"
        path.write_text(f"def f():\n    {form}\n")
        assert native_imports(path, "shardstream.pkg.m"), form
    path.write_text("from ..tar import reader\nfrom . import native_like\nimport shardstream.native\n")
    assert native_imports(path, "shardstream.pkg.m") == []
