"""A JSON Lines file cut into tasks by blocks (convert/lines.py) gives exactly the ranges of the line-by-line rule:
one record per non-blank line, ``rows`` records per range, cut after a record's line end."""

from __future__ import annotations

import random

import pytest

from shardstream.convert import plan
from shardstream.convert.lines import chunks_from_marks, jsonl_chunks, record_marks
from shardstream.convert.tables import csv_chunks


def line_by_line(path: str, rows_per_task: int) -> list[tuple[int, int, int]]:
    chunks, rows, start, first, offset = [], 0, 0, 0, 0
    with open(path, "rb") as f:
        for line in f:
            offset += len(line)
            if line.strip():
                rows += 1
                if rows - first >= max(1, rows_per_task):
                    chunks.append((start, offset, first))
                    start, first = offset, rows
    if rows > first or not chunks:
        chunks.append((start, offset, first))
    return chunks


@pytest.mark.parametrize("seed", range(4))
def test_block_cuts_equal_the_line_by_line_rule(tmp_path, seed):
    r = random.Random(seed)
    path = tmp_path / "rows.jsonl"
    for _ in range(300):
        lines = [r.choice([b'{"a": 1}', b"", b"  ", b'{"b": "x y"}\r', b'\t{"c": 3} ', b"{}" * 40])
                 for _ in range(r.randrange(0, 40))]  # fmt: skip
        path.write_bytes(b"\n".join(lines) + (b"\n" if r.random() < 0.5 else b""))
        rows, block = r.randrange(0, 7), r.choice([1, 2, 3, 7, 64, 1 << 20])
        expected = line_by_line(str(path), rows)
        assert jsonl_chunks(str(path), rows, block=block) == expected, (path.read_bytes(), rows, block)
        assert csv_chunks(str(path), rows, jsonl=True) == expected


def test_a_file_without_records_is_one_empty_range(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \n\n")
    assert jsonl_chunks(str(tmp_path / "empty.jsonl"), 5) == [(0, 0, 0)]
    assert jsonl_chunks(str(tmp_path / "blank.jsonl"), 5) == [(0, 5, 0)]


def test_a_few_blank_or_indented_lines_among_many_records(tmp_path):
    lines = [b'{"n": %d}' % i for i in range(500)]
    lines[7], lines[100], lines[101], lines[300] = b"", b"   ", b'  {"n": "indented"}', b"\t"
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for rows in (1, 3, 50, 496, 497, 1000):
        assert jsonl_chunks(str(path), rows) == line_by_line(str(path), rows)
    assert jsonl_chunks(str(path), 1000) == [(0, path.stat().st_size, 0)]


@pytest.mark.parametrize("seed", range(3))
def test_one_pass_marks_cut_any_multiple_of_their_step_as_the_line_rule(tmp_path, seed):
    """record_marks counts the records and keeps every `every`-th end; the cuts of `every * step` rows from them are
    the line-by-line rule's (the planner reads a JSON Lines file once to count and cut)."""
    r = random.Random(seed)
    path = tmp_path / "rows.jsonl"
    for _ in range(200):
        lines = [r.choice([b'{"a": 1}', b"", b"  ", b'\t{"c": 3} ', b"{}" * 30]) for _ in range(r.randrange(0, 60))]
        path.write_bytes(b"\n".join(lines) + (b"\n" if r.random() < 0.5 else b""))
        every, step, block = r.randrange(1, 5), r.randrange(1, 4), r.choice([1, 5, 64, 1 << 20])
        marks, records, size = record_marks(str(path), every, block=block)
        assert (records, size) == (sum(1 for line in lines if line.strip()), path.stat().st_size)
        expected = line_by_line(str(path), every * step)
        got = chunks_from_marks(marks, records, size, every, [every * step] * (records // (every * step)))
        assert got == expected, (path.read_bytes(), every, step)


def test_the_plan_cuts_jsonl_into_a_multiple_of_1000_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(45_500)))  # 45500 // 32 = 1421 rows: 1000 a task
    got = [(s.start, s.stop, s.first) for s in plan(str(path))]
    assert got == jsonl_chunks(str(path), 1000) and len(got) == 46
    assert [(s.start, s.stop, s.first) for s in plan(str(path), per_task=777)] == jsonl_chunks(str(path), 777)


def test_the_last_two_tasks_worth_of_rows_go_in_half_tasks(tmp_path):
    """Without per_task, the plan's last 2 * rows rows are cut in tasks of rows / 2 (a multiple of 1000): the
    workers run out of work nearly together. Every cut is still after a record's line end."""
    path = tmp_path / "rows.jsonl"
    lines = [b'{"n": %d}' % i if i % 997 else b"  " for i in range(64_600)]  # some blank lines: 64,535 records
    path.write_bytes(b"\n".join(lines) + b"\n")
    got = [(s.start, s.stop, s.first) for s in plan(str(path))]
    firsts = [first for _, _, first in got]  # 64535 // 32 = 2016 rows: 2000 a task, 1000 in the tail
    assert firsts == [2000 * k for k in range(32)] + [63_000, 64_000]
    data = path.read_bytes()
    ends = {offset + 1 for offset in range(len(data)) if data[offset] == 10}
    assert all(stop in ends for _, stop, _ in got) and got[-1][1] == path.stat().st_size
    assert [b for _, b, _ in got[:-1]] == [a for a, _, _ in got[1:]] and got[0][0] == 0
    by_rule = line_by_line(str(path), 1000)  # every cut is one of the 1000-row rule's
    assert {b for _, b, _ in got} <= {b for _, b, _ in by_rule}
