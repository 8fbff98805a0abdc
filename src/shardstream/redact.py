"""The one rule that keeps secrets out of what shardstream shows: errors, log records, file names, CLI output.

A URL, or any text that may hold one, goes through :func:`redact` (a URL) or :func:`redact_text` (a message)
before it is shown:

- the user info of a URL: ``https://alice:pw@host/`` shows as ``https://alice:***@host/``, and a user name
  without a password (often a token: ``https://TOKEN@host/``) as ``https://***@host/``;
- query parameters that carry a signature, a credential or a token (``X-Amz-Signature``,
  ``X-Amz-Security-Token``, ``X-Goog-Signature``, Azure's ``sig``, ``token``, ``access_token``, ``api_key``,
  ``password``...) keep their names, their values show as ``***``;
- ``Authorization: ...`` and ``Bearer ...`` in free text (a ``pipe:curl -H ...`` command, a header dump);
- every secret the library was handed (a storage rule's ``secret`` and ``token``, a password in a URL it
  opened, an ``Authorization`` header value): registered with :func:`register_secret` where it is read, and
  shown as ``***`` wherever it appears afterwards.

Who applies it: every shardstream exception (:class:`~shardstream.errors.ShardstreamError` redacts its message,
its notes and its ``url``), every record of the ``shardstream`` loggers (:func:`redacting_logger`), the shard
cache's file names and the CLI's output.

>>> redact("https://alice:pw@host:8080/a.tar?X-Amz-Signature=abc&part=1")
'https://alice:***@host:8080/a.tar?X-Amz-Signature=***&part=1'
>>> redact_text("cannot read 'http://tok@h/x.tar': bad header; pipe:curl -H 'Authorization: Bearer xyz' ...")
"cannot read 'http://***@h/x.tar': bad header; pipe:curl -H 'Authorization: ***' ..."
>>> register_secret("s3cr3t-key-1234"); redact_text("rule {'secret': 's3cr3t-key-1234'}")
"rule {'secret': '***'}"
"""

from __future__ import annotations

import contextlib
import re
import sys
from _thread import allocate_lock  # threading.Lock itself, without importing threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

__all__ = ["MASK", "RedactedText", "SecretFilter", "is_secret_name", "parse_problem", "redact", "redact_text", "redacted_stdio", "redacting_logger", "register_secret"]

#: what a secret shows as
MASK = "***"

_SECRET_WORDS = ("signature", "token", "secret", "password", "passwd", "credential", "apikey", "api_key",
                 "api-key", "auth", "session", "account_key", "accountkey", "connection_string",
                 "connectionstring", "private_key", "sas_")
_SECRET_NAMES = {"sig", "key", "pwd", "pass", "code", "x-amz-credential", "x-goog-credential"}
# a URL inside text: a scheme, ``://``, then anything up to a space, a quote or a bracket
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s'\"<>`]+")
_WHOLE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s'\"<>`]+\Z")
# header-like secrets in free text: ``Authorization: Basic xyz``, ``Bearer xyz``, ``X-Api-Key: xyz``
_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|x-amz-security-token|api-key|accountkey"
                     r"|sharedaccesssignature)"
                     r"(\s*[:=]\s*)(?:(basic|bearer|token|aws4-hmac-sha256)\s+)?[^\s'\",;]+")
_BEARER = re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9._~+/=-]{8,}")
_MAX_KNOWN = 4096  # the masking pattern stays small whatever a program registers
_MIN_SECRET = 8  # shorter strings are not registered: masking every "test" would make messages unreadable

_known: set[str] = set()
_known_re: re.Pattern[str] | None = None
_lock = allocate_lock()


def register_secret(secret: str | None) -> None:
    """From now on, show ``secret`` as ``***`` wherever :func:`redact_text` meets it (a storage rule's secret
    key, a session token, a password...). Values shorter than 8 characters are not registered (a URL's password
    is masked in its URL whatever its length), nor more than 4,096 secrets in one process."""
    global _known_re
    if not isinstance(secret, str) or len(secret) < _MIN_SECRET or secret in _known or len(_known) >= _MAX_KNOWN:
        return
    with _lock:
        _known.add(secret)
        ordered = sorted(_known, key=len, reverse=True)  # the longest first: a secret that contains another
        _known_re = re.compile("|".join(re.escape(s) for s in ordered))


