"""The sample dicts of the C pass (``scan_samples`` of the C extension, built from a template of each sample's shape): equal to the
reference grouping's, key order included, through shape changes, many fields and calls that end mid-sample; plain
dicts to use and change; and every reference counted right (nothing leaked, nothing freed early)."""

from __future__ import annotations

import gc
import io
import sys

import pytest

from shardstream import _native
from shardstream.samples import group_samples, iter_samples
from shardstream.tar import iter_tar
from shardstream.tar.writer import TarStreamWriter

pytestmark = pytest.mark.skipif(not hasattr(_native.extension, "scan_samples"), reason="C extension not built")


def shard(samples: list[list[tuple[str, bytes]]]) -> bytes:
    """A tar of samples given as lists of (name, data) members, in that order."""
    out = io.BytesIO()
    w = TarStreamWriter(out)
    for members in samples:
        for name, data in members:
            w.add(name, data)
    w.close()
    return out.getvalue()


def shapes() -> list[list[tuple[str, bytes]]]:
    """Samples whose field sets and orders change, repeat, and go past 16 fields."""
    out = []
    for i in range(60):
        key = f"s{i:04d}"
        if i % 10 == 3:
            exts = ["cls", "txt"]  # the same set in another order: another shape
        elif i % 10 == 5:
            exts = [f"f{j:02d}" for j in range(17 + i % 4)]  # more fields than the pending slots
        elif i % 10 == 7:
            exts = ["txt"]
        else:
            exts = ["txt", "cls"]
        out.append([(f"{key}.{e}", b"%s-%d" % (e.encode(), i)) for e in exts])
    return out


def reference(data: bytes, local: str | None = None) -> list[dict]:
    samples = list(group_samples(iter_tar(io.BytesIO(data), "t.tar", accelerate=False), "t.tar"))
    if local is not None:
        for s in samples:
            s["__local_path__"] = local
    return samples


@pytest.mark.parametrize("bufsize", [512, 1536, 5000, 1 << 20])
def test_dicts_equal_the_reference_in_values_and_key_order(bufsize, tmp_path):
    data = shard(shapes())
    want = reference(data)
    got = list(iter_samples(io.BytesIO(data), "t.tar", bufsize=bufsize, accelerate=True))
    assert got == want
    assert [list(s) for s in got] == [list(s) for s in want]
    path = tmp_path / "t.tar"
    path.write_bytes(data)
    with open(path, "rb") as f:
        local = list(iter_samples(f, "t.tar", bufsize=bufsize, accelerate=True, local_path=str(path)))
    assert local == reference(data, str(path))
    assert all(list(s)[-1] == "__local_path__" for s in local)


def test_dicts_are_plain_dicts_to_read_change_and_copy():
    data = shard(shapes())
    got = list(iter_samples(io.BytesIO(data), "t.tar", accelerate=True))
    first = got[0]
    assert type(first) is dict
    assert first["".join(["t", "x", "t"])] == b"txt-0"  # an equal str, not the same object
    assert first.get("c" + "ls") == b"cls-0" and "jpg" not in first
    first["extra"] = 1
    del first["txt"]
    assert list(first) == ["__key__", "__url__", "cls", "extra"]
    copy = dict(got[1])
    copy["cls"] = b"changed"
    assert got[1]["cls"] == b"cls-1"  # samples of one shape share nothing
    assert got[2]["__key__"] == "s0002" and got[2]["__url__"] == "t.tar"


def test_reference_counts_are_exact():
    data = shard(shapes())
    url = "".join(["u", "r", "l"])
    gc.collect()
    url_refs, none_refs = sys.getrefcount(url), sys.getrefcount(None)
    for _ in range(5):
        got = list(iter_samples(io.BytesIO(data), url, accelerate=True))
        assert len(got) == 60
        # each key and field value is held by its dict alone (plus getrefcount's argument)
        assert [k for s in got for k in list(s) if k != "__url__" and sys.getrefcount(s[k]) != 2] == []
        del got
    gc.collect()
    assert sys.getrefcount(url) == url_refs
    # None fills the templates' value slots before each copy gets its values: none may be left over or missing
    assert abs(sys.getrefcount(None) - none_refs) < 50
