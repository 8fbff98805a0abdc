"""Parsing dataset specs into :class:`DatasetSpec` (the format: :mod:`shardstream.spec`).

>>> load_spec({"sources": [{"shards": "a-{0..1}.tar", "choose": 5}]}).counts()
[5]
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..io.packed import PackedUrls
from ..io.storage_config import StorageConfig, StorageRule
from ..io.trust import packed_from_document, urls_from_document
from ..io.urls import braceexpand, split_scheme
from ..streams import FORMATS
from .document import read_file
from .values import MAX_COUNT, mapping_of_texts, number, shown, text, texts

__all__ = ["DatasetSpec", "SourceSpec", "apportion", "is_spec", "load_spec"]

_TOP = {"sources", "datasets", "seed", "epoch_size", "prefix", "buckets", "storage", "name"}
_SOURCE = {"name", "shards", "format", "samples", "weight", "proportion", "repeat", "choose", "fields", "rename",
           "storage", "prefix", "buckets", "resample", "subsample", "choose_shards"}
_FORMATS = {"tar", "msgpack", "cbors", "jsonl"}


def is_spec(value: Any) -> bool:
    """Whether ``value`` names a spec rather than shard URLs or a dataset index: a mapping, a
    :class:`DatasetSpec`, a ``.yaml``/``.yml`` path, or a ``.json`` file whose top level has ``sources`` or
    ``datasets`` (a dataset index, ``{"format": "shardstream-dataset-index", ...}``, is not a spec).

    >>> is_spec("train.yaml"), is_spec({"sources": []}), is_spec("a-{0..9}.tar")
    (True, True, False)
    """
    if isinstance(value, DatasetSpec) or isinstance(value, Mapping):
        return True
    if not isinstance(value, (str, os.PathLike)):
        return False
    path = os.fspath(value)
    if path.lower().endswith((".yaml", ".yml")):
        return True
    if not path.lower().endswith(".json") or split_scheme(path)[0] not in ("", "file"):
        return False
    try:
        import json  # noqa: PLC0415 - stdlib, used on this path only

        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError:
        return False  # not there: whoever reads it as shards or an index says so
    except (ValueError, RecursionError):
        return True  # not valid JSON (or nested too deeply to read): load_spec says why
    return isinstance(data, Mapping) and bool({"sources", "datasets"} & set(data))


#: a source's ``shards:`` pattern of one numeric range naming at least this many URLs is kept packed
PACK_FROM = 4096


def _packed(shards: Any, base: str, folder: str | None, document: str, allow_commands: bool) -> PackedUrls | None:
    """The URLs of a long pattern of one numeric range (``train-{000000..999999}.tar``), packed without a ``str``
    per URL (:class:`~shardstream.io.packed.PackedUrls`), checked by the same rule as every other spec URL; None
    for any other ``shards:`` (a list, several patterns, other braces, a short range)."""
    if not isinstance(shards, str) or shards.startswith("{"):
        return None  # the pattern's own start decides its join with the prefix, as its names' starts would
    packed = PackedUrls.of_pattern(_join(base, shards, folder) if base or folder else shards, least=PACK_FROM)
    return None if packed is None else packed_from_document(packed, document=document, allow_commands=allow_commands)


def _checked(urls: list[str], document: str, allow_commands: bool) -> list[str]:
    """THE one place URLs read from a spec are checked: :func:`shardstream.io.trust.urls_from_document` (a command
    URL, as written or after the rewrite rules, needs ``allow_commands``)."""
    return urls_from_document(urls, document=document, allow_commands=allow_commands)


@dataclasses.dataclass(frozen=True)
class SourceSpec:
    """One source of a spec (see the module docstring for the keys). ``urls`` is a tuple, or for a pattern of one
    numeric range naming :data:`PACK_FROM` URLs or more, a :class:`~shardstream.io.packed.PackedUrls` (a
    sequence equal to the tuple of the same URLs, kept as two buffers: a million URLs are planned in well under a
    second, without a ``str`` each)."""

    name: str
    urls: Sequence[str]
    format: str = "tar"
    samples: int | None = None
    weight: float | None = None
    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None
    fields: tuple[str, ...] | None = None
    rename: tuple[tuple[str, str], ...] = ()
    storage: tuple[StorageRule, ...] = ()
    resample_shards: int | None = None
    choose_shards: int | None = None
    subsample: float | None = None

    @property
    def shares(self) -> bool:
        """Whether the source's count is a share of ``epoch_size`` (proportion or weight)."""
        return self.proportion is not None or self.weight is not None

    def transform(self, sample: Any) -> Any:
        """The sample with the source's field selection and renames applied (records that are not dicts pass).

        >>> SourceSpec("s", ("a.tar",), fields=("jpg", "txt"), rename=(("caption", "txt"),)).transform(
        ...     {"__key__": "k", "jpg": b"..", "txt": b"hi", "json": b"{}"})
        {'__key__': 'k', 'jpg': b'..', 'caption': b'hi'}
        """
        if not isinstance(sample, dict):
            return sample
        if self.fields is not None:
            keep = set(self.fields)
            sample = {k: v for k, v in sample.items() if k in keep or k.startswith("__")}
        if self.rename:
            renamed = {old: new for new, old in self.rename}
            sample = {renamed.get(k, k): v for k, v in sample.items()}
        return sample


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A parsed spec: its sources, ``epoch_size``, ``seed``, storage rules, and where it came from."""

    sources: tuple[SourceSpec, ...]
    epoch_size: int | None = None
    seed: int | str | None = None
    storage: tuple[StorageRule, ...] = ()
    document: str = "<dict>"

    def storage_rules(self) -> tuple[StorageRule, ...]:
        """All storage rules: each source's first (they are the more specific), then the spec's; each applies to the
        URLs of its source (or of the spec) only (:attr:`StorageRule.scope
        <shardstream.io.storage_config.StorageRule.scope>`)."""
        return tuple(r for s in self.sources for r in s.storage) + self.storage

    def counts(self, sizes: Sequence[int | None] | None = None) -> list[int]:
        """Samples per epoch of each source (see the module docstring); ``sizes`` gives the sources' sample counts
        where the spec has no ``samples:`` (from their indexes).

        >>> load_spec({"sources": [{"shards": "a.tar", "samples": 10, "repeat": 0.5},
        ...                        {"shards": "b.tar", "choose": 4}]}).counts()
        [5, 4]
        """
        sizes = list(sizes) if sizes is not None else [None] * len(self.sources)
        counts: list[int | None] = []
        for source, size in zip(self.sources, sizes, strict=False):
            size = source.samples if source.samples is not None else size
            if source.choose is not None:
                counts.append(source.choose)
            elif source.repeat is not None or not source.shares:
                if size is None:
                    raise ConfigError(f"{self.document}: source {source.name!r} needs `samples:` (or an index) to "
                                      "know how many samples an epoch takes from it; or give it `choose:`")
                counts.append(round((1.0 if source.repeat is None else source.repeat) * size))
            else:
                counts.append(None)
        shared = [i for i, s in enumerate(self.sources) if counts[i] is None]
        if shared:
            if self.epoch_size is None:
                raise ConfigError(f"{self.document}: proportion/weight need `epoch_size:` (samples per epoch)")
            fixed = sum(c for c in counts if c is not None)
            room = self.epoch_size - fixed
            if room < 0:
                raise ConfigError(f"{self.document}: the sources with choose/repeat take {fixed} samples, more "
                                  f"than epoch_size={self.epoch_size}")
            proportions = [self.sources[i].proportion for i in shared]
            if all(p is not None for p in proportions):
                total = round(math.fsum(proportions) * self.epoch_size)  # type: ignore[arg-type]
                if total > room:
                    raise ConfigError(f"{self.document}: the proportions take {total} samples, the sources with "
                                      f"choose/repeat {fixed}: more than epoch_size={self.epoch_size}")
                shares = apportion(proportions, total)  # type: ignore[arg-type]
            elif all(p is None for p in proportions):
                shares = apportion([self.sources[i].weight for i in shared], room)  # type: ignore[misc]
            else:
                raise ConfigError(f"{self.document}: use either proportion or weight for all shared sources")
            for i, share in zip(shared, shares, strict=False):
                counts[i] = share
        for source, count in zip(self.sources, counts, strict=False):
            if count is not None and count > MAX_COUNT:
                raise ConfigError(f"{self.document}: source {source.name!r} would take {shown(count)} samples an "
                                  "epoch, more than 2**53")
        return [int(c) for c in counts]  # type: ignore[arg-type]


def apportion(weights: Sequence[float], total: int) -> list[int]:
    """``total`` split in whole numbers proportional to ``weights`` that add up to ``total`` exactly (largest
    remainders; ties to the earlier source).

    >>> apportion([1, 1, 1], 10), apportion([0.7, 0.2, 0.1], 7)
    ([4, 3, 3], [5, 1, 1])
    """
    try:
        weights = [float(w) for w in weights]
    except (TypeError, ValueError, OverflowError) as e:
        raise ConfigError(f"weights must be numbers, not {shown(weights)}") from e
    if any(w < 0 or not math.isfinite(w) for w in weights) or (weights and max(weights) <= 0):
        raise ConfigError(f"weights must be finite, >= 0, with a positive sum: {shown(weights)}")
    if weights:  # relative: scaled to at most 1, so that their sum cannot overflow
        top = max(weights)
        weights = [w / top for w in weights]
    if total < 0:
        raise ConfigError(f"cannot share out {total} samples")
    if not weights:
        return []
    s = math.fsum(weights)
    exact = [w * total / s for w in weights]
    counts = [math.floor(x) for x in exact]
    left = total - sum(counts)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:left]:
        counts[i] += 1
    return counts


def _join(base: str, url: str, folder: str | None) -> str:
    if split_scheme(url)[0] or url.startswith("/") or url == "-":
        return url
    if base:
        return base + url if base.endswith(("/", ":")) else f"{base}/{url}"
    return os.path.join(folder, url) if folder else url


def _storage_rule(entry: Any, urls: Sequence[str], where: str) -> tuple[StorageRule, ...]:
    if entry is None:
        return ()
    if not isinstance(entry, Mapping) or "prefix" in entry or "bucket" in entry:
        raise ConfigError(f"{where}: a source's `storage:` is a mapping of settings (endpoint_url, profile...) "
                          "without prefix/bucket: it applies to the source's own URLs")
    common = os.path.commonprefix(list(urls))
    rule = StorageRule.from_dict({**entry, "prefix": common[: common.rfind("/") + 1] or common}, where)
    return (dataclasses.replace(rule, scope=frozenset(urls)),)  # these URLs only: never the whole bucket


def _shard_urls(value: Any, where: str) -> list[str]:
    """A source's ``shards:``: a string (``::``-separated brace patterns; no environment variables: a spec may
    come from anyone) or a list of URLs (paths too, in a dict)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    elif isinstance(value, list):
        value = [os.fspath(u) if isinstance(u, os.PathLike) else u for u in value]
    urls = texts(value, f"{where}: shards")
    return [u for part in value.split("::") for u in braceexpand(part)] if isinstance(value, str) else urls