def is_secret_name(name: str) -> bool:
    """Whether a parameter, header or option called ``name`` holds a secret (``X-Amz-Signature``, ``token``...)."""
    low = name.lower()
    return low in _SECRET_NAMES or any(word in low for word in _SECRET_WORDS)


def _redact_query(query: str) -> str:
    if not query:
        return query
    out = []
    for item in query.split("&"):
        name, eq, value = item.partition("=")
        out.append(f"{name}={MASK}" if eq and value and is_secret_name(name) else item)
    return "&".join(out)


def redact(url: str) -> str:
    """``url`` as it may be shown: user info and secret query values replaced by ``***`` (see the module)."""
    if not isinstance(url, str):
        return url
    if not _WHOLE_URL.match(url):  # ``pipe:curl ...``, a path: free text that may hold URLs and headers
        return redact_text(url)
    if "@" not in url and "=" not in url:
        return _mask_known(url)
    from urllib.parse import unquote, urlsplit, urlunsplit  # noqa: PLC0415 - stdlib: ~2 ms off every import

    try:
        parts = urlsplit(url)
    except ValueError:  # a malformed URL (bad IPv6 brackets...): mask what looks like user info, by hand
        return _mask_known(re.sub(r"(://)[^/@\s]*@", rf"\1{MASK}@", url))
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        register_secret(unquote(password) if colon else None)  # shown masked also where it appears alone
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    return _mask_known(urlunsplit(parts._replace(netloc=netloc, query=_redact_query(parts.query))))


def _mask_known(text: str) -> str:
    pattern = _known_re
    return pattern.sub(MASK, text) if pattern is not None else text


def redact_text(text: str) -> str:
    """``text`` (a message, a command, a log line) with every URL redacted (:func:`redact`), header-like
    secrets (``Authorization: ...``, ``Bearer ...``) and every registered secret masked."""
    if not isinstance(text, str) or not text:
        return text
    if "://" in text:
        text = _URL.sub(lambda m: redact(m.group(0)), text)
    if ":" in text or "=" in text or " " in text:
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _mask_known(text)


def parse_problem(error: BaseException) -> str:
    """What a parser error says, without the lines of the document it quotes (a YAML error shows the line it
    failed on, which may hold a secret key): its problem, line and column."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if problem is None or mark is None:
        return redact_text(str(error))
    context = getattr(error, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return redact_text(f"{context + ': ' if context else ''}{problem} ({where})")


class SecretFilter:
    """Redacts a record's message (and its exception text): on every shardstream logger (see
    :func:`redacting_logger`) and on the handlers shardstream adds (the CLI's, :func:`~shardstream.logs.log_to_stderr`).

    A filter as :mod:`logging` takes one (``addFilter`` accepts any object with a ``filter(record)`` method), not a
    subclass of ``logging.Filter``: this module is imported with every error, and ``logging`` loads only with the
    first module that logs.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report, not ours
            return True
        shown = redact_text(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            import logging  # noqa: PLC0415 - loaded already: a record exists

            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = SecretFilter()


def redacting_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the redaction filter attached: every module of the package gets its
    logger here (``log = redacting_logger(__name__)``), so no record it logs shows a secret.

    >>> import logging, io
    >>> log = redacting_logger("shardstream.example"); out = io.StringIO(); h = logging.StreamHandler(out)
    >>> log.addHandler(h); log.setLevel(logging.INFO)
    >>> log.info("cached %s", "http://alice:pw@host/x.tar"); log.removeHandler(h); out.getvalue()
    'cached http://alice:***@host/x.tar\\n'
    """
    import logging  # noqa: PLC0415 - not with this module: see SecretFilter

    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


class RedactedText:
    """A text stream whose writes are redacted (:func:`redact_text`); everything else (``buffer``, ``fileno``,
    ``isatty``, ``flush``) is the wrapped stream's. The CLI writes its stdout and stderr through it.

    >>> import io
    >>> out = io.StringIO(); RedactedText(out).write("url: https://u:pw@h/a.tar\\n"); out.getvalue()
    26
    'url: https://u:***@h/a.tar\\n'
    """

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)  # what the caller handed over, as TextIO.write counts it

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_stdio() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` redacted for the duration (the CLI's output; binary ``.buffer`` writes
    pass unchanged: shard bytes are data)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactedText(sys.stdout), RedactedText(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
