"""How a local tar's bytes reach the C header walk: ``os.preadv`` into a reused buffer (``FileBuffer``, today)
at several sizes, against memory-mapped windows (measured here only; not in the library), driven by the real
reader. CPU time (``time.process_time``), every candidate in each round, medians; then peak RSS per candidate.

    .venv-bench/bin/python benchmarks/bench_read_buffers.py               # 3 rounds, then the RSS rows
    .venv-bench/bin/python benchmarks/bench_read_buffers.py --rounds 9 --no-rss
    .venv-bench/bin/python benchmarks/bench_read_buffers.py --small 'DIR/*.tar' --big 'DIR/*.tar'
    .venv-bench/bin/python benchmarks/bench_read_buffers.py --setting   # the library's own choice, MMAP=0 vs 1
    .venv-bench/bin/python benchmarks/bench_read_buffers.py --maps      # the kernel's cost of the maps alone

``--setting`` runs the library unchanged in fresh processes, alternating ``SHARDSTREAM_MMAP=0`` (``FileBuffer``) and
the default (``WindowBuffer`` where ``source_for`` picks it: the C walk prefetches), and prints CPU time (median of
the processes' medians) and peak RSS (VmHWM) per workload.

``--maps`` measures what the kernel alone costs to map the small shards once, window after window, without the
reader: each window's pages put in by faults (one byte read every 64 KiB: the kernel's fault-around maps 64 KiB per
fault), by ``MAP_POPULATE``, by ``MADV_POPULATE_READ``, or not at all (``mmap`` + ``munmap`` alone), at 1, 2 and
4 MiB; CPU ms per pass over the set and us per window, medians of the rounds.

Workloads: ``raw`` = ``sum(1 for _ in WebDataset(small, shardshuffle=False))`` (200k samples of ~250 B txt + cls,
~2 KiB of tar each); ``cols`` = ``DataPipeline(SimpleShardList(small), tarfile_to_columns(256))``; ``big`` = the
same ``WebDataset`` over 4 MiB members (read by ``take_direct``: one ``os.pread`` each, whatever the buffer).
Each candidate replaces ``shardstream.reading.source_for`` for regular files; ``base`` is the library's own.
A window candidate maps ``window`` bytes from the page-aligned offset of the first unread byte (never past the
size ``fstat`` reports) and drops the previous window; ``pop`` adds ``MAP_POPULATE``, ``seq``/``willneed`` an
``madvise``; ``whole`` maps each shard at once.
"""

from __future__ import annotations

import argparse
import glob
import mmap
import os
import stat
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import big_shards, small_shards, warm

import shardstream
from shardstream import reading
from shardstream.pipeline import tarfile_to_columns
from shardstream.tar import buffers

_GRAN = mmap.ALLOCATIONGRANULARITY
_EMPTY = memoryview(b"")
#: ``madvise(MADV_POPULATE_READ)`` (Linux 5.14+; the mmap module names it only from Python 3.13 on Linux)
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else 0)
K, M = 1 << 10, 1 << 20


class WindowBuffer:
    """A ``FileBuffer`` stand-in over memory-mapped windows (same ``buf``/``pos``/``base``/``eof`` interface)."""

    def __init__(self, stream: Any, fd: int, start: int, window: int, flags: int = 0, advice: int | None = None):
        self._stream, self._fd, self._start, self._window, self._ahead = stream, fd, start, window, window
        self._flags, self._advice = flags, advice
        self.buf, self.pos, self.base, self.eof = _EMPTY, 0, 0, False

    def file_end(self) -> int | None:
        return None if self._stream.closed else os.fstat(self._fd).st_size - self._start

    def fill(self, need: int) -> bool:
        avail = len(self.buf) - self.pos
        if avail >= need:
            return True
        if self.eof:
            return False
        self.base += self.pos
        self.pos, at = 0, self._start + self.base
        want, self._ahead = max(self._ahead, need), self._window
        end = min(at + want, os.fstat(self._fd).st_size)  # never map past the end fstat reports
        if end - at <= avail:
            self.buf, self.eof = self.buf[len(self.buf) - avail :], True
            return False
        lo = at - at % _GRAN
        self.buf = _EMPTY  # the old window is unmapped when its last view goes
        mm = mmap.mmap(self._fd, end - lo, flags=mmap.MAP_SHARED | self._flags, prot=mmap.PROT_READ, offset=lo)
        if self._advice is not None:
            mm.madvise(self._advice)
        self.buf = memoryview(mm)[at - lo :]
        self.eof = end - at < need
        return not self.eof

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None:
        if size < buffers._DIRECT_MIN or len(self.buf) - start >= size:
            return None
        end = self.file_end()
        if end is None or self.base + start + padded > end:
            return None
        data = os.pread(self._fd, size, self._start + self.base + start)
        if len(data) < size:
            return None
        self.base += start + padded
        self.buf, self.pos, self._ahead = _EMPTY, 0, buffers._AFTER_DIRECT
        return data


