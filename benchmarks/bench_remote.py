"""Remote shards on loopback: shardstream's HTTP client vs ``curl``, and its S3 reads vs a plain boto3 download.

    python benchmarks/bench_remote.py [--s3-shards N]

- HTTP: nginx serves the big shards; ``curl -s -o /dev/null`` downloads them (one process, one after the other)
  and shardstream reads them with ``open_url`` (raw bytes) and through the tar reader (samples). Goal: >= 0.8x.
- S3: the same shards in Ceph RadosGW; boto3 ``get_object()["Body"]`` read to the end (and, for reference, the
  threaded ``download_fileobj``) vs shardstream's ``s3://`` reads (a URL signed by s3fs, streamed by the native
  HTTP client). Goal: >= 0.8x of the plain get_object.

Each round runs every method once, in turn; the table shows the best round of each (these machines drift).

Parts whose server (nginx, Ceph) or library (boto3, s3fs) is missing are skipped with the reason. The servers
are the ones the tests use (tests/io/remote_servers.py), started on 127.0.0.1 and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _common import ROOT, big_shards, have, table, warm

sys.path.insert(0, str(ROOT / "tests" / "io"))

from remote_servers import CEPH_BINARIES, RGW_KEYS, Nginx, RadosGW, boto3_client, missing  # noqa: E402

MB = 1 << 20


def interleaved(methods: list[tuple[str, object]], nbytes: int, rounds: int = 3) -> list[tuple[str, float, str]]:
    """Best rate of each method over ``rounds`` rounds that run every method once, in turn (fair under drift)."""
    best = {name: float("inf") for name, _ in methods}
    for _ in range(rounds):
        for name, fn in methods:
            start = time.perf_counter()
            fn()  # type: ignore[operator]
            best[name] = min(best[name], time.perf_counter() - start)
    return [(name, nbytes / MB / best[name], "MB/s") for name, _ in methods]


def read_raw(urls: list[str]) -> int:
    from shardstream.io import open_url

    total, buf = 0, bytearray(4 * MB)
    for url in urls:
        with open_url(url) as f:
            while n := f.readinto(buf):
                total += n
    return total


def read_samples(urls: list[str]) -> int:
    from shardstream.pipeline import tarfile_samples

    return sum(len(s["bin"]) for s in tarfile_samples(urls))


def bench_http(paths: list[str], nbytes: int, work: str) -> list[tuple[str, float, str]] | None:
    reason = missing("nginx") or (None if shutil.which("curl") else "curl is not installed")
    if reason:
        print(f"# HTTP part skipped: {reason}")
        return None
    folder = os.path.dirname(paths[0])
    server = Nginx(folder, os.path.join(work, "nginx"))
    try:
        urls = [server.url(os.path.basename(p)) for p in paths]

        def curl() -> int:
            subprocess.run(["curl", "-s", "-f", *[a for u in urls for a in ("-o", "/dev/null", u)]], check=True)
            return nbytes

        assert read_raw(urls) == nbytes
        return interleaved([("curl -o /dev/null", curl), ("shardstream open_url", lambda: read_raw(urls)),
                            ("shardstream samples", lambda: read_samples(urls))], nbytes)
    finally:
        server.stop()


def bench_s3(paths: list[str], nbytes: int, work: str) -> list[tuple[str, float, str]] | None:
    reason = missing(*CEPH_BINARIES) or next((f"{m} is not installed" for m in ("boto3", "s3fs") if not have(m)),
                                             None)
    if reason:
        print(f"# S3 part skipped: {reason}")
        return None
    print(f"# starting Ceph RadosGW (~15 s) and uploading {nbytes / MB:.0f} MB", flush=True)
    server = RadosGW(os.path.join(work, "rgw"))
    try:
        client = boto3_client(server.endpoint)
        client.create_bucket(Bucket="bench")
        keys = [os.path.basename(p) for p in paths]
        for key, path in zip(keys, paths):
            client.upload_file(path, "bench", key)
        os.environ["SHARDSTREAM_STORAGE"] = (
            f"[{{bucket: bench, endpoint_url: '{server.endpoint}', key: {RGW_KEYS[0]}, secret: {RGW_KEYS[1]}, "
            "region: us-east-1, addressing_style: path}]")
        urls = [f"s3://bench/{k}" for k in keys]

        def boto3_get() -> int:
            total = 0
            for key in keys:
                body = client.get_object(Bucket="bench", Key=key)["Body"]
                while chunk := body.read(4 * MB):
                    total += len(chunk)
            return total

        def boto3_download() -> int:
            import io

            total = 0
            for key in keys:
                sink = io.BytesIO()
                client.download_fileobj("bench", key, sink)
                total += sink.tell()
            return total

        assert read_raw(urls) == nbytes
        return interleaved([("boto3 get_object", boto3_get), ("boto3 download_fileobj", boto3_download),
                            ("shardstream s3:// raw", lambda: read_raw(urls)),
                            ("shardstream s3:// samples", lambda: read_samples(urls))], nbytes)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--s3-shards", type=int, default=2, help="shards uploaded to RadosGW (128 MB each)")
    args = parser.parse_args()
    paths = big_shards()
    nbytes = warm(paths)
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as work:
        start = time.perf_counter()
        http = bench_http(paths, nbytes, work)
        if http:
            print(table(f"HTTP from nginx on loopback, {len(paths)} shards, {nbytes / MB:.0f} MB", http,
                        "curl -o /dev/null"))
        s3_paths = paths[: max(1, args.s3_shards)]
        s3 = bench_s3(s3_paths, sum(os.path.getsize(p) for p in s3_paths), work)
        if s3:
            print(table(f"S3 from Ceph RadosGW on loopback, {len(s3_paths)} shards", s3, "boto3 get_object"))
        print(f"# {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
