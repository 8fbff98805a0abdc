"""S3 specifics: presigned URLs for the native HTTP client, and the streaming reads of :class:`ObjectStream`.

``s3://`` shards are read by :func:`shardstream.io.objectstore.open_object` from a signed GET URL, streamed by
the native HTTP client (:mod:`shardstream.io.ranged`). When the storage settings of the bucket give the key and
secret, and the endpoint (path-style addressing, or an IP address) or the AWS region, the URL is signed here
with AWS Signature V4 (:func:`sigv4_url`, the standard library only): no s3fs/botocore import, no session or
client to create, no credential chain to probe (its container and instance metadata endpoints are unreachable
off the cloud and cost a timeout), so a process's (a DataLoader worker's) first sample comes after its first
request, not after ~1 s of client setup. Otherwise s3fs signs it (:func:`presigned_url`: profiles, ``AWS_*``
variables, instance roles; one filesystem per process and options, fsspec's cache, made afresh in a forked
worker); :class:`S3Body` is the fallback when no URL can be signed (custom TLS settings, credentials that
cannot sign).

>>> presigned_url(object(), "bucket/key") is None  # not an s3fs filesystem: no signed URL
True
>>> link = presign_v4("http://127.0.0.1:7480", "b", "x/a b.tar", "us-east-1", ("AK", "SK"),
...                   when=datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
>>> link.split("?")[0], "X-Amz-Date=20240102T030405Z" in link, "X-Amz-Signature=" in link
('http://127.0.0.1:7480/b/x/a%20b.tar', True, True)
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import re
from typing import Any
from urllib.parse import quote, urlsplit

from ..config import Settings
from ..redact import redacting_logger
from .storage_config import storage_options

log = redacting_logger(__name__)

__all__ = ["S3Body", "host_header", "presign_v4", "presigned_url", "sigv4_url"]

_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def presign_v4(endpoint: str, bucket: str, key: str, region: str, credentials: tuple[str, str],
               token: str | None = None, expires: int = 12 * 3600, virtual: bool = False,
               when: datetime.datetime | None = None) -> str:
    """A GET URL of ``bucket``/``key`` at ``endpoint`` (``scheme://host[:port]``) signed with AWS Signature V4
    (query parameters, unsigned payload) by ``credentials`` = ``(access key, secret key)`` for ``region``;
    ``virtual``: the bucket in the host name (``bucket.host``), else in the path. The signed ``host`` is the
    ``Host`` header the request will send (:func:`host_header`: a default port written in ``endpoint`` is dropped,
    as http.client and botocore drop it), and the URL is written with that same host."""
    parts = urlsplit(endpoint)
    host = f"{bucket}.{host_header(endpoint)}" if virtual else host_header(endpoint)
    path = quote(f"/{key}" if virtual else f"/{bucket}/{key}", safe="/~")
    now = (when or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{now[:8]}/{region}/s3/aws4_request"
    query = {"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Credential": f"{credentials[0]}/{scope}",
             "X-Amz-Date": now, "X-Amz-Expires": str(expires), "X-Amz-SignedHeaders": "host",
             **({"X-Amz-Security-Token": token} if token else {})}
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
    request = f"GET\n{path}\n{canonical_query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD"
    to_sign = f"AWS4-HMAC-SHA256\n{now}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    secret = ("AWS4" + credentials[1]).encode()
    for step in (now[:8], region, "s3", "aws4_request"):
        secret = hmac.new(secret, step.encode(), hashlib.sha256).digest()
    signature = hmac.new(secret, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"{parts.scheme}://{host}{path}?{canonical_query}&X-Amz-Signature={signature}"


def host_header(url: str) -> str:
    """The ``Host`` header that a request to ``url`` sends (what http.client writes, and botocore signs): the
    host name in lower case (an IPv6 address in brackets), with the port only when it is not the scheme's
    default (``http://H:80`` sends ``Host: h``, ``https://h:8443`` sends ``Host: h:8443``).

    >>> host_header("http://127.0.0.1:80"), host_header("https://S3.lan:443/x"), host_header("http://[::1]:7480")
    ('127.0.0.1', 's3.lan', '[::1]:7480')
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = parts.port
    return host if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()) else f"{host}:{port}"


def sigv4_url(url: str, settings: Settings, expires: int = 12 * 3600) -> str | None:
    """The signed GET URL of ``s3://bucket/key`` by :func:`presign_v4`, when the storage settings of its bucket
    say everything needed (key, secret, and an endpoint with a known addressing or an AWS region) and nothing
    that only s3fs applies (profiles, anonymous access, TLS or client options); else None (s3fs signs it)."""
    bucket, _, key = url.partition("://")[2].partition("/")
    if not bucket or not key or "?" in url:
        return None
    options = dict(storage_options(url, "s3", settings))
    client, config = options.pop("client_kwargs", None) or {}, options.pop("config_kwargs", None) or {}
    addressing = config.get("s3") or {}
    if set(client) - {"region_name"} or set(config) - {"s3"} or set(addressing) - {"addressing_style"}:
        return None  # TLS, retries, timeouts... of s3fs's own
    region, style = client.get("region_name"), addressing.get("addressing_style", "auto")
    access, secret, token, endpoint = (options.pop(name, None) for name in ("key", "secret", "token", "endpoint_url"))
    if options or not access or not secret:  # a profile, anonymous access, options for s3fs: s3fs signs
        return None
    if endpoint:
        host = urlsplit(endpoint).hostname or ""
        if style == "auto":
            style = "path" if host == "localhost" or _is_ip(host) else None
        if style is None:
            return None
    elif region:
        endpoint = f"https://s3.{region}.amazonaws.com"
        style = "virtual" if style != "path" and _DNS_BUCKET.match(bucket) else "path"
    else:
        return None
    return presign_v4(endpoint, bucket, key, region or "us-east-1", (access, secret), token, expires,
                      virtual=style == "virtual")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def presigned_url(fs: Any, path: str, expires: int = 12 * 3600) -> str | None:
    """A GET URL for ``path`` signed by the s3fs filesystem ``fs``, when ``fs`` uses no TLS settings of its own
    (custom CA bundles, ``verify=False``) that the native HTTP client would not apply; else None."""
    if not hasattr(fs, "url"):
        return None
    if (getattr(fs, "client_kwargs", None) or {}).get("verify") not in (None, True):
        return None
    try:
        return fs.url(path, expires=expires)
    except Exception as e:  # noqa: BLE001 - credentials that cannot sign: read through the fsspec client
        log.debug("s3fs cannot sign a GET URL for %s (%s): reading through s3fs", path, type(e).__name__)
        return None


class S3Body:
    """ObjectStream's S3 reads: one streaming GET (``Range: bytes=N-``, ``If-Match`` the ETag) continued block
    after block; reopened at the exact offset after a failure (bytes already received are returned first).
    Faster than s3fs's ``_fetch_range`` (a request per block, its body assembled by one slow ``read()``).
    Calls come from one thread, in order (the ObjectStream gives S3 a single fetch thread)."""

    def __init__(self, fs: Any, path: str, etag: str | None):
        self.fs = fs
        bucket, key, version = fs.split_path(path)
        self._request = {"Bucket": bucket, "Key": key, **({"IfMatch": etag} if etag else {}),
                         **({"VersionId": version} if version else {})}
        self._body: Any = None
        self._at = -1

    def __call__(self, start: int, end: int) -> list[bytes]:
        from fsspec.asyn import sync  # noqa: PLC0415 - a heavy import that only object-store URLs need

        return sync(self.fs.loop, self._get, start, end)

    async def _get(self, start: int, end: int) -> list[bytes]:
        if self._body is None or self._at != start:
            if start:
                log.info("s3://%s/%s: %s at byte %d", self._request["Bucket"], self._request["Key"],
                         "resuming" if self._at == start else "reading", start)
            self._drop()
            resp = await self.fs._call_s3("get_object", Range=f"bytes={start}-", **self._request)
            self._body, self._at = resp["Body"], start
        chunks: list[bytes] = []
        n, want = 0, end - start
        try:
            while n < want:
                chunk = await self._body.read(want - n)  # what has arrived, up to that: no copy
                if not chunk:
                    break
                chunks.append(chunk)
                n += len(chunk)
        except Exception as e:
            log.info("s3://%s/%s: the body broke at byte %d (%s: %s)%s", self._request["Bucket"], self._request["Key"],
                     start + n, type(e).__name__, e, "" if n else "; the read is retried")
            self._drop()
            if not n:
                raise
        self._at = start + n
        if n < want:
            self._drop()
        return chunks

    def _drop(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            try:
                body.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass

    def close(self) -> None:
        if self._body is not None:
            try:
                self.fs.loop.call_soon_threadsafe(self._drop)
            except RuntimeError:  # pragma: no cover - the loop is gone
                pass
