"""webdataset 1.0.2's public surface, walked from its source, and the rule for a compatible signature.

A *public name* of a webdataset module is a name, without a leading underscore, that the module defines (a
``def``, ``class`` or top-level assignment) or imports from webdataset itself; names it imports from the standard
library or third parties (``partial``, ``Popen``, ``IterableDataset``...) are not its surface. Public methods of
public classes count too (``DataPipeline.stage``, ``WebDataset.close``).

A shardstream callable is *compatible* when every call webdataset accepts by position or by name binds: each
webdataset parameter is accepted under the same name (and, if webdataset allows it positionally, at the same
position), or absorbed by ``*args``/``**kwargs``; and shardstream requires nothing webdataset does not.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from collections.abc import Iterator

#: webdataset modules whose surface shardstream mirrors, at ``shardstream.<same path>``
MODULES = ["", "autodecode", "cache", "gopen", "utils", "filters", "shardlists", "tariterators", "handlers",
           "writer", "mix", "tenbin"]


def _own_names(module: types.ModuleType) -> list[str]:
    """Names a module defines or imports from its own package, in source order."""
    tree = ast.parse(inspect.getsource(module))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("webdataset")):
            names += [a.asname or a.name for a in node.names]
    seen: dict[str, None] = {}
    for name in names:
        if not name.startswith("_") and name != "*" and hasattr(module, name):
            if not isinstance(getattr(module, name), types.ModuleType) or module.__name__ == "webdataset":
                seen.setdefault(name)
    return list(seen)


def surface() -> Iterator[tuple[str, object]]:
    """``("autodecode.ImageHandler", obj)``, ``("DataPipeline.stage", fn)``... for every public name."""
    for sub in MODULES:
        module = importlib.import_module("webdataset" + ("." + sub if sub else ""))
        prefix = sub + "." if sub else ""
        for name in _own_names(module):
            value = getattr(module, name)
            yield prefix + name, value
            if isinstance(value, type) and value.__module__.startswith("webdataset"):
                for attr, member in vars(value).items():
                    if not attr.startswith("_") and callable(member):
                        yield f"{prefix}{name}.{attr}", member


def resolve(path: str, root: object) -> object:
    """``resolve("autodecode.ImageHandler", shardstream)`` -> the attribute (AttributeError if missing).

    The first part names a webdataset submodule when it is one of :data:`MODULES`: it is imported as users do
    (``import shardstream.gopen``), since the package attribute of the same name may be a function (``gopen``).
    """
    first, _, rest = path.partition(".")
    if rest and first in MODULES:
        value = importlib.import_module(f"{root.__name__}.{first}")  # type: ignore[attr-defined]
        path = rest
    else:
        value = root
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _signature(obj: object) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _wds_signature(obj: object) -> inspect.Signature | None:
    """The signature users call: a ``pipelinefilter`` stage (``RestCurried``) is called without its data."""
    if type(obj).__name__ == "RestCurried":
        sig = _signature(obj.f)  # type: ignore[attr-defined]
        return sig.replace(parameters=list(sig.parameters.values())[1:]) if sig else None
    return _signature(obj)


def incompatibility(wds_obj: object, ours: object) -> str | None:
    """Why ``ours`` cannot stand in for ``wds_obj`` (None when it can).

    Every webdataset parameter that can be passed by position must be accepted at that position; every one with
    a default (an option, usually passed by name) or keyword-only must be accepted under its name; ours must not
    require more. Required positional parameters may be named differently (users pass them by position).
    """
    if isinstance(wds_obj, types.ModuleType):
        return None if isinstance(ours, types.ModuleType) else "is not a module"
    if not callable(wds_obj):
        return None
    if not callable(ours):
        return "is not callable"
    theirs, mine = _wds_signature(wds_obj), _signature(ours)
    if theirs is None or mine is None:
        return None
    mp = list(mine.parameters.values())
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in mp)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in mp)
    positional = [p for p in mp if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name for p in mp if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    problems, covered = [], set()
    for i, p in enumerate(theirs.parameters.values()):
        if p.kind == p.VAR_KEYWORD:
            continue
        if p.kind == p.VAR_POSITIONAL:
            if not var_pos:
                problems.append(f"*{p.name} not accepted")
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if i < len(positional):
                covered.add(positional[i].name)
                if p.name != positional[i].name and p.default is not p.empty and p.name not in by_name:
                    problems.append(f"{p.name} (position {i} is {positional[i].name!r})")
            elif not var_pos:
                problems.append(f"{p.name} (not accepted at position {i})")
        if (p.kind == p.KEYWORD_ONLY or p.default is not p.empty) and p.name not in by_name and not var_kw:
            if p.kind == p.KEYWORD_ONLY or not problems or not problems[-1].startswith(p.name):
                problems.append(f"{p.name}= (not accepted by name)")
        covered.add(p.name)
    required = [p.name for p in mp if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and p.name not in covered]
    if required:
        problems.append(f"requires {', '.join(required)} which webdataset does not")
    return "; ".join(problems) or None
