"""webdataset's obsolete MultiShardSample reads a YAML file: untrusted input like a dataset spec."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError, UnsafeURLError
from shardstream.shardlists import MultiShardSample


@pytest.fixture(autouse=True)
def _obsolete_allowed(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_ALLOW_OBSOLETE", "1")


def test_a_command_in_the_file_needs_the_opt_in(tmp_path):
    spec = tmp_path / "multi.yaml"
    spec.write_text("datasets:\n  - name: a\n    shards: 'pipe:touch pwned-{0..1}'\n")
    with pytest.raises(UnsafeURLError, match="allow_commands"):
        MultiShardSample(str(spec))
    assert [s.urls for s in MultiShardSample(str(spec), allow_commands=True).sources] == [
        ["pipe:touch pwned-0", "pipe:touch pwned-1"]]


def test_a_dict_is_the_callers_own():
    sample = MultiShardSample({"datasets": [{"name": "a", "shards": "pipe:cat a-{0..1}.tar"}]})
    assert sample.sources[0].urls == ["pipe:cat a-0.tar", "pipe:cat a-1.tar"]


@pytest.mark.parametrize("text", ["[1, 2]", "datasets: 5\n", "datasets: {a: 1}\n", "a: " + "[" * 200 + "]" * 200])
def test_a_malformed_file_is_a_config_error(tmp_path, text):
    spec = tmp_path / "multi.yaml"
    spec.write_text(text)
    with pytest.raises(ConfigError):
        MultiShardSample(str(spec))
