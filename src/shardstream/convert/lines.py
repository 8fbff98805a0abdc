"""Cutting a JSON Lines file into tasks without a Python step per line.

:func:`jsonl_chunks` gives the same ``(byte start, byte stop, first record number)`` ranges as the line-by-line
rule of :func:`~shardstream.convert.tables.csv_chunks` (one record per non-blank line, ``rows_per_task`` records
per range, cut only after a record), reading the file in blocks and finding the cuts with numpy passes (newlines,
non-blank lines): planning a conversion is serial work in the main process, before any worker starts.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
>>> with open(path, "wb") as f:
...     _ = f.write(b'{"a": 1}\\n\\n{"a": 2}\\n{"a": 3}')
>>> jsonl_chunks(path, 2)
[(0, 19, 0), (19, 27, 2)]
"""

from __future__ import annotations

import numpy as np

__all__ = ["jsonl_chunks"]

_BLOCK = 16 << 20
_NOT_SPACE = np.ones(256, dtype=bool)  # the bytes that make a line a record: all but bytes.strip()'s whitespace
_NOT_SPACE[list(b" \t\n\r\x0b\x0c")] = False


def jsonl_chunks(path: str, rows_per_task: int, *, block: int = _BLOCK) -> list[tuple[int, int, int]]:
    """The ranges of ``rows_per_task`` non-blank lines each (the last one shorter; one empty range for a file
    without records); a range ends after its last record's line end."""
    per_task = max(1, rows_per_task)
    chunks: list[tuple[int, int, int]] = []
    start = first = rows = 0  # the open range's start and first record; records so far
    base, carry = 0, b""  # the file offset of carry[0]; the unfinished line before the next block
    with open(path, "rb") as f:
        while True:
            data = f.read(block)
            text = carry + data
            if not text:
                break
            codes = np.frombuffer(text, dtype=np.uint8)
            if data:  # whole lines only: the rest waits for the next block
                ends = np.flatnonzero(codes == 10) + 1  # the offset after each line's newline
                if not len(ends):
                    carry = text
                    continue
                carry = text[int(ends[-1]) :]
            else:  # the end of the file: one last line, without a newline
                ends, carry = np.array([len(text)]), b""
            starts = np.concatenate(([0], ends[:-1]))
            kept = _records(text, codes, starts, ends)
            need = per_task - (rows - first)  # records until the open range is full
            while need <= len(kept):
                stop = base + int(ends[kept[need - 1]])
                chunks.append((start, stop, first))
                start = stop
                first = rows = rows + need
                kept = kept[need:]
                need = per_task
            rows += len(kept)
            base += int(ends[-1])
            if not data:
                break
    if rows > first or not chunks:
        chunks.append((start, base, first))
    return chunks


def _records(text: bytes, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The numbers of the lines ``text[starts[i]:ends[i]]`` (``codes``: the same bytes) that are not blank. Only a line that starts with
    whitespace (or is empty: it starts with its newline) may be blank: when few do, only those are looked at."""
    maybe = np.flatnonzero(~_NOT_SPACE[codes[starts]])
    if not len(maybe):
        return np.arange(len(starts))
    if len(maybe) > len(starts) // 16:  # many indented lines: one pass over every byte
        return np.flatnonzero(np.logical_or.reduceat(_NOT_SPACE[codes[: int(ends[-1])]], starts))
    blank = [i for i in maybe.tolist() if not text[starts[i] : ends[i]].strip()]
    return np.delete(np.arange(len(starts)), blank)
