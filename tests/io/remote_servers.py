"""Real servers for the remote-shard tests and the benchmark, started on 127.0.0.1 and stopped by PID.

- :class:`Nginx`: nginx (Debian ``nginx-light``) serving a directory, with Range support (206), a
  header-protected ``/private/``, a Basic-auth ``/basic/`` and a redirecting ``/moved/``.
- :class:`RadosGW`: Ceph RadosGW (real S3) over a one-OSD memstore cluster in a temporary directory; all ports
  free ones on loopback (the recipe of ../shared/servers/ceph-rgw-start.sh, with a free monitor port too).

The fault-injecting proxy and the misbehaving stub server are in fault_servers.py.

Nothing here installs anything: a missing binary makes :func:`missing` return the reason to skip.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import random
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import uuid

LOOPBACK = "127.0.0.1"
RGW_KEYS = ("AKTEST", "SKTEST")
CEPH_BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "ceph-authtool", "monmaptool")


#: the shards the io tests' fixtures build, and the bucket they are uploaded to
SHARDS = 4
BUCKET = "shards"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def which(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def missing(*names: str) -> str | None:
    """The reason to skip when one of the binaries is not installed (None when all are there)."""
    absent = [n for n in names if which(n) is None]
    if not absent:
        return None
    return (f"{', '.join(absent)} not installed (Debian: apt-get install -y nginx-light ceph-mon ceph-osd radosgw "
            "uuid-runtime; `scripts/install-test-servers.sh` does it)")


def stop_process(proc: subprocess.Popen) -> None:
    """Stop a server process: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {LOOPBACK}:{port} after {timeout} s")


# -- nginx -----------------------------------------------------------------------------------------------------

