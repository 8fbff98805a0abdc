"""The first sample of a remote shard is handed over once its own bytes have arrived (io/ranged.py): not after a
buffer fills, a part completes or the shard downloads; and a big first sample comes over several connections at
once. The server sends no byte past those the tar reader needs to know the first sample is whole (the header of the
next sample's first member: the grouping closes a sample at a header with a new key, before that member's data)
until the test releases it: the first sample must come out before that."""

from __future__ import annotations

import io
import tarfile
import threading

import pytest
from fault_servers import StubHTTP

from shardstream import WebDataset


def _shard(first: int, rest: int, count: int) -> tuple[bytes, int]:
    """A tar whose first sample has a ``first``-byte ``.bin``, then ``count`` samples of ``rest`` bytes; and the
    offset where the second sample's first member's header ends (what the reader needs to know the first is
    whole)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i, size in enumerate([first] + [rest] * count):
            for ext, data in (("bin", bytes([i % 251]) * size), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    blob = out.getvalue()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        second = tf.getmembers()[2]
    return blob, second.offset_data


def _first_sample(url: str) -> tuple[dict | None, BaseException | None, threading.Event]:
    """Takes the first sample in a thread; ``done`` is set when it is out (or failed)."""
    got: list = [None, None]
    done = threading.Event()

    def take() -> None:
        it = iter(WebDataset(url, shardshuffle=False))
        try:
            got[0] = next(it)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            got[1] = e
        finally:
            done.set()
            it.close()

    threading.Thread(target=take, daemon=True).start()
    return got, done  # type: ignore[return-value]


@pytest.mark.parametrize("scheme", ["http", "s3"])
@pytest.mark.parametrize(("first", "rest", "parts"), [(200_000, 180_000, 1), (4 << 20, 4 << 20, 5)],
                         ids=["image", "4MiB"])
def test_the_first_sample_needs_only_its_own_bytes(monkeypatch, scheme, first, rest, parts):
    """Default part size and connections; ``parts``: how many requests at least carry the first sample's bytes
    (a 4 MiB sample is not queued behind one connection)."""
    blob, needed = _shard(first, rest, 40 if first < 1 << 20 else 3)
    stub = StubHTTP({"b/x/a.tar": blob}, hold_at=needed)
    try:
        if scheme == "s3":
            monkeypatch.setenv("SHARDSTREAM_STORAGE", f"[{{bucket: b, endpoint_url: '{stub.url()}', key: K, "
                                                      "secret: S, region: us-east-1, addressing_style: path}]")
            url = "s3://b/x/a.tar"
        else:
            url = stub.url("b/x/a.tar")
        got, done = _first_sample(url)
        out = done.wait(60)  # a hang guard, not a timing: the server sends nothing more until released
        sent = stub.sent
        stub.release.set()
        assert out, f"no first sample while the server held every byte from {needed} on"
        sample, error = got
        assert error is None, error
        assert sample["__key__"] == "s0000" and sample["bin"] == bytes([0]) * first
        assert sent <= needed  # what had arrived when the first sample came out: its own bytes, no more
        starts = [int(r.split("=")[1].split("-")[0]) for _, r in stub.requests if r is not None]
        assert sum(1 for start in starts if start < needed) >= parts, stub.requests
    finally:
        stub.release.set()
        stub.stop()
