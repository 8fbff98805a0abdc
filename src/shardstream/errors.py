"""The one exception tree of shardstream.

Every error raised on purpose by shardstream derives from :class:`ShardstreamError` *and* from the builtin
that describes it best, so ``except ValueError`` / ``except OSError`` keep working in user code::

    ShardstreamError                       base of everything below
    ├── ConfigError(ValueError)            bad settings, bad arguments combinations, bad spec files
    │   ├── StateError                     a checkpoint cannot be saved or restored here (another pipeline,
    │   │                                  configuration, rank or worker; a stage that keeps no state)
    │   ├── UnsafeURLError                 a file (dataset index, recipe...) names a URL that runs a command, and
    │   │                                  the caller did not opt in (``allow_commands=True``, ``--allow-commands``)
    │   └── UnbalancedBracesError          a brace pattern (``train-{000..009.tar``) has a ``{`` or ``}`` without
    │                                      its partner (webdataset's ``braceexpand`` raises its error of this name)
    ├── MissingDependencyError(ImportError)  an optional extra is not installed; names the pip command
    ├── ShardError                         something wrong with one shard; carries ``url``
    │   ├── TarFormatError(ValueError, tarfile.ReadError)  not a valid tar: truncated, bad checksum, garbage;
    │   │   │                              carries ``offset``
    │   │   └── NotATarError               not a tar at all: empty, or it starts like a JPEG, an HTML page, a
    │   │                                  Parquet file...; ``looks_like`` says which, the message what to do
    │   ├── SampleFormatError(ValueError)  members do not form valid samples; carries ``key`` and ``member``
    │   │   ├── DuplicateFieldError        the same extension twice in one sample
    │   │   ├── MissingExtensionError      a member whose name has no extension
    │   │   ├── ReservedFieldError         a member named like the sample's metadata (``KEY.__url__``)
    │   │   ├── InterleavedKeyError        a key reappears after other keys (interleaved members)
    │   │   ├── MissingFieldError          a stage asks a sample for a field it lacks (``to_tuple("jgp")``);
    │   │   │                              names the closest field it has (``did you mean 'jpg'?``)
    │   │   └── MissingPartnerError        a joined sample set has no sample of this key (``join``)
    │   ├── StaleIndexError(ValueError)    a shard's index does not match the shard (changed since indexing,
    │   │                                  or the index is unreadable); the message says how to rebuild it
    │   ├── RecordFormatError(ValueError)  a record file (TFRecord, Parquet..., msgpack/CBOR/JSON-lines stream
    │   │                                  files) is corrupt: a bad checksum, a truncated record; carries
    │   │                                  ``offset`` (and ``record``, its number, where known)
    │   ├── OpenError(OSError)             the shard could not be opened / fetched / piped
    │   └── WriteError(OSError)            a shard could not be written (disk full, interrupted, ...)
    ├── DecodeError(ValueError)            a field could not be decoded; carries ``url``, ``key``, ``field``
    │   │                                  (``DecodingError`` is webdataset's name for it: an alias)
    │   ├── UnsafeDecodeError              decoding needs an explicit opt-in (unpickling, torch.load)
    │   └── DecodeLimitError               a field would decode to more bytes or pixels than the limits allow
    ├── EncodeError(ValueError)            a value could not be encoded for its extension
    ├── ObsoleteNameError(AttributeError)  an old webdataset name (``wds.ShardList``...); names the replacement
    ├── WorkerSplitError(RuntimeError, ValueError)  a rank or worker would receive no shard
    │   └── UnevenSplitError               the shards cannot be shared evenly between the ranks (DDP would hang);
    │                                      carries ``shards`` and ``ranks``, names the fixes
    └── ProcessingError(RuntimeError)      tasks of a processing or conversion job failed (after retries);
                                           ``failures`` lists each input with its error, ``result`` the rest

The second builtin of ``TarFormatError`` and ``WorkerSplitError`` is what webdataset raises in those cases
(``tarfile.ReadError`` for a damaged shard, ``ValueError`` for a worker without data), so ``except`` clauses
written for webdataset keep catching them.

Context (shard url, sample key, field) is stored in attributes *and* in the message; the original exception is
always chained with ``raise ... from cause``. Code that adds context to an error after the fact uses
:func:`add_context`, which appends a note and never edits ``args``.
"""

from __future__ import annotations

import tarfile
from typing import Any

from .redact import redact, redact_text

