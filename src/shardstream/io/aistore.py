"""AIStore: ``ais://bucket/object`` URLs, and routing other schemes through an AIStore gateway.

AIStore serves objects over its HTTP API, ``GET {endpoint}/v1/objects/{bucket}/{object}?provider=...``; the
gateway redirects the request to the storage target that holds the object, and Range requests work, so reads
go through :class:`~shardstream.io.http.HttpStream` with its retries and exact resume. The gateway is
``AIS_ENDPOINT`` (AIStore's own variable). With ``SHARDSTREAM_USE_AIS_FOR="gs s3"``, ``gs://`` and ``s3://``
URLs are read through the gateway too (AIStore fetches and caches them from the cloud bucket): see
:func:`shardstream.io.rewrite.rewrite_url`.

>>> ais_url("ais://train/shards/a-000.tar", "http://ais-gw:51080")
'http://ais-gw:51080/v1/objects/train/shards/a-000.tar?provider=ais'
>>> ais_url("gs://public bucket/x y.tar", "http://ais-gw:51080/")
'http://ais-gw:51080/v1/objects/public%20bucket/x%20y.tar?provider=gcp'
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING
from urllib.parse import quote, urlsplit

from .._lazy import lazy_module
from ..config import get_settings
from ..errors import ConfigError

if TYPE_CHECKING:
    from . import web
else:
    web = lazy_module("shardstream.io.web")  # the HTTP client loads with the first remote read

__all__ = ["PROVIDERS", "ais_url", "open_ais"]

#: URL scheme -> AIStore backend provider name
PROVIDERS = {"ais": "ais", "s3": "aws", "gs": "gcp", "gcs": "gcp", "az": "azure", "abfs": "azure", "abfss": "azure"}


def ais_url(url: str, endpoint: str | None) -> str:
    """The AIStore HTTP API URL that serves ``url`` (``ais://``, ``s3://``, ``gs://``, ``az://``) via ``endpoint``."""
    scheme, sep, rest = url.partition("://")
    provider = PROVIDERS.get(scheme.lower())
    if not sep or provider is None:
        raise ConfigError(f"{url!r} cannot be read through AIStore; schemes: {sorted(PROVIDERS)}")
    if not endpoint:
        raise ConfigError(f"reading {url!r} through AIStore needs its gateway: set AIS_ENDPOINT=http://HOST:PORT")
    if urlsplit(endpoint).scheme not in ("http", "https"):
        raise ConfigError(f"AIS_ENDPOINT={endpoint!r} must be an http:// or https:// URL")
    bucket, _, obj = rest.partition("/")
    if not bucket or not obj:
        raise ConfigError(f"{url!r} does not name a bucket and an object")
    return f"{endpoint.rstrip('/')}/v1/objects/{quote(bucket, safe='')}/{quote(obj)}?provider={provider}"


def open_ais(url: str) -> IO[bytes]:
    """The opener of ``ais://bucket/object``: a GET through the gateway ``AIS_ENDPOINT`` (see module docstring)."""
    return web.open_http(ais_url(url, get_settings().ais_endpoint))
