"""Which URLs may run a command: the one check every reader of URLs written inside a file goes through.

Opening a ``pipe:CMD`` URL runs ``CMD`` in a shell. That is what webdataset users rely on when *they* write the
URL, in code or on the command line (``WebDataset("pipe:curl -s https://host/a.tar")``, ``shardstream cat
'pipe:...'``): such URLs are trusted as they are. A URL read out of a *document* — a dataset index, a recipe, a
JSON Lines file, a shard list in a file, any spec format — was written by whoever produced that file, so it must
never run a command unless the caller opts in, spelled the same everywhere: ``allow_commands=True`` in Python,
``--allow-commands`` on the command line. Every code path that takes URLs out of a file calls
:func:`urls_from_document` on them, before anything is opened; a command URL without the opt-in raises
:class:`~shardstream.errors.UnsafeURLError` naming the file, the URL and the opt-in.

A URL is a command when its scheme runs one (:data:`COMMAND_SCHEMES`), as written or after the URL rewrite
rules of the settings (``SHARDSTREAM_URL_REWRITES``: a rule ``gs://=pipe:./fetch-gs.sh?`` would otherwise turn
a document's ``gs://`` URL into a shell command built from the document's text).

>>> urls_from_document(["a.tar", "https://host/b.tar"], document="train.json")
['a.tar', 'https://host/b.tar']
>>> urls_from_document(["pipe:touch /tmp/pwned"], document="train.json")
Traceback (most recent call last):
...
shardstream.errors.UnsafeURLError: 'train.json' names the URL 'pipe:touch /tmp/pwned', which runs a shell command; ...
>>> urls_from_document(["pipe:cat a.tar"], document="train.json", allow_commands=True)
['pipe:cat a.tar']

Secure mode (webdataset's ``WDS_SECURE=1`` / ``utils.enforce_security = True``; ``SHARDSTREAM_SECURE``, read by
:mod:`shardstream.config`) is the same rule made stricter for every URL, at open time (:func:`check_url`): a
dataset may only be read from remote URLs; command URLs and local files (paths and ``file:``) are refused with a
:class:`~shardstream.errors.ConfigError` (a ``ValueError`` that starts with webdataset's words, see
:func:`shardstream.config.secure_refusal`), as are URL rewriting from the
environment (:mod:`shardstream.io.rewrite`) and unpickling (the decoder). Standard input/output (``-``) stays
allowed, as in webdataset.

>>> from shardstream.config import Settings
>>> check_url("https://example.com/a.tar", Settings(secure=True))
>>> check_url("pipe:cat a.tar", Settings(secure=True))
Traceback (most recent call last):
...
shardstream.errors.ConfigError: gopen_pipe: unsafe_gopen is False, cannot open pipe URLs (secure mode, from WDS_SECURE / SHARDSTREAM_SECURE / utils.enforce_security, refuses 'pipe:cat a.tar', which runs a command; unset secure mode to open it)
>>> check_url("pipe:cat a.tar", Settings())
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..config import Settings, get_settings, secure_mode, secure_refusal
from ..errors import UnsafeURLError
from .packed import PackedUrls
from .rewrite import rewrite_url, rewrites
from .urls import split_scheme

__all__ = ["COMMAND_SCHEMES", "check_url", "packed_from_document", "runs_command", "urls_from_document"]

#: URL schemes whose opener runs a command (``pipe:CMD`` runs CMD in a shell).
COMMAND_SCHEMES = frozenset({"pipe"})


#: What a command URL's text starts with, lower-cased (:func:`split_scheme` lower-cases ASCII schemes).
_COMMAND_STARTS = tuple(f"\n{scheme}:" for scheme in sorted(COMMAND_SCHEMES))


def runs_command(url: str | os.PathLike[str], settings: Settings | None = None) -> bool:
    """Whether opening ``url`` runs a command: its scheme, as written or after the URL rewrite rules of
    ``settings`` (the process environment by default).

    >>> runs_command("pipe:cat a.tar"), runs_command("PIPE:cat a.tar"), runs_command("/data/pipe:x.tar")
    (True, True, False)
    """
    text = os.fspath(url)
    if split_scheme(text)[0] in COMMAND_SCHEMES:
        return True

    return split_scheme(rewrite_url(text, settings))[0] in COMMAND_SCHEMES


def urls_from_document(urls: Iterable[str | os.PathLike[str]], *, document: str | os.PathLike[str],
                       allow_commands: bool = False) -> list[str]:
    """``urls``, read from the file ``document``, as strings; refuses any that runs a command (see the module
    docstring) unless ``allow_commands``. Call it on every URL taken out of a file, before opening any.

    The settings are read once for the whole list; without rewrite rules, a million URLs are checked by one
    scan of their text rather than one call per URL, and the URL named in the error is the first that runs a
    command (:func:`runs_command` decides).
    """
    checked: list[str] = list(map(os.fspath, urls))  # type: ignore[arg-type]  # os.fspath is overloaded
    if allow_commands or not checked:
        return checked
    settings = get_settings()
    if rewrites(settings):
        suspects: Iterable[str] = checked  # a rule may turn any URL into a command: check each
    else:  # one scan: a line break, then a command scheme, in the lower-cased text of all the URLs
        text = "\n" + "\n".join(checked).lower()
        if not any(start in text for start in _COMMAND_STARTS):
            return checked
        suspects = checked  # one URL at least starts like a command (or holds a line break): find it exactly
    for url in suspects:
        if runs_command(url, settings):
            raise UnsafeURLError(url, document=os.fspath(document))
    return checked


def packed_from_document(urls: PackedUrls, *, document: str | os.PathLike[str],
                         allow_commands: bool = False) -> PackedUrls:
    """:func:`urls_from_document` for the URLs of one numeric range, packed by
    :meth:`~shardstream.io.packed.PackedUrls.of_pattern`: they share everything before their digits, and digits
    cannot complete a scheme, so without rewrite rules the first URL decides for all; with rules each is checked.
    Returns ``urls``, packed as they came."""
    if not allow_commands and len(urls):
        urls_from_document(urls if rewrites(get_settings()) else [urls[0]], document=document)
    return urls


def check_url(url: str, settings: Settings | None = None) -> None:
    """Secure mode's rule (see the module docstring): raise :class:`~shardstream.errors.ConfigError` if secure
    mode is on and ``url`` runs a command or is a local file."""
    if url == "-" or not secure_mode(settings or get_settings()):
        return
    scheme = split_scheme(url)[0]
    if scheme in COMMAND_SCHEMES:
        raise secure_refusal("command", f"{url!r}, which runs a command", "unset secure mode to open it")
    if scheme in ("", "file"):
        raise secure_refusal("local", f"the local file {url!r}", "unset secure mode to open it, or read the shards "
                             "from a remote URL (http(s)://, s3://...)")
