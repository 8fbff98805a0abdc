"""Dataset specifications: parsing (ours and webdataset 0.2's keys), counts per epoch, safety."""

from __future__ import annotations

import json

import pytest

from shardstream.errors import ConfigError
from shardstream.spec import DatasetSpec, apportion, is_spec, load_spec


def write_yaml(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


def test_yaml_file_with_every_source_key(tmp_path):
    path = write_yaml(tmp_path, """
seed: 7
epoch_size: 100
storage:
  - bucket: shared
    endpoint_url: http://127.0.0.1:9000
sources:
  - name: images
    shards: img-{000..003}.tar
    proportion: 0.6
    fields: [jpg, json]
    rename: {image: jpg}
    storage: {endpoint_url: http://127.0.0.1:7480, profile: reader}
  - name: text
    shards: [s3://shared/t-0.jsonl, s3://shared/t-1.jsonl]
    proportion: 0.4
""")
    spec = load_spec(path)
    images, text = spec.sources
    assert spec.seed == 7 and spec.document == path
    assert images.urls == tuple(str(tmp_path / f"img-{i:03d}.tar") for i in range(4))  # relative to the file
    assert images.format == "tar" and text.format == "jsonl"
    assert images.fields == ("jpg", "json") and images.rename == (("image", "jpg"),)
    rule = images.storage[0]
    assert rule.prefix == str(tmp_path) + "/" and rule.profile == "reader"
    assert [r.prefix for r in spec.storage_rules()] == [str(tmp_path) + "/", "s3://shared/"]
    assert spec.counts() == [60, 40]


def test_json_file_and_dict_give_the_same_spec(tmp_path):
    data = {"epoch_size": 9, "sources": [{"shards": "/d/a.tar", "weight": 1}, {"shards": "/d/b.tar", "weight": 2}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    from_file, from_dict = load_spec(str(path)), load_spec(data)
    assert from_file.sources == from_dict.sources and from_dict.counts() == [3, 6]
    assert is_spec(str(path)) and is_spec(data) and is_spec(from_dict) and not is_spec("/d/a.tar")
    assert load_spec(from_dict) is from_dict


def test_webdataset_0_2_keys():
    spec = load_spec({"prefix": "s3://bucket/", "buckets": "train",
                      "datasets": [{"name": "a", "shards": "a-{0..4}.tar", "choose": 2},
                                   {"name": "b", "shards": "b-{0..1}.tar", "resample": 5, "buckets": "other"},
                                   {"name": "c", "shards": ["c.tar"], "subsample": 0.5}]})
    a, b, c = spec.sources
    assert a.urls[0] == "s3://bucket/train/a-0.tar" and a.choose_shards == 2 and a.choose is None
    assert b.urls == ("s3://bucket/other/b-0.tar", "s3://bucket/other/b-1.tar") and b.resample_shards == 5
    assert c.subsample == 0.5


@pytest.mark.parametrize("url", ["pipe:curl -s http://x/a.tar", "PIPE:cat a.tar"])
def test_command_urls_need_the_opt_in(url, tmp_path):
    with pytest.raises(ConfigError, match="allow_commands=True"):
        load_spec({"sources": [{"shards": url}]})
    path = write_yaml(tmp_path, f"sources:\n  - shards: '{url}'\n")
    with pytest.raises(ConfigError, match="spec.yaml"):
        load_spec(path)
    assert load_spec({"sources": [{"shards": url}]}, allow_commands=True).sources[0].urls == (url,)


def test_yaml_is_read_safely(tmp_path):
    path = write_yaml(tmp_path, "sources: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(path)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("bad, message", [
    ({"source": []}, "unknown top-level"),
    ({"sources": []}, "non-empty list"),
    ({"sources": [{"shard": "a.tar"}]}, "unknown key"),
    ({"sources": [{"name": "x"}]}, "no `shards:`"),
    ({"sources": [{"shards": "a.tar", "weight": 1, "choose": 3}]}, "one of weight"),
    ({"sources": [{"shards": "a.tar", "weight": -1}]}, ">= 0"),
    ({"sources": [{"shards": "a.tar", "proportion": 1.5}]}, "<= 1"),
    ({"sources": [{"shards": "a.tar", "format": "parquet"}]}, "format"),
    ({"sources": [{"shards": "a.tar", "name": "x"}, {"shards": "b.tar", "name": "x"}]}, "repeat"),
    ({"sources": [{"shards": "a.tar", "storage": {"bucket": "b"}}]}, "without prefix/bucket"),
    ({"sources": [{"shards": "a.tar", "storage": {"endpoint": "http://h", "colour": 1}}]}, "unknown storage"),
    ({"datasets": [{"shards": "a.tar", "choose": 2}]}, "choose 2 shards of 1"),
])
def test_bad_specs_name_the_problem(bad, message):
    with pytest.raises(ConfigError, match=message):
        load_spec(bad)


def test_counts_choose_repeat_and_shares():
    spec = load_spec({"epoch_size": 100, "sources": [
        {"shards": "a.tar", "samples": 30, "repeat": 2},  # 60
        {"shards": "b.tar", "choose": 10},
        {"shards": "c.tar", "weight": 1}, {"shards": "d.tar", "weight": 2}]})  # the 30 left, 1:2
    assert spec.counts() == [60, 10, 10, 20]
    one_pass = load_spec({"sources": [{"shards": "a.tar"}, {"shards": "b.tar", "samples": 4}]})
    assert one_pass.counts([7, None]) == [7, 4]
    with pytest.raises(ConfigError, match="needs `samples:`"):
        one_pass.counts()
    with pytest.raises(ConfigError, match="epoch_size"):
        load_spec({"sources": [{"shards": "a.tar", "weight": 1}]}).counts()
    with pytest.raises(ConfigError, match="more than epoch_size"):
        load_spec({"epoch_size": 5, "sources": [{"shards": "a.tar", "choose": 9}, {"shards": "b", "weight": 1}]}
                  ).counts()


@pytest.mark.parametrize("weights, total", [([1, 1, 1], 10), ([0.5, 0.3, 0.2], 7), ([3, 0, 1], 1001), ([1], 0)])
def test_apportion_adds_up_exactly(weights, total):
    counts = apportion(weights, total)
    assert sum(counts) == total
    for w, c in zip(weights, counts):
        assert abs(c - w * total / sum(weights)) < 1


def test_transform_selects_and_renames():
    source = load_spec({"sources": [{"shards": "a.tar", "fields": "jpg;txt", "rename": {"caption": "txt"}}]}
                       ).sources[0]
    assert source.transform({"__key__": "k", "jpg": 1, "txt": 2, "cls": 3}) == {"__key__": "k", "jpg": 1,
                                                                               "caption": 2}
    assert source.transform([1, 2]) == [1, 2]
    assert isinstance(load_spec({"sources": [{"shards": "a.tar"}]}), DatasetSpec)
