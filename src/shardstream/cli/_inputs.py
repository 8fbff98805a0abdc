"""The one source resolver of the commands that read shards: what a user names -> shard URLs, in order.

Every reading command (``ls``, ``info``, ``verify``, ``index``, ``extract``, ``cat``, ``split``, ``shuffle``,
``sort``, ``map``, ``view``) passes its INPUT arguments through :func:`resolve_inputs`, so each of them takes:

- a shard path or URL (``s3://...``, ``https://...``, ``pipe:CMD``), and ``-`` (standard input, once);
- a directory: its shards (``*.tar``, ``*.tar.gz``, ``*.tgz``...) in sorted order (``info out/``);
- a glob the shell did not expand (``'shards/*.tar'``) and a brace pattern (``'train-{000..009}.tar'``);
- a dataset spec (``.yaml``/``.yml``, or ``.json`` with ``sources:``): the shards of its sources, in order (its
  ``storage:`` settings apply to them);
- a dataset index (``.json`` from ``shardstream index -o``): the shards it lists.

An argument that names no shard is a :class:`~shardstream.errors.ConfigError` naming it.

>>> import os
>>> os.makedirs("resolved", exist_ok=True)
>>> for name in ("b.tar", "a.tar", "a.tar.ssidx"):
...     open(os.path.join("resolved", name), "wb").close()
>>> resolve_inputs(["resolved"]) == [os.path.join("resolved", "a.tar"), os.path.join("resolved", "b.tar")]
True
>>> resolve_inputs(["resolved/*.tar"]) == resolve_inputs(["resolved"])
True
>>> resolve_inputs(["s-{0..1}.tar", "-"])
['s-0.tar', 's-1.tar', '-']
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ..errors import ConfigError
from ..io.urls import collect_inputs, expand_inputs, local_path

__all__ = ["INPUT_HELP", "resolve_inputs"]

#: what the INPUT arguments of a reading command may be (their --help text)
INPUT_HELP = ("shard paths or URLs, directories of shards, globs, brace patterns ('train-{000..009}.tar'), "
              "dataset specs (.yaml), dataset indexes (.json), or - (standard input)")

_DOCUMENTS = (".yaml", ".yml", ".json")


def _json_kind(path: str) -> str | None:
    """``"spec"``, ``"index"`` or None (not a JSON document we know) for a local ``.json`` file."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if {"sources", "datasets"} & set(data):
        return "spec"
    return "index" if str(data.get("format", "")).endswith("dataset-index") else None


def _document_kind(arg: str) -> str | None:
    """Whether ``arg`` names a dataset spec (``"spec"``), a dataset index (``"index"``) or neither."""
    lowered = arg.lower()
    if not lowered.endswith(_DOCUMENTS):
        return None
    path = local_path(arg)
    if lowered.endswith((".yaml", ".yml")):
        return "spec"
    return _json_kind(path) if path is not None and os.path.isfile(path) else None


def _spec_urls(arg: str) -> list[str]:
    from ..io.storage_config import add_storage_rules  # noqa: PLC0415 - only a spec needs them
    from ..spec import load_spec  # noqa: PLC0415 - the spec package pulls in the pipeline: only specs need it

    spec = load_spec(arg)
    not_tar = [s.name for s in spec.sources if s.format != "tar"]
    if not_tar:
        raise ConfigError(f"{arg}: the sources {not_tar} are record streams, not tar shards; the command reads "
                          "tar shards (read record streams with WebDataset(spec) in Python)")
    if spec.storage_rules():  # scoped to the spec's own URLs
        add_storage_rules(spec.storage_rules())
    return [url for source in spec.sources for url in source.urls]


def _index_urls(arg: str) -> list[str]:
    from ..indexed import DatasetIndex  # noqa: PLC0415 - only a dataset index needs it

    return [entry.url for entry in DatasetIndex.load(arg).shards]


def resolve_inputs(inputs: Sequence[str], *, keep_indexes: bool = False) -> list[str]:
    """The shard URLs of the INPUT arguments of a reading command (see the module docstring).

    ``keep_indexes``: a dataset index stays as it is (the viewer opens it itself, with the indexes it names).
    """
    def expand(arg: str) -> list[str]:
        kind = _document_kind(arg)
        if kind == "spec":
            return _spec_urls(arg)
        if kind == "index":
            return [arg] if keep_indexes else _index_urls(arg)
        return expand_inputs([arg], directories=True, globs=True)

    return collect_inputs(inputs, expand)
