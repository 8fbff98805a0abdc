"""``shardstream sort``: rewrite a dataset sorted by key or by a field's value, in bounded memory.

``--by key`` (default) sorts by the sample key; ``--by FIELD`` by the text of a field (``--by cls``,
``--by txt``); ``--by FIELD:PATH`` by a value inside a JSON field (``--by json:meta.width``: keys separated by
dots, list positions as numbers). Values that read as numbers sort as numbers, before strings; samples without
the value come last (or ``--missing error``). Ties keep the input order, so the output is deterministic.
``--reverse`` sorts in descending order (ties still in input order).

When the samples do not fit in ``--memory`` they are sorted in runs written to temporary shards (in
``--tmpdir``) and merged: each sample is then read and written twice. Bytes are copied as they are.

>>> sort_value({"json": b'{"size": [3, 40]}'}, "json", ["size", "1"]), sort_value({"cls": b" 7"}, "cls", None)
((0, 40.0, ''), (0, 7.0, ''))
>>> sort_value({"txt": b"cat"}, "txt", None), sort_value({}, "txt", None)
((1, 0.0, 'cat'), (2, 0.0, ''))
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import ConfigError
from ..samples import KeyRule
from ..writer import TarWriter
from ._common import CommandError, Progress, dataset_samples, key_rule, parse_size, shard_samples
from ._inputs import resolve_inputs
from ._options import add_inputs, command, examples
from ._output import SampleOutput, add_output_options, finish, output_options

__all__ = ["register", "run", "sort_value", "sorted_samples"]

EXAMPLES = examples(
    "shardstream sort shards-*.tar -o by-key.tar",
    "shardstream sort dataset.tar --by cls --reverse -o by-class.tar",
    "shardstream sort dataset.tar --by json:i --memory 4K -o 'by-i-%06d.tar' --maxcount 8",
)

_RAW_RULE = KeyRule("first-dot", lowercase=False)
_OVERHEAD = 256
Value = tuple[int, float, str]


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "sort", "rewrite a dataset sorted by key or field value", __doc__, EXAMPLES)
    add_inputs(p)
    add_output_options(p)
    p.add_argument("--by", default="key", metavar="key|FIELD|FIELD:PATH",
                   help="sort by the key (default), a field's text, or a value in a JSON field (json:a.b)")
    p.add_argument("--reverse", action="store_true", help="descending order")
    p.add_argument("--missing", choices=("last", "error"), default="last",
                   help="samples without the field or value: last (default) or error")
    p.add_argument("--memory", type=parse_size, default=parse_size("1G"), metavar="SIZE",
                   help="memory for samples before sorted runs spill to temporary shards (default 1G)")
    p.add_argument("--tmpdir", metavar="DIR", help="directory for the temporary shards (default: the system's)")
    p.set_defaults(run=run)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value  # NaN sorts as text


def sort_value(sample: dict[str, Any], field: str, path: list[str] | None) -> Value:
    """``(rank, number, text)``: numbers (rank 0) before strings (1) before a missing value (2)."""
    data = sample.get(field)
    if data is None:
        return (2, 0.0, "")
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8", "replace")
    value: Any = data
    if path is not None:
        try:
            value = json.loads(data)
            for part in path:
                value = value[int(part)] if isinstance(value, list) else value[part]
        except (ValueError, KeyError, IndexError, TypeError):
            return (2, 0.0, "")
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    if isinstance(value, (int, float)):
        return (0, float(value), "")
    number = _number(value.strip())
    return (0, number, "") if number is not None else (1, 0.0, value)


def _key_function(by: str, missing: str) -> Any:
    if by == "key":
        return lambda s: (1, 0.0, s["__key__"])
    field, _, path = by.partition(":")
    parts = path.split(".") if path else None

    def key(sample: dict[str, Any]) -> Value:
        value = sort_value(sample, field, parts)
        if value[0] == 2 and missing == "error":
            raise CommandError(f"sample {sample['__key__']!r} (in {sample.get('__url__')}) has no {by!r} to sort "
                               "by; pass --missing last to put such samples at the end")
        return value

    return key


def _size(sample: dict[str, Any]) -> int:
    return _OVERHEAD * len(sample) + sum(len(v) for v in sample.values() if isinstance(v, (bytes, str)))


def _order(item: tuple[Value, int, dict[str, Any]], reverse: bool) -> tuple[Any, ...]:
    (rank, number, text), position, _ = item
    if not reverse:
        return (rank, number, text, position)
    # descending values, missing still last, ties in input order
    return (rank if rank == 2 else -rank, -number, _Desc(text), position)


@functools.total_ordering
class _Desc:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.text == other.text

    def __lt__(self, other: _Desc) -> bool:
        return self.text > other.text


def _write_run(directory: str, number: int, run: list[tuple[Value, int, dict[str, Any]]]) -> str:
    path = os.path.join(directory, f"run-{number:06d}.tar")
    with TarWriter(path, encoder=False, keep_meta=True) as sink:
        for value, position, sample in run:
            fields = {k: v for k, v in sample.items() if k not in ("__key__", "__url__")}
            sink.write({"__key__": f"{position:016x}", "__sortkey__": json.dumps(list(value)).encode(),
                        "__origkey__": sample["__key__"].encode(), **fields})
    return path


def _read_run(path: str) -> Iterator[tuple[Value, int, dict[str, Any]]]:
    for sample in shard_samples(path, _RAW_RULE):
        position = int(sample.pop("__key__"), 16)
        del sample["__url__"]
        rank, number, text = json.loads(sample.pop("__sortkey__"))
        key = sample.pop("__origkey__").decode("utf-8")
        yield (rank, number, text), position, {"__key__": key, **sample}


def sorted_samples(samples: Iterable[dict[str, Any]], by: str = "key", *, reverse: bool = False,
                   missing: str = "last", memory: int = 1 << 30, tmpdir: str | None = None
                   ) -> Iterator[dict[str, Any]]:
    """``samples`` sorted (see the module docstring): in memory, or by sorted runs and a merge."""
    key = _key_function(by, missing)
    order = functools.partial(_order, reverse=reverse)
    runs: list[str] = []
    buffer: list[tuple[Value, int, dict[str, Any]]] = []
    used = 0
    with tempfile.TemporaryDirectory(prefix="shardstream-sort-", dir=tmpdir) as directory:
        for position, sample in enumerate(samples):
            buffer.append((key(sample), position, sample))
            used += _size(sample)
            if used > memory and len(buffer) > 1:
                buffer.sort(key=order)
                runs.append(_write_run(directory, len(runs), buffer))
                buffer, used = [], 0
        buffer.sort(key=order)
        if not runs:
            for _, _, sample in buffer:
                yield sample
            return
        if buffer:
            runs.append(_write_run(directory, len(runs), buffer))
            buffer = []
        for _, _, sample in heapq.merge(*(_read_run(p) for p in runs), key=order):
            yield sample


def run(args: argparse.Namespace) -> int:
    if args.by != "key" and not args.by.partition(":")[0]:
        raise ConfigError(f"--by {args.by!r}: name a field, e.g. --by cls or --by json:meta.width")
    inputs = resolve_inputs(args.inputs)
    samples = dataset_samples(inputs, key_rule(args, lowercase=False))
    ordered = sorted_samples(samples, args.by, reverse=args.reverse, missing=args.missing, memory=args.memory,
                             tmpdir=args.tmpdir)
    with SampleOutput(args.output, inputs=inputs, **output_options(args)) as out, Progress(args, desc="sort") as bar:
        for sample in ordered:
            out.write(sample)
            bar.update()
    return finish(args, "sort", out.result(), out.summary())
