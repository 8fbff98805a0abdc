"""Per-bucket storage settings from YAML, TOML or the environment; longest prefix wins; typos are errors."""

from __future__ import annotations

import os
import time

import pytest

from shardstream.config import Settings
from shardstream.errors import ConfigError, MissingDependencyError
from shardstream.io.storage_config import (
    StorageConfig,
    StorageRule,
    http_headers,
    load_storage_config,
    storage_options,
)

YAML = """
storage:
  - bucket: alpha
    endpoint_url: http://10.0.0.1:7480
    region: eu-west-1
    key: AK1
    secret: SK1
    addressing_style: path
  - prefix: s3://alpha/special/
    profile: special
  - bucket: beta
    scheme: gs
    options: {project: p1}
  - prefix: https://data.example.com/
    headers: {Authorization: Bearer T}
"""

TOML = """
[[storage]]
bucket = "alpha"
endpoint_url = "http://10.0.0.1:7480"
region = "eu-west-1"
key = "AK1"
secret = "SK1"
addressing_style = "path"

[[storage]]
prefix = "s3://alpha/special/"
profile = "special"

[[storage]]
bucket = "beta"
scheme = "gs"
options = {project = "p1"}

[[storage]]
prefix = "https://data.example.com/"
headers = {Authorization = "Bearer T"}
"""


@pytest.mark.parametrize("name, text", [("s.yaml", YAML), ("s.toml", TOML)])
def test_yaml_and_toml_files_give_the_same_rules(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    config = StorageConfig.from_file(path)
    assert [r.prefix for r in config.rules] == ["s3://alpha/", "s3://alpha/special/", "gs://beta/",
                                                "https://data.example.com/"]
    assert config.match("s3://alpha/x.tar").fsspec_options("s3") == {
        "endpoint_url": "http://10.0.0.1:7480", "key": "AK1", "secret": "SK1",
        "client_kwargs": {"region_name": "eu-west-1"}, "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    assert config.match("s3://alpha/special/x.tar").fsspec_options("s3") == {"profile": "special"}
    assert config.match("gs://beta/x.tar").fsspec_options("gs") == {"project": "p1"}
    assert config.match("s3://beta/x.tar") is None
    assert config.rules[0].source == str(path)


def test_settings_file_and_inline_environment(tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    monkeypatch.setenv("SHARDSTREAM_STORAGE_CONFIG", str(path))
    monkeypatch.setenv("SHARDSTREAM_STORAGE", '[{"bucket": "gamma", "endpoint_url": "http://other:9000"}]')
    assert storage_options("s3://gamma/a.tar", "s3") == {"endpoint_url": "http://other:9000"}
    assert storage_options("s3://alpha/a.tar", "s3")["key"] == "AK1"
    assert storage_options("s3://nothing/a.tar", "s3") == {}
    assert http_headers("https://data.example.com/a.tar") == {"Authorization": "Bearer T"}


def test_the_file_is_read_again_when_it_changes(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("storage: [{bucket: a, region: r1}]\n")
    settings = Settings(storage_config=str(path))
    assert load_storage_config(settings).match("s3://a/x").region == "r1"
    path.write_text("storage: [{bucket: a, region: r2}]\n")
    future = time.time() + 5
    os.utime(path, (future, future))
    assert load_storage_config(settings).match("s3://a/x").region == "r2"


@pytest.mark.parametrize("text, match", [
    ("storage: [{bucket: a, endpont_url: x}]", "unknown storage setting.*endpont_url"),
    ("storage: [{region: x}]", "exactly one of 'prefix' or 'bucket'"),
    ("storage: [{bucket: a, prefix: s3://a/}]", "exactly one"),
    ("storage: [{bucket: a, addressing_style: sideways}]", "addressing_style"),
    ("buckets: []", "unknown top-level"),
    ("storage: {bucket: a}", "must be a list"),
    ("storage: [: :", "not valid YAML"),
])
def test_mistakes_are_config_errors(text, match):
    with pytest.raises(ConfigError, match=match):
        StorageConfig.from_text(text, "test.yaml")


def test_aliases_and_option_merging():
    rule = StorageRule.from_dict({"bucket": "a", "aws_access_key_id": "K", "endpoint": "http://e",
                                  "region_name": "r", "options": {"client_kwargs": {"verify": False}}})
    assert rule.fsspec_options("s3") == {"endpoint_url": "http://e", "key": "K",
                                         "client_kwargs": {"region_name": "r", "verify": False}}


def test_missing_file_and_bad_headers_name_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="SHARDSTREAM_STORAGE_CONFIG"):
        load_storage_config(Settings(storage_config=str(tmp_path / "nope.yaml")))
    with pytest.raises(ConfigError, match="SHARDSTREAM_HTTP_HEADERS"):
        http_headers("http://x/", Settings(http_headers=("no colon here",)))


def test_missing_object_store_library_names_the_extra(monkeypatch):
    import fsspec

    from shardstream.io import open_url

    def no_library(protocol):
        raise ImportError(f"Install gcsfs to access {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", no_library)
    for url, extra in (("gs://b/a.tar", "gcs"), ("s3://b/a.tar", "s3"), ("az://c/a.tar", "azure"),
                       ("hf://datasets/x/a.tar", "hf")):
        with pytest.raises(MissingDependencyError, match=rf"pip install 'shardstream\[{extra}\]'"):
            open_url(url)
