"""Fuzz target: dataset spec files (YAML or JSON, :func:`shardstream.spec.load_spec`).

An input is the text of a spec file; its seed's ending (``spec-*.yaml``, ``spec-*.json``) names the file it is
written to. Allowed: a :class:`~shardstream.spec.DatasetSpec` or a :class:`~shardstream.errors.ConfigError`
(``UnsafeURLError`` is one). Findings besides those of :func:`targets.outcome`: a parsed spec holding a URL that
runs a command (no ``allow_commands`` is passed), counts that are not whole numbers >= 0, one count per source,
and an error message that shows a password, secret or token written in the spec (the seeds and the mutations
put ``s3cr3tpw`` in credentials and URLs).
"""

from __future__ import annotations

import copy
import json
import os
import random

import yaml
from mutators import flip
from targets import _TMP, Finding, outcome

from shardstream.errors import ConfigError
from shardstream.io.trust import runs_command
from shardstream.spec import load_spec

SECRET = "s3cr3tpw"
_KEYS = ["name", "shards", "format", "samples", "weight", "proportion", "repeat", "choose", "fields", "rename",
         "storage", "prefix", "buckets", "resample", "subsample", "choose_shards", "sources", "datasets", "seed",
         "epoch_size", "unknown"]  # fmt: skip
VALUES: list[object] = [
    None, True, -1, 0, 1, 3, 2**63, 10**400, 0.5, 1.5, float("nan"), float("inf"), -0.0, "", "x", "7",
    "pipe:touch /tmp/shardstream-fuzz-pwned", "PIPE:id", "a-{0..3}.tar::pipe:id", "a-{0..99999999}.tar",
    "a-{0..2}-{0..2}.tar", "a-{3..0}.tar", "a-{0..}.tar", "a-{a,b,{c,d}}.tar", "${HOME}/a.tar", "${WDS_X}",
    "s3://b/a.tar", "../../etc/passwd", "file:///etc/passwd", f"http://user:{SECRET}@host/a.tar", "-", "/",
    "jsonl", "tar", "msgpack", [], {}, [1, 2], ["a.tar", 3], [[["a.tar"]]], {"a": "b"}, {"image": ["jpg"]},
    {"secret": SECRET, "key": "k"}, {"token": SECRET}, {"headers": {"Authorization": f"Bearer {SECRET}"}},
    [{"bucket": "b", "secret": SECRET, "bogus": 1}], [{"prefix": "s3://b/", "token": SECRET, "anon": "x"}],
]  # fmt: skip
# YAML features inserted as text: aliases (and a billion-laughs shape), tags, merge keys, deep nesting
SNIPPETS = [
    "sources: [{shards: !!python/object/apply:os.system [id]}]\n", "sources: [{shards: !!binary aGVsbG8=}]\n",
    "sources: [{shards: a.tar, samples: !!timestamp 2001-12-14}]\n", "sources: !!set {a, b}\n",
    "name: &b {shards: a.tar, weight: 1}\nsources: [{<<: *b, name: x}, {<<: *b, name: y}]\n",
    "sources: " + "[" * 1200 + "]" * 1200 + "\n", "sources: [{shards: a.tar}]\n" + "x: y\n" * 3,
    "sources:\n- shards: a.tar\n  name: a\n- shards: b.tar\n  name: a\n", "\ufeffsources: [{shards: a.tar}]\n",
    "sources: [{shards: a.tar}]\n---\nsources: [{shards: b.tar}]\n", "%YAML 1.1\n---\nsources: [{shards: a.tar}]\n",
]  # fmt: skip


def check_spec(name: str, data: bytes, rng: random.Random) -> None:
    """Load the spec; check what a loaded one holds and that no error shows a secret."""
    path = os.path.join(_TMP, "spec" + name[name.rindex("."):])
    with open(path, "wb") as f:
        f.write(data)
    loaded = outcome(lambda: load_spec(path), (ConfigError,))
    if loaded[0] == "error":
        _no_secret(loaded[2])
        return
    spec = loaded[1]
    for source in spec.sources:
        for url in source.urls:
            if runs_command(url):
                raise Finding(f"a spec naming a command was accepted without allow_commands: {url!r}")
    sizes = [rng.choice([None, 0, 1, 10, 10**6]) for _ in spec.sources]
    counted = outcome(lambda: spec.counts(sizes), (ConfigError,))
    if counted[0] == "error":
        _no_secret(counted[2])
        return
    counts = counted[1]
    if len(counts) != len(spec.sources) or any(not isinstance(c, int) or c < 0 for c in counts):
        raise Finding(f"counts {counts} for {len(spec.sources)} sources")
    for source in spec.sources:
        outcome(lambda source=source: source.transform({"__key__": "k", "jpg": b"1", "txt": b"2"}), (ConfigError,))


