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
- the same extension twice in one sample (:class:`~shardstream.errors.DuplicateFieldError`): the whole sample
  is skipped, since there is no way to tell which copy is right;
- a key that reappears after other keys in the same shard (:class:`~shardstream.errors.InterleavedKeyError`):
  the later fragment is skipped (the earlier one was already complete when it was yielded).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, Union

from .errors import ConfigError, DuplicateFieldError, InterleavedKeyError, MissingExtensionError, SampleFormatError

__all__ = ["ColumnBatches", "DEFAULT_RULE", "KeyRule", "SampleStats", "group_samples", "iter_samples"]

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

    def __init__(self, rule: RuleSpec = "first-dot", *, lowercase: bool = True):
        if isinstance(rule, KeyRule):
            rule, lowercase = rule.rule, rule.lowercase
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


def _group(
    members: Iterable[tuple[str, Any, int]],
    url: str | None,
    split: Splitter,
    on_error: Handler,
    stats: SampleStats,
    seen: set[str] | None = None,
    current: dict[str, Any] | None = None,
    current_key: str | None = None,
) -> Iterator[dict[str, Any]]:
    """:func:`group_samples`, optionally going on from a state reached by the C grouping (``seen`` keys, the
    ``current`` sample and its key, with no problem pending): the one definition of every grouping decision."""
    seen = set() if seen is None else seen
    bad: SampleFormatError | None = None  # set when the current sample must be dropped
    n_bad = 0  # members of the current sample, counted once it is bad

    def problem(exc: SampleFormatError, members: int, samples: int) -> bool:
        """True to go on, False to stop; raises through the handler."""
        stats.count(exc, members, samples)
        return bool(on_error(exc))

    for name, data, _offset in members:
        key, ext = split(name)
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
        if key == current_key:
            bad = DuplicateFieldError(f"extension {ext!r} appears twice in one sample", url=url, key=key, member=name)
            n_bad = len(current) - 1  # type: ignore[arg-type]  (its fields, minus __key__/__url__, plus this one)
            continue
        if current is not None:
            if bad is None:
                stats.samples += 1
                yield current
            elif not problem(bad, n_bad, 1):
                return
        current_key, bad = key, None
        current = {"__key__": key, "__url__": url, ext: data}
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


def iter_samples(
    stream: BinaryIO,
    url: str = "<stream>",
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
    stats: SampleStats | None = None,
    bufsize: int = 1 << 20,
    accelerate: bool | None = None,
    zero_copy: bool = False,
) -> Iterator[dict[str, Any]]:
    """The samples of one tar shard (plain or compressed): ``group_samples(iter_tar(stream, url), url, ...)``.

    Same samples, errors, warnings and ``stats`` as that composition, faster: with the default key rule and the
    C extension (:func:`shardstream.tar.accelerated`, or ``accelerate=True``), headers are walked and members
    grouped into sample dicts in one C pass. The C grouping makes only the clean steps (a new field, a new key);
    at a member without extension, a repeated extension or key, an extension starting with ``__``, a member of
    1 MiB or more, or any header the C walk leaves to Python, the rest of the shard goes through
    :func:`~shardstream.tar.iter_members` and :func:`group_samples` from the state reached, so every decision
    is theirs. ``accelerate=False`` or another key rule always takes the Python path.

    ``zero_copy=True``: when ``stream`` is an uncompressed tar file on a local file system (a plain regular file,
    see :func:`shardstream.tar.compress.map_tar`), the file is memory-mapped and every field is a read-only
    ``memoryview`` into the map instead of ``bytes``: no data is copied (the fast path for large fields). Same
    samples, errors and warnings otherwise; other streams are read as usual (fields are ``bytes``). A view keeps
    the map alive; ``bytes(view)`` copies. Members are grouped in Python (~1 us per member), so small fields are
    faster without it.

    >>> import io
    >>> from shardstream.tar import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a.txt", b"x"), tw.add("a.cls", b"1"), tw.add("b.txt", b"y")
    >>> [sorted(s.items()) for s in iter_samples(io.BytesIO(out.getvalue()), "s.tar")]
    [[('__key__', 'a'), ('__url__', 's.tar'), ('cls', b'1'), ('txt', b'x')], [('__key__', 'b'), ('__url__', 's.tar'), ('txt', b'y')]]
    """
    from .tar import compress, reader

    if bufsize < 1:
        raise ConfigError(f"bufsize must be a positive number of bytes, got {bufsize!r}")
    key_rule = _rule(rule)
    scan = reader.member_scan(accelerate)
    on_error = handler or _reraise
    stats = stats if stats is not None else SampleStats()
    mapped = compress.map_tar(stream) if zero_copy else None
    if mapped is not None:
        members = reader.iter_members_mapped(mapped, url, accelerate=accelerate)
        return _group(members, url, key_rule.split, on_error, stats)
    if scan is None or not _is_default(key_rule) or not hasattr(reader._scan, "scan_samples"):
        members = compress.iter_tar(stream, url, bufsize=bufsize, accelerate=accelerate)
        return _group(members, url, key_rule.split, on_error, stats)
    return compress.read_tar(
        stream, url, lambda tar: _grouped_in_c(reader.StreamBuffer(tar, bufsize), url, scan, on_error, stats)
    )


#: members at least this large leave the C grouping (the Python walk reads them with one copy, not two)
_C_GROUP_MAX = 1 << 20


