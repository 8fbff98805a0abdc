"""``shardstream ls`` and ``shardstream info``: what a dataset contains.

``ls`` prints one line per sample: the key, then ``ext:bytes`` for each field (``--json``: one JSON object per
line with ``url``, ``key`` and ``fields``). ``ls --fields key,cls,txt,json:meta.width`` prints a table instead
(tab-separated, a header line first; tarproc's ``tar2tsv``): per sample the key (``key``), the shard (``url``),
the text of a field (``cls``; tabs and newlines shown as ``\\t`` and ``\\n``, at most ``--width`` characters), or
a value inside a JSON field (``json:a.b``); an empty cell when the sample has no such field. With ``--json`` each
line is an object with those names. ``info`` prints a summary: shards, samples, extensions with their
counts and total/min/max sizes, the sample size histogram (powers of two), the first and last key
(``--json``: one JSON document with the same numbers, per shard too). Sizes are the bytes of the fields as
stored (compressed fields stay compressed). Extensions are compared as the reader does (lower-cased).

>>> field_value({"__key__": "k", "json": b'{"a": {"b": [5, 6]}}'}, "json:a.b.1"), field_value({"txt": b"a\\tb"}, "txt")
(6, 'a\\tb')
>>> s = Summary(); s.add({"__key__": "a", "__url__": "x.tar", "jpg": b"1234", "cls": b"1"})
>>> s.samples, s.extensions["jpg"], s.histogram()
(1, {'count': 1, 'bytes': 4, 'min': 4, 'max': 4}, [{'from': 4, 'to': 8, 'count': 1}])
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import fields, human, key_rule, progress, shard_samples
from ._inputs import resolve_inputs
from ._options import add_inputs, add_options, command, examples

__all__ = ["Summary", "field_value", "register", "run_info", "run_ls"]

LS_EXAMPLES = examples(
    "shardstream ls dataset.tar",
    "shardstream ls shards-*.tar --json",
    "shardstream ls 'pipe:cat dataset.tar' | head -n 3",
    "shardstream ls dataset.tar --fields key,cls,txt,json:i | head -n 4",
)
INFO_EXAMPLES = examples(
    "shardstream info dataset.tar",
    "shardstream info shards-*.tar --json",
    "cat dataset.tar | shardstream info -",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    for name, run, doc, epilog in (
        ("ls", run_ls, "list the samples of a dataset and their fields", LS_EXAMPLES),
        ("info", run_info, "count samples, extensions and sizes", INFO_EXAMPLES),
    ):
        p = command(sub, parents, name, doc, __doc__, epilog)
        add_inputs(p)
        add_options(p, json="machine-readable output")
        if name == "ls":
            p.add_argument("--fields", metavar="NAME,...",
                           help="print a table of these: key, url, a field's text (cls, txt), a JSON value (json:a.b)")
            p.add_argument("--width", type=int, default=200, metavar="N", help="--fields: at most N characters a cell")
        p.set_defaults(run=run)


def field_value(sample: dict[str, Any], spec: str) -> Any:
    """The value ``spec`` names in a sample (see the module docstring): text, a JSON value, or None."""
    if spec in ("key", "__key__"):
        return sample.get("__key__")
    if spec in ("url", "__url__"):
        return sample.get("__url__")
    field, _, path = spec.partition(":")
    data = sample.get(field)
    if data is None:
        return None
    text = bytes(data).decode("utf-8", "replace") if isinstance(data, (bytes, bytearray, memoryview)) else str(data)
    if not path:
        return text.strip()
    try:
        value = json.loads(text)
        for part in path.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return value


def _cell(value: Any, width: int) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def run_ls(args: argparse.Namespace) -> int:
    rule = key_rule(args, lowercase=True)
    out = sys.stdout
    specs = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    if specs is not None and not args.json:
        out.write("\t".join(specs) + "\n")
    for url in resolve_inputs(args.inputs):
        for sample in shard_samples(url, rule):
            if specs is not None:
                values = [field_value(sample, spec) for spec in specs]
                if args.json:
                    out.write(json.dumps(dict(zip(specs, values, strict=False)), ensure_ascii=False) + "\n")
                else:
                    out.write("\t".join(_cell(v, args.width) for v in values) + "\n")
                continue
            sizes = {ext: len(data) for ext, data in fields(sample)}
            if args.json:
                out.write(json.dumps({"url": url, "key": sample["__key__"], "fields": sizes}) + "\n")
            else:
                out.write(sample["__key__"] + "\t" + " ".join(f"{k}:{n}" for k, n in sizes.items()) + "\n")
    out.flush()
    return 0


class Summary:
    """Counts and sizes of samples, added one at a time."""

    def __init__(self) -> None:
        self.samples = 0
        self.bytes = 0
        self.extensions: dict[str, dict[str, int]] = {}
        self.sizes: dict[int, int] = {}  # power-of-two bucket -> samples
        self.first_key: str | None = None
        self.last_key: str | None = None

    def add(self, sample: dict[str, Any]) -> None:
        size = 0
        for ext, data in fields(sample):
            n = len(data)
            size += n
            e = self.extensions.get(ext)
            if e is None:
                self.extensions[ext] = {"count": 1, "bytes": n, "min": n, "max": n}
            else:
                e["count"] += 1
                e["bytes"] += n
                e["min"] = min(e["min"], n)
                e["max"] = max(e["max"], n)
        self.samples += 1
        self.bytes += size
        bucket = size.bit_length()
        self.sizes[bucket] = self.sizes.get(bucket, 0) + 1
        if self.first_key is None:
            self.first_key = sample["__key__"]
        self.last_key = sample["__key__"]

    def histogram(self) -> list[dict[str, int]]:
        """Samples per size range ``[from, to)`` (powers of two; an empty sample counts in ``[0, 1)``)."""
        return [{"from": (1 << b) >> 1, "to": 1 << b, "count": self.sizes[b]} for b in sorted(self.sizes)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "bytes": self.bytes,
            "extensions": dict(sorted(self.extensions.items())),
            "sample_size_histogram": self.histogram(),
            "first_key": self.first_key,
            "last_key": self.last_key,
        }


def run_info(args: argparse.Namespace) -> int:
    rule = key_rule(args, lowercase=True)
    urls = resolve_inputs(args.inputs)
    total = Summary()
    shards = []
    for url in progress(args, urls, desc="info", unit=" shards", total=len(urls)):
        shard = Summary()
        for sample in shard_samples(url, rule):
            shard.add(sample)
            total.add(sample)
        shards.append({"url": url, "samples": shard.samples, "bytes": shard.bytes})
    if args.json:
        json.dump({"shards": shards, **total.as_dict()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_info(shards, total)
    return 0


def _print_info(shards: list[dict[str, Any]], total: Summary) -> None:
    w = sys.stdout.write
    w(f"shards:   {len(shards)}\n")
    w(f"samples:  {total.samples}\n")
    w(f"bytes:    {total.bytes} ({human(total.bytes)}, fields only)\n")
    if total.samples:
        w(f"keys:     {total.first_key} ... {total.last_key}\n")
        w(f"mean:     {human(total.bytes / total.samples)} per sample\n")
    w("\nextension     samples        bytes         mean          min          max\n")
    for ext, e in sorted(total.extensions.items()):
        w(f"{ext:<12} {e['count']:>8} {human(e['bytes']):>12} {human(e['bytes'] / e['count']):>12} "
          f"{human(e['min']):>12} {human(e['max']):>12}\n")
    missing = {ext: total.samples - e["count"] for ext, e in total.extensions.items() if e["count"] < total.samples}
    if missing:
        w("missing in some samples: " + ", ".join(f"{ext} ({n})" for ext, n in sorted(missing.items())) + "\n")
    hist = total.histogram()
    if hist:
        w("\nsample size            samples\n")
        peak = max(h["count"] for h in hist)
        for h in hist:
            bar = "#" * max(1, round(40 * h["count"] / peak))
            w(f"{human(h['from']):>9} - {human(h['to']):<9} {h['count']:>8}  {bar}\n")
    sys.stdout.flush()
