"""The ONE rule that turns tar member names into samples.

A WebDataset sample is the run of consecutive members that share a *key*. By default (identical to WebDataset)
the key is the member path up to the first ``.`` of its basename and the *extension* is the rest, lower-cased:

>>> KeyRule().split("train/a/b.seg.JPG")
('train/a/b', 'seg.jpg')

Basenames that contain dots of their own need another rule: ``"last-dot"``, a regular expression with two
groups, or any callable ``name -> (key, ext)``:

>>> KeyRule("last-dot").split("music/235342 Track 2.0 (Clean Version).mp3")
('music/235342 Track 2.0 (Clean Version)', 'mp3')
>>> KeyRule(r"(.*?)\\.(seg\\.png|[^.]+)$").split("a/x.y.seg.png")
('a/x.y', 'seg.png')

:func:`group_samples` groups ``(name, data, offset)`` members into sample dicts. Three things make a shard's
samples ill-defined, and each raises its own :class:`~shardstream.errors.SampleFormatError` (or, when the
caller passes a skipping ``handler``, is skipped and counted in :class:`SampleStats`; never silently merged):

- a member name with no extension (:class:`~shardstream.errors.MissingExtensionError`): the member is skipped;
- a member whose extension is ``__key__`` or ``__url__`` (:class:`~shardstream.errors.ReservedFieldError`), the
  names of the metadata every sample gets: the member is skipped, never allowed to overwrite them (other
  ``__*__`` extensions are fields like any other);
- the same extension twice in one sample (:class:`~shardstream.errors.DuplicateFieldError`): the whole sample
  is skipped, since there is no way to tell which copy is right;
- a key that reappears after other keys in the same shard (:class:`~shardstream.errors.InterleavedKeyError`):
  the later fragment is skipped (the earlier one was already complete when it was yielded).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Union

from .errors import (
    ConfigError,
    DuplicateFieldError,
    InterleavedKeyError,
    MissingExtensionError,
    ReservedFieldError,
    SampleFormatError,
    add_context,
)

__all__ = ["DEFAULT_RULE", "KeyRule", "RESERVED_FIELDS", "SampleStats", "group_samples"]
#: the metadata every sample gets from the reader; a member with one of these extensions is refused
RESERVED_FIELDS = frozenset(("__key__", "__url__"))
#: these live in :mod:`shardstream.reading` (the C-accelerated reading of shards) and stay importable from here
_READING = ("ColumnBatches", "iter_samples")

Splitter = Callable[[str], "tuple[str, str | None]"]
RuleSpec = Union[str, "re.Pattern[str]", Splitter, "KeyRule", None]
#: a handler gets the exception and returns True to skip and go on, False to stop; or it raises.
Handler = Callable[[BaseException], bool]


def _dot_splitter(last: bool, lowercase: bool) -> Splitter:
    """The built-in rules: split at the first (WebDataset) or last dot of the basename."""

    def split(name: str) -> tuple[str, str | None]:
        slash = name.rfind("/")
        dot = name.rfind(".") if last else name.find(".", slash + 1)
        if dot <= slash:
            return name, None
        return name[:dot], (name[dot + 1 :].lower() if lowercase else name[dot + 1 :])

    return split


class KeyRule:
    """How a member name splits into ``(key, extension)``; ``extension`` is None when there is none.

    ``rule`` is ``"first-dot"`` (default, WebDataset's rule), ``"last-dot"``, a regular expression (string or
    compiled) whose two groups are key and extension, or a callable returning ``(key, ext)`` (``ext`` may be
    None). ``lowercase`` lower-cases extensions (default, as WebDataset does); pass False to keep their case.

    >>> KeyRule(lowercase=False).split("img.JPG")
    ('img', 'JPG')
    >>> KeyRule().split("README")
    ('README', None)
    """

    __slots__ = ("split", "rule", "lowercase")
    rule: RuleSpec
    lowercase: bool

    def __init__(self, rule: RuleSpec = "first-dot", *, lowercase: bool = True):
        if isinstance(rule, KeyRule):
            lowercase, rule = rule.lowercase, rule.rule
        self.rule, self.lowercase = rule, lowercase
        if rule is None or rule in ("first-dot", "last-dot"):
            self.split: Splitter = _dot_splitter(rule == "last-dot", lowercase)
            return
        base = self._custom_splitter(rule)
        if lowercase:
            def split(name: str, _base: Splitter = base) -> tuple[str, str | None]:
                key, ext = _base(name)
                return key, (ext.lower() if ext is not None else None)

            self.split = split
        else:
            self.split = base

    @staticmethod
    def _custom_splitter(rule: RuleSpec) -> Splitter:
        if isinstance(rule, str | re.Pattern):
            try:
                pattern = re.compile(rule) if isinstance(rule, str) else rule
            except re.error as e:
                raise ConfigError(
                    f"key rule {rule!r} is neither 'first-dot', 'last-dot' nor a valid regular expression: {e}"
                ) from e
            if pattern.groups != 2:
                raise ConfigError(
                    f"key rule regex {pattern.pattern!r} must have exactly two groups (key, extension); "
                    f"it has {pattern.groups}"
                )

            def split_regex(name: str) -> tuple[str, str | None]:
                m = pattern.match(name)
                return (m.group(1), m.group(2)) if m else (name, None)

            return split_regex
        if callable(rule):
            return rule
        raise ConfigError(f"key rule must be 'first-dot', 'last-dot', a regex or a callable, not {rule!r}")

    def __repr__(self) -> str:
        return f"KeyRule({self.rule!r}, lowercase={self.lowercase})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (KeyRule, (self.rule,), {"lowercase": self.lowercase})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(self.rule, lowercase=state["lowercase"])  # type: ignore[misc]


DEFAULT_RULE = KeyRule()


@dataclasses.dataclass
class SampleStats:
    """Counts of what :func:`group_samples` skipped under a skipping handler (and of what it produced)."""

    samples: int = 0
    skipped_samples: int = 0
    skipped_members: int = 0
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)

    def count(self, exc: SampleFormatError, members: int, samples: int) -> None:
        self.skipped_members += members
        self.skipped_samples += samples
        name = type(exc).__name__
        self.reasons[name] = self.reasons.get(name, 0) + 1


def _reraise(exc: BaseException) -> bool:
    raise exc


_NOTHING = object()  # no member's data is this


def group_samples(
    members: Iterable[tuple[str, Any, int]],
    url: str | None = None,
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
    stats: SampleStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Group consecutive ``(name, data, offset)`` members sharing a key into sample dicts.

    Each sample is ``{"__key__": key, "__url__": url, ext: data, ...}``. ``handler`` decides what happens on a
    :class:`~shardstream.errors.SampleFormatError`: by default it is raised; a handler returning True skips
    (counted in ``stats``), False stops the shard.

    >>> members = [("a.txt", b"x", 512), ("a.cls", b"1", 1536), ("b.txt", b"y", 2560)]
    >>> [sorted(s) for s in group_samples(members, "s.tar")]
    [['__key__', '__url__', 'cls', 'txt'], ['__key__', '__url__', 'txt']]
    """
    split = _rule(rule).split
    yield from _group(members, url, split, handler or _reraise, stats if stats is not None else SampleStats())


