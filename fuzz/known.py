"""Known findings: classes of bugs the fuzz targets find that another branch fixes (spec parsing, state
validation, the TFRecord reader, the HTTP client). A finding of a listed class is saved and printed as known and
does not fail a run (``--strict`` counts it); anything else is a new finding. Remove an entry once its fix is
merged: ``tests/test_fuzz.py`` replays each entry's reproducer from ``fuzz/known/`` and reports it as passing
(XPASS) from then on.

A class is matched by a regular expression on the finding's signature, ``TYPE: MESSAGE @ FILE:FUNCTION``: the
finding and, after ``@``, the innermost shardstream function the original exception came from.
"""

from __future__ import annotations

import dataclasses
import re
import traceback


@dataclasses.dataclass(frozen=True)
class Known:
    """One class of findings: the ``kind`` of input, a ``pattern`` searched in the signature, the area that fixes
    it, and ``seed``: the corpus name its reproducer ``fuzz/known/NAME.bin`` is fed as (None: no reproducer
    replayed in the tests, e.g. a hang)."""

    name: str
    kind: str
    pattern: str
    owner: str
    seed: str | None

    def __str__(self) -> str:
        return f"{self.name}, {self.owner}"


_UNTYPED = r"^Finding: untyped (?!MemoryError)\w+"
KNOWN: list[Known] = []  # every class found so far is fixed; add one here while its fix is on another branch


def _origin(error: BaseException) -> str:
    """``FILE:FUNCTION`` of the innermost shardstream frame of ``error``'s cause chain (or of itself)."""
    chain, seen = [], set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for exc in reversed(chain):  # the original exception first
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/shardstream/" in f.filename.replace("\\", "/")]
        if frames:
            path = frames[-1].filename.replace("\\", "/").rsplit("/shardstream/", 1)[1]
            return f"{path}:{frames[-1].name}"
    return "?"


def signature(error: BaseException) -> str:
    """``TYPE: MESSAGE @ FILE:FUNCTION`` (the message's first line, at most 300 characters)."""
    message = str(error).splitlines()[0][:300] if str(error) else ""
    return f"{type(error).__name__}: {message} @ {_origin(error)}"


def classify(kind: str, error: BaseException) -> Known | None:
    """The known class of this finding, or None for a new one."""
    text = signature(error)
    for entry in KNOWN:
        if entry.kind == kind and re.search(entry.pattern, text):
            return entry
    return None
