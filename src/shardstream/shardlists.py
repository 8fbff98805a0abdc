"""webdataset's ``shardlists`` module: where shard URLs come from (lists, resampling, YAML specs, directories)
and how they are split across nodes and workers.

>>> envsubst("data/a-{0..2}.tar")  # ${NAME} would be replaced by the value of WDS_NAME
'data/a-{0..2}.tar'
>>> list(non_empty([1, 2]))
[1, 2]
>>> len(list(resampled(5)(["a", "b"])))
5
>>> expand_source("a-{0..2}.tar")
['a-0.tar', 'a-1.tar', 'a-2.tar']
"""

from __future__ import annotations

import dataclasses
import glob
import os
import random
import re
import sys
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from .errors import ConfigError, WorkerSplitError
from .io.trust import urls_from_document
from .io.urls import braceexpand, envsubst as _envsubst, expand_urls
from .pipeline import (
    Context,
    IterableDatasetBase as IterableDataset,
    ResampledShards,
    SimpleShardList,
    pipelinefilter,
    single_node_only,
    split_by_node,
    split_by_worker,
    stage,
)
from .spec.document import read_file
from .utils import glob_with_braces, is_iterable, obsolete

__all__ = [
    "DirectoryShardList", "IterableDataset", "MSSource", "MultiShardSample", "ResampledShardList", "ResampledShards",
    "SimpleShardList", "check_pid_is_running", "default_rng", "envlookup", "envsubst", "expand", "expand_source",
    "expand_urls", "get_pid_from_filename", "is_iterable", "non_empty", "obsolete", "pipelinefilter", "resampled",
    "resampled_", "shardspec", "single_node_only", "split_by_node", "split_by_worker", "without_last_extension",
]

#: webdataset's name for :class:`ResampledShards`
ResampledShardList = ResampledShards
#: the random generator :class:`MultiShardSample` uses until ``set_epoch`` seeds its own
default_rng = random.Random()


def envsubst(s: str) -> str:
    """``s`` with ``${NAME}`` replaced by the value of ``WDS_NAME`` (see :func:`shardstream.io.urls.envsubst`)."""
    return _envsubst(s)


def envlookup(m: re.Match[str]) -> str:
    """The value of ``WDS_<group 1 of m>`` (the replacement function of :func:`envsubst`)."""
    return _envsubst("${" + m.group(1) + "}")


def expand(s: str) -> str:
    """``~`` and ``${NAME}`` (from ``WDS_NAME``) expanded in a path of a :class:`MultiShardSample` spec."""
    return os.path.expanduser(_envsubst(s))


def expand_source(source: Any, max_urls: int = int(1e9)) -> list[str]:
    """A shard list from a URL pattern (brace-expanded), a list, or any iterable (at most ``max_urls``)."""
    if isinstance(source, str):
        return expand_urls(source)
    if isinstance(source, list):
        return source
    if is_iterable(source):
        return list(islice(source, max_urls))
    raise ConfigError(f"cannot make a shard list from {type(source).__name__}")


def _resampled(source: Iterable[Any], n: int = sys.maxsize, *, ctx: Context) -> Iterator[Any]:
    """Collect the whole source, then yield ``n`` items drawn from it with replacement (reproducible from the
    pipeline's seed, epoch, rank and worker)."""
    items = list(source)
    if not items:
        return
    rng = ctx.rng("resampled")
    for _ in range(n):
        yield items[rng.randrange(len(items))]


#: ``resampled(n)``: the stage form (``DataPipeline(..., resampled(1000), ...)``)
resampled = stage(_resampled, name="resampled", context=True, fluid=False)


def resampled_(src: Iterable[Any], n: int = sys.maxsize) -> Iterator[Any]:
    """``resampled(n)`` applied to ``src`` directly."""
    return iter(resampled(n)(src))


def non_empty(src: Iterable[Any]) -> Iterator[Any]:
    """Pass the items through; raise :class:`~shardstream.errors.WorkerSplitError` (a ValueError) if there were
    none (e.g. a worker that received no shard)."""
    count = 0
    for item in src:
        yield item
        count += 1
    if count == 0:
        raise WorkerSplitError("pipeline stage received no data at all and non_empty declared this an error; "
                               "check the shard list, and use at most as many workers as shards")


@dataclasses.dataclass
class MSSource:
    """One dataset of a :class:`MultiShardSample` spec."""

    name: str = ""
    perepoch: int = -1
    resample: bool = False
    urls: list[str] = dataclasses.field(default_factory=list)


