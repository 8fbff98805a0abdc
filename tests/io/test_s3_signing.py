"""s3:// URLs signed by shardstream itself (AWS Signature V4, io/s3.py) when the storage settings give the keys and
the endpoint or region: the same signature as botocore's, accepted by a real S3 service (RadosGW, which checks
it), no s3fs/botocore import in the reading process, and s3fs still signing what only it can."""

from __future__ import annotations

import contextlib
import datetime
import socket
import subprocess
import sys
import threading
from unittest import mock
from urllib.parse import urlsplit

import pytest
from remote_servers import BUCKET, RGW_KEYS, s3_settings_yaml

from shardstream.config import Settings
from shardstream.errors import OpenError
from shardstream.io import open_url
from shardstream.io.proxy import Route
from shardstream.io.s3 import presign_v4, sigv4_url

WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(("virtual", "token", "key"), [(False, None, "x/a b+c~%.tar"), (True, "T/K+=", "k.tar")])
def test_the_signature_is_botocores(virtual, token, key):
    auth = pytest.importorskip("botocore.auth")
    AWSRequest = pytest.importorskip("botocore.awsrequest").AWSRequest  # noqa: N806
    Credentials = pytest.importorskip("botocore.credentials").Credentials  # noqa: N806

    endpoint = "https://s3.eu-west-1.amazonaws.com" if virtual else "http://127.0.0.1:7480"
    ours = presign_v4(endpoint, "bkt", key, "eu-west-1", ("AK", "SK"), token, virtual=virtual, when=WHEN)
    request = AWSRequest(method="GET", url=ours.split("?")[0])
    with mock.patch.object(auth, "get_current_datetime", return_value=WHEN.replace(tzinfo=None)):
        auth.S3SigV4QueryAuth(Credentials("AK", "SK", token), "s3", "eu-west-1", expires=43200).add_auth(request)
    assert sorted(ours.split("?")[1].split("&")) == sorted(request.url.split("?")[1].split("&"))


def _settings(rule: str) -> Settings:
    return Settings(storage=f"storage: [{rule}]")


@pytest.mark.parametrize(("rule", "signed_here"), [
    ("{bucket: b, endpoint_url: 'http://127.0.0.1:9', key: K, secret: S}", True),  # an IP: path style
    ("{bucket: b, endpoint_url: 'http://s3.lan', key: K, secret: S, addressing_style: path}", True),
    ("{bucket: b, region: eu-west-1, key: K, secret: S}", True),  # AWS, its regional endpoint
    ("{bucket: b, endpoint_url: 'http://s3.lan', key: K, secret: S}", False),  # addressing left to botocore
    ("{bucket: b, endpoint_url: 'http://127.0.0.1:9', profile: p}", False),  # credentials only s3fs finds
    ("{bucket: b, endpoint_url: 'http://127.0.0.1:9', key: K, secret: S, options: {use_ssl: false}}", False),
    ("{bucket: b, endpoint_url: 'http://127.0.0.1:9'}", False),  # no keys: the credential chain
])
def test_what_is_signed_here_and_what_s3fs_signs(rule, signed_here):
    assert (sigv4_url("s3://b/d/x.tar", _settings(rule)) is not None) == signed_here


def test_a_process_reads_s3_without_importing_s3fs_or_botocore(rgw_settings, local_shards):
    code = ("import sys\nfrom shardstream.io import open_url\n"
            f"data = open_url('s3://{BUCKET}/data/shard-000002.tar').read()\n"
            f"assert data == open({local_shards[2]!r}, 'rb').read()\n"
            "print(sorted(m for m in ('s3fs', 'botocore', 'aiobotocore') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_wrong_secret_is_refused_by_the_service(rgw, monkeypatch, fast_retries):
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, rgw.endpoint, (RGW_KEYS[0], "wrong"))]))
    with pytest.raises(OpenError, match="403"):
        open_url(f"s3://{BUCKET}/data/shard-000000.tar").read()


