"""Remote shards over an emulated long link (issue 15): parallel ranged reads vs one stream per shard.

    python benchmarks/bench_remote_link.py [--rtt-ms 40] [--conn-mbps 25] [--link-mbps 200] [--short-rtt-ms 2]

One command prints the issue's table at the end (``## summary``): for each server and set, the limit, webdataset
1.0.2 with 1 and 4 DataLoader workers, shardstream with 1 and 4 workers (ratios to the limit and to webdataset
with 1 worker), the time to the first sample next to its goal, and the short-RTT rows (one stream vs the
default). It takes about 4 minutes on a quiet 2-core machine, 7-8 at load 7-10 (RadosGW start and upload ~1 min;
each reader runs in a fresh process); ``--no-s3`` halves it.

The link emulator of the tests (tests/io/link_emulator.py: delay, a cap per connection, a cap for the link)
stands in front of nginx (HTTP) and Ceph RadosGW (S3). Two sets, 4 shards of ~75 MB each: JPEG images
(~180 KB, 800x600) and 4 MiB samples. For each server and set, side by side in one run:

- ``limit``: every shard fetched with 16 parallel ranged connections (8 MiB parts) to /dev/null;
- ``webdataset 1.0.2`` (``pipe:curl``, as its http URLs are read) with 1 and 4 DataLoader workers;
- ``shardstream one stream`` (``SHARDSTREAM_HTTP_CONNECTIONS=1``: the reader before parallel ranged reads);
- ``shardstream`` (defaults) with 1 and 4 DataLoader workers;
- the time to the first sample (no worker process), next to the goal: 4 RTT + the sample's own bytes at the
  per-connection rate.

The samples are counted in the workers (their sizes summed), so what is measured is loading, not the
DataLoader's pickling; both libraries' modules are imported before the clock starts (shardstream signs ``s3://``
URLs itself here: s3fs is not needed). Then the same at a short RTT (a local cluster: the per-connection cap scales with
the RTT, a 1 MB window), where parallel reads must be no slower than one stream. webdataset comes from
``.venv-bench`` (``make bench``) or, failing that, ``.venv-bench/wds-site``, which this script fills when it is
missing (``pip install --target .venv-bench/wds-site --no-deps webdataset==1.0.2 braceexpand``).

Small shards (``--only-small`` runs these rows alone, in about a minute): two ~26 MB shards of 256 KiB samples
over a thinner link (``--small-conn-mbps 10``, ``--small-link-mbps 80``, the same RTT), where every shard boundary
and the first round trips weigh: shardstream's defaults in this process and in one DataLoader worker against the
link, against 8 ranged connections per shard (new ones for each shard, as ``curl -r`` would) and against 8
kept-alive connections fetching both shards back to back (the pipe never drained); the first sample in this process
and through one worker (the worker's start included) against 4 RTT + its own bytes. Medians of 3 interleaved runs.
Here a new connection costs a round trip before its request, as on a real link (the emulator's ``handshake``;
``--no-handshake``: loopback's free connect, as in the other rows).

CPU: each reader row also gives its CPU per MB (its process and its DataLoader workers, from the start of the
clock), and each emulator line the proxy's own CPU: on a small machine the proxy (~1.5 ms/MB, two kernel copies
of every byte) and the reader (~1.5-2 ms/MB in a worker) share the cores, so a row far below the limit with the
machine busy says CPU, not the reader's network side.

Many shards (``--many-shards N``, e.g. 100000; about a minute at 100k): the time to the first batch when the
shard list is long, behind the same link (``--rtt-ms``, no handshake cost): tiny indexed shards (4 samples, 10 KiB:
``bench_scale.py``'s, in ``bench-data/scale-indexed``) served by nginx, named by one brace pattern of N/1000,
N/100, N/10 and N shards; in a fresh process each, ``WebDataset(pattern, shardshuffle=True)`` and
``TrainingDataset(pattern, shuffle="stream", lengths=...)`` with its default ``buffer=1000`` and with ``buffer=8``
(both shuffle the shard list; the stream shuffle reads one block of ``buffer`` samples, here 250 tiny shards
opened ``open_ahead`` (16) at a time, before its first batch): the first batch against its goal of 4 RTT. What grows with N is the list itself
(expanded, shuffled, planned); the network part does not depend on N.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

from _common import ROOT, big_shards, jpeg_shards, table, warm

sys.path.insert(0, str(ROOT / "tests" / "io"))

from link_emulator import LinkEmulator
from remote_servers import CEPH_BINARIES, RGW_KEYS, Nginx, RadosGW, boto3_client, missing

MB = 1e6
PART = 8 << 20


# -- the limit: 16 parallel ranged connections to /dev/null --------------------------------------------------------

def fetch_all(urls: list[str], sizes: list[int], connections: int = 16, part: int = PART) -> float:
    """Seconds to fetch every byte of ``urls`` as ``part`` ranges over ``connections`` kept-alive connections."""
    jobs = [(u, start, min(size, start + part)) for u, size in zip(urls, sizes) for start in range(0, size, part)]
    local = __import__("threading").local()

    def get(job: tuple[str, int, int]) -> int:
        url, start, end = job
        p = urlsplit(url)
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(p.hostname, p.port, timeout=60)
        conn.request("GET", p.path + (f"?{p.query}" if p.query else ""), headers={"Range": f"bytes={start}-{end - 1}"})
        resp = conn.getresponse()
        buf, n = bytearray(1 << 20), 0
        while k := resp.readinto(buf):
            n += k
        assert resp.status == 206 and n == end - start, (resp.status, n)
        return n

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        assert sum(pool.map(get, jobs)) == sum(sizes)
    return time.perf_counter() - start


# -- one reader in its own process ---------------------------------------------------------------------------

READER = r"""
import json, os, resource, sys, time
lib, workers, urls, local = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
mode = sys.argv[5] if len(sys.argv) > 5 else ""  # "inproc": every sample in this process, no DataLoader
if lib == "webdataset":
    import webdataset as wds
    make = lambda urls=urls: wds.WebDataset(urls, shardshuffle=False, empty_check=False)