Factory = Callable[[Any, int, int], Any]


def candidates() -> dict[str, Factory | None]:
    pop = getattr(mmap, "MAP_POPULATE", 0)
    out: dict[str, Factory | None] = {"base": None}
    for n in (128 * K, 256 * K, 512 * K, 4 * M):
        out[f"preadv-{n // K}K"] = lambda s, fd, at, n=n: buffers.FileBuffer(s, fd, at, n)
    for n in (256 * K, M, 4 * M):
        out[f"map-{n // K}K"] = lambda s, fd, at, n=n: WindowBuffer(s, fd, at, n)
        out[f"map-pop-{n // K}K"] = lambda s, fd, at, n=n: WindowBuffer(s, fd, at, n, pop)
    out["map-seq-1024K"] = lambda s, fd, at: WindowBuffer(s, fd, at, M, 0, mmap.MADV_SEQUENTIAL)
    out["map-willneed-1024K"] = lambda s, fd, at: WindowBuffer(s, fd, at, M, 0, mmap.MADV_WILLNEED)
    if _POPULATE_READ:
        out["map-popread-1024K"] = lambda s, fd, at: WindowBuffer(s, fd, at, M, 0, _POPULATE_READ)
    out["map-whole"] = lambda s, fd, at: WindowBuffer(s, fd, at, 1 << 40)
    return out


USED = [0]


def use(name: str) -> None:
    factory = candidates()[name]
    if factory is None:
        reading.source_for = buffers.source_for
        return

    def source_for(stream: Any, bufsize: int) -> Any:
        fd, at = stream.fileno(), stream.tell()
        if stat.S_ISREG(os.fstat(fd).st_mode):
            USED[0] += 1
            return factory(stream, fd, at)
        return buffers.source_for(stream, bufsize)

    reading.source_for = source_for


def workloads(small: list[str], big: list[str]) -> dict[str, Callable[[], int]]:
    def cols() -> int:
        pipe = shardstream.DataPipeline(shardstream.SimpleShardList(small), tarfile_to_columns(256))
        return sum(len(b["__key__"]) for b in pipe)

    return {
        "raw": lambda: sum(1 for _ in shardstream.WebDataset(small, shardshuffle=False)),
        "cols": cols,
        "big": lambda: sum(len(s["bin"]) for s in shardstream.WebDataset(big, shardshuffle=False)),
    }


def cpu_rows(small: list[str], big: list[str], names: list[str], rounds: int) -> None:
    runs = workloads(small, big)
    times: dict[tuple[str, str], list[float]] = {(w, c): [] for w in runs for c in names}
    expected = {}
    for w, fn in runs.items():
        for c in names:  # warm-up round, and every candidate must give the same count
            use(c)
            before, count = USED[0], fn()
            if c != "base" and USED[0] == before:
                raise SystemExit(f"{c} was not used on {w}")
            if expected.setdefault(w, count) != count:
                raise SystemExit(f"{c} read {count} on {w}, base read {expected[w]}")
    for _ in range(rounds):
        for w, fn in runs.items():
            for c in names:
                use(c)
                t0 = time.process_time()
                fn()
                times[w, c].append(time.process_time() - t0)
    print(f"CPU seconds, median of {rounds} interleaved rounds (min), ratio to base")
    for w in runs:
        base = statistics.median(times[w, "base"])
        for c in names:
            m = statistics.median(times[w, c])
            print(f"  {w:5s} {c:20s} {m:.4f} ({min(times[w, c]):.4f})  x{m / base:.3f}")


def rss_rows(args: argparse.Namespace, names: list[str]) -> None:
    print("peak RSS of one process reading the whole set (VmHWM, MiB)")
    for w in ("raw", "big"):
        for c in names:
            cmd = [sys.executable, __file__, "--rss-one", f"{w}:{c}", "--small", args.small or "", "--big",
                   args.big or ""]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
            print(f"  {w:5s} {c:20s} {out}")


def rss_one(small: list[str], big: list[str], spec: str) -> None:
    w, c = spec.split(":")
    use(c)
    workloads(small, big)[w]()
    status = {ln.split(":")[0]: int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("Vm")}
    print(f"VmHWM {status['VmHWM'] // 1024}")  # ru_maxrss would keep the parent's peak across fork + exec