__all__ = [
    "ConfigError",
    "DecodeError",
    "DecodeLimitError",
    "DecodingError",
    "DuplicateFieldError",
    "EncodeError",
    "InterleavedKeyError",
    "MissingDependencyError",
    "MissingExtensionError",
    "MissingFieldError",
    "MissingPartnerError",
    "NotATarError",
    "ObsoleteNameError",
    "OpenError",
    "ProcessingError",
    "RecordFormatError",
    "ReservedFieldError",
    "SampleFormatError",
    "ShardError",
    "ShardstreamError",
    "StaleIndexError",
    "StateError",
    "TarFormatError",
    "UnbalancedBracesError",
    "UnevenSplitError",
    "UnsafeDecodeError",
    "UnsafeURLError",
    "WorkerSplitError",
    "WriteError",
    "add_context",
]


class ShardstreamError(Exception):
    """Base class of every error shardstream raises on purpose.

    Its message never shows a secret: a password or token in a URL, a signed query string, a registered secret
    key are masked (:mod:`shardstream.redact`), whoever builds the message.

    >>> str(OpenError("cannot open 'http://alice:pw@host/x.tar'"))
    "cannot open 'http://alice:***@host/x.tar'"
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))

    def add_note(self, note: str, /) -> None:
        """As :meth:`BaseException.add_note`, with the note redacted."""
        note = redact_text(note)
        if hasattr(Exception, "add_note"):
            super().add_note(note)  # type: ignore[misc]  # 3.11+; mypy may check for 3.10
        else:  # Python 3.10: the attribute that 3.11+ tracebacks show
            self.__notes__ = [*getattr(self, "__notes__", ()), note]


class ConfigError(ShardstreamError, ValueError):
    """Invalid configuration: arguments, settings files or environment values."""


class StateError(ConfigError):
    """A state (checkpoint) cannot be saved or restored: it comes from another pipeline or configuration, another
    rank or worker, or a stage cannot say where it is. The message names the difference and what to do.
    ``except ConfigError`` and ``except ValueError`` still catch it.

    >>> issubclass(StateError, ConfigError) and issubclass(StateError, ValueError)
    True
    """


class UnsafeURLError(ConfigError):
    """A URL read from a file would run a command (``pipe:CMD``) and the caller did not opt in.

    ``url`` is the URL and ``document`` the file that names it. URLs given directly in code or on the command
    line are trusted; URLs inside files run commands only with ``allow_commands=True`` (``--allow-commands``).
    """

    def __init__(self, url: str, *, document: str):
        self.url, self.document = redact(url), document
        super().__init__(
            f"{document!r} names the URL {url!r}, which runs a shell command; shardstream runs commands named "
            "inside files only with allow_commands=True (command line: --allow-commands): pass it only if you "
            f"trust {document!r}"
        )


class UnbalancedBracesError(ConfigError):
    """A brace pattern (``train-{000..009.tar``) has a ``{`` never closed or a ``}`` closing nothing: ``pattern``,
    and ``position``, that brace's index. webdataset raises ``braceexpand.UnbalancedBracesError``; both are
    ``ValueError`` s. Example: :func:`shardstream.braceexpand`."""

    def __init__(self, pattern: str, position: int):
        self.pattern, self.position = pattern, position
        if pattern[position:position + 1] == "{":
            problem = f"the '{{' at position {position} is never closed: add its '}}'"
        else:
            problem = f"the '}}' at position {position} closes no '{{': remove it"
        shown = repr(pattern) if len(pattern) <= 120 else f"...{pattern[max(0, position - 50):position + 50]!r}..."
        super().__init__(f"unbalanced braces in the brace pattern {shown}: {problem}, or write a literal brace "
                         "with a backslash (\\{ or \\})")


class MissingDependencyError(ShardstreamError, ImportError):
    """An optional dependency is missing. The message names the extra: ``pip install 'shardstream[s3]'``."""

    def __init__(self, feature: str, extra: str, module: str | None = None):
        self.feature, self.extra, self.module = feature, extra, module
        super().__init__(
            f"{feature} needs the optional dependency {module or extra!r}, which is not installed; "
            f"install it with: pip install 'shardstream[{extra}]'"
        )


def _where(url: str | None = None, key: str | None = None, field: str | None = None, offset: int | None = None) -> str:
    parts = []
    if url is not None:
        parts.append(f"shard {url!r}")
    if offset is not None:
        parts.append(f"offset {offset}")
    if key is not None:
        parts.append(f"sample {key!r}")
    if field is not None:
        parts.append(f"field {field!r}")
    return ", ".join(parts)


class ShardError(ShardstreamError):
    """A problem tied to one shard; ``url`` names it."""

    def __init__(self, message: str, *, url: str | None = None):
        self.url = redact(url) if url is not None else None  # what it is shown as: never a secret
        super().__init__(message)


class TarFormatError(ShardError, ValueError, tarfile.ReadError):
    """The bytes are not a valid (or complete) tar archive. ``offset`` is the byte offset of the bad header."""

    def __init__(self, problem: str, *, url: str | None = None, offset: int | None = None, member: str | None = None):
        self.problem, self.offset, self.member = problem, offset, member
        where = _where(url=url or "<stream>", offset=offset)
        if member is not None:
            where += f", member {member!r}"
        super().__init__(
            f"{problem} ({where}); the shard is corrupt or truncated: re-download or rebuild it", url=url
        )


class NotATarError(TarFormatError):
    """Not a tar at all: empty, or its first bytes are another kind of file's. ``looks_like`` says what
    (``"it starts like a JPEG image"``), the message also what to do; ``offset`` is 0.

    >>> str(NotATarError("it starts like a JPEG image", "check the URL", url="cat.tar"))
    "not a tar file: it starts like a JPEG image (shard 'cat.tar'); check the URL"
    """

    def __init__(self, looks_like: str, fix: str = "", *, url: str | None = None):
        self.looks_like, self.fix = looks_like, fix
        self.problem, self.offset, self.member = f"not a tar file: {looks_like}", 0, None
        ShardError.__init__(self, f"{self.problem} ({_where(url=url or '<stream>')}){'; ' + fix if fix else ''}",
                            url=url)


class SampleFormatError(ShardError, ValueError):
    """The members of a shard do not form well-defined samples."""

    hint = "fix the shard, or pass a skipping handler to skip such samples"

    def __init__(self, problem: str, *, url: str | None = None, key: str | None = None, member: str | None = None):
        self.problem, self.key, self.member = problem, key, member
        where = _where(url=url or "<stream>", key=key)
        if member is not None:
            where += f", member {member!r}"
        super().__init__(f"{problem} ({where}); {self.hint}", url=url)


class DuplicateFieldError(SampleFormatError):
    """Two members of one sample have the same extension (e.g. ``a.jpg`` twice, or ``a.JPG`` and ``a.jpg``)."""


class MissingExtensionError(SampleFormatError):
    """A member name has no extension, so it cannot be a field of a sample."""

    hint = "rename the member to KEY.EXT, choose another key rule, or pass a skipping handler"


class ReservedFieldError(SampleFormatError):
    """A member's extension is ``__key__`` or ``__url__``, the names of the metadata the reader puts in every
    sample: taking it as a field would overwrite them. The member is skipped under a skipping handler."""

    hint = "rename the member (other __*__ extensions are ordinary fields), or pass a skipping handler"


class InterleavedKeyError(SampleFormatError):
    """A key reappears later in a shard after other keys: the members of one sample are not contiguous."""

    hint = "rewrite the shard with the members of each sample next to each other (e.g. `shardstream reshard`)"


class MissingFieldError(SampleFormatError):
    """A stage asked a sample for a field it lacks (``to_tuple("jgp")``): ``wanted`` (the alternatives asked for),
    ``fields`` (what it has), ``suggestion`` (the field probably meant, or None; the message says ``did you mean
    'jpg'?``). Example: :func:`shardstream.getfirst`."""

    hint = "ask for a field the samples have, or pass a skipping handler to skip samples without it"

    def __init__(self, problem: str, *, wanted: tuple[str, ...] = (), fields: tuple[Any, ...] = (),
                 suggestion: str | None = None, url: str | None = None, key: str | None = None):
        self.wanted, self.fields, self.suggestion = tuple(wanted), tuple(fields), suggestion
        super().__init__(problem, url=url, key=key)


class MissingPartnerError(SampleFormatError):
    """A join found no sample of this key in one of the joined shard sets (``key`` names the sample, ``url`` the
    shard of the set that has it); the message names the sets that lack it."""

    hint = "add the missing samples to that set, or pass a skipping handler to drop samples without all partners"


class StaleIndexError(ShardError, ValueError):
    """A shard's random-access index does not describe the shard: the shard changed after it was indexed (its
    size or content fingerprint differs), or the index file is unreadable. ``url`` names the shard; the message
    names the index and the command that rebuilds it. A stale index is never used."""


class RecordFormatError(ShardError, ValueError):
    """A record file is corrupt: an input of another format (TFRecord, Parquet, Arrow...) or a stream file
    (concatenated msgpack or CBOR, JSON lines): a record's checksum does not match, a record is not valid, or the
    file ends inside a record. ``url`` names the file, ``offset`` the byte offset of the record and ``record`` its
    number (0-based) where known."""

    def __init__(self, problem: str, *, url: str | None = None, offset: int | None = None,
                 record: int | None = None):
        self.problem, self.offset, self.record = problem, offset, record
        where = _where(url=url or "<stream>", offset=offset) + ("" if record is None else f", record {record}")
        hint = "" if record is None else ", or pass a skipping handler to read the records before it"
        super().__init__(f"{problem} ({where}); the file is corrupt or truncated: re-download or re-export it{hint}",
                         url=url)


class OpenError(ShardError, OSError):
    """A shard could not be opened, fetched or piped."""


class WriteError(ShardError, OSError):
    """A shard could not be written; no partial shard is left under its final name."""


class DecodeError(ShardstreamError, ValueError):
    """A field could not be decoded. ``url``, ``key`` and ``field`` name where."""

    def __init__(self, problem: str, *, url: str | None = None, key: str | None = None, field: str | None = None):
        self.problem, self.url, self.key, self.field = problem, url, key, field
        where = _where(url=url, key=key, field=field)
        super().__init__(f"{problem} ({where})" if where else problem)


#: webdataset's name for the same error; kept so ``except wds.DecodingError`` keeps working.
DecodingError = DecodeError


class UnsafeDecodeError(DecodeError):
    """Decoding this field would run code from the data (unpickling, full ``torch.load``); it needs an opt-in."""


class DecodeLimitError(DecodeError):
    """A field would inflate past a limit (``SHARDSTREAM_MAX_DECODED_BYTES``, ``SHARDSTREAM_MAX_IMAGE_PIXELS``):
    refused before the memory is allocated. ``url``, ``key`` and ``field`` name where; the message names the
    setting that raises the limit."""


class EncodeError(ShardstreamError, ValueError):
    """A value could not be encoded for its extension. ``key`` and ``field`` name where, when known."""

    key: Any = None
    field: str | None = None


class ObsoleteNameError(ShardstreamError, AttributeError):
    """A name from an old webdataset version that no longer exists; the message names what replaced it."""


class WorkerSplitError(ShardstreamError, RuntimeError, ValueError):
    """Splitting shards across ranks/workers would leave one of them without data."""


class UnevenSplitError(WorkerSplitError):
    """The shards cannot be split evenly between the ranks of a distributed job and nothing makes the ranks'
    epochs equal, so they would train on different numbers of batches (and a DDP job would wait forever for the
    missing ones). ``shards`` and ``ranks`` say how many; the message names the fixes.

    >>> str(UnevenSplitError(shards=5, ranks=2)).split(":")[0]
    '5 shards cannot be split evenly between 2 ranks'
    """

    def __init__(self, message: str | None = None, *, shards: int | None = None, ranks: int | None = None):
        self.shards, self.ranks = shards, ranks
        if message is None:
            low = (shards or 0) // (ranks or 1)
            message = (
                f"{shards} shards cannot be split evenly between {ranks} ranks: some ranks would read {low + 1} "
                f"shards and the others {low}, train on different numbers of batches, and a DDP job would wait "
                f"forever at the end of the epoch. Fixes: .with_epoch(n) (every rank's epoch is n samples per "
                "DataLoader worker, the data repeating as needed), resampled=True with .with_epoch(n), "
                "WebDataset(..., equalize=True) (equal samples on every rank, from the shards' sidecar indexes "
                f"or a dataset index; the tails of bigger shards are left out), a number of shards divisible by "
                f"{ranks}, or shardstream.training.TrainingDataset (exact epochs, equal batches)"
            )
        super().__init__(message)


class ProcessingError(ShardstreamError, RuntimeError):
    """Some tasks of a processing or conversion job failed after their retries. ``failures`` lists each failed
    input with its error; ``result`` describes what was written. Completed tasks stay done: a rerun redoes only
    the failed ones."""

    def __init__(self, message: str, *, failures: list | None = None, result: object = None):
        self.failures, self.result = list(failures or []), result
        super().__init__(message)


def add_context(exc: BaseException, **context: object) -> BaseException:
    """Attach context (``url=``, ``key=``, ``field=`` ...) to ``exc`` without touching ``exc.args``.

    Attributes not already set are stored on the exception, and one note is added for the traceback. Returns
    ``exc`` so it can be re-raised: ``raise add_context(e, url=url)``.
    """
    shown = {}
    for name, value in context.items():
        if value is None:
            continue
        if isinstance(value, str):
            value = redact_text(value)
        try:
            if getattr(exc, name, None) is None:
                setattr(exc, name, value)
        except AttributeError:  # pragma: no cover - exceptions with slots
            pass
        shown[name] = value
    if shown:
        note = "while reading " + ", ".join(f"{k}={v!r}" for k, v in shown.items())
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        else:  # Python 3.10: no add_note() yet; the same attribute, which 3.11+ tracebacks show
            try:
                exc.__notes__ = [*getattr(exc, "__notes__", ()), note]  # type: ignore[attr-defined]
            except AttributeError:  # pragma: no cover - exceptions with slots
                pass
    return exc