else:
    import shardstream as wds
    import shardstream.io.ranged, shardstream.io.objectstore  # what a first remote read imports (s3:// with
    # keys and endpoint in the storage settings is signed without s3fs; webdataset's modules are all imported
    # by `import webdataset`)
    make = lambda urls=urls: wds.WebDataset(urls, shardshuffle=False)
import torch

def size(sample):
    return sum(len(v) for v in sample.values() if isinstance(v, (bytes, bytearray)))

if workers == 0 and mode != "inproc":  # the time to the first sample, in this process, after a local one
    next(iter(make([local])))
    start = time.perf_counter()
    first = next(iter(make()))
    print(json.dumps({"first_s": time.perf_counter() - start, "first_bytes": size(first)}))
    sys.exit(0)
if mode == "inproc":  # every sample in this process (no DataLoader), after a local one
    next(iter(make([local])))
    start = time.perf_counter()
    total = sum(map(size, make()))
    print(json.dumps({"seconds": time.perf_counter() - start, "bytes": total, "cpu_s": 0.0}))
    sys.exit(0)
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

loader = torch.utils.data.DataLoader(make().map(size), num_workers=workers, batch_size=None)
start, cpu0 = time.perf_counter(), cpu()
it = iter(loader)
total = next(it)
first = time.perf_counter() - start  # with the workers' start
total += sum(it)
seconds = time.perf_counter() - start
del it, loader  # the workers are joined: their CPU is counted
print(json.dumps({"seconds": seconds, "bytes": total, "cpu_s": cpu() - cpu0, "first_s": first}))
"""


def webdataset_path(install: bool = True) -> tuple[str, dict[str, str]] | None:
    """(python, env) that imports webdataset 1.0.2 and torch: ``.venv-bench``, else ``.venv-bench/wds-site``
    (filled here when missing and ``install``)."""
    bench = ROOT / ".venv-bench" / "bin" / "python"
    if bench.exists() and subprocess.run([str(bench), "-c", "import webdataset, torch"], check=False).returncode == 0:
        return str(bench), {}
    site = ROOT / ".venv-bench" / "wds-site"
    if not (site / "webdataset").exists() and install:
        print(f"# installing webdataset 1.0.2 into {site} (for the webdataset rows)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), "--no-deps",
                        "webdataset==1.0.2", "braceexpand"], check=False)
    if (site / "webdataset").exists():
        return sys.executable, {"PYTHONPATH": str(site)}
    return None


def run_reader(lib: str, workers: int, urls: list[str], env: dict[str, str], python: str = sys.executable,
               local: str = "", mode: str = "") -> dict:
    full = {**os.environ, **env}
    if lib == "shardstream":
        full["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run([python, "-c", READER, lib, str(workers), json.dumps(urls), local, mode], env=full,
                         capture_output=True, text=True, timeout=900, check=False)
    if out.returncode:
        raise RuntimeError(f"{lib} with {workers} workers failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the emulator's accuracy ---------------------------------------------------------------------------------

def accuracy(url: str, size: int, rtt: float, conn: float, link: float) -> list[tuple[str, float, float]]:
    p = urlsplit(url)
    c = http.client.HTTPConnection(p.hostname, p.port, timeout=60)
    rtts = []
    for _ in range(5):
        start = time.perf_counter()
        c.request("GET", p.path, headers={"Range": "bytes=0-0"})
        c.getresponse().read()
        rtts.append(time.perf_counter() - start)
    one = min(size, 50 << 20)
    start = time.perf_counter()
    c.request("GET", p.path, headers={"Range": f"bytes=0-{one - 1}"})
    resp, buf = c.getresponse(), bytearray(1 << 20)
    while resp.readinto(buf):
        pass
    single = one / (time.perf_counter() - start) / MB
    many = 4 * size / fetch_all([url] * 4, [size] * 4) / MB
    return [("RTT (ms, best of 5)", rtt * 1000, min(rtts) * 1000),
            ("1 connection (MB/s): the cap", conn / MB, single),
            ("16 connections (MB/s): min(16 x cap, link)", min(16 * conn, link) / MB, many)]


# -- the comparison ------------------------------------------------------------------------------------------

def compare(urls: dict[str, list[str]], sizes: list[int], env: dict[str, str], first_goal: float,
            wds: tuple[str, dict[str, str]] | None, full: bool, local: str) -> tuple[list, list, dict]:
    """The rows of one server and set (MB/s, and the first sample in ms), and the same by short name for the
    summary: ``limit``, ``wds1``, ``wds4``, ``one``, ``ss1``, ``ss4`` (MB/s, reader CPU ms/MB), ``first``,
    ``goal`` (ms)."""
    total = sum(sizes)
    found: dict = {"limit": (total / fetch_all(urls["plain"], sizes) / MB, None)}
    rows = [("limit: 16 ranged connections", found["limit"][0], "MB/s")]
    readers = [("one", "shardstream one stream, 1 worker", "shardstream", 1, {"SHARDSTREAM_HTTP_CONNECTIONS": "1"}),
               ("ss1", "shardstream, 1 worker", "shardstream", 1, {}),
               ("ss4", "shardstream, 4 workers", "shardstream", 4, {})]
    if full and wds is not None:
        readers[:0] = [(f"wds{w}", f"webdataset 1.0.2 pipe:curl, {w} worker{'s' * (w > 1)}", "webdataset", w, {})
                       for w in (1, 4)]
    if not full:
        readers = readers[:2]
    for key, label, lib, workers, extra in readers:
        python, wenv = wds if lib == "webdataset" else (sys.executable, {})
        got = run_reader(lib, workers, urls["curl" if lib == "webdataset" else "ss"], {**env, **wenv, **extra},
                         python)
        assert got["bytes"] > 0.8 * total, got
        found[key] = (total / got["seconds"] / MB, got["cpu_s"] / (total / MB) * 1000)
        rows.append((f"{label} ({found[key][1]:.1f} ms CPU/MB)", found[key][0], "MB/s"))
    firsts = []
    if full:
        first = run_reader("shardstream", 0, urls["ss"], env, local=local)
        found["first"], found["goal"] = first["first_s"] * 1000, first_goal * 1000
        firsts.append(("goal: 4 RTT + its own bytes", first_goal * 1000, "ms"))
        firsts.append(("shardstream first sample", first["first_s"] * 1000, "ms"))
        if wds is not None:
            got = run_reader("webdataset", 0, urls["curl"], {**env, **wds[1]}, wds[0], local=local)
            firsts.append(("webdataset first sample", got["first_s"] * 1000, "ms"))
    return rows, firsts, found


# -- small shards: the pipe between shards, and the first sample ----------------------------------------------

def fetch_per_shard(urls: list[str], sizes: list[int], connections: int = 8) -> float:
    """Seconds to fetch each shard as ``connections`` ranges over as many new connections (``curl -r`` each),
    one shard after the other: what a downloader that opens each shard on its own gets."""
    def get(job: tuple[str, int, int]) -> int:
        url, start, end = job
        p = urlsplit(url)
        conn = http.client.HTTPConnection(p.hostname, p.port, timeout=60)
        conn.request("GET", p.path, headers={"Range": f"bytes={start}-{end - 1}"})
        resp, buf, n = conn.getresponse(), bytearray(1 << 20), 0
        while k := resp.readinto(buf):
            n += k
        conn.close()
        return n

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        for url, size in zip(urls, sizes, strict=True):
            step = -(-size // connections)
            assert sum(pool.map(get, [(url, a, min(size, a + step)) for a in range(0, size, step)])) == size
    return time.perf_counter() - start


def small_shards(args: argparse.Namespace, www: str, server: Nginx, paths: list[str]) -> list[str]:
    """Two ~26 MB shards of 256 KiB samples over ``--small-link`` (default 40 ms RTT, 10 MB/s per connection, 80
    MB/s link): shardstream's defaults in this process and in one DataLoader worker, against the link, 8 ranged
    connections per shard, and 8 kept-alive connections over all shards; and the first sample against 4 RTT +
    its own bytes. Each row is the median of ``--small-repeat`` runs, interleaved."""
    rtt, conn, link = args.rtt_ms / 1000, args.small_conn_mbps * MB, args.small_link_mbps * MB
    sizes = [os.path.getsize(p) for p in paths]
    total, runs = sum(sizes), {}
    with LinkEmulator(server.port, delay=rtt / 2, conn_rate=conn, link_rate=link,
                      handshake=not args.no_handshake) as emu:
        urls = [emu.url(f"small/{os.path.basename(p)}") for p in paths]
        for _ in range(args.small_repeat):
            runs.setdefault("per shard", []).append(total / fetch_per_shard(urls, sizes) / MB)
            runs.setdefault("pipe", []).append(total / fetch_all(urls, sizes, 8, -(-max(sizes) // 8)) / MB)
            got = run_reader("shardstream", 0, urls, {}, local=paths[0], mode="inproc")
            runs.setdefault("in process", []).append(got["bytes"] / got["seconds"] / MB)
            got = run_reader("shardstream", 1, urls, {})
            runs.setdefault("1 worker", []).append(got["bytes"] / got["seconds"] / MB)
            runs.setdefault("first, 1 worker", []).append(got["first_s"] * 1000)
            runs.setdefault("first", []).append(run_reader("shardstream", 0, urls, {}, local=paths[0])["first_s"] * 1000)
        stats = emu.stop()
    med = {key: sorted(v)[len(v) // 2] for key, v in runs.items()}
    goal = 4 * rtt * 1000 + first_sample_end(paths[0]) / conn * 1000
    title = (f"small shards ({len(paths)} x {sizes[0] / MB:.0f} MB, 256 KiB samples), {args.rtt_ms:g} ms RTT"
             f"{'' if args.no_handshake else ' (+1 RTT to open a connection)'}, "
             f"{conn / MB:g} MB/s per connection, {link / MB:g} MB/s link; median of {args.small_repeat}")
    rows = [("the link", link / MB, "MB/s"),
            ("8 ranged connections per shard, new ones each shard", med["per shard"], "MB/s"),
            ("8 kept-alive ranged connections over all shards", med["pipe"], "MB/s"),
            ("shardstream in this process", med["in process"], "MB/s"),
            ("shardstream, 1 DataLoader worker", med["1 worker"], "MB/s")]
    firsts = [("goal: 4 RTT + its own bytes", goal, "ms"), ("shardstream first sample, in this process", med["first"], "ms"),
              ("shardstream first sample, 1 worker (its start included)", med["first, 1 worker"], "ms")]
    lines = [table(title, rows, "the link"), table("small shards: the first sample", firsts, "goal: 4 RTT + its own bytes"),
             f"# small shards: {med['in process'] / (link / MB):.2f}x the link in this process, "
             f"{med['1 worker'] / (link / MB):.2f}x with 1 worker; vs 8 connections per shard "
             f"{med['in process'] / med['per shard']:.2f}x / {med['1 worker'] / med['per shard']:.2f}x; first sample "
             f"{med['first'] / goal:.2f}x its goal ({med['first, 1 worker'] / goal:.2f}x through a worker); runs: "
             + json.dumps({k: [round(x, 1) for x in v] for k, v in runs.items()}),
             f"# emulator: {stats['connections']} connections, {stats['bytes_down'] / MB:.0f} MB, "
             f"{stats['cpu_s']:.1f} s CPU"]
    for line in lines:
        print(line, flush=True)
    return lines


# -- many shards: the first batch from a long shard list -----------------------------------------------------

MANY = r"""
import json, sys, time
kind, pattern, count, local = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
import shardstream as ss
from shardstream.training import TrainingDataset
def make(urls, n):
    if kind == "webdataset":
        return ss.WebDataset(urls, shardshuffle=True, seed=0).batched(4)
    buffer = 8 if kind == "training-b8" else 1000  # the samples read before the first batch is served
    return TrainingDataset(urls, batch_size=4, shuffle="stream", lengths=[4] * n, rank=0, world_size=1, buffer=buffer)
