"""The house rule from STYLE.md: imports flow downward only; a lower floor never imports a higher one.

Every import in the package (at module level or inside a function) is checked against the floors below.
Siblings on one floor may import each other. ``shardstream/__init__.py`` (lazy re-exports) is exempt.
"""

from __future__ import annotations

import ast
import pathlib

import shardstream

SRC = pathlib.Path(shardstream.__file__).parent

#: lowest first; a module may import modules of its own floor or lower ones
FLOORS = [
    {"errors", "config", "logs"},
    {"tar"},
    {"samples", "reading", "streams"},
    {"codecs"},
    {"io"},
    {"writer", "interleaved"},
    {"runtime", "order"},
    {"pipeline"},
    {"dataset", "compat", "indexed", "join", "spec"},
    # webdataset's module paths (`shardstream.autodecode`, `shardstream.cache`...): thin modules over the floors below
    {"autodecode", "cache", "filters", "gopen", "handlers", "mix", "shardlists", "tariterators", "tenbin", "utils"},
    {"process"},
    {"convert"},
    {"loader"},
    {"training"},
    {"testing"},
    {"cli", "viewer", "demo", "__main__"},
]
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}


def top_part(module: str) -> str:
    """``shardstream.tar.reader`` -> ``tar``."""
    return module.split(".")[1] if module.startswith("shardstream.") else ""


def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    package = "shardstream." + ".".join(path.relative_to(SRC).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0]
    base = package if path.name == "__init__.py" else package.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("shardstream.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "shardstream":  # `from shardstream import x` / `from .. import x`: x is the floor
                found += [(node.lineno, f"shardstream.{alias.name}") for alias in node.names]
            elif target.startswith("shardstream."):
                found.append((node.lineno, target))
    return found


def test_every_top_level_module_has_a_floor():
    names = {p.stem if p.is_file() else p.name for p in SRC.iterdir() if (p.suffix == ".py" or p.is_dir())}
    names -= {"__init__", "__pycache__"}
    assert names <= set(FLOOR), f"add these to FLOORS: {sorted(names - set(FLOOR))}"


def test_imports_flow_downward_only():
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "__init__.py":
            continue
        own = path.relative_to(SRC).parts[0].removesuffix(".py")
        for line, target in imports_of(path):
            other = top_part(target)
            if other in FLOOR and FLOOR[other] > FLOOR[own]:
                violations.append(f"{path.relative_to(SRC)}:{line} ({own}) imports {target} ({other})")
    assert violations == [], "lower floors import higher ones:\n" + "\n".join(violations)
