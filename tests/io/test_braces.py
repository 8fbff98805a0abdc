"""Brace patterns name the same shards as in webdataset: a differential test against the ``braceexpand`` package
(what webdataset 1.0.2 expands URLs with), over a corpus of named patterns and a seeded random one.

Every pattern webdataset accepts gives the same names here; every pattern it refuses as unbalanced is an
:class:`~shardstream.errors.UnbalancedBracesError` here. One deliberate difference: an escaped backslash
(``\\\\``) *inside* a brace group. ``braceexpand`` removes escapes once per nesting level, so ``{a\\\\b,c}`` gives
``ab`` there (the backslash, once unescaped, escapes the ``b``); here it gives ``a\\b``, as bash does.
"""

from __future__ import annotations

import random

import pytest

from shardstream.errors import ConfigError, UnbalancedBracesError
from shardstream.io.urls import MAX_NAMES, braceexpand

reference = pytest.importorskip("braceexpand")  # installed with webdataset (the dev setup pins 1.0.2)

CORPUS = [
    # plain, lists, empty alternatives
    "plain.tar", "", "{a,b}", "{a,b,c}.tar", "{,x}", "{x,}", "{,}", "{a,,b}", "x{}y", "{}",
    # numeric ranges: zero-padded, descending, negative, steps
    "shard-{000000..000009}.tar", "{8..11}", "{08..11}", "{8..011}", "{3..1}", "{-1..1}", "{2..-1}", "{-05..5}",
    "{0..9..4}", "{0..9..-4}", "{9..0..3}", "{1..1}", "{0..0}", "{-0..3}", "{00..3}", "{1..10..0}",
    # letter ranges, case and steps; mixed types stay literal
    "{a..e}", "{e..a}", "{a..g..2}", "{A..C}", "{Y..b}", "{b..Y}", "{z..A..5}", "{a..3}", "{3..a}", "{a..}",
    "{1..}", "{..3}", "{1..2..}", "{1...3}", "{a..b..c}", "{1.5..3}",
    # nesting
    "x{a,b{0..1}}y", "{a,{b,{c,d}}}", "{{a,b},c}x{0..9..2}", "python{2.{5..7},3.{2,3}}", "{{a,b}}", "{x{1,2}}",
    "{a,b}{1,2}{x,y}", "{{1..2},{a..b}}", "s{0..1}/{00..02}.tar",
    # literal groups and escapes
    "{single}", "keep{this}and\\{that\\}", r"esc\{0..1\}", r"{a\,b,c}", r"\{a,b\}", r"{a,b\}}", r"\}",
    "C:\\data\\train-{0..1}.tar", r"{1\{2,3}", "trailing\\",
    # the depth may dip below zero and come back (braceexpand's rule)
    "}{", "}{x}{", "}{{a,b}", "x}{{a}",
    # URLs
    "pipe:curl -s http://h/x-{00..01}.tar || true", "s3://bucket/{train,val}-{0000..0002}.tar",
    "https://h/a%20b/shard-{000..002}%d.tar", "%s{-03..2}%%", r"a\%{9..11}\}", "{0..3}", "x{-1..-3}",
    "https://host/path/shard-{000..002}.tar?x=1", "${DATA}/a.tar",
    # unbalanced: refused by both
    "photos-{0000..0002.tar", "open{brace", "close}brace", "{a,b}{", "}{a,b}", "{1{2,3}", "{{a,b}", "a}", r"\{a,b}",
]
TOKENS = ["{", "}", ",", "..", "a", "Z", "y", "0", "1", "05", "-", "-2", "\\", "\\\\", "x", "..2", "..-3", "9", "b",
          "{1..3}", "{a,b}", "{,}", "\\{", "\\,", "A", "z", "10", "007", "{0..2..2}", "{Y..b}", "{c..a}", "."]


def _random_patterns(count: int, seed: int = 28) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 10))) for _ in range(count)]


def _escaped_backslash_in_a_group(pattern: str) -> bool:
    depth = i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if depth > 0 and pattern[i + 1 : i + 2] == "\\":
                return True
            i += 2
            continue
        depth += (pattern[i] == "{") - (pattern[i] == "}")
        i += 1
    return False


def _theirs(pattern: str) -> list[str] | str:
    try:
        return list(reference.braceexpand(pattern))
    except reference.UnbalancedBracesError:
        return "unbalanced"


def _ours(pattern: str) -> list[str] | str:
    try:
        return braceexpand(pattern)
    except UnbalancedBracesError:
        return "unbalanced"


def _compare(patterns: list[str], expected: list[list[str] | str] | None = None) -> list[tuple[str, object, object]]:
    """The patterns we expand differently from webdataset's reference (``expected``: its answers, if known)."""
    differences = []
    for pattern, theirs in zip(patterns, expected or map(_theirs, patterns), strict=True):
        if theirs != "unbalanced" and _escaped_backslash_in_a_group(pattern):
            continue  # the one deliberate difference (module docstring)
        ours = _ours(pattern)
        if ours != theirs:
            differences.append((pattern, theirs, ours))
    return differences


def test_the_corpus_expands_as_in_webdataset():
    assert _compare(CORPUS) == []
    assert sum(_theirs(p) == "unbalanced" for p in CORPUS) == 9  # the corpus holds refused patterns too


def test_random_patterns_expand_as_in_webdataset():
    patterns = _random_patterns(10_000)
    theirs = [_theirs(p) for p in patterns]
    assert sum(t == "unbalanced" for t in theirs) > 500  # both kinds are well represented
    assert _compare(patterns, theirs) == []


def test_an_escaped_backslash_in_a_group_is_one_backslash():
    assert braceexpand(r"{a\\b,c}") == ["a\\b", "c"]
    assert braceexpand(r"{x\\y}") == ["{x\\y}"]


@pytest.mark.parametrize("pattern, position", [("photos-{0000..0002.tar", 7), ("close}brace", 5), ("{a,b}{", 5),
                                               ("}{a,b}", 0), (r"\{a,b}", 5)])
def test_an_unbalanced_pattern_names_the_brace_and_the_fix(pattern, position):
    with pytest.raises(UnbalancedBracesError) as caught:
        braceexpand(pattern)
    error = caught.value
    assert isinstance(error, ConfigError) and isinstance(error, ValueError)
    assert error.pattern == pattern and error.position == position
    assert repr(pattern) in str(error) and f"position {position}" in str(error) and "\\{" in str(error)


def test_the_caps_stay():
    with pytest.raises(ConfigError, match="more than"):
        braceexpand(f"{{0..{MAX_NAMES}}}")
    with pytest.raises(ConfigError, match="nests braces"):
        braceexpand("{" * 200 + "}" * 200)