def _is_default(rule: KeyRule) -> bool:
    """Whether ``rule`` is WebDataset's default one, which the C grouping implements."""
    return rule.rule in (None, "first-dot") and rule.lowercase


def _grouped_in_c(src: Any, url: str, scan: Any, on_error: Handler, stats: SampleStats) -> Iterator[dict[str, Any]]:
    """Samples grouped by ``_scan.scan_samples`` while it can; then :func:`_group` over the walk from there."""
    from .tar import reader

    scan_samples, split = reader._scan.scan_samples, DEFAULT_RULE.split  # type: ignore[union-attr]
    seen: set[str] = set()
    current: dict[str, Any] | None = None
    current_key: str | None = None
    while True:
        done, src.pos, current, current_key, need = scan_samples(
            src.buf, src.pos, url, seen, current, current_key, split
        )
        if done:
            stats.samples += len(done)
            yield from done
        if not (0 < need < _C_GROUP_MAX and src.fill(need)):
            break  # a member or header for Python; or the stream ends where Python must report it
    members = reader.walk(src, url, scan)
    yield from _group(members, url, split, on_error, stats, seen, current, current_key)


class ColumnBatches:
    """Samples read straight into column batches ``{field: [value, ...]}`` of ``batch_size`` rows, across shards.

    The rows of one batch have the same fields: a sample with other fields than the batch's ends the batch early
    (a shorter batch) and starts the next. Fields are in the order of the batch's first sample. The samples, their
    errors and ``stats`` are those of :func:`iter_samples`; with the default key rule and the C extension no
    per-sample Python code runs (the fast path for batches of small fields; decode the columns with
    :meth:`shardstream.codecs.Decoder.decode_columns`).

    >>> import io
    >>> from shardstream.tar import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     for i in range(5):
    ...         _ = tw.add(f"{i}.txt", b"t%d" % i), tw.add(f"{i}.cls", b"%d" % i)
    >>> batches = ColumnBatches(2)
    >>> [b["cls"] for b in batches.read(io.BytesIO(out.getvalue()), "s.tar")]
    [[b'0', b'1'], [b'2', b'3']]
    >>> batches.flush()
    {'__key__': ['4'], '__url__': ['s.tar'], 'txt': [b't4'], 'cls': [b'4']}
    """

    def __init__(
        self,
        batch_size: int,
        *,
        rule: RuleSpec = None,
        handler: Handler | None = None,
        stats: SampleStats | None = None,
        bufsize: int = 1 << 20,
        accelerate: bool | None = None,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = batch_size
        self.rule, self.handler, self.bufsize, self.accelerate = _rule(rule), handler, bufsize, accelerate
        self.stats = stats if stats is not None else SampleStats()
        self.columns: dict[str, list[Any]] = {}

    def read(self, stream: BinaryIO, url: str = "<stream>") -> Iterator[dict[str, list[Any]]]:
        """Read one shard; yield the batches it completes (the last, partial one stays for the next shard)."""
        from .tar import compress, reader

        scan = reader.member_scan(self.accelerate)
        if scan is None or not _is_default(self.rule) or not hasattr(reader._scan, "scan_samples"):
            samples = iter_samples(stream, url, rule=self.rule, handler=self.handler, stats=self.stats,
                                   bufsize=self.bufsize, accelerate=self.accelerate)
            return self._add_all(samples)
        return compress.read_tar(stream, url, lambda tar: self._read_in_c(reader.StreamBuffer(tar, self.bufsize), url, scan))

    def add(self, sample: dict[str, Any]) -> dict[str, list[Any]] | None:
        """Add one sample; return the batch it completed or ended (None if none)."""
        columns, done = self.columns, None
        if columns and columns.keys() != sample.keys():  # other fields: the batch ends before this sample
            done, columns = columns, {}
        if not columns:
            self.columns = columns = {k: [v] for k, v in sample.items()}
        else:
            for k, v in sample.items():
                columns[k].append(v)
        if len(next(iter(columns.values()))) >= self.batch_size:
            # full; when the batch also ended before this sample (done is set), batch_size >= 2, so not here
            done, self.columns = columns, {}
        return done

    def flush(self) -> dict[str, list[Any]] | None:
        """The partial batch left (None if empty); the batcher starts empty again."""
        columns, self.columns = self.columns, {}
        return columns or None

    def _add_all(self, samples: Iterable[dict[str, Any]]) -> Iterator[dict[str, list[Any]]]:
        for sample in samples:
            done = self.add(sample)
            if done is not None:
                yield done

    def _read_in_c(self, src: Any, url: str, scan: Any) -> Iterator[dict[str, list[Any]]]:
        from .tar import reader

        scan_samples, split = reader._scan.scan_samples, DEFAULT_RULE.split  # type: ignore[union-attr]
        on_error, stats = self.handler or _reraise, self.stats
        seen: set[str] = set()
        current: dict[str, Any] | None = None
        current_key: str | None = None
        while True:
            before = len(next(iter(self.columns.values()), ()))
            _, src.pos, current, current_key, need = scan_samples(
                src.buf, src.pos, url, seen, current, current_key, split, self.columns, self.batch_size
            )
            stats.samples += len(next(iter(self.columns.values()), ())) - before
            if need == -2:
                yield self.flush()  # type: ignore[misc]
                continue
            if not (0 < need < _C_GROUP_MAX and src.fill(need)):
                break
        members = reader.walk(src, url, scan)
        yield from self._add_all(_group(members, url, split, on_error, stats, seen, current, current_key))
