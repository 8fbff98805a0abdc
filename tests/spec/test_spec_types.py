"""Every key of a spec is checked for its type and range before use: a wrong one is a ConfigError naming the
key and what it must be (never a TypeError, OverflowError or RecursionError from deep inside)."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError
from shardstream.spec import apportion, load_spec

HUGE = 10**400  # no float has it


def source(**keys):
    return {"sources": [{"shards": "a.tar", **keys}]}


CASES = [
    # each source key
    ({"sources": [{"shards": 5}]}, r"source 0: shards must be a string or a list of strings, not int"),
    ({"sources": [{"shards": None}]}, r"shards must be a string or a list of strings, not NoneType"),
    ({"sources": [{"shards": [5]}]}, r"shards must be a string or a list of strings; item 0 is int"),
    ({"sources": [{"shards": ["a.tar", ["b.tar"]]}]}, r"shards .* item 1 is list"),
    ({"sources": [{"shards": {"a": 1}}]}, r"shards must be a string or a list of strings, not dict"),
    (source(fields=5), r"source 0: fields must be a string or a list of strings, not int"),
    (source(fields=["jpg", 1]), r"fields must be a string or a list of strings; item 1 is int"),
    (source(buckets=5), r"source 0: buckets must be a string or a list of strings, not int"),
    (source(prefix=["a", 1]), r"source 0: prefix must be a string or a list of strings; item 1"),
    (source(format=["tar"]), r"source 0: format must be one of \['cbors', 'jsonl', 'msgpack', 'tar'\], not \['tar'\]"),
    (source(format=5), r"format must be one of .*, not 5"),
    (source(name=["x"]), r"source 0: name must be a string, not list"),
    (source(name=True), r"source 0: name must be a string, not bool"),
    (source(name=HUGE), r"source 0: name must be a string, not int an integer of 401 digits"),
    (source(rename=["jpg"]), r"source 0: `rename:` \(new name: old name\) must map strings to strings"),
    (source(rename={"image": 5}), r"`rename:` .* must map strings to strings, e.g. \{image: jpg\}"),
    (source(storage=5), r"source 0: a source's `storage:` is a mapping of settings"),
    (source(storage={"endpoint_url": 5}), r"source 0: the storage setting 'endpoint_url' must be a string, not int"),
    (source(storage={"region": ["x"]}), r"storage setting 'region' must be a string, not list"),
    (source(storage={"anon": "yes"}), r"storage setting 'anon' must be true or false, not str"),
    (source(storage={"headers": ["X: y"]}), r"storage setting 'headers' must be a mapping, not list"),
    (source(storage={"headers": {"X": ["y"]}}), r"'headers' must map header names to strings"),
    (source(storage={"options": 5}), r"storage setting 'options' must be a mapping, not int"),
    (source(storage={"options": {5: 1}}), r"the names in 'options' must be strings"),
    (source(samples="10"), r"source 0: samples must be a number >= 0, not '10'"),
    (source(samples=-1), r"samples must be .*>= 0, not -1"),
    (source(samples=1.5), r"samples must be a whole number up to 2\*\*53, not 1.5"),
    (source(samples=HUGE), r"samples must be at most 2\*\*53, not an integer of 401 digits"),
    (source(samples=2**53 + 1), r"samples must be at most 2\*\*53"),
    (source(weight="1"), r"source 0: weight must be a number >= 0, not '1'"),
    (source(weight=HUGE), r"weight must be a finite number >= 0, not an integer of 401 digits"),
    (source(weight=float("nan")), r"weight must be a finite number >= 0, not nan"),
    (source(weight=float("inf")), r"weight must be a finite number"),
    (source(weight=True), r"weight must be a number >= 0, not True"),
    (source(weight=-HUGE), r"weight must be a number >= 0"),
    (source(proportion=[0.5]), r"proportion must be a number >= 0, not \[0.5\]"),
    (source(repeat={}), r"repeat must be a number >= 0, not \{\}"),
    (source(choose=HUGE), r"source 0: choose must be at most 2\*\*53, not an integer of 401 digits"),
    (source(choose=1e300), r"choose must be a whole number up to 2\*\*53"),
    (source(choose=1.5), r"choose must be a whole number"),
    (source(choose_shards=0), r"choose_shards must be > 0, not 0"),
    (source(resample="5"), r"resample must be a number >= 0, not '5'"),
    (source(subsample=0), r"subsample must be > 0"),
    (source(subsample="0.5"), r"subsample must be a number >= 0, not '0.5'"),
    ({"sources": [{"shards": "a.tar", 5: 1}]}, r"source 0: unknown key\(s\) \[5\]"),
    ({"sources": [{"shards": "a.tar", 5: 1, "x": 2}]}, r"source 0: unknown key\(s\) \[5, 'x'\]"),
    # each top-level key
    ({**source(), "seed": 1.5}, r"seed must be an integer or a string, not float 1.5"),
    ({**source(), "seed": [1]}, r"seed must be an integer or a string, not list \[1\]"),
    ({**source(), "epoch_size": "10"}, r"epoch_size must be a number >= 0, not '10'"),
    ({**source(), "epoch_size": HUGE}, r"epoch_size must be at most 2\*\*53"),
    ({**source(), "prefix": 5}, r"<dict>: prefix must be a string, not int"),
    ({**source(), "buckets": 5}, r"<dict>: buckets must be a string or a list of strings, not int"),
    ({**source(), "name": ["x"]}, r"<dict>: name must be a string, not list"),
    ({**source(), "storage": 5}, r"'storage' must be a list of rules"),
    ({**source(), "storage": [5]}, r"a storage rule must be a mapping, not int"),
    ({**source(), "storage": [{"bucket": 5}]}, r"storage setting 'bucket' must be a string, not int"),
    ({**source(), "storage": [{"prefix": ["s3://a/"]}]}, r"storage setting 'prefix' must be a string, not list"),
    ({"sources": 5}, r"`sources:` must be a non-empty list of sources, not 5"),
    ({"sources": {"shards": "a.tar"}}, r"`sources:` must be a non-empty list"),
    ({"datasets": "a.tar"}, r"`datasets:` must be a non-empty list of sources, not 'a.tar'"),
    ({"sources": [5]}, r"source 0 must be a mapping with `shards:`, not 5"),
    ({**source(), 5: 1, "x": 2}, r"unknown top-level key\(s\) \[5, 'x'\]"),
]


@pytest.mark.parametrize(("spec", "message"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_a_wrong_type_or_range_names_the_key(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_spec(spec)


@pytest.mark.parametrize(("text", "message"), [
    ("sources: [{shards: 5}]", "shards must be a string or a list of strings, not int"),
    ("sources: [{shards: a.tar, fields: 5}]", "fields must be a string or a list of strings, not int"),
    ("sources: [{shards: a.tar, buckets: 5}]", "buckets must be a string or a list of strings, not int"),
    ("sources: [{shards: a.tar, format: [tar]}]", r"format must be one of .*, not \['tar'\]"),
    ("sources: [{shards: a.tar, choose: 10**400}]", r"choose must be a number >= 0, not '10\*\*400'"),
    ("sources: [{shards: a.tar, choose: 1.0e+400}]", "choose must be a finite number >= 0, not inf"),
    ("sources: [{shards: a.tar, weight: .nan}]", "weight must be a finite number >= 0, not nan"),
    ("sources: [{shards: a.tar, name: {a: 1}}]", "name must be a string, not dict"),
    ("seed: 2024-01-01\nsources: [{shards: a.tar}]", "seed must be an integer or a string, not date"),
    ("sources: [{shards: a.tar, storage: {anon: 1}}]", "'anon' must be true or false, not int"),
    ("sources: [{shards: a.tar, storage: {secret: 12345678}}]", "'secret' must be a string, not int$"),
    ("sources: [{shards: !!binary aGVsbG8=}]", "shards must be a string or a list of strings, not bytes"),
    ("sources: !!set {a}", "`sources:` must be a non-empty list"),
])
def test_a_wrong_type_in_a_yaml_file_names_the_key(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_spec(str(path))
    assert "spec.yaml" in str(caught.value) and "12345678" not in str(caught.value)  # a secret is never shown


def test_a_name_written_as_a_number_is_its_text():
    assert load_spec(source(name=2024)).sources[0].name == "2024"


def test_huge_weights_share_out_without_overflow():
    spec = load_spec({"epoch_size": 10, "sources": [{"shards": "a.tar", "weight": 1e308},
                                                    {"shards": "b.tar", "weight": 1e308}]})
    assert spec.counts() == [5, 5]
    assert apportion([1e308, 1e308, 0], 3) == [2, 1, 0]


def test_a_count_past_2_53_is_refused():
    spec = load_spec({"sources": [{"name": "big", "shards": "a.tar", "samples": 10, "repeat": 1e300}]})
    with pytest.raises(ConfigError, match="source 'big' would take .* samples an epoch, more than 2\\*\\*53"):
        spec.counts()


def test_spec_urls_do_not_expand_environment_variables(monkeypatch):
    """A spec is a document: ``${NAME}`` in its URLs stays as written (WDS_NAME's value never goes into a URL a
    spec's author chose)."""
    monkeypatch.setenv("WDS_TOKEN", "s3cr3t")
    spec = load_spec({"sources": [{"shards": "https://h/${TOKEN}/a-{0..1}.tar::https://h/b.tar"}]})
    assert spec.sources[0].urls == ("https://h/${TOKEN}/a-0.tar", "https://h/${TOKEN}/a-1.tar", "https://h/b.tar")
