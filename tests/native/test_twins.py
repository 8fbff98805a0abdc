"""Every name the C extension exports has a Python twin and a test that compares the two: the table :data:`TWINS`.

The extension (``shardstream._native._scan``) only makes faster what Python defines; each of its entry points has a
twin in Python that gives the same results (the path taken without the extension), and a differential test that runs
both on the same input. A new C entry point without a row here fails :func:`test_every_c_entry_point_has_a_row`
(read from the C sources, and from the built module when there is one); a row naming a twin or a test that does not
exist fails the tests below. :data:`LOOPS` holds the same for pairs of Python loops that must agree.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

from shardstream import _native
from shardstream.pipeline import bases

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOME = ROOT / "src" / "shardstream" / "_native"

#: C entry point -> (its Python twins as ``module:qualname``, the differential test as ``path::function``)
TWINS: dict[str, tuple[tuple[str, ...], str]] = {
    # the tar layer (shardstream.tar.accel)
    "scan": (("shardstream.tar.reader:walk",),
             "tests/tar/test_scan_walk.py::test_size_in_the_writer_form_reads_as_python_does"),
    "pack_members": (("shardstream.tar.writer:TarStreamWriter.add_many",),
                     "tests/test_writer.py::test_c_member_packer_writes_the_bytes_of_the_python_loop"),
    "PREFETCH_AHEAD": (("shardstream.tar.filebuffers:FileBuffer",),  # maps where the C walk prefetches, else preadv
                       "tests/tar/test_window_buffer.py::test_the_same_members_and_samples_as_read_by_offset"),
    # the reading layer (shardstream.reading_accel)
    "scan_samples": (("shardstream.samples:group_samples",), "tests/test_iter_samples.py::test_random_archives"),
    "scan_columns": (("shardstream.samples:group_samples", "shardstream.reading:ColumnBatches.add"),
                     "tests/tar/test_scan_columns.py::test_random_archives"),
    "stored_keys": (("shardstream.samples:_group",),  # the keys it has seen
                    "tests/native/test_differentials.py::test_stored_keys_are_the_keys_the_python_grouping_saw"),
    "MAX_WANTED": (("shardstream.pipeline.stages.fused:_Plan._columns_wanted",),
                   "tests/native/test_differentials.py::test_more_fields_than_max_wanted_read_dicts_with_the_same_rows"),
    "slice_column": (("shardstream.codecs:Decoder.decode_columns", "shardstream.indexed.opened:OpenShard.sample"),
                     "tests/indexed/test_columns.py::test_native_modes_equal_the_codec_table"),
    # the order layer (shardstream.order.permute)
    "permute_positions": (("shardstream.order.permute:Permutation._encrypt",),
                          "tests/training/test_order_permutation.py::test_the_c_permutation_is_the_numpy_one"),
    # the indexed layer (shardstream.indexed.opened)
    "gather_samples": (("shardstream.indexed.opened:OpenShard.sample",),
                       "tests/indexed/test_gather.py::test_a_random_batch_is_read_as_sample_by_sample"),
    # the pipeline layer (shardstream.pipeline.bases)
    "Chunks": (("shardstream.pipeline.bases:PyChunks",),
               "tests/native/test_chunks.py::test_serves_every_item_in_order_and_counts"),
    "Tally": (("shardstream.pipeline.bases:PyTally",), "tests/native/test_tally_relay.py::test_tally_keeps_deals_share_and_counts"),
    "Relay": (("shardstream.pipeline.bases:PyRelay",),
              "tests/native/test_tally_relay.py::test_relay_serves_the_chain_after_the_first_step_and_drops_it_at_the_end"),
    "HOOKS": (("shardstream.pipeline.bases:HOOKS",), "tests/native/test_differentials.py::test_the_hooks_are_named_alike"),
    "fill_int64": (("numpy:array",), "tests/tar/test_scan_names_values.py::test_int_columns_equal_numpy_arrays"),
}

#: Python loops written twice for speed -> (the twins, the test that they agree)
LOOPS: dict[str, tuple[tuple[str, ...], str]] = {
    "shuffle draw loops": (("shardstream.pipeline.stages.shuffle:ShuffleCursor.__next__",
                            "shardstream.pipeline.stages.shuffle:_PlainShuffle._drawing"),
                           "tests/pipeline/test_shuffle_loops.py::test_draw_loops_agree"),
}

ROWS = {**TWINS, **LOOPS}


def exported_in_the_sources() -> set[str]:
    """The names the module exports, read from ``_scan.c``: its method table and what its init adds to the module."""
    text = (HOME / "_scan.c").read_text()
    methods = set(re.findall(r'^\s*\{"(\w+)",\s*\w+,\s*METH_', text, re.M))
    added = set(re.findall(r'PyModule_Add\w+\(m,\s*"(\w+)"', text))
    return methods | added


def test_every_c_entry_point_has_a_row():
    names = exported_in_the_sources()
    assert {"scan", "Chunks", "MAX_WANTED", "HOOKS"} <= names  # the reading of the sources works
    missing = sorted(names - set(TWINS))
    assert missing == [], f"C entry points without a twin and a differential test in TWINS: {missing}"
    assert sorted(set(TWINS) - names) == [], "rows for names the extension no longer exports"
    if _native.extension is not None:
        built = {name for name in dir(_native.extension) if not name.startswith("__")}
        assert built == names, "the built extension is not the one of these sources: rebuild it"


def resolve(target: str) -> object:
    module, _, qualname = target.partition(":")
    found: object = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_twin_exists(name):
    for twin in ROWS[name][0]:
        assert resolve(twin) is not None, twin


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_differential_test_exists(name):
    path, _, function = ROWS[name][1].partition("::")
    file = ROOT / path
    assert file.is_file(), path
    defined = {node.name for node in ast.parse(file.read_text()).body if isinstance(node, ast.FunctionDef)}
    assert function in defined, f"{ROWS[name][1]}: no such test"


def test_the_pipeline_bases_twins_are_the_table_s():
    assert bases.TWINS == {name: resolve(TWINS[name][0][0]) for name in bases.TWINS}