def one_process(small: list[str], big: list[str], workload: str, passes: int) -> None:
    """``--one``: the library's own buffer, ``passes`` timed passes after one untimed; prints median and VmHWM."""
    fn = workloads(small, big)[workload]
    fn()
    times = []
    for _ in range(passes):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    with open(small[0], "rb") as f:
        kind = type(buffers.source_for(f, 1 << 20)).__name__
    hwm = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM"))
    print(kind, statistics.median(times), hwm // 1024)


def setting_rows(args: argparse.Namespace) -> None:
    """SHARDSTREAM_MMAP=0 against the default, each run in fresh processes, alternating."""
    rows: dict[tuple[str, str], list[tuple[str, float, int]]] = {}
    for _ in range(args.rounds):
        for w in ("raw", "cols", "big"):
            for mmap_setting in ("0", "1"):
                cmd = [sys.executable, __file__, "--one", w, "--small", args.small or "", "--big", args.big or ""]
                env = {**os.environ, "SHARDSTREAM_MMAP": mmap_setting}
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout.split()
                rows.setdefault((w, mmap_setting), []).append((out[0], float(out[1]), int(out[2])))
    print(f"the library's choice, {args.rounds} fresh processes each (median CPU s of 5 passes; peak VmHWM MiB)")
    for (w, setting), got in rows.items():
        base = statistics.median(t for _, t, _ in rows[w, "0"])
        cpu = statistics.median(t for _, t, _ in got)
        print(f"  {w:5s} SHARDSTREAM_MMAP={setting} {got[0][0]:13s} {cpu:.4f} s  x{cpu / base:.3f}  "
              f"VmHWM {max(h for _, _, h in got)} MiB")


def map_rows(small: list[str], rounds: int) -> None:
    """``--maps``: the kernel's cost of mapping every page of ``small`` once, window after window (no reader)."""
    pop = getattr(mmap, "MAP_POPULATE", 0)
    ways: dict[str, tuple[int, int, int]] = {"mmap+munmap only": (0, 0, 0), "faults (64 KiB fault-around)": (1, 0, 0)}
    if pop:
        ways["MAP_POPULATE"] = (0, pop, 0)
    if _POPULATE_READ:
        ways["MADV_POPULATE_READ"] = (0, 0, _POPULATE_READ)
    rows = [(way, window) for window in (M, 2 * M, 4 * M) for way in ways]
    times: dict[tuple[str, int], list[float]] = {row: [] for row in rows}
    count = {}
    for _ in range(rounds + 1):  # the first round warms up
        for way, window in rows:
            touch, flags, advice = ways[way]
            t0, n = time.process_time(), 0
            for path in small:
                fd = os.open(path, os.O_RDONLY)
                size = os.fstat(fd).st_size
                for off in range(0, size, window):
                    mm = mmap.mmap(fd, min(window, size - off), flags=mmap.MAP_SHARED | flags, prot=mmap.PROT_READ,
                                   offset=off)
                    try:
                        if advice:
                            mm.madvise(advice)
                        if touch:
                            sum(mm[i] for i in range(0, len(mm), 64 * K))
                    except OSError:  # a kernel without the advice
                        pass
                    mm.close()
                    n += 1
                os.close(fd)
            times[way, window].append(time.process_time() - t0)
            count[way, window] = n
    print(f"the kernel's cost of mapping the small set once (CPU ms per pass, us per window; medians of {rounds})")
    for way, window in rows:
        t = statistics.median(times[way, window])
        print(f"  {window // K:5d} KiB  {way:30s} {t * 1e3:7.1f} ms  {t / count[way, window] * 1e6:6.1f} us/window")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", help="glob of the small-sample shards (default: bench-data/small-200000)")
    parser.add_argument("--big", help="glob of the 4 MiB-member shards (default: bench-data/big-72x4194304)")
    parser.add_argument("--only", help="comma-separated candidates (base is always first)")
    parser.add_argument("--no-rss", action="store_true")
    parser.add_argument("--rss-one", help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--setting", action="store_true", help="the library's own buffer, SHARDSTREAM_MMAP=0 vs 1")
    parser.add_argument("--maps", action="store_true", help="the kernel's cost of the maps alone: faults, populate")
    args = parser.parse_args()
    small = sorted(glob.glob(args.small)) if args.small else small_shards()
    big = sorted(glob.glob(args.big)) if args.big else big_shards(72, 4 << 20, per_shard=18)
    if args.rss_one:
        rss_one(small, big, args.rss_one)
        return
    if args.one:
        one_process(small, big, args.one, 5)
        return
    if args.maps:
        warm(small)
        map_rows(small, args.rounds)
        return
    if args.setting:
        warm(small + big)
        setting_rows(args)
        return
    names = ["base", *(n for n in (args.only.split(",") if args.only else candidates()) if n != "base")]
    warm(small + big)
    cpu_rows(small, big, names, args.rounds)
    if not args.no_rss and sys.platform.startswith("linux"):
        rss_rows(args, names)


if __name__ == "__main__":
    main()