def _no_secret(message: str) -> None:
    if SECRET in message:
        raise Finding(f"an error message shows a secret written in the spec: {message[:300]}")


def mutate_spec(rng: random.Random, data: bytes, name: str) -> bytes:
    """A spec with a value replaced, a key added or removed, a YAML feature inserted, or bytes flipped."""
    roll = rng.random()
    if roll < 0.15:
        return flip(rng, data)
    if roll < 0.24:
        return rng.choice(SNIPPETS).encode()
    if roll < 0.25:
        return _alias_bomb(rng.randint(2, 10)).encode()
    try:
        doc = yaml.safe_load(data)
    except (yaml.YAMLError, ValueError, RecursionError):
        return flip(rng, data)
    for _ in range(rng.randint(1, 3)):
        doc = _mutate_node(rng, doc)
    if name.endswith(".json") and rng.random() < 0.8:
        return json.dumps(doc, default=str).encode()
    try:
        return yaml.safe_dump(doc, allow_unicode=rng.random() < 0.5, default_flow_style=rng.random() < 0.3).encode()
    except (yaml.YAMLError, ValueError, RecursionError):
        return json.dumps(doc, default=str).encode()


def _alias_bomb(levels: int) -> str:
    """A spec of a few hundred bytes whose ``shards:`` list is 8**levels strings once its aliases are followed."""
    lines = ["name:", "- &l0 [a.tar, a.tar, a.tar, a.tar, a.tar, a.tar, a.tar, a.tar]"]
    lines += [f"- &l{i} [{', '.join([f'*l{i - 1}'] * 8)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nsources: [{{shards: *l{levels - 1}}}]\n"


def _mutate_node(rng: random.Random, node: object, depth: int = 0) -> object:
    if isinstance(node, dict) and node and rng.random() < 0.8:
        roll = rng.random()
        key = rng.choice(list(node))
        if roll < 0.5:
            node[key] = _mutate_node(rng, node[key], depth + 1)
        elif roll < 0.75:
            node[key] = copy.deepcopy(rng.choice(VALUES))
        elif roll < 0.9:
            node[rng.choice(_KEYS)] = copy.deepcopy(rng.choice(VALUES))
        else:
            del node[key]
        return node
    if isinstance(node, list) and node and rng.random() < 0.8:
        i = rng.randrange(len(node))
        roll = rng.random()
        if roll < 0.6:
            node[i] = _mutate_node(rng, node[i], depth + 1)
        elif roll < 0.8:
            node.append(json.loads(json.dumps(node[i], default=str)))  # a copy: repeated names, more sources
        else:
            node[i] = copy.deepcopy(rng.choice(VALUES))
        return node
    return copy.deepcopy(rng.choice(VALUES)) if depth else node


def corpus_seeds() -> dict[str, bytes]:
    """The checked-in seeds of this kind (``--make-corpus``)."""
    plain = """seed: 0
epoch_size: 100
prefix: s3://bucket/data/
storage:
  - bucket: bucket
    endpoint_url: http://127.0.0.1:7480
    secret: s3cr3tpw
    key: k
sources:
  - name: laion
    shards: laion-{000..003}.tar
    samples: 1000
    proportion: 0.7
    fields: [jpg, txt]
    rename: {image: jpg, caption: txt}
  - name: captions
    shards: /data/captions-{0..1}.jsonl
    weight: 3
  - name: fixed
    shards: [a.tar, b.tar]
    choose: 5
    storage: {profile: reader, token: s3cr3tpw}
"""
    wds = """buckets: https://user:s3cr3tpw@host/data/
datasets:
  - name: a
    shards: a-{0..9}.tar
    resample: 4
  - name: b
    buckets: gs://other/
    shards: b-{00..19}.tar
    choose: 3
    repeat: 2
    samples: 50
  - name: c
    shards: c.tar::d.tar
    subsample: 0.5
    samples: 10
"""
    doc = {"epoch_size": 10, "seed": "s", "sources": [
        {"name": "a", "shards": ["a-0.tar", "a-1.tar"], "weight": 2, "format": "tar"},
        {"name": "b", "shards": "b-{0..3}.cbors", "weight": 1, "fields": "x;y", "choose_shards": 2},
        {"name": "c", "shards": "c.msgpack", "repeat": 0.5, "samples": 8}]}
    return {"spec-plain.yaml": plain.encode(), "spec-wds.yaml": wds.encode(),
            "spec-doc.json": json.dumps(doc).encode()}
