"""The key rule and the grouping of members into samples."""

import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream import _native
from shardstream.errors import (
    ConfigError,
    DuplicateFieldError,
    InterleavedKeyError,
    MissingExtensionError,
    SampleFormatError,
)
from shardstream.samples import KeyRule, SampleStats, group_samples


def members(*names):
    return [(n, n.encode(), 512 * (i + 1)) for i, n in enumerate(names)]


@pytest.mark.parametrize(
    "name, key, ext",
    [
        ("a/b.seg.jpg", "a/b", "seg.jpg"),
        ("0001.jpg", "0001", "jpg"),
        ("dir.v2/x.JSON", "dir.v2/x", "json"),
        ("dir/noext", "dir/noext", None),
        ("dir/.hidden", "dir/", "hidden"),
    ],
)
def test_default_rule_is_webdatasets(name, key, ext):
    assert KeyRule().split(name) == (key, ext)


def test_keep_case():
    assert KeyRule(lowercase=False).split("a/b.Seg.JPG") == ("a/b", "Seg.JPG")


def test_last_dot_rule_for_basenames_with_dots():
    rule = KeyRule("last-dot")
    assert rule.split("235342 Track 2.0 (Clean Version).mp3") == ("235342 Track 2.0 (Clean Version)", "mp3")
    assert rule.split("v1.2/noext") == ("v1.2/noext", None)


def test_regex_and_callable_rules():
    rule = KeyRule(re.compile(r"(.+?)\.((?:seg\.)?[^.]+)$"))
    assert rule.split("x.y.seg.png") == ("x.y", "seg.png")
    assert KeyRule(r"(.*)_(\w+)$").split("img_0001_depth") == ("img_0001", "depth")
    assert KeyRule(lambda n: (n[:3], n[3:])).split("abcDEF") == ("abc", "def")


def test_bad_rules_are_config_errors():
    with pytest.raises(ConfigError, match="two groups"):
        KeyRule(r"(.*)\.jpg")
    with pytest.raises(ConfigError, match="regular expression"):
        KeyRule("((")
    with pytest.raises(ConfigError):
        KeyRule(42)


def test_rules_pickle():
    for rule in (KeyRule(), KeyRule("last-dot", lowercase=False), KeyRule(r"(.*)\.(\w+)$")):
        clone = pickle.loads(pickle.dumps(rule))
        assert clone.split("A.B.C") == rule.split("A.B.C")
        assert clone.lowercase == rule.lowercase


def test_grouping_consecutive_members():
    got = list(group_samples(members("a.txt", "a.cls", "b.txt", "c.jpg", "c.json"), "s.tar"))
    assert [s["__key__"] for s in got] == ["a", "b", "c"]
    assert got[0] == {"__key__": "a", "__url__": "s.tar", "txt": b"a.txt", "cls": b"a.cls"}
    assert all(s["__url__"] == "s.tar" for s in got)


def test_empty_input():
    assert list(group_samples([], "s.tar")) == []


def test_duplicate_extension_raises_with_context():
    with pytest.raises(DuplicateFieldError) as info:
        list(group_samples(members("a.txt", "a.TXT"), "s.tar"))
    e = info.value
    assert isinstance(e, SampleFormatError) and isinstance(e, ValueError)
    assert e.url == "s.tar" and e.key == "a" and e.member == "a.TXT"
    assert "s.tar" in str(e) and "'a'" in str(e) and "twice" in str(e)


def test_missing_extension_raises():
    with pytest.raises(MissingExtensionError, match="no extension"):
        list(group_samples(members("a.txt", "README"), "s.tar"))


def test_interleaved_keys_raise():
    with pytest.raises(InterleavedKeyError, match="not contiguous") as info:
        list(group_samples(members("a.txt", "b.txt", "a.cls"), "s.tar"))
    assert info.value.key == "a"


def skip(exc):
    return True


def stop(exc):
    return False


def test_skipping_handler_drops_and_counts():
    stats = SampleStats()
    names = ("a.txt", "a.txt", "b.txt", "README", "c.txt", "b.cls", "d.txt")
    got = list(group_samples(members(*names), "s.tar", handler=skip, stats=stats))
    # a: duplicate -> dropped; README: member dropped; b.cls after c: interleaved fragment dropped
    assert [s["__key__"] for s in got] == ["b", "c", "d"]
    assert stats.samples == 3
    assert stats.skipped_samples == 2 and stats.skipped_members == 1 + 2 + 1
    assert stats.reasons == {"DuplicateFieldError": 1, "MissingExtensionError": 1, "InterleavedKeyError": 1}


def test_duplicate_in_last_sample_is_reported():
    with pytest.raises(DuplicateFieldError):
        list(group_samples(members("a.txt", "b.txt", "b.txt"), "s.tar"))
    stats = SampleStats()
    assert [s["__key__"] for s in group_samples(members("a.txt", "b.txt", "b.txt"), handler=skip, stats=stats)] == ["a"]
    assert stats.skipped_samples == 1


