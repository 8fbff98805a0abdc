"""No password, token, signature or secret key in an error, a log record, a cache file name or CLI output.

A canary secret goes in every place a user may put one (the password of a URL, a token as user name, a signed
query string, a storage rule's secret key, an ``Authorization`` header); the tests then fail if it comes out
anywhere: the exception's message, ``repr``, attributes, notes and formatted traceback, every log record, the
names in the shard cache, and the CLI's stdout and stderr. The shards are served by a real nginx.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import tarfile
import traceback

import pytest

import shardstream as wds
from shardstream.errors import ConfigError, OpenError, ShardstreamError, TarFormatError, add_context
from shardstream.io.cache import ShardCache
from shardstream.io.storage_config import StorageRule, http_headers
from shardstream.config import Settings
from shardstream.redact import SecretFilter, redact, redact_text, redacting_logger

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "io"))
from remote_servers import Nginx, missing  # noqa: E402

CANARY = "Canary7pw0Q"  # a password no message would contain by chance


def _tar(samples: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(samples):
            for ext, data in (("txt", f"sample {i}".encode()), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"{i:04d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    reason = missing("nginx")
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("secret-root")
    good = _tar(20)
    (root / "good.tar").write_bytes(good)
    corrupt = bytearray(good)
    corrupt[2048 + 148:2048 + 156] = b"garbage!"  # the third header's checksum
    (root / "corrupt.tar").write_bytes(bytes(corrupt))
    server = Nginx(str(root), str(tmp_path_factory.mktemp("secret-nginx")))
    yield server
    server.stop()


def _url(server, name: str) -> str:
    return server.url(name).replace("http://", f"http://alice:{CANARY}@")


def _everything_shown(exc: BaseException) -> str:
    """All the text an exception can show: message, repr, text attributes, notes, and the formatted chain.

    (``partial_sample``, the sample a skipping handler may still yield, is the caller's own data: its
    ``__url__`` is the URL as given, like every sample's.)"""
    shown = [str(exc), repr(exc), *map(str, getattr(exc, "__notes__", ()))]
    shown += [v for v in vars(exc).values() if isinstance(v, str)]
    shown += traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "\n".join(shown)


def test_a_corrupt_shard_behind_a_password_names_the_shard_without_the_password(served):
    url = _url(served, "corrupt.tar")
    with pytest.raises(TarFormatError) as caught:
        list(wds.WebDataset(url, shardshuffle=False))
    shown = _everything_shown(caught.value)
    assert CANARY not in shown
    assert "alice:***@" in str(caught.value) and "corrupt.tar" in str(caught.value)
    assert caught.value.url is not None and CANARY not in caught.value.url


def test_the_cli_error_line_hides_the_password(served, tmp_path):
    url = _url(served, "corrupt.tar")
    proc = subprocess.run([sys.executable, "-m", "shardstream", "cat", url, "-o", str(tmp_path / "out.tar")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "corrupt.tar" in proc.stderr
    assert CANARY not in proc.stdout + proc.stderr


def test_the_cache_log_names_and_listing_hide_the_password(served, tmp_path, caplog):
    url = _url(served, "good.tar")
    cache_dir = tmp_path / "cache"
    with caplog.at_level(logging.DEBUG, logger="shardstream"):
        samples = list(wds.WebDataset(url, shardshuffle=False, cache_dir=str(cache_dir)))
    assert len(samples) == 20
    assert caplog.records, "the cache logs each download"
    for record in caplog.records:
        assert CANARY not in record.getMessage()
    names = os.listdir(cache_dir)
    assert names and all(CANARY not in name for name in names)
    assert any("good" in name for name in names)
    proc = subprocess.run([sys.executable, "-m", "shardstream", "cache", "list", "--cache-dir", str(cache_dir),
                           "-vv"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "good" in proc.stdout and CANARY not in proc.stdout + proc.stderr


def test_two_passwords_of_one_object_share_its_cache_name():
    cache = ShardCache("unused")
    one = cache.name_for(f"https://alice:{CANARY}@host/data/a.tar")
    assert one == cache.name_for("https://alice:other-password@host/data/a.tar")
    assert CANARY not in one


@pytest.mark.parametrize("entry", [
    {"prefix": "s3://a/", "bucket": "a", "secret": CANARY, "key": "AKIA"},
    {"endpoint_url": "http://127.0.0.1:1", "secret": CANARY, "key": "AKIA"},
    {"prefix": "s3://a/", "bucket": "a", "token": CANARY},
])
def test_a_storage_rule_error_never_shows_its_secret(entry):
    with pytest.raises(ConfigError) as caught:
        StorageRule.from_dict(entry, source="storage.yaml")
    assert "prefix" in str(caught.value) and "storage.yaml" in str(caught.value)
    assert CANARY not in _everything_shown(caught.value)


def test_a_storage_rule_repr_hides_its_credentials():
    rule = StorageRule.from_dict({"prefix": "s3://a/", "secret": CANARY, "token": CANARY + "t",
                                  "headers": {"Authorization": "Bearer " + CANARY}})
    assert CANARY not in repr(rule)
    # and once read, the secret is masked wherever it turns up in text
    assert CANARY not in redact_text(f"signing with {CANARY} failed")


def test_a_malformed_header_setting_is_not_echoed():
    with pytest.raises(ConfigError) as caught:
        http_headers("https://h/a.tar", Settings(http_headers=(f"Authorization Bearer {CANARY}",)))
    assert CANARY not in str(caught.value) and "SHARDSTREAM_HTTP_HEADERS" in str(caught.value)


@pytest.mark.parametrize("url", [
    f"https://alice:{CANARY}@host/a.tar",
    f"https://{CANARY}@host/a.tar",
    f"https://bucket.s3.amazonaws.com/a.tar?X-Amz-Credential=AKIA%2F2026&X-Amz-Signature={CANARY}",
    f"https://h/a.tar?X-Amz-Security-Token={CANARY}&X-Amz-Expires=60",
    f"https://acct.blob.core.windows.net/c/a.tar?sv=2024&sig={CANARY}",
    f"https://storage.googleapis.com/b/a.tar?X-Goog-Signature={CANARY}",
    f"https://h/a.tar?access_token={CANARY}",
    f"pipe:curl -s -H 'Authorization: Bearer {CANARY}' https://h/a.tar",
    f"pipe:curl -s https://bob:{CANARY}@h/a.tar",
])
def test_every_kind_of_secret_is_masked_in_errors_and_logs(url, caplog):
    err = OpenError(f"cannot open {url!r}: HTTP 403", url=url)
    assert CANARY not in _everything_shown(err)
    assert CANARY not in redact(url)
    assert CANARY not in _everything_shown(add_context(ValueError("bad"), url=url))
    log = redacting_logger("shardstream.test_secrets")
    with caplog.at_level(logging.INFO, logger="shardstream.test_secrets"):
        log.info("opened %s", url)
        try:
            raise RuntimeError(f"third-party error about {url}")
        except RuntimeError:
            log.exception("failed")
    assert caplog.records
    for record in caplog.records:
        assert CANARY not in record.getMessage()
        assert CANARY not in (record.exc_text or "")


def test_what_is_not_secret_stays_readable():
    url = "https://host:8443/data/train-{000..009}.tar?part=1&versionId=3"
    assert redact(url) == url
    assert redact("s3://bucket/a b.tar") == "s3://bucket/a b.tar"
    assert redact("/data/shards/x.tar") == "/data/shards/x.tar"
    assert redact_text("shard 'https://h/a.tar', offset 1536") == "shard 'https://h/a.tar', offset 1536"


def test_a_handler_filter_catches_loggers_made_elsewhere():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(SecretFilter())
    log = logging.getLogger("shardstream.made.elsewhere")  # not through redacting_logger
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("GET https://h/a.tar?X-Amz-Signature=%s", CANARY)
    finally:
        log.removeHandler(handler)
    assert CANARY not in out.getvalue() and "X-Amz-Signature=***" in out.getvalue()


def test_every_logger_of_the_package_redacts():
    """One rule: modules get their logger from redacting_logger, never logging.getLogger directly."""
    import pathlib

    src = pathlib.Path(wds.__file__).parent
    offenders = [str(p.relative_to(src)) for p in src.rglob("*.py")
                 if "getLogger(__name__)" in p.read_text() and p.name != "redact.py"]
    assert offenders == []


def test_shardstream_errors_redact_whatever_builds_them():
    assert issubclass(TarFormatError, ShardstreamError)
    err = TarFormatError("bad checksum", url=f"http://alice:{CANARY}@h/x.tar", offset=1536)
    assert CANARY not in _everything_shown(err) and "offset 1536" in str(err)


def test_cli_output_hides_urls_secrets(served, tmp_path):
    """``info --json`` prints each shard's URL: shown redacted."""
    url = _url(served, "good.tar")
    proc = subprocess.run([sys.executable, "-m", "shardstream", "info", "--json", url], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert CANARY not in proc.stdout + proc.stderr
    assert "alice:***@" in proc.stdout


def test_a_settings_or_spec_file_that_does_not_parse_shows_no_line_of_it():
    """YAML errors quote the line they failed on; the message keeps the problem and its position only."""
    from shardstream.io.storage_config import StorageConfig
    from shardstream.spec.document import read_text

    text = f"storage:\n  - prefix: s3://a/\n    secret: {CANARY}\n    key: [unclosed\n"
    with pytest.raises(ConfigError, match="line") as caught:
        StorageConfig.from_text(text, "storage.yaml")
    assert CANARY not in _everything_shown(caught.value)
    spec = f"sources:\n  - shards: a.tar\n    storage: {{secret: {CANARY}, x: [}}\n"
    with pytest.raises(ConfigError, match="line 3") as caught:
        read_text(spec, "spec.yaml")
    assert CANARY not in _everything_shown(caught.value)


@pytest.mark.parametrize("name", ["account_key", "AccountKey", "connection_string", "sas_token", "private_key"])
def test_azure_and_gcs_credentials_in_a_rules_options_are_masked(name):
    """fsspec's Azure and GCS options carry the secret under their own names; a rule's options register them."""
    secret = f"{CANARY}{name}=="
    StorageRule.from_dict({"prefix": "az://masked-container/", "options": {"account_name": "acct", name: secret}})
    shown = redact_text(f"cannot open 'az://masked-container/a.tar' with options {name}={secret}")
    assert secret not in shown
    assert secret not in str(OpenError(f"failed with {secret}", url="az://masked-container/a.tar"))


def test_an_azure_connection_string_in_text_is_masked():
    text = (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={CANARY}+/x==;"
            f"SharedAccessSignature=sv=2024&sig={CANARY}2;EndpointSuffix=core.windows.net")
    shown = redact_text(f"connection failed: {text}")
    assert CANARY not in shown
    assert "AccountName=acct" in shown