class MultiShardSample(IterableDataset):
    """Shards from a YAML spec (webdataset's obsolete multi-dataset format; needs
    ``SHARDSTREAM_ALLOW_OBSOLETE=1``, as webdataset needs ``ALLOW_OBSOLETE=1``)::

        prefix: /data/            # optional
        datasets:
          - name: a
            shards: a-{000..009}.tar
            choose: 3             # shards drawn without replacement per epoch (or resample: N, with)
    """

    @obsolete(reason="replaced by the WIDS JSON format in webdataset")
    def __init__(self, fname: str | dict[str, Any], *, allow_commands: bool = False):
        self.epoch = -1
        self.allow_commands = allow_commands
        self.parse_spec(fname)

    def parse_spec(self, fname: str | dict[str, Any]) -> None:
        """Read the spec (a YAML file name or a dict). A file is read as untrusted input, like a dataset spec
        (bounded YAML; a ``pipe:`` URL in it needs ``allow_commands=True``); a dict is the caller's own."""
        self.rng: random.Random = default_rng
        spec = fname if isinstance(fname, dict) else read_file(fname)
        if not isinstance(spec, dict) or not isinstance(spec.get("datasets"), list):
            raise ConfigError(f"MultiShardSample spec {fname if isinstance(fname, str) else '<dict>'!r}: a mapping "
                              "with a list of 'datasets' is expected")
        unknown = set(spec) - {"prefix", "datasets", "buckets"}
        if unknown:
            raise ConfigError(f"MultiShardSample spec: unknown keys {sorted(unknown)}")
        prefix = expand(spec.get("prefix", ""))
        self.sources = []
        for ds in spec["datasets"]:
            unknown = set(ds) - {"buckets", "name", "shards", "resample", "choose"}
            if unknown:
                raise ConfigError(f"MultiShardSample dataset: unknown keys {sorted(unknown)}")
            buckets = ds.get("buckets", spec.get("buckets", [])) or [""]
            buckets = [expand(b) for b in ([buckets] if isinstance(buckets, str) else buckets)]
            if len(buckets) != 1:
                raise ConfigError(f"MultiShardSample: one bucket per dataset is supported, got {buckets}")
            shards = [ds["shards"]] if isinstance(ds["shards"], str) else ds["shards"]
            urls = [prefix + os.path.join(buckets[0], u) for url in shards for u in braceexpand(expand(url))]
            if not isinstance(fname, dict):
                urls = urls_from_document(urls, document=fname, allow_commands=self.allow_commands)
            resample, choose = ds.get("resample", -1), ds.get("choose", -1)
            if choose > len(urls):
                raise ConfigError(f"choose: {choose} is more than the {len(urls)} shards of {ds.get('name')}")
            if choose > 0 and resample > 0:
                raise ConfigError("specify only one of resample and choose")
            self.sources.append(MSSource(ds.get("name", "@" + buckets[0]), choose, resample, urls))

    def set_epoch(self, seed: int) -> None:
        """Draw the next epochs' shards from ``random.Random(seed)``."""
        self.rng = random.Random(seed)

    def get_shards_for_epoch(self) -> list[str]:
        """The shards of one epoch: each dataset's (resampled / chosen / all), shuffled together."""
        result: list[str] = []
        for source in self.sources:
            if source.resample > 0:
                result += self.rng.choices(source.urls, k=int(source.resample))
            elif source.perepoch > 0:
                result += self.rng.sample(source.urls, source.perepoch)
            else:
                result += source.urls
        self.rng.shuffle(result)
        return result

    def __iter__(self) -> Iterator[dict[str, str]]:
        for url in self.get_shards_for_epoch():
            yield {"url": url}


def shardspec(spec: str) -> Any:
    """A :class:`MultiShardSample` for a ``.yaml`` spec, else a :class:`SimpleShardList` of the URL pattern."""
    return MultiShardSample(spec) if spec.endswith(".yaml") else SimpleShardList(spec)


def check_pid_is_running(pid: int) -> bool:
    """Whether a process with this id exists."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def without_last_extension(fname: str) -> str:
    """``a.tar._123_`` -> ``a.tar``."""
    return re.sub(r"\.[^.]*$", "", fname)


def get_pid_from_filename(fname: str) -> int | None:
    """The process id in a claimed file name ``NAME._PID_``, or None."""
    m = re.match(r"^(.*)\._(\d+)_$", fname)
    return int(m.group(2)) if m else None


class DirectoryShardList(IterableDataset):
    """Shards taken from a directory as they appear (a work queue shared by processes): each shard is claimed by
    renaming it ``NAME._PID_``, yielded, then recycled by ``mode``: ``"resample"`` (renamed back), ``"keep"``
    (renamed ``NAME._done_``) or ``"unlink"``. ``select`` picks ``"random"`` or ``"oldest"``; ``poll`` seconds
    between looks at an empty directory (None: stop when empty); stop after ``timeout`` seconds.
    """

    def __init__(self, path: str, pattern: str = "*.{tar,tgz,tar.tgz}", poll: float | None = 1,
                 timeout: float = 1e12, mode: str = "resample", select: str = "random", fate: Any = None):
        if not os.path.isdir(path):
            raise ConfigError(f"DirectoryShardList: {path!r} is not a directory")
        if mode not in ("resample", "keep", "unlink") or select not in ("random", "oldest"):
            raise ConfigError(f"DirectoryShardList: mode {mode!r} / select {select!r} unknown")
        self.path, self.pattern, self.poll, self.timeout = os.path.join(path, ""), pattern, poll, timeout
        self.mode, self.select, self.fate = mode, select, fate

    def recycle(self, activename: str) -> None:
        """Give a claimed shard back (or keep / remove it, by ``mode``)."""
        if self.mode == "unlink":
            os.unlink(activename)
        elif self.mode == "keep":
            os.rename(activename, without_last_extension(activename) + "._done_")
        else:
            os.rename(activename, without_last_extension(activename))

    def cleanup_files_without_processes(self) -> None:
        """Recycle the shards claimed by processes that no longer run."""
        for fname in glob.glob(os.path.join(self.path, "*._*_")):
            pid = get_pid_from_filename(fname)
            if pid is not None and not check_pid_is_running(pid):
                self.recycle(fname)

    def __iter__(self) -> Iterator[dict[str, str]]:
        start = time.time()
        while time.time() - start < self.timeout:
            candidates = sorted(glob_with_braces(self.path + self.pattern))
            if not candidates:
                if self.poll is None:
                    return
                time.sleep(self.poll)
                continue
            if self.select == "oldest":
                candidate = min(candidates, key=lambda f: os.stat(f).st_mtime)
            else:
                candidate = random.choice(candidates)
            activename = f"{candidate}._{os.getpid()}_"
            try:
                os.rename(candidate, activename)
            except FileNotFoundError:  # another process claimed it first
                continue
            yield {"url": activename}
            self.recycle(activename)
            self.cleanup_files_without_processes()