def test_stopping_handler_ends_the_shard():
    got = list(group_samples(members("a.txt", "README", "b.txt"), "s.tar", handler=stop))
    assert got == []  # stopped before 'a' was complete
    got = list(group_samples(members("a.txt", "b.txt", "b.txt", "c.txt"), "s.tar", handler=stop))
    assert [s["__key__"] for s in got] == ["a"]


def test_custom_rule_in_grouping():
    got = list(group_samples(members("t 2.0.mp3", "t 2.0.json"), "s.tar", rule="last-dot"))
    assert [(s["__key__"], sorted(k for k in s if not k.startswith("__"))) for s in got] == [("t 2.0", ["json", "mp3"])]


names = st.lists(
    st.tuples(st.text("abc/", min_size=1, max_size=4).filter(lambda k: not k.endswith("/") and "." not in k),
              st.sampled_from(["jpg", "txt", "cls", "seg.png"])),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(names)
def test_grouping_never_corrupts(pairs):
    """Under a skipping handler, every yielded sample has exactly the members written under its key."""
    ms = [(f"{k}.{e}", f"{k}.{e}".encode(), 0) for k, e in pairs]
    for s in group_samples(ms, "u", handler=skip):
        for ext, data in s.items():
            if not ext.startswith("__"):
                assert data == f"{s['__key__']}.{ext}".encode()


# --- the C grouping (shardstream.reading.iter_samples) against the Python one, on tricky names and key orders ---

TRICKY = {
    "dots in dirs": ["v1.2/a.txt", "v1.2/a.cls", "d.x/b.json", "d.x/b.TXT"],
    "multi-dot extensions": ["a.seg.png", "a.seg.PNG.gz", "b.x.y.z", "b.x"],
    "upper case": ["A.TXT", "A.Txt", "a.txt", "B.JPG"],
    "duplicate fields": ["a.txt", "a.TXT", "b.txt"],
    "long names (GNU/PAX)": ["d" * 120 + "/k.txt", "d" * 120 + "/k.cls", "e" * 300 + ".txt"],
    "empty files": ["a.txt", "a.cls", "b.txt"],
    "keys out of order, none repeated": ["b.txt", "a.txt", "c.txt", "a0.txt", "0.txt"],
    "keys out of order, one repeated": ["b.txt", "c.txt", "a.txt", "c.cls", "d.txt"],
    "a repeated key after increasing ones": ["a.txt", "b.txt", "c.txt", "b.cls", "e.txt"],
    "equal prefixes": ["a.txt", "a0.txt", "a.cls", "a00.txt"],
    "non-ascii and escapes": ["é.txt", "é.TXT", "\udcff.txt", "z.txt", "ü.cls"],
    "no extension, reserved and dunder": ["a.txt", "README", "b.__key__", "b.txt", "c.__meta__"],
}


def _tar(names, fmt, empty=False):
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape") as tf:
        for i, name in enumerate(names):
            data = b"" if empty else f"{i}:{name}".encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _read(data, tmp_path, *, fast, source, handler):
    """(samples with field order, error, stats) of one pass: the C grouping or group_samples(iter_tar(...))."""
    import io

    from shardstream.reading import iter_samples
    from shardstream.tar import iter_tar

    path = tmp_path / "t.tar"
    path.write_bytes(data)
    stats, got, error = SampleStats(), [], None
    with (open(path, "rb") if source == "file" else io.BytesIO(data)) as stream:
        try:
            if fast:
                samples = iter_samples(stream, "t.tar", handler=handler, stats=stats, bufsize=1024, accelerate=True)
            else:
                members_ = iter_tar(stream, "t.tar", accelerate=False)
                samples = group_samples(members_, "t.tar", handler=handler, stats=stats)
            got.extend(list(s.items()) for s in samples)
        except SampleFormatError as e:
            error = (type(e).__name__, str(e), e.key, e.member)
    return got, error, stats


@pytest.mark.skipif(not hasattr(_native.extension, "scan_samples"),
                    reason="C extension not built")
@pytest.mark.parametrize("case", sorted(TRICKY))
@pytest.mark.parametrize("fmt", ["gnu", "pax"])
@pytest.mark.parametrize("handler", [None, lambda e: True, lambda e: False], ids=["raise", "skip", "stop"])
def test_c_grouping_equals_python_on_tricky_names(case, fmt, handler, tmp_path):
    import tarfile

    data = _tar(TRICKY[case], tarfile.GNU_FORMAT if fmt == "gnu" else tarfile.PAX_FORMAT, empty=case == "empty files")
    want = _read(data, tmp_path, fast=False, source="bytes", handler=handler)
    for source in ("bytes", "file"):
        assert _read(data, tmp_path, fast=True, source=source, handler=handler) == want, source


def test_keys_out_of_order_are_all_samples():
    """Unique keys in any order are samples (only a key that comes back is an error), in the C pass too."""
    import io
    import tarfile

    from shardstream.reading import iter_samples

    names = TRICKY["keys out of order, none repeated"]
    keys = [s["__key__"] for s in iter_samples(io.BytesIO(_tar(names, tarfile.GNU_FORMAT)), "t.tar")]
    assert keys == [n.split(".")[0] for n in names]
