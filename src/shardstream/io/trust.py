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
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import UnsafeURLError
from .registry import split_scheme
from .rewrite import rewrite_url

__all__ = ["COMMAND_SCHEMES", "runs_command", "urls_from_document"]

#: URL schemes whose opener runs a command (``pipe:CMD`` runs CMD in a shell).
COMMAND_SCHEMES = frozenset({"pipe"})


def runs_command(url: str | os.PathLike[str]) -> bool:
    """Whether opening ``url`` runs a command: its scheme, as written or after the URL rewrite rules.

    >>> runs_command("pipe:cat a.tar"), runs_command("PIPE:cat a.tar"), runs_command("/data/pipe:x.tar")
    (True, True, False)
    """
    text = os.fspath(url)
    if split_scheme(text)[0] in COMMAND_SCHEMES:
        return True

    return split_scheme(rewrite_url(text))[0] in COMMAND_SCHEMES


def urls_from_document(urls: Iterable[str | os.PathLike[str]], *, document: str | os.PathLike[str],
                       allow_commands: bool = False) -> list[str]:
    """``urls``, read from the file ``document``, as strings; refuses any that runs a command (see the module
    docstring) unless ``allow_commands``. Call it on every URL taken out of a file, before opening any."""
    checked = [os.fspath(url) for url in urls]
    if not allow_commands:
        for url in checked:
            if runs_command(url):
                raise UnsafeURLError(url, document=os.fspath(document))
    return checked
