"""The layer rule of docs/architecture.md ("Layers"): imports flow downward only; a lower floor never imports a
higher one.

Every import in the package (at module level or inside a function) is checked against the floors below.
Siblings on one floor may import each other. ``shardstream/__init__.py`` (lazy re-exports) is exempt.
"""

from __future__ import annotations

import ast
import pathlib

import shardstream
from import_graph import SRC, import_statements, imported_module, module_name, package_of

#: the top-level modules that exist for webdataset's module paths (``_WEBDATASET_MODULES``, but for packages)
WEBDATASET_PATHS = {name for name in shardstream._WEBDATASET_MODULES if (SRC / f"{name}.py").is_file()}

#: lowest first; a module may import modules of its own floor or lower ones
FLOORS = [
    {"errors", "config", "_settings", "logs", "redact", "_lazy"},
    {"_native"},  # the C accelerator's home: its loader; each layer reaches it through its own wrapper
    {"tar"},
    {"samples", "reading", "reading_accel", "streams"},
    {"codecs"},
    {"io"},
    {"writer", "interleaved"},
    {"runtime", "order", "resume"},
    {"pipeline"},
    {"dataset", "compat", "indexed", "join", "spec"},
    # webdataset's module paths (`shardstream.autodecode`, `shardstream.cache`...): thin modules over the floors below,
    # from their one table (`writer`, also a webdataset path, is shardstream's own package, on its floor above)
    WEBDATASET_PATHS,
    {"process"},
    {"convert"},
    {"loader"},
    {"training"},
    {"cluster"},  # training batches made on a Dask cluster
    {"testing"},
    {"cli", "viewer", "demo", "__main__"},
]
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}


def top_part(module: str) -> str:
    """``shardstream.tar.reader`` -> ``tar``."""
    return module.split(".")[1] if module.startswith("shardstream.") else ""


def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    """The package's modules that ``path`` imports: ``from shardstream import x`` counts as the floor of ``x``."""
    found = []
    for line, module, names in import_statements(path):
        if module == "shardstream" and names:  # `from shardstream import x` / `from .. import x`: x is the floor
            found += [(line, f"shardstream.{name}") for name in names]
        elif module.startswith("shardstream."):
            found.append((line, module))
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


def test_the_webdataset_paths_are_imported_by_nothing_else():
    """webdataset's module paths are for webdataset's users: the package itself (but for ``__init__``'s lazy names
    and the paths among themselves) imports what they re-export from its home, never the path."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "__init__.py" or (path.parent == SRC and path.stem in WEBDATASET_PATHS):
            continue
        found += [f"{path.relative_to(SRC)}:{line} imports {target}" for line, target in imports_of(path)
                  if target.split(".")[1:2] and target.split(".")[1] in WEBDATASET_PATHS]
    assert found == [], "\n".join(found)


def module_level_imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports when it is imported: module-level statements only (not inside
    functions, not under ``if TYPE_CHECKING:``); ``from pkg import name`` counts ``pkg.name`` when that is a module."""
    name = module_name(path)
    package = package_of(path, name)
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = imported_module(node, package)
                if base in modules:
                    found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules)

    visit(ast.parse(path.read_text()).body)
    found.discard(name)
    return found


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (``[a, b, ..., a]``), or None: a depth-first search for a back edge."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (circle := dfs(target)) is not None:
                return circle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (circle := dfs(start)) is not None:
            return circle
    return None


def import_graph() -> dict[str, set[str]]:
    paths = sorted(SRC.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): module_level_imports(p, modules) for p in paths}


def test_the_circle_finder_finds_circles():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None
    assert find_circle({"x": {"x2"}, "x2": {"y"}, "y": {"x2"}}) == ["x2", "y", "x2"]


def test_the_import_graph_sees_relative_imports_and_skips_type_checking():
    graph = import_graph()
    assert "shardstream.pipeline.core" in graph["shardstream.pipeline.datapipeline"]
    assert "shardstream.errors" in graph["shardstream.io.registry"]
    assert "shardstream.dataset" not in graph["shardstream"]  # lazy, and only under TYPE_CHECKING


def test_no_import_circles_inside_the_package():
    """A module-level import circle (packages included: an ``__init__`` importing its modules counts)."""
    graph = import_graph()
    # a package imports its submodules through its __init__; a submodule importing its own package's __init__ is
    # the usual way to reach siblings and not a circle by itself: drop edges from a module to its own ancestors
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    assert find_circle(graph) is None, " -> ".join(find_circle(graph) or [])
