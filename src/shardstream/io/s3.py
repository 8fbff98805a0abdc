"""S3 specifics: presigned URLs for the native HTTP client, and the streaming reads of :class:`ObjectStream`.

``s3://`` shards are read by :func:`shardstream.io.objectstore.open_object` from a URL that s3fs signs with the
bucket's credentials and endpoint (:func:`presigned_url`), streamed by :class:`~shardstream.io.http.HttpStream`.
:class:`S3Body` is the fallback when that is not possible (custom TLS settings, credentials that cannot sign).

>>> presigned_url(object(), "bucket/key") is None  # not an s3fs filesystem: no signed URL
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["S3Body", "presigned_url"]


def presigned_url(fs: Any, path: str, expires: int = 12 * 3600) -> str | None:
    """A GET URL for ``path`` signed by the s3fs filesystem ``fs``, when ``fs`` uses no TLS settings of its own
    (custom CA bundles, ``verify=False``) that the native HTTP client would not apply; else None."""
    if not hasattr(fs, "url"):
        return None
    if (getattr(fs, "client_kwargs", None) or {}).get("verify") not in (None, True):
        return None
    try:
        return fs.url(path, expires=expires)
    except Exception:  # noqa: BLE001 - credentials that cannot sign: read through the fsspec client
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
        except Exception:
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