next(iter(make([local], 1)))  # imports, before the clock
start = time.perf_counter()
batch = next(iter(make(pattern, count)))
print(json.dumps({"first_s": time.perf_counter() - start}))
"""


def many_shards(args: argparse.Namespace) -> list[str]:
    """The first batch from N/1000 .. N tiny shards behind the link (see the module docstring)."""
    from bench_scale import indexed_shards

    top = args.many_shards
    counts = sorted({max(1, top // 1000), max(1, top // 100), max(1, top // 10), top})
    paths, _ = indexed_shards(top)
    rtt = args.rtt_ms / 1000
    rows, env = [], {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with tempfile.TemporaryDirectory(prefix="bench-many-") as work:
        server = Nginx(os.path.dirname(paths[0]), os.path.join(work, "nginx"))
        try:
            with LinkEmulator(server.port, delay=rtt / 2, conn_rate=args.conn_mbps * MB,
                              link_rate=args.link_mbps * MB) as emu:
                for count in counts:
                    pattern = emu.url(f"t-{{000000..{count - 1:06d}}}.tar")
                    row = [f"{count:,}"]
                    for kind in ("webdataset", "training", "training-b8"):
                        try:
                            out = subprocess.run([sys.executable, "-c", MANY, kind, pattern, str(count), paths[0]],
                                                 env=env, capture_output=True, text=True, timeout=args.many_timeout,
                                                 check=False)
                        except subprocess.TimeoutExpired:
                            row.append(f"> {args.many_timeout * 1000:.0f} (stopped)")
                            continue
                        if out.returncode:
                            raise RuntimeError(f"{kind} with {count} shards failed:\n{out.stderr[-3000:]}")
                        row.append(f"{json.loads(out.stdout.strip().splitlines()[-1])['first_s'] * 1000:.0f}")
                    rows.append(row)
        finally:
            server.stop()
    lines = [f"## many shards: the first batch (ms) behind a {args.rtt_ms:g} ms RTT link; goal 4 RTT = "
             f"{4 * args.rtt_ms:g} ms", "", "| shards | WebDataset(shardshuffle=True) | TrainingDataset(shuffle='stream') | the same, buffer=8 |",
             "|---|---|---|---|"] + [f"| {' | '.join(row)} |" for row in rows]
    print("\n".join(lines), flush=True)
    return lines


def summary(results: list[tuple[str, str, float, dict]]) -> str:
    """The issue's table: one line per server, set and RTT."""
    def rate(found: dict, key: str, *against: str) -> str:
        if key not in found:
            return "-"
        text = f"{found[key][0]:.0f}"
        for other in against:
            if other in found:
                text += f" {found[key][0] / found[other][0]:.2f}x"
        return text

    head = ("server", "set", "RTT", "limit MB/s", "wds 1w", "wds 4w", "ss 1w (x limit, x wds)", "ss 4w (x limit)",
            "first sample ms (x goal)", "one stream 1w")
    lines = ["## summary (MB/s; ratios: shardstream vs the limit and vs webdataset with 1 worker; first sample vs "
             "its goal of 4 RTT + its own bytes at one connection's rate)", " | ".join(head),
             " | ".join("---" for _ in head)]
    for server, set_name, rtt_ms, found in results:
        first = f"{found['first']:.0f} ({found['first'] / found['goal']:.2f}x)" if "first" in found else "-"
        lines.append(" | ".join((server, set_name, f"{rtt_ms:g} ms", rate(found, "limit"), rate(found, "wds1"),
                                 rate(found, "wds4"), rate(found, "ss1", "limit", "wds1"),
                                 rate(found, "ss4", "limit"), first, rate(found, "one", "limit"))))
    return "\n".join(lines)


