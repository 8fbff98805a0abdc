"""Azurite (Microsoft's Azure Blob Storage emulator) for the ``az://``/``abfs://`` tests, started on 127.0.0.1.

Azurite is the npm package ``azurite``; ``scripts/install-test-servers.sh`` installs it into
``.test-servers/azurite`` (an ``azurite-blob`` on the PATH works too). :class:`Azurite` runs its blob service in
memory (nothing on disk) on a free loopback port and stops it by PID. It checks the Shared Key signature of
every request, so a wrong account key is refused as it would be by Azure. The credentials are the emulator's
published development account (``devstoreaccount1``), never a real one.

The fixtures here are imported by the test modules that need them (``from azure_server import ...``); nothing
here installs anything: :func:`missing` gives the reason to skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from remote_servers import LOOPBACK, build_shard, free_port, samples_of, stop_process, wait_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL_BIN = os.path.join(ROOT, ".test-servers", "azurite", "node_modules", ".bin", "azurite-blob")

#: Azurite's well-known development account and key (published in Azurite's documentation)
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: the container the session's shards are uploaded to
CONTAINER = "shards"
SHARDS = 3


def binary() -> str | None:
    """The ``azurite-blob`` script: the project-local install first, then the PATH."""
    if os.access(LOCAL_BIN, os.X_OK):
        return LOCAL_BIN
    return shutil.which("azurite-blob")


def missing() -> str | None:
    """The reason to skip when Azurite, node or adlfs is not installed (None when all are there)."""
    if binary() is None:
        return "Azurite is not installed (`scripts/install-test-servers.sh` installs it with npm)"
    if shutil.which("node") is None:
        return "node is not installed: Azurite is a Node.js program"
    try:
        import adlfs  # noqa: F401
    except ImportError:
        return "adlfs is not installed: pip install 'shardstream[azure]'"
    return None


class Azurite:
    """Azurite's blob service, in memory, on a free loopback port."""

    def __init__(self, workdir: str, timeout: float = 60):
        self.port, self.workdir = free_port(), workdir
        os.makedirs(workdir, exist_ok=True)
        self.log = open(os.path.join(workdir, "azurite.log"), "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [binary() or "azurite-blob", "--blobHost", LOOPBACK, "--blobPort", str(self.port), "--inMemoryPersistence",
             "--loose", "--skipApiVersionCheck", "--disableTelemetry"],
            cwd=workdir, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_port(self.port, timeout, self.proc)
        except BaseException:
            self.stop()
            raise

    @property
    def endpoint(self) -> str:
        """The blob endpoint of the development account (path-style: the account is the first path segment)."""
        return f"http://{LOOPBACK}:{self.port}/{ACCOUNT}"

    def connection_string(self, key: str = ACCOUNT_KEY, endpoint: str | None = None) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
                f"BlobEndpoint={endpoint or self.endpoint};")

    def filesystem(self, **kw):
        """An adlfs file system on this server (for the tests' own uploads and checks)."""
        import adlfs

        return adlfs.AzureBlobFileSystem(connection_string=self.connection_string(), skip_instance_cache=True, **kw)

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def storage_yaml(prefix: str, connection_string: str, extra: str = "") -> str:
    """Storage settings text giving the URLs under ``prefix`` a connection string (in a rule's ``options``)."""
    return (f"storage:\n  - prefix: {prefix}\n    options:\n      connection_string: \"{connection_string}\"\n"
            + extra)


# -- fixtures (imported by the test modules) ---------------------------------------------------------------------

@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """Azurite, once per session (~2 s to start); skips, saying why, when it or adlfs is missing."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    server = Azurite(str(tmp_path_factory.mktemp("azurite")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def az_local(tmp_path_factory) -> list[str]:
    """Three small local shards (8 samples each, some fields of several hundred kB)."""
    root = tmp_path_factory.mktemp("az-shards")
    return [build_shard(str(root / f"shard-{i:06d}.tar"), i, count=8, seed=31) for i in range(SHARDS)]


@pytest.fixture(scope="session")
def az_expected(az_local) -> list[dict]:
    return samples_of(az_local)


@pytest.fixture(scope="session")
def az_data(azurite, az_local):
    """Azurite with the three shards in ``az://shards/data/``."""
    fs = azurite.filesystem()
    fs.mkdir(CONTAINER)
    for i, path in enumerate(az_local):
        fs.put_file(path, f"{CONTAINER}/data/shard-{i:06d}.tar")
    return azurite


@pytest.fixture
def az_settings(az_data, monkeypatch):
    """The process settings give every ``az://`` URL Azurite's connection string (as a user's settings would)."""
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("az://", az_data.connection_string()))
    return az_data
