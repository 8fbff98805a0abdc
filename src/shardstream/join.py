"""Joins: one tar set per modality, read as one sample stream by key.

Images in one shard set, captions in another, embeddings added later in a third: each set holds some fields of
the same samples, under the same keys. A join gives each sample of the *primary* set (the first) the fields its
partners hold under its key.

- :func:`join_streams` reads the sets in lockstep: streams whose shards have the same boundaries (shard ``i``
  of every set holds the same keys). Partners are read ahead as far as needed to find a key (at most
  ``max_pending`` samples held), so the keys need not be in the same order within a shard. Give every set the
  same shard order (the same ``seed`` and ``shardshuffle``, no sample shuffle before the join; shuffle after it).
- :class:`Join` is the same lockstep join as a pipeline: fluid methods (``Join(a, b).shuffle(1000).decode()``),
  ``set_epoch`` handed to the sets, and ``state_dict()``/``load_state_dict()`` to resume mid-epoch;
- :func:`join_indexed` looks each key up in the partners' indexes (any shard boundaries, any order): partners are
  :class:`~shardstream.indexed.IndexedDataset` s (or anything with ``get(key)`` raising ``KeyError``).

A key that a partner lacks raises :class:`~shardstream.errors.MissingPartnerError` naming the key and the sets
without it; a ``handler`` that returns True skips the sample instead (``warn_and_continue``). The lockstep joins
(:func:`join_streams`, :class:`Join`) also raise it, once the primary set ends, for keys that only a partner has
(a caption without its image): the message counts them and names the first; a ``handler`` that returns True
ignores them. :func:`join_indexed` only looks up the primary's keys, so it never sees such keys. A field present
in two sets is a :class:`~shardstream.errors.ConfigError` naming both (rename one first).

>>> from shardstream.writer import TarWriter
>>> import shardstream as wds
>>> for name, field in (("images", "jpg"), ("captions", "txt")):
...     with TarWriter(f"{name}.tar") as sink:
...         for i in range(3):
...             n = sink.write({"__key__": f"s{i}", field: f"{field} {i}".encode()})
>>> joined = join_streams(wds.WebDataset("images.tar", shardshuffle=False),
...                       wds.WebDataset("captions.tar", shardshuffle=False), names=["images", "captions"])
>>> [(s["__key__"], s["jpg"], s["txt"]) for s in joined][:2]
[('s0', b'jpg 0', b'txt 0'), ('s1', b'jpg 1', b'txt 1')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .errors import ConfigError, MissingPartnerError
from .pipeline import DataPipeline
from .pipeline.context import Context
from .pipeline.cursors import Cursor, require
from .pipeline.stages.multisource import MultiSource, SubCursors, restore_each, saved_list
from .resume.fields import field as state_field, problem, refuse, within

__all__ = ["Join", "join_indexed", "join_streams", "merge_fields"]

Handler = Callable[[BaseException], bool]


def _reraise(exn: BaseException) -> bool:
    raise exn


def _names(names: Sequence[str] | None, count: int) -> list[str]:
    if names is None:
        return [f"set {i}" for i in range(count)]
    names = [str(n) for n in names]
    if len(names) != count:
        raise ConfigError(f"join: {len(names)} names for {count} sets")
    return names


def merge_fields(sample: dict[str, Any], part: dict[str, Any], names: tuple[str, str]) -> dict[str, Any]:
    """``sample`` with the fields of ``part`` added (``__key__``/``__url__`` stay the primary's; a partner's URL is
    kept as ``__url_<set>__``). A field in both is a ConfigError naming both sets.

    >>> merge_fields({"__key__": "k", "jpg": 1}, {"__key__": "k", "__url__": "c.tar", "txt": 2}, ("img", "cap"))
    {'__key__': 'k', 'jpg': 1, '__url_cap__': 'c.tar', 'txt': 2}
    """
    out = dict(sample)
    for field, value in part.items():
        if field == "__url__":
            out[f"__url_{names[1]}__"] = value
        elif field.startswith("__") and field.endswith("__"):
            continue
        elif field in out:
            raise ConfigError(f"join: the field {field!r} of sample {sample.get('__key__')!r} is in both "
                              f"{names[0]!r} and {names[1]!r}; rename it in one of them (rename_keys / a spec's "
                              "rename:)")
        else:
            out[field] = value
    return out


def _missing(key: Any, url: Any, lacking: list[str], names: list[str]) -> MissingPartnerError:
    return MissingPartnerError(f"no sample of this key in {', '.join(repr(n) for n in lacking)} (joined sets: "
                               f"{names})", url=url, key=key)


class _Partner:
    """One partner stream, read ahead into a dict of pending samples by key."""

    def __init__(self, stream: Iterable[dict[str, Any]], name: str, limit: int):
        self.it, self.name, self.limit = iter(stream), name, limit
        self.pending: dict[Any, dict[str, Any]] = {}
        self.done = False

    def take(self, key: Any) -> dict[str, Any] | None:
        if key in self.pending:
            return self.pending.pop(key)
        while not self.done:
            try:
                sample = next(self.it)
            except StopIteration:
                self.done = True
                break
            if sample.get("__key__") == key:
                return sample
            if len(self.pending) >= self.limit:
                raise MissingPartnerError(
                    f"{self.limit} samples of {self.name!r} read ahead without finding this key: the sets are not "
                    "in the same order (same shards, same shard order?); use join_indexed for other layouts",
                    key=key)
            self.pending[sample.get("__key__")] = sample
        return None


def join_streams(primary: Iterable[dict[str, Any]], *partners: Iterable[dict[str, Any]],
                 names: Sequence[str] | None = None, handler: Handler = _reraise,
                 max_pending: int = 10_000) -> Iterator[dict[str, Any]]:
    """Join sample streams with the same shard boundaries and shard order, by ``__key__`` (module docstring).

    A partner's samples without a primary sample are a :class:`~shardstream.errors.MissingPartnerError` too,
    raised (or handed to ``handler``) when the primary stream ends, after every joined sample:

    >>> import shardstream as wds
    >>> from shardstream.writer import TarWriter
    >>> with TarWriter("more-captions.tar") as sink:
    ...     for i in range(4):
    ...         n = sink.write({"__key__": f"s{i}", "txt": b"caption"})
    >>> joined = join_streams(wds.WebDataset("images.tar", shardshuffle=False),
    ...                       wds.WebDataset("more-captions.tar", shardshuffle=False), names=["images", "captions"])
    >>> [s["__key__"] for s in joined]
    Traceback (most recent call last):
    ...
    shardstream.errors.MissingPartnerError: 1 sample(s) of 'captions' have no sample in 'images' (first: 's3') ...
    """
    names_ = _names(names, 1 + len(partners))
    readers = [_Partner(p, n, max_pending) for p, n in zip(partners, names_[1:], strict=False)]
    for sample in primary:
        key, merged, lacking = sample.get("__key__"), sample, []
        for reader in readers:
            part = reader.take(key)
            if part is None:
                lacking.append(reader.name)
            else:
                merged = merge_fields(merged, part, (names_[0], reader.name))
        if lacking:
            if handler(_missing(key, sample.get("__url__"), lacking, names_)):
                continue
            return
        yield merged
    for reader in readers:
        extra = list(reader.pending) + [s.get("__key__") for s in reader.it]
        if extra and not handler(MissingPartnerError(
                f"{len(extra)} sample(s) of {reader.name!r} have no sample in {names_[0]!r} (first: {extra[0]!r})",
                key=extra[0])):
            return


def join_indexed(primary: Iterable[dict[str, Any]], *partners: Any, names: Sequence[str] | None = None,
                 handler: Handler = _reraise) -> Iterator[dict[str, Any]]:
    """Join a sample stream with indexed partners (``partner.get(key)``, any shard boundaries and order).

    >>> from shardstream.indexed import IndexedDataset, index_dataset
    >>> _ = index_dataset(["captions.tar"], "captions.json")
    >>> joined = join_indexed([{"__key__": "s2", "jpg": b".."}], IndexedDataset("captions.json"))
    >>> [(s["__key__"], s["txt"]) for s in joined]
    [('s2', b'txt 2')]
    """
    names_ = _names(names, 1 + len(partners))
    for sample in primary:
        key, merged, lacking = sample.get("__key__"), sample, []
        for partner, name in zip(partners, names_[1:], strict=False):
            try:
                part = partner.get(key)
            except KeyError:
                lacking.append(name)
                continue
            merged = merge_fields(merged, part, (names_[0], name))
        if lacking:
            if handler(_missing(key, sample.get("__url__"), lacking, names_)):
                continue
            return
        yield merged


class _PartnerCursor:
    """A partner's cursor read ahead by key; its saved position is the oldest sample still held (re-read on
    restore), plus the keys already given out after it (skipped when read again)."""

    def __init__(self, cursor: Cursor, name: str, limit: int):
        self.cursor, self.name, self.limit = cursor, name, limit
        self.pending: dict[Any, dict[str, Any]] = {}
        self.history: list[tuple[Any, Any]] = []  # (mark before, key) of every sample read since the oldest pending
        self.given: set[Any] = set()  # keys of the history given out
        self.skip: set[Any] = set()
        self.done = False

    def _read(self) -> tuple[Any, dict[str, Any]] | None:
        """The next sample not to skip, with the cursor's mark before it (None at the end)."""
        while not self.done:
            mark = self.cursor.mark()
            try:
                sample = next(self.cursor)
            except StopIteration:
                self.done = True
                return None
            key = sample.get("__key__")
            if key in self.skip:
                self.skip.discard(key)
                continue
            if self.pending:
                self.history.append((mark, key))
            return mark, sample
        return None

    def take(self, key: Any) -> dict[str, Any] | None:
        if key in self.pending:
            sample = self.pending.pop(key)
            self._given(key)
            return sample
        while (read := self._read()) is not None:
            mark, sample = read
            if sample.get("__key__") == key:
                self._given(key)
                return sample
            if len(self.pending) >= self.limit:
                raise MissingPartnerError(f"{self.limit} samples of {self.name!r} read ahead without finding this "
                                          "key: the sets are not in the same order", key=key)
            if not self.pending:
                self.history = [(mark, sample.get("__key__"))]
            self.pending[sample.get("__key__")] = sample
        return None

    def _given(self, key: Any) -> None:
        if self.pending:
            self.given.add(key)
        else:
            self.history, self.given = [], set()

    def mark(self) -> tuple[Any, tuple[Any, ...]]:
        if not self.pending:
            return self.cursor.mark(), tuple(self.skip)
        return self.history[0][0], tuple(self.given | self.skip)

    def state_at(self, mark: tuple[Any, tuple[Any, ...]]) -> dict[str, Any]:
        return {"at": self.cursor.state_at(mark[0]), "skip": sorted(mark[1], key=repr)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        what = f"Join partner {self.name}"
        state = require(state, ("at", "skip"), what)
        skip = state_field(state, "skip", list, what=what)
        for i, key in enumerate(skip):  # sample keys: strings (or the ints and None of sources other than tars)
            wrong = None if key is None else problem(key, (str, int))
            if wrong:
                raise refuse(what, f"skip/{i}", wrong)
        with within("at"):
            self.cursor.load_state_dict(state["at"])
        self.pending, self.history, self.given, self.done = {}, [], set(), False
        self.skip = set(skip)


class _JoinSource(MultiSource):
    name = "Join"

    def __init__(self, datasets: Sequence[Any], names: list[str], handler: Handler, max_pending: int):
        if len(datasets) < 2:
            raise ConfigError("Join needs a primary set and at least one partner")
        super().__init__(datasets)
        self.names, self.handler, self.max_pending = names, handler, max_pending

    def cursor(self, ctx: Context | None) -> Cursor:
        return _JoinCursor(self, ctx if ctx is not None else Context.current(seed=self.seed))


class _JoinCursor(Cursor):
    def __init__(self, source: _JoinSource, ctx: Context):
        self.source, self.subs = source, SubCursors(source, ctx)
        self.primary, *partners = self.subs.open()  # opened at once (the partners wrap theirs)
        self.partners = [_PartnerCursor(c, n, source.max_pending) for c, n in zip(partners, source.names[1:], strict=False)]
        self.ended = False
        self.restorable = self.subs.restorable

    def __next__(self) -> dict[str, Any]:
        names = self.source.names
        while not self.ended:
            try:
                sample = next(self.primary)
            except StopIteration:
                self.ended = True
                for partner in self.partners:
                    extra = list(partner.pending)
                    while (more := partner._read()) is not None:
                        extra.append(more[1].get("__key__"))
                    if extra and not self.source.handler(MissingPartnerError(
                            f"{len(extra)} sample(s) of {partner.name!r} have no sample in {names[0]!r} (first: "
                            f"{extra[0]!r})", key=extra[0])):
                        break
                break
            key, merged, lacking = sample.get("__key__"), sample, []
            for partner in self.partners:
                part = partner.take(key)
                if part is None:
                    lacking.append(partner.name)
                else:
                    merged = merge_fields(merged, part, (names[0], partner.name))
            if not lacking:
                return merged
            if not self.source.handler(_missing(key, sample.get("__url__"), lacking, names)):
                self.ended = True
        raise StopIteration

    def mark(self) -> Any:
        return self.primary.mark(), [p.mark() for p in self.partners], self.ended

    def state_at(self, mark: Any) -> dict[str, Any]:
        primary, partners, ended = mark
        return {"primary": self.primary.state_at(primary),
                "partners": [p.state_at(m) for p, m in zip(self.partners, partners, strict=False)], "ended": ended}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Any) -> None:
        state = require(state, ("primary", "partners", "ended"), "Join")
        partners = saved_list(state, "partners", len(self.partners), "Join", noun="partners")
        ended = state_field(state, "ended", bool, what="Join")
        with within("primary"):
            self.primary.load_state_dict(state["primary"])
        restore_each(self.partners, partners, "partners")
        self.ended = ended


class Join(DataPipeline):
    """The lockstep join of ``datasets`` (the first is the primary) as a pipeline (see the module docstring).

    >>> import shardstream as wds
    >>> joined = Join([wds.WebDataset("images.tar"), wds.WebDataset("captions.tar")], names=["img", "cap"])
    >>> it = iter(joined); first = next(it)["__key__"]; state = joined.state_dict()
    >>> again = Join([wds.WebDataset("images.tar"), wds.WebDataset("captions.tar")], names=["img", "cap"])
    >>> again.load_state_dict(state); [s["txt"] for s in again]
    [b'txt 1', b'txt 2']
    """

    def __init__(self, datasets: Iterable[Any], names: Sequence[str] | None = None, handler: Handler = _reraise,
                 max_pending: int = 10_000, seed: int | str | None = None):
        datasets = list(datasets)
        super().__init__(_JoinSource(datasets, _names(names, len(datasets)), handler, max_pending), seed=seed)
