"""A sample is complete once the next member's header shows another key: both walks (the Python walk and grouping,
and the C grouping with its two sinks) hand it out before the next member's data arrives. The stream here gives the
bytes of the first sample and the header of the second sample's first member, then waits until the test opens it:
the first sample (or batch, or column run) must come out before that."""

from __future__ import annotations

import io
import queue
import tarfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shardstream import _native
from shardstream.reading import ColumnBatches, ColumnRequest, ColumnRun, iter_samples
from shardstream.testing import ShortReads

WALKS = [pytest.param(False, id="python"),
         pytest.param(True, id="c", marks=pytest.mark.skipif(_native.extension is None, reason="C extension not built"))]
needs_c = pytest.mark.skipif(_native.extension is None, reason="C extension not built")
GUARD = 60  # seconds: a hang guard, not a timing (the stream sends nothing more until the test opens it)


def _shard(names: list[str]) -> tuple[bytes, int]:
    """A tar of ``names`` (3,000-byte members), and where the data of the member after the first sample begins."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i, name in enumerate(names):
            info = tarfile.TarInfo(name)
            data = (b"%d" % i) * 3000 if name.endswith(".bin") else b"%d" % i
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    blob = out.getvalue()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        first = tf.getmembers()[0].name.split(".")[0]
        after = next((m.offset_data for m in tf.getmembers() if m.name.split(".")[0] != first), len(blob))
    return blob, after


class Gate(io.RawIOBase):
    """Gives ``data[:at]`` (at most what each read asks for), then waits until ``opened`` is set, then the rest."""

    def __init__(self, data: bytes, at: int):
        self.data, self.at, self.pos = data, at, 0
        self.opened = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.pos >= self.at and not self.opened.wait(GUARD):
            raise TimeoutError("the test did not open the gate")
        end = len(self.data) if self.opened.is_set() else self.at
        chunk = self.data[self.pos : min(end, self.pos + len(buffer))]
        buffer[: len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


def _first_then_rest(blob: bytes, at: int, read: Callable[[io.RawIOBase], Iterator[Any]]) -> tuple[Any, list[Any]]:
    """The first item ``read(stream)`` yields while the stream holds every byte from ``at`` on, then the rest."""
    stream = Gate(blob, at)
    items: queue.Queue = queue.Queue()

    def take() -> None:
        try:
            for item in read(stream):
                items.put(("item", item))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            items.put(("error", e))
        items.put(("end", None))

    threading.Thread(target=take, daemon=True).start()
    try:
        kind, first = items.get(timeout=GUARD)
    except queue.Empty:
        pytest.fail(f"nothing came out while the stream held every byte from {at} on")
    finally:
        stream.opened.set()
    assert kind == "item", first
    rest = []
    while (got := items.get(timeout=GUARD))[0] != "end":
        assert got[0] == "item", got[1]
        rest.append(got[1])
    return first, rest


@pytest.mark.parametrize("accelerate", WALKS)
@pytest.mark.parametrize("chunks", [False, True], ids=["samples", "chunks"])
def test_the_first_sample_comes_out_at_the_next_header(accelerate, chunks):
    blob, at = _shard(["a/s0.bin", "a/s0.cls", "a/s1.bin", "a/s1.cls", "a/s2.bin"])
    first, rest = _first_then_rest(blob, at, lambda s: iter_samples(s, "s.tar", accelerate=accelerate, chunks=chunks))
    samples = (first + [s for chunk in rest for s in chunk]) if chunks else [first, *rest]
    assert samples == list(iter_samples(io.BytesIO(blob), "s.tar", accelerate=False))
    assert [s["__key__"] for s in samples] == ["a/s0", "a/s1", "a/s2"] and samples[0]["bin"] == b"0" * 3000


@pytest.mark.parametrize("accelerate", WALKS)
@pytest.mark.parametrize("names", [
    ["s0.bin", "s0.cls", "s1", "s0.txt", "s2.bin"],  # a member with no extension does not end s0
    ["s0.bin", "s0.cls", "s1.__key__", "s0.txt", "s2.bin"],  # nor does a reserved extension
    ["s0.bin", "s0.cls", "s0.bin", "s1.bin", "s1.cls"],  # a repeated field: s0 is dropped, not handed out
    ["s0.bin", "s1.bin", "s0.cls", "s2.bin"],  # a key seen before: s1 is complete, the s0 fragment dropped
], ids=["no-extension", "reserved", "repeated", "interleaved"])
@pytest.mark.parametrize("step", [512, 700])
def test_odd_members_give_what_reading_them_whole_gives(accelerate, names, step):
    """Buffers that end after a header (reads of ``step`` bytes): the same samples and errors as a walk that has
    every byte, raising or under a skipping handler."""
    blob = _shard(names)[0]
    for handler in (None, lambda e: True):
        want = _outcome(lambda: iter_samples(io.BytesIO(blob), "s.tar", accelerate=False, handler=handler))
        got = _outcome(lambda: iter_samples(ShortReads(blob, step), "s.tar", accelerate=accelerate, handler=handler,
                                            bufsize=step))
        assert got == want


def _outcome(read: Callable[[], Iterator[Any]]) -> tuple[list[Any], str | None]:
    out = []
    try:
        out.extend(read())
    except Exception as e:  # noqa: BLE001 - compared
        return out, f"{type(e).__name__}: {e}"
    return out, None


@needs_c
def test_a_batch_of_one_comes_out_at_the_next_header():
    """The C column sink in batch mode (``ColumnBatches``): the batch the first sample fills."""
    blob, at = _shard(["s0.bin", "s0.cls", "s1.bin", "s1.cls"])
    batches = ColumnBatches(1, accelerate=True)
    first, rest = _first_then_rest(blob, at, lambda s: batches.read(s, "s.tar"))
    assert first == {"__key__": ["s0"], "__url__": ["s.tar"], "bin": [b"0" * 3000], "cls": [b"1"]}
    assert rest == [{"__key__": ["s1"], "__url__": ["s.tar"], "bin": [b"2" * 3000], "cls": [b"3"]}]


@needs_c
def test_a_column_run_comes_out_at_the_next_header():
    """The C column sink in run mode (the fused plans' reader): the run of the first sample."""
    blob, at = _shard(["s0.bin", "s0.cls", "s1.bin", "s1.cls"])
    request = ColumnRequest()
    request.want = (("bin", "cls"), bytes([0, 3]), True)
    first, rest = _first_then_rest(blob, at, lambda s: iter_samples(s, "s.tar", accelerate=True, chunks=True,
                                                                   columns=request))
    assert isinstance(first, ColumnRun) and (first.rows, first.columns) == (1, [[b"0" * 3000], [1]])
    # the last sample of a shard leaves C as a sample dict (Python's grouping ends the shard)
    assert [item[0]["cls"] if isinstance(item, list) else item.columns[1][0] for item in rest] == [b"3"]
