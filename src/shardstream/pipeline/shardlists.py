"""Shard lists: brace expansion, ``::``-joined lists, SimpleShardList and ResampledShards.

>>> braceexpand("shard-{000..002}.tar")
['shard-000.tar', 'shard-001.tar', 'shard-002.tar']
>>> braceexpand("{a,b{1..2}}-{x,y}")
['a-x', 'a-y', 'b1-x', 'b1-y', 'b2-x', 'b2-y']
>>> expand_urls("a-{0..1}.tar::b.tar")
['a-0.tar', 'a-1.tar', 'b.tar']
>>> [s["url"] for s in SimpleShardList("s-{0..2}.tar")]
['s-0.tar', 's-1.tar', 's-2.tar']
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Union

from ..errors import ConfigError
from .core import Context, Source

__all__ = ["ResampledShards", "SimpleShardList", "braceexpand", "expand_urls"]

Urls = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
_CHARS = re.compile(r"^(\w)\.\.(\w)(?:\.\.(-?\d+))?$")


def _find(text: str, char: str, start: int) -> int:
    """Index of the first unescaped ``char`` at or after ``start`` (-1 if none)."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == char:
            return i
        i += 1
    return -1


def _match(text: str, open_at: int) -> tuple[int, list[int]]:
    """(index of the matching ``}``, indices of the top-level commas between), or (-1, [])."""
    depth, commas, i = 0, [], open_at
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i, commas
        elif c == "," and depth == 1:
            commas.append(i)
        i += 1
    return -1, []


def _sequence(body: str) -> list[str] | None:
    m = _RANGE.match(body)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        lo, hi = m.group(1).lstrip("-"), m.group(2).lstrip("-")
        padded = (len(lo) > 1 and lo[0] == "0") or (len(hi) > 1 and hi[0] == "0")
        width = max(len(m.group(1)), len(m.group(2))) if padded else 0
        numbers = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [f"{n:0{width}d}" for n in numbers]
    m = _CHARS.match(body)
    if m:
        a, b = ord(m.group(1)), ord(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        return [chr(n) for n in (range(a, b + 1, step) if a <= b else range(a, b - 1, -step))]
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _expand(text: str, start: int = 0) -> list[str]:
    open_at = _find(text, "{", start)
    while open_at >= 0:
        close_at, commas = _match(text, open_at)
        if close_at < 0:
            break
        body = text[open_at + 1 : close_at]
        if commas:
            cuts = [open_at, *commas, close_at]
            choices = [text[cuts[i] + 1 : cuts[i + 1]] for i in range(len(cuts) - 1)]
        else:
            choices = _sequence(body)  # type: ignore[assignment]
        if choices is None:  # "{x}": literal braces; look further
            open_at = _find(text, "{", open_at + 1)
            continue
        prefix, rests = text[:open_at], _expand(text[close_at + 1 :])
        return [_unescape(prefix) + c + r for choice in choices for c in _expand(choice) for r in rests]
    return [_unescape(text)]


def braceexpand(pattern: str) -> list[str]:
    """Bash-style brace expansion: ``{a,b}`` alternatives, ``{000..099}`` zero-padded ranges, ``{a..e}``,
    ``{0..10..2}`` steps, nesting; ``\\{`` is a literal brace, and unmatched braces stay as they are.

    >>> braceexpand("x{1..10..4}y"), braceexpand("{9..11}"), braceexpand("keep{this}and\\\\{that}")
    (['x1y', 'x5y', 'x9y'], ['9', '10', '11'], ['keep{this}and{that}'])
    """
    return _expand(pattern)


def expand_urls(urls: Urls) -> list[str]:
    """A string is split on ``::`` and each part brace-expanded; a list (of strings or paths) is taken as is."""
    if isinstance(urls, (str, os.PathLike)):
        return [url for part in os.fspath(urls).split("::") for url in braceexpand(part)]
    if isinstance(urls, Sequence) or hasattr(urls, "__iter__"):
        result = []
        for url in urls:
            if not isinstance(url, (str, os.PathLike)):
                raise ConfigError(f"a shard list must contain strings or paths, not {url!r}")
            result.append(os.fspath(url))
        return result
    raise ConfigError(f"shards must be a string (with {{..}} and ::) or a list of URLs, not {urls!r}")


class SimpleShardList(Source):
    """The shards of ``urls``, in order, as ``{"url": url}`` items (what tarfile_to_samples reads).

    With ``seed``, the list is shuffled (before any split) differently every epoch, reproducibly.

    >>> list(SimpleShardList(["a.tar", "b.tar"]))
    [{'url': 'a.tar'}, {'url': 'b.tar'}]
    """

    def __init__(self, urls: Urls, seed: int | str | None = None):
        self.urls = expand_urls(urls)
        if not self.urls:
            raise ConfigError(f"the shard list {urls!r} is empty")
        self.seed = seed

    def __len__(self) -> int:
        return len(self.urls)

    def iterate(self, ctx: Context) -> Iterator[dict[str, Any]]:
        urls = list(self.urls)
        if self.seed is not None:
            ctx.replace(seed=self.seed, shared=True).rng("shardlist").shuffle(urls)
        for url in urls:
            yield {"url": url}

    def __repr__(self) -> str:
        return f"SimpleShardList({len(self.urls)} shards: {self.urls[0]!r}...)"


class ResampledShards(Source):
    """An endless stream of shards drawn at random with replacement (``nshards`` of them if given): each rank
    and worker draws its own, so no splitting is needed. Draws are reproducible from (seed, epoch, rank,
    worker); ``deterministic`` and ``worker_seed`` are accepted for webdataset compatibility (shardstream's
    draws are always deterministic).

    >>> r = ResampledShards("s-{0..9}.tar", nshards=5, seed=1)
    >>> draws = [s["url"] for s in r]
    >>> len(draws), draws == [s["url"] for s in r], set(draws) <= set(r.urls)
    (5, True, True)
    """

    def __init__(self, urls: Urls, nshards: int = sys.maxsize, seed: int | str | None = None,
                 deterministic: bool = True, worker_seed: Any = None, empty_check: bool = True):
        self.urls = expand_urls(urls)
        if not self.urls:
            raise ConfigError(f"the shard list {urls!r} is empty")
        self.nshards, self.seed = nshards, seed

    def iterate(self, ctx: Context) -> Iterator[dict[str, Any]]:
        rng = (ctx if self.seed is None else ctx.replace(seed=self.seed)).replace(shared=False).rng("resampled")
        for _ in range(self.nshards):
            yield {"url": self.urls[rng.randrange(len(self.urls))]}

    def __repr__(self) -> str:
        return f"ResampledShards({len(self.urls)} shards: {self.urls[0]!r}...)"
