"""The home of the optional C accelerator, ``shardstream._native._scan``: its sources, and the one place that loads it.

The extension is built at install time when a compiler is there (``setup.py``); without it every caller takes the
pure-Python path, with the same results. Nothing else in the package imports it: each layer reaches it through one
thin wrapper module of its own, which hands out a C function (or None) for the switch in force *now*
(:data:`shardstream.tar.reader.USE_ACCELERATOR`, on unless ``SHARDSTREAM_NO_EXTENSIONS`` was set):

- :mod:`shardstream.tar.accel`: the header walk (``scan``), the writer's packing (``pack_members``) and the walk's
  prefetch distance (``PREFETCH_AHEAD``);
- :mod:`shardstream.reading_accel`: the grouping into sample dicts and into columns (``scan_samples``,
  ``scan_columns``, ``stored_keys``, ``MAX_WANTED``), used by :mod:`shardstream.reading` and the fused stage;
- :mod:`shardstream.order.permute`: :class:`~shardstream.order.Permutation` in C (``permute_positions``);
- :mod:`shardstream.indexed.opened`: the batch read of indexed shards (``gather_samples``, one
  :class:`~shardstream.indexed.opened.ShardTable` per shard);
- :mod:`shardstream.indexed.columns`: one column sliced out of a memory map (``slice_column``);
- :mod:`shardstream.pipeline.bases`: the iterators' base types ``Chunks``, ``Tally`` and ``Relay`` (``HOOKS``: the
  methods they call on their subclasses) and the int packer of batching (``fill_int64``).

``tests/native/test_twins.py`` maps every name the extension exports to its Python twin and to the test that
compares the two; ``tests/native/test_wrappers.py`` checks that no module but those of :data:`WRAPPERS` imports
this package.

>>> extension is None or extension.__name__ == "shardstream._native._scan"
True
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["WRAPPERS", "extension"]

#: The modules that reach the extension (each imports this package; no other module does): one per layer.
WRAPPERS = (
    "shardstream.indexed.columns",
    "shardstream.indexed.opened",
    "shardstream.order.permute",
    "shardstream.pipeline.bases",
    "shardstream.reading_accel",
    "shardstream.tar.accel",
)


try:
    from . import _scan as _built
except ImportError:  # the extension is optional: not built, or no compiler at install time
    _built = None  # type: ignore[assignment]

#: The loaded C extension, or None when it is not built. Loaded once, at import; the wrappers read this attribute
#: at each call (tests set it to None to take the Python paths).
extension: ModuleType | None = _built
