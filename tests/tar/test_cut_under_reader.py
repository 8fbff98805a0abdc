"""A local shard truncated in place while it is read: a truncated archive (a typed error, or the warning of a shard
cut between members), never a ``SIGBUS`` from a memory-mapped window read past the file's new end.

Each case runs in a child process (a ``SIGBUS`` kills the process) that cuts the shard after the reader handed out
its first item: deterministically, while the reader is paused between two items, which is where it spends its time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import shardstream
from shardstream.tar import TarStreamWriter, accelerated

# the children inherit the environment: with SHARDSTREAM_NO_EXTENSIONS set they read local shards with pread
pytestmark = pytest.mark.skipif(not accelerated() or not hasattr(os, "truncate"),
                                reason="mapped windows need the C walk (built, SHARDSTREAM_NO_EXTENSIONS unset)")

_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (os.path.dirname(os.path.dirname(shardstream.__file__)), os.environ.get("PYTHONPATH", "")) if p))

#: what each case reads (``path``: the shard); it cuts the shard after the first item
READS = {
    "samples (C grouping)": "iter(wds.WebDataset(path, shardshuffle=False))",
    "column batches (C grouping)": "ColumnBatches(2).read(open(path, 'rb'), path)",
    "members (C walk)": "iter_members(open(path, 'rb'), path, accelerate=True)",
    "members (Python walk)": "iter_members(open(path, 'rb'), path, accelerate=False)",
}

SCRIPT = """
import json, os, sys, warnings
import shardstream as wds
from shardstream.errors import ShardstreamError
from shardstream.reading import ColumnBatches
from shardstream.tar import TruncatedTarWarning, buffers, iter_members

path, cut_to = sys.argv[1], int(sys.argv[2])
items, error, mapped = 0, None, buffers.map_windows()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        for item in {read}:
            items += 1
            if items == 1:
                os.truncate(path, cut_to)
    except ShardstreamError as e:
        error = [type(e).__name__, str(e), e.url]
print(json.dumps({{"items": items, "error": error, "warnings": [str(w.message) for w in caught if w.category is TruncatedTarWarning], "mapped": mapped}}))
"""


@pytest.fixture
def shard(tmp_path):
    """100 samples of 2560 bytes (a 1000-byte text, a label), all in the first mapped window."""
    path = tmp_path / "cut.tar"
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for i in range(100):
            tw.add(f"{i:04d}.txt", bytes([i]) * 1000)
            tw.add(f"{i:04d}.cls", b"%d" % i)
    return path


def _read_and_cut(path, read: str, cut_to: int, mmap: str) -> dict:
    env = dict(_ENV, SHARDSTREAM_MMAP=mmap)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT.format(read=read)), str(path), str(cut_to)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"exit status {out.returncode} (-7: SIGBUS): {out.stderr[-2000:]}"
    return json.loads(out.stdout)


#: where the shard is cut: at a page boundary (a map read past it faults at once; within the page of the file's new
#: end, it would read zeros), the first byte of sample 51's text (its header is at 51 * 2560 = 130560)
CUT = 131072

#: what each case gives when it reads the whole shard
WHOLE = {"samples (C grouping)": 100, "column batches (C grouping)": 50, "members (C walk)": 200,
         "members (Python walk)": 200}


@pytest.mark.parametrize("mmap", ["1", "0"], ids=["maps", "pread"])
@pytest.mark.parametrize("how", sorted(READS))
def test_shard_cut_after_the_first_item(shard, how, mmap):
    """Cut inside sample 51 (its text) after the first item: what the reader had read before the cut (a whole
    window, a whole file) it gives, and it meets the cut where it reads on: TarFormatError naming the shard (or,
    where it had read every member, the warning that the end-of-archive marker is missing). Never a signal."""
    got = _read_and_cut(shard, READS[how], CUT, mmap)
    assert got["mapped"] == (mmap == "1")  # the default reads local shards through mapped windows
    if got["error"] is None:
        assert got["items"] == WHOLE[how]
        assert all("without the end-of-archive marker" in w for w in got["warnings"])
    else:
        kind, message, url = got["error"]
        assert kind == "TarFormatError" and url == str(shard) and str(shard) in message
        assert "truncated tar member" in message and "offset 130560" in message and "0051.txt" in message


def _base256_sizes(path) -> None:
    """Rewrite every header's size field in GNU base-256 form, which the C walk leaves to the Python walk."""
    data = bytearray(path.read_bytes())
    at = 0
    while data[at : at + 512].strip(b"\0"):
        header = data[at : at + 512]
        size = int(header[124:135], 8)
        header[124:136] = b"\x80" + size.to_bytes(11, "big")
        header[148:156] = b" " * 8
        header[148:156] = b"%06o\0 " % sum(header)
        data[at : at + 512] = header
        at += 512 + (size + 511) // 512 * 512
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["members (C walk)", "column batches (C grouping)", "samples, Python walk in a window"])
def test_the_cut_is_met_where_members_were_unread(shard, how):
    """Readers that hand out what they read before they are done with a mapped window (the C member walk, the column
    batcher at each full batch, the Python walk where the C walk leaves it each member) meet the cut as a truncated
    shard."""
    if how == "samples, Python walk in a window":
        _base256_sizes(shard)
    read = READS.get(how, READS["samples (C grouping)"])
    got = _read_and_cut(shard, read, CUT, "1")
    assert got["error"] is not None, got
    kind, message, _ = got["error"]
    assert kind == "TarFormatError" and "offset 130560" in message, got
    if how == "samples, Python walk in a window":
        assert got["items"] == 51  # samples 0 to 50: the error names a member of sample 51
