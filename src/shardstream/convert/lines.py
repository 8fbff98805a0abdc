"""Cutting a JSON Lines file into tasks without a Python step per line.

:func:`jsonl_chunks` gives the same ``(byte start, byte stop, first record number)`` ranges as the line-by-line
rule of :func:`~shardstream.convert.tables.csv_chunks` (one record per non-blank line, ``rows_per_task`` records
per range, cut only after a record), reading the file in blocks and finding the cuts with numpy passes (newlines,
non-blank lines): planning a conversion is serial work in the main process, before any worker starts.
:func:`record_marks` is that pass, keeping the end of every ``every``-th record: :func:`chunks_from_marks` cuts
ranges of multiples of ``every`` records from it, so the planner learns the number of records and the cuts in
one pass over the file.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
>>> with open(path, "wb") as f:
...     _ = f.write(b'{"a": 1}\\n\\n{"a": 2}\\n{"a": 3}')
>>> jsonl_chunks(path, 2)
[(0, 19, 0), (19, 27, 2)]
"""

from __future__ import annotations

import mmap
import os

import numpy as np

__all__ = ["chunks_from_marks", "jsonl_chunks", "record_marks"]

_BLOCK = 1 << 20  # windows whose temporary arrays malloc reuses (16 MiB ones were fresh pages each: +60% CPU)
_NOT_SPACE = np.ones(256, dtype=bool)  # the bytes that make a line a record: all but bytes.strip()'s whitespace
_NOT_SPACE[list(b" \t\n\r\x0b\x0c")] = False


def jsonl_chunks(path: str, rows_per_task: int, *, block: int = _BLOCK) -> list[tuple[int, int, int]]:
    """The ranges of ``rows_per_task`` non-blank lines each (the last one shorter; one empty range for a file
    without records); a range ends after its last record's line end."""
    per_task = max(1, rows_per_task)
    return chunks_from_marks(*record_marks(path, per_task, block=block), per_task)


def chunks_from_marks(marks: list[int], records: int, size: int, every: int,
                      counts: list[int] | None = None) -> list[tuple[int, int, int]]:
    """The ranges of a file from its :func:`record_marks` (taken every ``every`` records): ``counts`` records
    each (multiples of ``every``; by default ``every`` each), then the records left (one empty range for a file
    without records). So one pass over the file serves any cut at its marks."""
    chunks: list[tuple[int, int, int]] = []
    start = first = 0
    for count in [every] * len(marks) if counts is None else counts:
        stop = marks[(first + count) // every - 1]
        chunks.append((start, stop, first))
        start, first = stop, first + count
    if records > first or not chunks:
        chunks.append((start, size, first))
    return chunks


def record_marks(path: str, every: int, *, block: int = _BLOCK) -> tuple[list[int], int, int]:
    """One pass over a JSON Lines file: the offsets after the line ends of records ``every``, ``2 * every``, ...
    (one record per non-blank line), the number of records, and the file's size. The file is mapped (no copy
    into this process) and looked at in windows of ``block`` bytes."""
    per = max(1, every)
    marks: list[int] = []
    rows = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return marks, rows, size
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            codes = np.frombuffer(mapped, dtype=np.uint8)
            try:
                line = 0  # where the unfinished line begins
                for at in range(0, size, max(1, block)):
                    ends = np.flatnonzero(codes[at : at + block] == 10) + (at + 1)  # after each newline
                    if at + block >= size and int(ends[-1] if len(ends) else line) < size:
                        ends = np.append(ends, size)  # the last line, without a newline
                    if not len(ends):
                        continue
                    starts = np.concatenate(([line], ends[:-1]))
                    kept = _records(codes[line : int(ends[-1])], starts - line, ends - line)
                    need = per - rows % per  # records until the next mark
                    if need <= len(kept):
                        marks.extend(ends[kept[need - 1 :: per]].tolist())
                    rows += len(kept)
                    line = int(ends[-1])
            finally:
                del codes  # the map closes only without views on it
    return marks, rows, size


def _records(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The numbers of the lines ``codes[starts[i]:ends[i]]`` that are not blank. Only a line that starts with
    whitespace (or is empty: it starts with its newline) may be blank: when few do, only those are looked at."""
    maybe = np.flatnonzero(~_NOT_SPACE[codes[starts]])
    if not len(maybe):
        return np.arange(len(starts))
    if len(maybe) > len(starts) // 16:  # many indented lines: one pass over every byte
        return np.flatnonzero(np.logical_or.reduceat(_NOT_SPACE[codes[: int(ends[-1])]], starts))
    blank = [i for i in maybe.tolist() if not codes[starts[i] : ends[i]].tobytes().strip()]
    return np.delete(np.arange(len(starts)), blank)