def first_sample_end(path: str) -> int:
    """Bytes up to the end of the first sample of a local shard (what one stream must deliver first)."""
    sys.path.insert(0, str(ROOT / "src"))
    from shardstream.tar.index import scan_file

    entries = scan_file(path)
    key = entries[0][0].split(".", 1)[0]
    return max(offset + size for name, offset, size in entries if name.split(".", 1)[0] == key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=40)
    parser.add_argument("--conn-mbps", type=float, default=25, help="MB/s per connection at --rtt-ms")
    parser.add_argument("--link-mbps", type=float, default=200)
    parser.add_argument("--short-rtt-ms", type=float, default=2, help="the local-cluster case (0: skip)")
    parser.add_argument("--no-s3", action="store_true", help="skip RadosGW")
    parser.add_argument("--small-conn-mbps", type=float, default=10, help="small shards: MB/s per connection")
    parser.add_argument("--small-link-mbps", type=float, default=80, help="small shards: the link, MB/s")
    parser.add_argument("--small-repeat", type=int, default=3, help="small shards: runs of each row (median)")
    parser.add_argument("--only-small", action="store_true", help="the small-shards rows only (about a minute)")
    parser.add_argument("--many-shards", type=int, default=0, metavar="N",
                        help="only the first batch from N/1000 .. N tiny shards (e.g. 100000)")
    parser.add_argument("--many-timeout", type=float, default=120, help="--many-shards: seconds before a reader "
                        "is stopped (its row then says so)")
    parser.add_argument("--no-handshake", action="store_true",
                        help="small shards: a new connection costs no round trip (loopback's free connect)")
    args = parser.parse_args()
    began, results = time.perf_counter(), []
    reason = missing("nginx") or (None if __import__("shutil").which("curl") else "curl is not installed")
    if reason:
        print(f"# skipped: {reason}")
        return 0
    if args.many_shards:
        many_shards(args)
        print(f"# took {time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f} (cores: "
              f"{os.cpu_count()})", flush=True)
        return 0
    small = big_shards(200, 256 << 10, 100)  # two ~26 MB shards of 256 KiB samples
    warm(small)
    if args.only_small:
        with tempfile.TemporaryDirectory(prefix="bench-link-") as work:
            os.makedirs(os.path.join(work, "www"))
            os.symlink(os.path.dirname(small[0]), os.path.join(work, "www", "small"))
            server = Nginx(os.path.join(work, "www"), os.path.join(work, "nginx"))
            try:
                small_shards(args, os.path.join(work, "www"), server, small)
            finally:
                server.stop()
        print(f"# took {time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f} (cores: "
              f"{os.cpu_count()})", flush=True)
        return 0
    sets = {"images": jpeg_shards(1680, 420, (800, 600)), "4MiB": big_shards(72, 4 << 20, 18)}
    for paths in sets.values():
        warm(paths)
    wds = webdataset_path()
    if wds is None:
        print("# webdataset rows skipped: run `make bench` (or pip install --target .venv-bench/wds-site "
              "webdataset==1.0.2 braceexpand)")
    with tempfile.TemporaryDirectory(prefix="bench-link-") as work:
        www = os.path.join(work, "www")
        os.makedirs(www)
        for name, paths in {**sets, "small": small}.items():
            os.symlink(os.path.dirname(paths[0]), os.path.join(www, name))
        servers = [("nginx", Nginx(www, os.path.join(work, "nginx")))]
        rgw = None
        s3_reason = "--no-s3" if args.no_s3 else missing(*CEPH_BINARIES)
        if s3_reason:
            print(f"# RadosGW skipped: {s3_reason}")
        else:
            print("# starting Ceph RadosGW and uploading the sets", flush=True)
            rgw = RadosGW(os.path.join(work, "rgw"))
            client = boto3_client(rgw.endpoint)
            client.create_bucket(Bucket="bench")
            for name, paths in sets.items():
                for p in paths:
                    client.upload_file(p, "bench", f"{name}/{os.path.basename(p)}")
            servers.append(("RadosGW", rgw))
        try:
            cases = [(args.rtt_ms, args.conn_mbps * MB, True)]
            if args.short_rtt_ms:
                window = args.conn_mbps * MB * args.rtt_ms / 1000  # bytes in flight: the same TCP window
                cases.append((args.short_rtt_ms, window / (args.short_rtt_ms / 1000), False))
            for rtt_ms, conn, full in cases:
                rtt = rtt_ms / 1000
                for server_name, server in servers:
                    with LinkEmulator(server.port, delay=rtt / 2, conn_rate=conn, link_rate=args.link_mbps * MB) as emu:
                        for set_name, paths in sets.items():
                            sizes = [os.path.getsize(p) for p in paths]
                            names = [f"{set_name}/{os.path.basename(p)}" for p in paths]
                            if server_name == "nginx":
                                plain = [emu.url(n) for n in names]
                                urls = {"plain": plain, "ss": plain, "curl": [f"pipe:curl -s -f {u}" for u in plain]}
                                env: dict[str, str] = {}
                            else:
                                signer = boto3_client(emu.endpoint)
                                plain = [signer.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": n},
                                                                       ExpiresIn=3600) for n in names]
                                urls = {"plain": plain, "ss": [f"s3://bench/{n}" for n in names],
                                        "curl": [f"pipe:curl -s -f '{u}'" for u in plain]}
                                env = {"SHARDSTREAM_STORAGE": (
                                    f"[{{bucket: bench, endpoint_url: '{emu.endpoint}', key: {RGW_KEYS[0]}, "
                                    f"secret: {RGW_KEYS[1]}, region: us-east-1, addressing_style: path}}]")}
                            if full and server_name == "nginx" and set_name == "4MiB":
                                print(f"## link emulator accuracy\n{'':44}  configured  measured  ratio")
                                for what, want, got in accuracy(plain[0], sizes[0], rtt, conn, args.link_mbps * MB):
                                    print(f"{what:44}  {want:>10.1f}  {got:>8.1f}  {got / want:>4.2f}x", flush=True)
                            goal = 4 * rtt + first_sample_end(paths[0]) / conn
                            rows, firsts, found = compare(urls, sizes, env, goal, wds, full, paths[-1])
                            results.append((server_name, set_name, rtt_ms, found))
                            title = (f"{server_name}, {set_name} set ({len(paths)} shards, {sum(sizes) / MB:.0f} MB), "
                                     f"{rtt_ms:g} ms RTT, {conn / MB:.0f} MB/s per connection, "
                                     f"{args.link_mbps:g} MB/s link")
                            print(table(title, rows, "limit: 16 ranged connections"), flush=True)
                            if firsts:
                                print(table(f"{server_name}, {set_name} set: time to the first sample", firsts,
                                            "goal: 4 RTT + its own bytes"), flush=True)
                        stats = emu.stop()
                        print(f"# emulator: {stats['connections']} connections, {stats['bytes_down'] / MB:.0f} MB, "
                              f"{stats['cpu_s']:.1f} s CPU ({stats['cpu_s'] / max(1, stats['bytes_down'] / MB) * 1000:.1f}"
                              " ms/MB)", flush=True)
            small_lines = small_shards(args, www, servers[0][1], small)
        finally:
            for _, server in servers:
                server.stop()
    print(summary(results))
    print("\n".join(small_lines))
    print(f"# took {time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f} (cores: "
          f"{os.cpu_count()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