def _source(entry: Any, i: int, top: Mapping[str, Any], document: str, folder: str | None, allow_commands: bool,
            webdataset: bool) -> SourceSpec:
    where = f"{document}: source {i}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a mapping with `shards:`, not {shown(entry)}")
    unknown = sorted(set(entry) - _SOURCE, key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {shown(unknown)}; known: {sorted(_SOURCE)}")
    if "shards" not in entry:
        raise ConfigError(f"{where} has no `shards:`")
    key = next((k for k in ("buckets", "prefix") if k in entry), None)
    buckets = texts(entry[key], f"{where}: {key}") if key else top.get("buckets") or [""]
    if len(buckets) != 1:
        raise ConfigError(f"{where}: one bucket per source (got {shown(buckets)}); write one source per bucket")
    base = _join(top.get("prefix") or "", buckets[0], None) if buckets[0] else top.get("prefix") or ""
    urls: Sequence[str] | None = _packed(entry["shards"], base, folder, document, allow_commands)
    if urls is None:
        named = _shard_urls(entry["shards"], where)
        urls = _checked([_join(base, u, folder) for u in named] if base or folder else named, document,
                        allow_commands)
    if not urls:
        raise ConfigError(f"{where}: `shards:` names no shard")
    name = text(entry.get("name", f"source{i}"), f"{where}: name", numbers=True)
    fmt = entry.get("format")
    if fmt is None:
        fmt = next((f for f, ends in FORMATS.items() if urls[0].lower().endswith(ends)), "tar")
    if not isinstance(fmt, str) or fmt not in _FORMATS:
        raise ConfigError(f"{where}: format must be one of {sorted(_FORMATS)}, not {shown(fmt)}")
    choose = number(entry.get("choose"), f"{where}: choose", integer=True)
    choose_shards = number(entry.get("choose_shards"), f"{where}: choose_shards", integer=True, positive=True)
    if webdataset and choose is not None:  # webdataset 0.2: `choose` counts shards
        choose, choose_shards = None, choose
    counts = [k for k in ("weight", "proportion", "repeat") if entry.get(k) is not None] + (["choose"] if choose
                                                                                            is not None else [])
    if len(counts) > 1:
        raise ConfigError(f"{where}: give one of weight, proportion, repeat, choose (not {counts})")
    shard_rules = [k for k in ("resample", "subsample") if entry.get(k) is not None] + (
        ["choose"] if choose_shards is not None else [])
    if len(shard_rules) > 1:
        raise ConfigError(f"{where}: give one of resample, choose (shards), subsample (not {shard_rules})")
    fields = entry.get("fields")
    if fields is not None:
        fields = tuple(fields.split(";") if isinstance(fields, str) else texts(fields, f"{where}: fields"))
    rename = mapping_of_texts(entry.get("rename") or {}, f"{where}: `rename:` (new name: old name)", "{image: jpg}")
    proportion = number(entry.get("proportion"), f"{where}: proportion")
    if proportion is not None and proportion > 1:
        raise ConfigError(f"{where}: proportion is a fraction of the epoch (<= 1), not {proportion}")
    subsample = number(entry.get("subsample"), f"{where}: subsample", positive=True)
    if subsample is not None and subsample > 1:
        raise ConfigError(f"{where}: subsample is a fraction of the shards (<= 1), not {subsample}")
    if choose_shards is not None and choose_shards > len(urls):
        raise ConfigError(f"{where}: choose {choose_shards} shards of {len(urls)}")
    return SourceSpec(
        name=name, urls=urls if isinstance(urls, PackedUrls) else tuple(urls), format=fmt,
        samples=number(entry.get("samples"), f"{where}: samples", integer=True),
        weight=number(entry.get("weight"), f"{where}: weight"), proportion=proportion,
        repeat=number(entry.get("repeat"), f"{where}: repeat"), choose=choose, fields=fields,
        rename=tuple(rename.items()),
        storage=_storage_rule(entry.get("storage"), urls, where),
        resample_shards=number(entry.get("resample"), f"{where}: resample", integer=True, positive=True),
        choose_shards=choose_shards, subsample=subsample)


def load_spec(spec: Any, *, allow_commands: bool = False) -> DatasetSpec:
    """Parse a spec: a path to a ``.yaml``/``.yml``/``.json`` file, a dict, or a :class:`DatasetSpec` (returned
    as is). Relative local shard paths in a file are relative to the file's folder. ``allow_commands=True``
    lets the spec's URLs run commands (``pipe:``); without it they raise
    :class:`~shardstream.errors.UnsafeURLError`.

    >>> load_spec({"prefix": "s3://b/", "datasets": [{"shards": "x-{0..1}.tar", "choose": 1}]}).sources[0]
    SourceSpec(name='source0', urls=('s3://b/x-0.tar', 's3://b/x-1.tar'), format='tar', samples=None, weight=None, \
proportion=None, repeat=None, choose=None, fields=None, rename=(), storage=(), resample_shards=None, choose_shards=1, \
subsample=None)
    """
    if isinstance(spec, DatasetSpec):
        return spec
    folder = None
    if isinstance(spec, Mapping):
        data, document = spec, "<dict>"
    elif isinstance(spec, (str, os.PathLike)):
        document = os.fspath(spec)
        if split_scheme(document)[0] not in ("", "file"):
            raise ConfigError(f"dataset spec {document!r}: read specs from local files (or pass a dict)")
        data = read_file(document)
        folder = os.path.dirname(os.path.abspath(document))
    else:
        raise ConfigError(f"a dataset spec is a path or a dict, not {type(spec).__name__}")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{document}: a dataset spec is a mapping with `sources:` (or `datasets:`), not "
                          f"{type(data).__name__} {shown(data)}")
    unknown = sorted(set(data) - _TOP, key=str)
    if unknown:
        raise ConfigError(f"{document}: unknown top-level key(s) {shown(unknown)}; known: {sorted(_TOP)}")
    for key in ("prefix", "name"):
        if data.get(key) is not None:
            text(data[key], f"{document}: {key}")
    if data.get("buckets") is not None:
        data = {**data, "buckets": texts(data["buckets"], f"{document}: buckets")}
    webdataset = "datasets" in data
    if webdataset and "sources" in data:
        raise ConfigError(f"{document}: give `sources:` or `datasets:` (webdataset 0.2), not both")
    entries = data.get("datasets" if webdataset else "sources")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{document}: `{'datasets' if webdataset else 'sources'}:` must be a non-empty list of "
                          f"sources, not {shown(entries)}")
    sources = tuple(_source(e, i, data, document, folder, allow_commands, webdataset) for i, e in enumerate(entries))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        repeated = sorted(n for n, k in collections.Counter(names).items() if k > 1)
        raise ConfigError(f"{document}: source names repeat: {shown(repeated)}")
    storage = data.get("storage")

    rules = StorageConfig.from_data({"storage": storage} if storage is not None else None, document).rules
    if rules:  # the spec's rules: for its own URLs only
        spec_urls = frozenset(url for s in sources for url in s.urls)
        rules = tuple(dataclasses.replace(rule, scope=spec_urls) for rule in rules)
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, str))):
        raise ConfigError(f"{document}: seed must be an integer or a string, not {type(seed).__name__} {shown(seed)}")
    return DatasetSpec(sources=sources, epoch_size=number(data.get("epoch_size"), f"{document}: epoch_size",
                                                           integer=True), seed=seed, storage=rules,
                       document=document)