def test_settings_only_s3fs_applies_are_signed_by_s3fs(rgw, monkeypatch, local_shards):
    pytest.importorskip("s3fs")
    yaml = s3_settings_yaml([(BUCKET, rgw.endpoint, RGW_KEYS)]) + "\n    options: {default_block_size: 1048576}"
    monkeypatch.setenv("SHARDSTREAM_STORAGE", yaml)
    url = f"s3://{BUCKET}/data/shard-000003.tar"
    assert sigv4_url(url, Settings.from_env()) is None
    with open(local_shards[3], "rb") as local:
        assert open_url(url).read() == local.read()


# -- the signed host is the Host header sent ---------------------------------------------------------------------

def _sent_host(link: str, route) -> str:
    """The Host header that the native client's connection writes for a GET of ``link`` (nothing is sent)."""
    target, _, connect = route.connection_for(urlsplit(link), timeout=5)
    conn, sent = connect(), {}
    conn.putheader = lambda name, *values: sent.setdefault(name, b"".join(
        v if isinstance(v, bytes) else str(v).encode() for v in values).decode())
    conn.putrequest("GET", target)
    return sent["Host"]


@pytest.mark.parametrize("proxied", [False, True])
@pytest.mark.parametrize(("endpoint", "virtual", "host"), [
    ("http://127.0.0.1:80", False, "127.0.0.1"),  # a default port written out: not in the Host header
    ("https://s3.example.com:443", True, "bkt.s3.example.com"),
    ("http://S3.LAN:80", False, "s3.lan"),  # http.client sends the host name as urlsplit gives it: lower case
    ("http://127.0.0.1:7480", False, "127.0.0.1:7480"),  # any other port stays
    ("http://[::1]:7480", False, "[::1]:7480"),
])
def test_the_signed_host_is_the_host_header_sent(endpoint, virtual, host, proxied):
    if proxied and endpoint.startswith("https"):
        pytest.skip("a CONNECT tunnel sends the request as it is")
    link = presign_v4(endpoint, "bkt", "d/x.tar", "us-east-1", ("AK", "SK"), virtual=virtual, when=WHEN)
    route = Route(http_proxy="http://127.0.0.1:3128") if proxied else Route()
    assert _sent_host(link, route) == host
    # botocore's signature for a request to that host is ours
    auth = pytest.importorskip("botocore.auth")
    AWSRequest = pytest.importorskip("botocore.awsrequest").AWSRequest  # noqa: N806
    Credentials = pytest.importorskip("botocore.credentials").Credentials  # noqa: N806
    request = AWSRequest(method="GET", url=f"{urlsplit(endpoint).scheme}://{host}{urlsplit(link).path}")
    with mock.patch.object(auth, "get_current_datetime", return_value=WHEN.replace(tzinfo=None)):
        auth.S3SigV4QueryAuth(Credentials("AK", "SK"), "s3", "us-east-1", expires=43200).add_auth(request)
    assert sorted(link.split("?")[1].split("&")) == sorted(request.url.split("?")[1].split("&"))


class _Relay:
    """A TCP relay from 127.0.0.1:``port`` to 127.0.0.1:``upstream`` (bytes passed as they are)."""

    def __init__(self, port: int, upstream: int):
        self.upstream, self.listener = upstream, socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def test_an_endpoint_written_with_its_default_port_is_accepted_by_the_service(rgw, monkeypatch, local_shards):
    """RadosGW checks the signature against the Host header it receives: ``http://127.0.0.1:80`` (through a relay
    on port 80 to RadosGW) must sign ``host:127.0.0.1``, as botocore does, not ``host:127.0.0.1:80`` (a 403)."""
    try:
        relay = _Relay(80, rgw.port)
    except OSError as e:  # not root, or port 80 taken
        pytest.skip(f"cannot listen on 127.0.0.1:80: {e}")
    try:
        monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, "http://127.0.0.1:80", RGW_KEYS)]))
        with open_url(f"s3://{BUCKET}/data/shard-000001.tar") as f, open(local_shards[1], "rb") as local:
            assert f.read() == local.read()
    finally:
        relay.stop()
