"""Heavy modules loaded on first use, so that ``import shardstream`` and ``from shardstream import WebDataset`` stay
light (tests/test_import_cost.py pins which modules a bare import must not load).

A module that needs numpy everywhere but not at import writes::

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = lazy_module("numpy")

and uses ``np`` as usual: the first attribute looked up imports numpy (each lookup then costs one more call than
a module's). Type checkers see the real module.

>>> import sys
>>> colorsys = LazyModule("colorsys")  # what lazy_module("colorsys") gives while colorsys is not imported
>>> colorsys
<module 'colorsys' (loaded on first use)>
>>> colorsys.rgb_to_hsv(1.0, 0.0, 0.0)
(0.0, 1.0, 1.0)
>>> "colorsys" in sys.modules, lazy_module("colorsys") is sys.modules["colorsys"]
(True, True)
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["LazyModule", "lazy_module"]


class LazyModule:
    """A stand-in for the module ``name``, imported when one of its names is first looked up; every lookup,
    assignment and deletion then goes to the module itself (patching the module or the stand-in is the same).

    Double-underscore names (``__wrapped__``, ``__path__``...) asked before the module is loaded are
    ``AttributeError`` without loading it: introspection (doctest, inspect) does not pay for the import.
    """

    __slots__ = ("_lazy_name", "_lazy_module")

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_lazy_name", name)
        object.__setattr__(self, "_lazy_module", None)

    def _load(self) -> Any:
        if self._lazy_module is None:
            object.__setattr__(self, "_lazy_module", importlib.import_module(self._lazy_name))
        return self._lazy_module

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        """The module's namespace (what ``vars()`` and ``monkeypatch`` read)."""
        return vars(self._load())

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__") and self._lazy_module is None:
            raise AttributeError(attr)
        return getattr(self._load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._load(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<module {self._lazy_name!r} (loaded on first use)>"


def lazy_module(name: str) -> Any:
    """A :class:`LazyModule` for ``name``, or the module itself when something has imported it already."""
    module = sys.modules.get(name)
    return module if module is not None else LazyModule(name)
