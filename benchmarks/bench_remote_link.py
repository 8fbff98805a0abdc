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

CPU: each reader row also gives its CPU per MB (its process and its DataLoader workers, from the start of the
clock), and each emulator line the proxy's own CPU: on a small machine the proxy (~1.5 ms/MB, two kernel copies
of every byte) and the reader (~1.5-2 ms/MB in a worker) share the cores, so a row far below the limit with the
machine busy says CPU, not the reader's network side.
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

def fetch_all(urls: list[str], sizes: list[int], connections: int = 16) -> float:
    """Seconds to fetch every byte of ``urls`` as ``PART`` ranges over ``connections`` kept-alive connections."""
    jobs = [(u, start, min(size, start + PART)) for u, size in zip(urls, sizes) for start in range(0, size, PART)]
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

if workers == 0:  # the time to the first sample, in this process, after a local one (first-use costs)
    next(iter(make([local])))
    start = time.perf_counter()
    first = next(iter(make()))
    print(json.dumps({"first_s": time.perf_counter() - start, "first_bytes": size(first)}))
    sys.exit(0)
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

loader = torch.utils.data.DataLoader(make().map(size), num_workers=workers, batch_size=None)
start, cpu0 = time.perf_counter(), cpu()
it = iter(loader)
total = sum(it)
seconds = time.perf_counter() - start
del it, loader  # the workers are joined: their CPU is counted
print(json.dumps({"seconds": seconds, "bytes": total, "cpu_s": cpu() - cpu0}))
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
               local: str = "") -> dict:
    full = {**os.environ, **env}
    if lib == "shardstream":
        full["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run([python, "-c", READER, lib, str(workers), json.dumps(urls), local], env=full,
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
    args = parser.parse_args()
    began, results = time.perf_counter(), []
    reason = missing("nginx") or (None if __import__("shutil").which("curl") else "curl is not installed")
    if reason:
        print(f"# skipped: {reason}")
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
        for name, paths in sets.items():
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
        finally:
            for _, server in servers:
                server.stop()
    print(summary(results))
    print(f"# took {time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f} (cores: "
          f"{os.cpu_count()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
