"""Guard rails: ``ruff check src`` has no findings ([tool.ruff] in pyproject.toml), and a function-local import
(allowed only for optional or heavy third-party packages) says why it is late.
"""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

import shardstream

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = pathlib.Path(shardstream.__file__).parent


def ruff() -> str:
    found = shutil.which("ruff", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it is in the `test` extra: pip install -e '.[test]')")
    return found


def test_ruff_finds_nothing_in_src():
    result = subprocess.run([ruff(), "check", "--no-cache", "--output-format", "concise", str(SRC)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_would_catch_an_undefined_name_and_a_lazy_own_import(tmp_path):
    """The configuration is the one in pyproject.toml, and it bites (run on a file outside the package)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from shardstream import errors\n\n    return errors, Mapping\n")
    result = subprocess.run([ruff(), "check", "--no-cache", "--output-format", "concise", "--config",
                             str(ROOT / "pyproject.toml"), str(bad)], capture_output=True, text=True)
    assert "F821" in result.stdout and "PLC0415" in result.stdout, result.stdout + result.stderr


def late_imports(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """``(line, imported module, the line's text)`` for every import inside a function of ``path``."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                found += [(node.lineno, alias.name, lines[node.lineno - 1]) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.lineno, "." * node.level + (node.module or ""), lines[node.lineno - 1]))
    return found


def test_late_imports_are_third_party_and_say_why():
    """PLC0415 is waived line by line, only for another package, and with a reason: ``# noqa: PLC0415 - why``.
    The one exception is the top of the house: a CLI command may defer a heavy part of the package that one of its
    options needs (start-up time of every other command), with its reason."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        for line, module, text in late_imports(path):
            where = f"{path.relative_to(SRC)}:{line}"
            in_cli = path.relative_to(SRC).parts[0] == "cli"
            if module.startswith((".", "shardstream")) and not (in_cli and "PLC0415 - " in text):
                bad.append(f"{where} imports the package's own {module} late: import it at the top")
            elif "PLC0415 - " not in text:
                bad.append(f"{where} imports {module} late without `# noqa: PLC0415 - <why>`")
    assert bad == [], "\n".join(bad)


def test_mypy_finds_nothing_in_src():
    """mypy over src/ ([tool.mypy] in pyproject.toml) has zero errors (it had 121 when it was first configured)."""
    pytest.importorskip("mypy", reason="mypy is not installed (it is in the `test` extra)")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"),
                             "--config-file", str(ROOT / "pyproject.toml"), str(SRC)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
