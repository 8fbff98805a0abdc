"""The opener of ``http://`` and ``https://`` URLs: the settings in force made into a
:class:`~shardstream.io.ranged.RangedStream` (parallel ranged GETs) or an :class:`~shardstream.io.http.HttpStream`
(one stream), with the next shard of a numbered series opened ahead (:mod:`shardstream.io.prefetch`).

>>> open_http.__name__
'open_http'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, cast

from ..config import get_settings
from .fetchers import share
from .http import HttpStream
from .prefetch import open_in_series
from .proxy import route_from_settings
from .ranged import RangedStream
from .storage_config import http_headers

__all__ = ["open_http"]


def open_http(url: str, name: str | None = None, headers: Mapping[str, str] | None = None,
              series: bool = True) -> IO[bytes]:
    """The opener of ``http://`` and ``https://`` URLs, with the settings' retries, timeout, headers
    (``SHARDSTREAM_HTTP_HEADERS``, then the storage settings of the URL's prefix) and proxies: a
    :class:`~shardstream.io.ranged.RangedStream` (parallel ranged GETs), or an :class:`HttpStream` (one
    stream) with ``SHARDSTREAM_HTTP_CONNECTIONS=1``. ``name`` is what messages call the shard; ``headers``
    replace those of the settings (a signed S3 URL needs none). With ``series``, the next shard of a numbered
    series read in order is opened ahead (:mod:`shardstream.io.prefetch`)."""

    settings = get_settings()
    explicit = headers is not None
    headers = http_headers(url, settings) if headers is None else headers
    route = route_from_settings(settings)
    if settings.http_connections <= 1:
        return cast(IO[bytes], HttpStream(url, headers=headers, retries=settings.http_retries, name=name,
                                          timeout=settings.http_timeout, backoff=settings.http_backoff, route=route))

    connections, readahead = share(settings.http_connections, settings.http_readahead, settings.http_part_size)

    def ranged(target: str) -> IO[bytes]:
        given = http_headers(target, settings) if target != url and not explicit else headers
        return cast(IO[bytes], RangedStream(target, connections=connections, readahead=readahead, headers=given,
                                            part_size=settings.http_part_size, retries=settings.http_retries,
                                            timeout=settings.http_timeout, backoff=settings.http_backoff,
                                            name=name, route=route))

    return open_in_series(url, ranged, (settings, headers)) if series else ranged(url)