class Nginx:
    """nginx serving ``root`` on a free loopback port; ``url(path)`` gives the URL of a file."""

    TOKEN = "secret-token"
    BASIC = ("alice", "wonderland")

    def __init__(self, root: str, workdir: str):
        self.root, self.workdir, self.port = root, workdir, free_port()
        os.makedirs(workdir, exist_ok=True)
        basic = base64.b64encode(":".join(self.BASIC).encode()).decode()
        temp = " ".join(f"{kind}_temp_path {workdir}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                           "uwsgi", "scgi"))
        conf = f"""
daemon off; master_process off; worker_processes 1;
pid {workdir}/nginx.pid; error_log {workdir}/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000; {temp}
  default_type application/octet-stream;
  server {{
    listen {LOOPBACK}:{self.port}; root {root};
    location /private/ {{ if ($http_x_token != "{self.TOKEN}") {{ return 401; }} }}
    location /basic/ {{ if ($http_authorization != "Basic {basic}") {{ return 401; }} }}
    location /moved/ {{ rewrite ^/moved/(.*)$ /$1 redirect; }}
  }}
}}
"""
        self.conf = os.path.join(workdir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([which("nginx") or "nginx", "-p", workdir, "-c", self.conf, "-e",
                                      os.path.join(workdir, "error.log")], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_port(self.port, 10, self.proc)
        except BaseException:
            self.stop()
            raise

    def url(self, path: str = "") -> str:
        return f"http://{LOOPBACK}:{self.port}/{path.lstrip('/')}"

    def stop(self) -> None:
        stop_process(self.proc)


# -- Ceph RadosGW ---------------------------------------------------------------------------------------------

class RadosGW:
    """A throw-away Ceph cluster (one monitor, one memstore OSD) with RadosGW on a free loopback port."""

    def __init__(self, workdir: str, timeout: float = 90):
        self.dir, self.port, mon_port = workdir, free_port(), free_port()
        d = workdir
        for sub in ("run", "log", "mon", "osd/ceph-0", "rgw"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        fsid = str(uuid.uuid4())
        self.conf = os.path.join(d, "ceph.conf")
        with open(self.conf, "w") as f:
            f.write(f"""[global]
fsid = {fsid}
mon host = v2:{LOOPBACK}:{mon_port}
public addr = {LOOPBACK}
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
run dir = {d}/run
admin socket = {d}/run/$name.asok
pid file = {d}/run/$name.pid
log file = {d}/log/$name.log
mon data = {d}/mon/$cluster-$id
osd data = {d}/osd/$cluster-$id
keyring = {d}/keyring
osd objectstore = memstore
memstore device bytes = 1073741824
[client.rgw.test]
rgw frontends = beast endpoint={LOOPBACK}:{self.port}
rgw data = {d}/rgw
""")
        c = ["-c", self.conf]
        try:
            self._run("ceph-authtool", "--create-keyring", f"{d}/keyring", "--gen-key", "-n", "mon.", "--cap",
                      "mon", "allow *")
            self._run("monmaptool", "--create", "--addv", "a", f"[v2:{LOOPBACK}:{mon_port}]", "--fsid", fsid,
                      f"{d}/monmap")
            self._run("ceph-mon", *c, "--mkfs", "-i", "a", "--monmap", f"{d}/monmap", "--keyring", f"{d}/keyring")
            self._run("ceph-mon", *c, "-i", "a")
            self._run("ceph", *c, "osd", "create", timeout=30)
            self._run("ceph-osd", *c, "-i", "0", "--mkfs")
            self._run("ceph-osd", *c, "-i", "0")
            self._run("radosgw", *c, "-n", "client.rgw.test", timeout=60)
            wait_port(self.port, timeout)
            self._run("radosgw-admin", *c, "user", "create", "--uid=test", "--display-name=test",
                      f"--access-key={RGW_KEYS[0]}", f"--secret-key={RGW_KEYS[1]}", timeout=60)
        except BaseException:
            self.stop()
            raise

    def _run(self, *cmd: str, timeout: float = 30) -> None:
        r = subprocess.run(list(cmd), cwd=self.dir, capture_output=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode()[-2000:]}")

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        pids = []
        for name in ("client.rgw.test", "osd.0", "mon.a"):
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(self.dir, "run", f"{name}.pid")) as f:
                    pids.append(int(f.read().strip()))
        for pid in pids:  # a throw-away cluster: no clean shutdown needed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def boto3_client(endpoint: str, keys: tuple[str, str] = RGW_KEYS):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=keys[0], aws_secret_access_key=keys[1],
                        region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))


# -- data helpers --------------------------------------------------------------------------------------------

def build_shard(path: str, shard: int, count: int = 12, seed: int = 0) -> str:
    """A plain tar shard with samples of random sizes (some of several hundred kB), stdlib tarfile."""
    rng = random.Random(seed * 1000 + shard)
    with tarfile.open(path, "w") as tf:
        for i in range(count):
            key = f"s{shard:02d}-{i:04d}"
            size = rng.choice([10, 700, 5000, 90_000, 400_000])
            for ext, data in (("bin", rng.randbytes(size)), ("cls", str(i % 7).encode()),
                              ("json", b'{"i": %d}' % i)):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


def samples_of(urls, **kw) -> list[dict]:
    """The samples of ``urls`` read in order by the pipeline's shard reader, without ``__url__``."""
    from shardstream.pipeline import tarfile_samples

    return [{k: v for k, v in s.items() if k != "__url__"} for s in tarfile_samples(list(urls), **kw)]


def s3_settings_yaml(rules: list[tuple[str, str, tuple[str, str]]]) -> str:
    """Storage settings text for ``[(bucket, endpoint, (key, secret)), ...]`` with path-style addressing."""
    lines = ["storage:"]
    for bucket, endpoint, (key, secret) in rules:
        lines += [f"  - bucket: {bucket}", f"    endpoint_url: {endpoint}", f"    key: {key}",
                  f"    secret: {secret}", "    region: us-east-1", "    addressing_style: path"]
    return "\n".join(lines) + "\n"


def upload(endpoint: str, keys: tuple[str, str], bucket: str, files: dict[str, str]) -> None:
    """Create ``bucket`` (if needed) and upload ``{key: local path}`` with boto3."""
    client = boto3_client(endpoint, keys)
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for key, path in files.items():
        client.upload_file(path, bucket, key)


@contextlib.contextmanager
def moto_server():
    """A moto S3 server on a free loopback port (a fast mock, never the only S3 of the suite); yields its endpoint."""
    import moto.server

    port = free_port()
    server = moto.server.ThreadedMotoServer(ip_address=LOOPBACK, port=port, verbose=False)
    server.start()
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.stop()
