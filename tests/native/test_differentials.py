"""Differential tests of the C entry points that had none (see ``test_twins.py``): the keys the C grouping stores,
the most fields its column maker converts at once, and the hooks its base types call."""

from __future__ import annotations

import io
import pathlib
import re
import tarfile
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import shardstream as wds
from shardstream import _native
from shardstream.pipeline import bases, iteration
from shardstream.pipeline.stages import reading
from shardstream.reading_accel import MAX_WANTED, stored_keys
from shardstream.samples import DEFAULT_RULE, SampleStats, _group, _reraise
from shardstream.tar import iter_tar

needs_c = pytest.mark.skipif(_native.extension is None, reason="C extension not built")
HOME = pathlib.Path(__file__).resolve().parents[2] / "src" / "shardstream" / "_native"


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet="ab-_0\u00e9", min_size=1, max_size=5), max_size=30, unique=True),
       st.integers(1, 2))
def test_stored_keys_are_the_keys_the_python_grouping_saw(keys, fields):
    """After one C pass over a shard of distinct keys, the keys it put in ``seen`` and those it stored as bytes
    (``stored_keys``, in the order met, increasing) are the keys Python's grouping has seen over the same members."""
    data = _tar([(f"{key}.{ext}", b"x") for key in keys for ext in ("txt", "cls")[:fields]])
    seen: set[str] = set()
    stored = bytearray()
    _native.extension.scan_samples(data, 0, "t.tar", seen, None, None, DEFAULT_RULE.split, stored)  # type: ignore[union-attr]
    got = stored_keys(stored)
    python_seen: set[str] = set()
    list(_group(iter_tar(io.BytesIO(data), "t.tar"), "t.tar", DEFAULT_RULE.split, _reraise, SampleStats(), python_seen))
    assert python_seen == seen | set(got) and not seen & set(got)
    assert got == sorted(got) and len(set(got)) == len(got)
    assert got == [key for key in keys if key in set(got)]


def _rows(make, fused: bool, monkeypatch) -> tuple[list, list[bool]]:
    """The batches of ``make()`` (fused plans on, or every stage its own generator) and, per ``take_columns`` call
    of the reader, whether it gave rows as columns."""
    taken: list[bool] = []
    real = reading.ReaderCursor.take_columns

    def spy(self, n, want):
        got = real(self, n, want)
        taken.append(got[0] is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(reading.ReaderCursor, "take_columns", spy)
        if not fused:
            m.setattr(iteration, "fused", lambda items, makes: makes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = [[list(column) for column in batch] for batch in make()]
    return out, taken


@needs_c
@pytest.mark.parametrize("extra", [0, 1], ids=["max", "one more"])
def test_more_fields_than_max_wanted_read_dicts_with_the_same_rows(tmp_path, monkeypatch, extra):
    """A plan of ``MAX_WANTED`` fields is fed columns by the C grouping; one of more fields reads sample dicts (the
    Python path); both give the rows of the unfused chain."""
    fields = [f"f{j:02d}" for j in range(MAX_WANTED + extra)]
    path = tmp_path / "wide.tar"
    path.write_bytes(_tar([(f"k{i:03d}.{field}", f"{i}-{field}".encode()) for i in range(30) for field in fields]))

    def make():
        return wds.WebDataset([str(path)], shardshuffle=False).decode().to_tuple(*fields).batched(8)

    fused, taken = _rows(make, True, monkeypatch)
    plain, _ = _rows(make, False, monkeypatch)
    assert fused == plain and len(fused) == 4 and fused[0][-1][0] == f"0-{fields[-1]}".encode()
    assert any(taken) == (extra == 0)


def test_the_hooks_are_named_alike():
    """The hooks the C base types call (``_scan.h``: HOOK_*, exported as ``HOOKS``) are those the Python twins declare
    (``bases.HOOKS``), and each is called on a subclass by that name."""
    header = (HOME / "_scan.h").read_text()
    in_c = dict(re.findall(r'#define HOOK_(\w+) "(\w+)"', header))
    assert {kind.upper(): hook for kind, hook in bases.HOOKS.items()} == in_c
    for kind, twin in bases.TWINS.items():
        assert callable(getattr(twin, bases.HOOKS[kind]))
    if _native.extension is not None:
        assert _native.extension.HOOKS == bases.HOOKS
    kinds = [bases.TWINS]
    if _native.extension is not None:
        kinds.append({kind: getattr(_native.extension, kind) for kind in bases.HOOKS})
    for types in kinds:
        calls: list[str] = []
        for kind, base in types.items():
            sub = type("Sub", (base,), {bases.HOOKS[kind]: lambda self, kind=kind, calls=calls: calls.append(kind) or False})
            it = sub()
            if kind == "Tally":
                it.upstream = iter(())
            next(it, None)
        assert calls == list(types), (types, calls)
