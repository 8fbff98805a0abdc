"""Reading a spec file: YAML (which includes JSON) with PyYAML's safe loader, within limits.

``yaml.safe_load`` builds no objects, but a few hundred bytes of anchors and aliases (``&a [*b, *b, ...]``, each
level referring to the one before) make a value of billions of items (shared, so cheap to load, but not to walk
or print), and a deep nesting (``[[[[...``) exhausts the interpreter's stack. The loader here refuses both with a
:class:`~shardstream.errors.ConfigError` before any value is built: nesting deeper than :data:`MAX_DEPTH` levels,
aliases that stand for more than :data:`MAX_ALIAS_NODES` nodes in all, and an alias inside its own anchor. A file
that is not UTF-8 (or UTF-16 with a BOM, as YAML allows) is a ConfigError too.

>>> read_text("sources: [{shards: a.tar}]", "spec.yaml")
{'sources': [{'shards': 'a.tar'}]}
>>> try:
...     read_text("a: &a [x, x]\\nb: &b [*a, *a]\\nc: [*b, *b]", "spec.yaml", max_alias_nodes=10)
... except ValueError as e:  # a ConfigError
...     print(str(e)[:66])
spec.yaml: its aliases (*name) stand for more than 10 nodes in all
"""

from __future__ import annotations

import codecs
from typing import IO, Any

from ..errors import ConfigError
from ..redact import parse_problem

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "read_file", "read_text"]

#: the deepest nesting of a spec (sources: - storage: headers: is 4)
MAX_DEPTH = 64
#: the most nodes that the aliases of a spec may stand for, all together (a spec needs a few)
MAX_ALIAS_NODES = 100_000


def _loader(stream: IO[bytes] | str, document: str, max_depth: int, max_alias_nodes: int) -> Any:
    import yaml  # noqa: PLC0415 - PyYAML loads only for spec files

    class Loader(yaml.SafeLoader):
        """The safe loader (pure Python: its composer can be watched) that counts nesting and alias expansion."""

        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.depth >= max_depth:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{document}: nested deeper than {max_depth} levels (line {mark.line + 1}); "
                                  "a dataset spec needs a few")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def compose_document(self) -> Any:
            node = super().compose_document()
            _check_aliases(node, document, max_depth, max_alias_nodes)
            return node

    return Loader(stream)


def _check_aliases(root: Any, document: str, max_depth: int, max_alias_nodes: int) -> None:
    """Refuse a node graph whose aliases stand for more than ``max_alias_nodes`` nodes (the expanded tree less the
    nodes written), go deeper than ``max_depth`` once expanded, or contain themselves. Iterative: no recursion."""
    import yaml  # noqa: PLC0415 - PyYAML loads only for spec files

    size: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes of its expanded tree, its expanded depth)
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = [] if isinstance(node, yaml.ScalarNode) else (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value))
        if done:
            open_.discard(key)
            total = 1 + sum(size[id(c)][0] for c in children)
            depth = 1 + max((size[id(c)][1] for c in children), default=0)
            if total - len(size) > max_alias_nodes:
                raise ConfigError(f"{document}: its aliases (*name) stand for more than {max_alias_nodes} nodes in "
                                  "all (an alias bomb?); write the values out, or use fewer aliases")
            if depth > max_depth:
                raise ConfigError(f"{document}: its aliases (*name) nest values deeper than {max_depth} levels")
            size[key] = (total, depth)
            continue
        if key in size:
            continue
        if key in open_:
            raise ConfigError(f"{document}: an alias (*name) inside its own anchor (&name) makes a value that "
                              "contains itself")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def read_text(text: str | bytes, document: str, *, max_depth: int = MAX_DEPTH,
              max_alias_nodes: int = MAX_ALIAS_NODES) -> Any:
    """The value of the YAML/JSON ``text`` (bytes: UTF-8, or UTF-16 with a BOM) of the spec ``document``."""
    import yaml  # noqa: PLC0415 - PyYAML loads only for spec files

    if isinstance(text, bytes) and not text.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ConfigError(f"the dataset spec {document!r} is not UTF-8 text (byte {e.start}: {e.reason}); save "
                              "it as UTF-8") from e
    loader = None
    try:
        loader = _loader(text, document, max_depth, max_alias_nodes)  # type: ignore[arg-type]  # reads the start
        return loader.get_single_data()
    except yaml.YAMLError as e:
        raise ConfigError(f"the dataset spec {document!r} is not valid YAML/JSON: {parse_problem(e)}") from None
    except RecursionError as e:  # pragma: no cover - the depth limit comes first
        raise ConfigError(f"the dataset spec {document!r} is nested too deeply") from e
    finally:
        if loader is not None:
            loader.dispose()


def read_file(path: str) -> Any:
    """The value of the spec file ``path`` (see :func:`read_text`)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read the dataset specification {path!r}: {e.strerror or e}") from e
    return read_text(data, path)
