"""Reading spec files within limits: alias bombs, deep nesting, self-containing values, bytes that are not
UTF-8 are each refused with a ConfigError, in little memory; values in error messages are shown short."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from shardstream.errors import ConfigError
from shardstream.spec import is_spec, load_spec
from shardstream.spec.document import MAX_ALIAS_NODES, MAX_DEPTH, read_text
from shardstream.spec.values import SHOWN, shown


def bomb(where: str = "sources", levels: int = 8, width: int = 9) -> str:
    """A billion-laughs spec of about 400 bytes whose value at ``where`` is ``width ** levels`` strings once
    expanded (all its keys are a spec's: 5542f61 went on to repr that value in an error message)."""
    value = ", ".join([f"&l0 [{','.join(['lol'] * width)}]"] + [
        f"&l{i} [{','.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)])
    if where == "sources":
        return f"sources: [[{value}]]\n"
    if where == "storage":  # a rule with both prefix and bucket: its message showed the whole rule
        return f"sources: [{{shards: a.tar}}]\nstorage: [{{bucket: b, prefix: [{value}]}}]\n"
    return f"sources: [{{shards: a.tar}}]\n{where}: [{value}]\n"


def peak_of(call) -> tuple[BaseException | None, int]:
    """(the exception ``call()`` raised, the peak of memory traced while it ran)."""
    tracemalloc.start()
    try:
        call()
    except Exception as e:  # noqa: BLE001 - returned to the test
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return None, 0


@pytest.mark.parametrize("where", ["sources", "seed", "storage", "epoch_size"])
def test_an_alias_bomb_is_refused_in_little_memory(tmp_path, where):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(where))
    assert len(path.read_bytes()) < 450
    error, peak = peak_of(lambda: load_spec(str(path)))
    assert isinstance(error, ConfigError), error
    assert "aliases" in str(error) and str(MAX_ALIAS_NODES) in str(error) and "bomb.yaml" in str(error)
    assert peak < 2 << 20, peak  # expanded: 43 million strings (~475 MB to repr)


def test_aliases_within_the_limit_still_work():
    data = read_text("base: &b {shards: a.tar, weight: 1}\nsources: [*b, {<<: *b, shards: b.tar}]", "s.yaml")
    spec = load_spec({"sources": data["sources"], "epoch_size": 4})
    assert [s.urls for s in spec.sources] == [("a.tar",), ("b.tar",)] and spec.counts() == [2, 2]


@pytest.mark.parametrize("text", [
    "[" * 20000,  # unbalanced: the parser's own error would come after 20000 levels of recursion
    "[" * 20000 + "]" * 20000,
    "sources: " + "{a: " * 5000 + "1" + "}" * 5000,
    "sources:\n" + "".join(" " * i + "- \n" for i in range(0, 400, 2)),
])
def test_deep_nesting_is_a_config_error(tmp_path, text):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"deeper than {MAX_DEPTH} levels|not valid YAML"):
        load_spec(str(path))


def test_deep_json_is_a_spec_whose_error_says_why(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert is_spec(str(path))  # json.load's RecursionError: the spec reader says why
    with pytest.raises(ConfigError, match="deeper than"):
        load_spec(str(path))


def test_aliases_nesting_deeper_than_the_limit_once_expanded():
    chain = "\n".join(["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 200)])
    with pytest.raises(ConfigError, match="aliases.*deeper than"):
        read_text(chain, "chain.yaml")


def test_a_value_that_contains_itself_is_refused():
    with pytest.raises(ConfigError, match="contains itself"):
        read_text("sources: &s [{shards: a.tar, fields: *s}]", "loop.yaml")


@pytest.mark.parametrize("data", [b"sources: [{shards: \xff\xfe.tar}]\n", b"\xc3\x28: 1\n"])
def test_bytes_that_are_not_utf8_are_a_config_error(tmp_path, data):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match="latin1.yaml.*not UTF-8 text"):
        load_spec(str(path))
    json_path = tmp_path / "latin1.json"
    json_path.write_bytes(b'{"sources": [{"shards": "\xff.tar"}]}')
    assert is_spec(str(json_path))
    with pytest.raises(ConfigError, match="latin1.json"):
        load_spec(str(json_path))


def test_utf8_with_a_bom_and_json_files_read():
    assert read_text("\ufeffsources: [{shards: a.tar}]".encode(), "bom.yaml") == {"sources": [{"shards": "a.tar"}]}
    assert read_text("sources: [{shards: é.tar}]".encode("utf-16"), "utf16.yaml") == {"sources": [{"shards": "é.tar"}]}
    assert read_text(json.dumps({"sources": [{"shards": "é.tar"}]}).encode(), "s.json")["sources"][0]["shards"] == \
        "é.tar"


def shared_tree(levels: int, width: int = 10) -> list:
    """A Python value of ``width ** levels`` leaves in ``levels`` lists (each level holds the one below, shared)."""
    value: list = ["x"]
    for _ in range(levels):
        value = [value] * width
    return value


@pytest.mark.parametrize("spec", [
    {"seed": shared_tree(9), "sources": [{"shards": "a.tar"}]},
    {"sources": shared_tree(9)},
    {"sources": [shared_tree(9)]},
    {"sources": [{"shards": "a.tar", "name": shared_tree(9)}]},
    {"sources": [{"shards": shared_tree(9)}]},
    {"sources": [{"shards": "a.tar", "fields": shared_tree(9)}]},
    {"sources": [{"shards": "a.tar", "rename": {"a": shared_tree(9)}}]},
    {"sources": [{"shards": "a.tar", "weight": shared_tree(9)}]},
    {"sources": [{"shards": "a.tar", "format": shared_tree(9)}]},
    {"sources": [{"shards": "a.tar", "buckets": shared_tree(9)}]},
    {5: 1, "x" * 10**6: 2, "sources": [{"shards": "a.tar"}]},  # unknown keys of two types, one long
])
def test_error_messages_show_values_short(spec):
    """A dict spec whose value is a billion items (shared): the message shows a few, costing no memory."""
    error, peak = peak_of(lambda: load_spec(spec))
    assert isinstance(error, ConfigError), error
    assert len(str(error)) < 600 and peak < 1 << 20, (len(str(error)), peak)


def test_shown_cuts_values_short():
    assert shown("a" * 10_000).startswith("'aaa") and len(shown("a" * 10_000)) <= SHOWN
    assert shown(shared_tree(50)).startswith("[[[[") and len(shown(shared_tree(50))) <= SHOWN
    assert shown(10**100_000) == "<int>"  # too long for str(): still a message
    assert shown({"k": 1}) == "{'k': 1}"