def _rule(rule: RuleSpec) -> KeyRule:
    return rule if isinstance(rule, KeyRule) else KeyRule(rule) if rule is not None else DEFAULT_RULE


def _damaged(exc: Exception, url: str | None, split: Splitter, on_error: Handler, stats: SampleStats,
             current: dict[str, Any] | None, current_key: str | None) -> Iterator[dict[str, Any]]:
    """The end of a shard that cannot be read further: the sample being grouped is yielded if it is complete (the
    error names a member of another sample); then ``exc`` is raised, with the incomplete sample, if any, as its
    ``partial_sample`` (marked ``"__partial__": True``) for a reader whose handler skips the error to yield
    (webdataset yields it, unmarked). ``on_error`` (the handler of *sample* errors) is not asked."""
    member = getattr(exc, "member", None)
    if current is not None and member is not None and split(member)[0] != current_key:
        stats.samples += 1
        yield current
        current = None
    add_context(exc, url=url)
    if current is not None:
        try:
            exc.partial_sample = {**current, "__partial__": True}  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - exceptions with slots
            pass
    raise exc


def _group(
    members: Iterable[tuple[str, Any, int]],
    url: str | None,
    split: Splitter,
    on_error: Handler,
    stats: SampleStats,
    seen: set[str] | None = None,
    current: dict[str, Any] | None = None,
    current_key: str | None = None,
    pending: Iterable[str] | None = None,
    ahead: Any = _NOTHING,
) -> Iterator[dict[str, Any]]:
    """:func:`group_samples`, optionally going on from a state reached by the C grouping (``seen`` keys and the
    ``pending`` ones, iterated and added to ``seen`` only when a new key is first checked; the ``current`` sample and
    its key, with no problem pending): the one definition of every grouping decision.

    ``ahead``: the data of a member whose header came before its data (``tar.reader.AHEAD``, from a walk that
    announces members). A clean current sample is yielded as soon as such a header shows that the member starts a
    new sample (a new key and an extension the grouping takes): the same samples, errors and counts as when that
    member's data has arrived, only sooner."""
    seen = set() if seen is None else seen
    bad: SampleFormatError | None = None  # set when the current sample must be dropped
    n_bad = 0  # members of the current sample, counted once it is bad

    def problem(exc: SampleFormatError, members: int, samples: int) -> bool:
        """True to go on, False to stop; raises through the handler."""
        stats.count(exc, members, samples)
        return bool(on_error(exc))

    members = iter(members)
    while True:
        try:
            name, data, _offset = next(members)
        except StopIteration:
            break
        except Exception as exc:  # the shard is damaged or the stream broke: keep what was read (see _damaged)
            yield from _damaged(exc, url, split, on_error, stats, current if bad is None else None, current_key)
            return
        key, ext = split(name)
        if data is ahead:  # only a header: its data follows as the next member (the same one)
            if current is not None and bad is None and key != current_key and ext and ext not in RESERVED_FIELDS:
                stats.samples += 1
                yield current
                current = None  # complete, and handed out; the member (read next) starts the next one
            continue
        if key == current_key:  # the common case: one more field of the current sample
            if bad is not None:
                n_bad += 1
                continue
            if ext and ext not in current:  # type: ignore[operator]
                current[ext] = data  # type: ignore[index]
                continue
        if not ext:
            if not problem(MissingExtensionError("member has no extension", url=url, key=key, member=name), 1, 0):
                return
            continue
        if ext in RESERVED_FIELDS:
            error = ReservedFieldError(f"member extension {ext!r} is reserved for the sample's metadata", url=url,
                                       key=key, member=name)  # fmt: skip
            if not problem(error, 1, 0):
                return
            continue
        if key == current_key:
            bad = DuplicateFieldError(f"extension {ext!r} appears twice in one sample", url=url, key=key, member=name)
            # its fields, minus __key__/__url__, plus this one (key == current_key: current is not None)
            n_bad = len(current) - 1  # type: ignore[arg-type]
            continue
        if current is not None:
            if bad is None:
                stats.samples += 1
                yield current
            elif not problem(bad, n_bad, 1):
                return
        current_key, bad = key, None
        current = {"__key__": key, "__url__": url, ext: data}
        if pending:
            seen.update(pending)
            pending = None
        if key in seen:
            bad = InterleavedKeyError(
                "key appears again after other keys (members of one sample are not contiguous)",
                url=url, key=key, member=name,
            )
            n_bad = 1
        seen.add(key)
    if current is not None:
        if bad is None:
            stats.samples += 1
            yield current
        else:
            problem(bad, n_bad, 1)


def __getattr__(name: str) -> Any:
    """``iter_samples`` and ``ColumnBatches`` live in :mod:`shardstream.reading` (which builds on this module)."""
    if name in _READING:
        return getattr(importlib.import_module("shardstream.reading"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
