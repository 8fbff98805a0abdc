"""URL rewriting: prefix rules and AIStore routing, applied to every URL before it is opened.

Rules are ``FROM=TO`` prefix replacements (``SHARDSTREAM_URL_REWRITES``, or webdataset's ``GOPEN_REWRITE`` /
``WDS_REWRITE``, separated by ``;`` as in webdataset, or by newlines; a space inside a rule is part of it, so a
path may hold one; ``FROM`` is a literal prefix, not a regular expression); the
first rule whose ``FROM`` is a prefix of the URL wins, and only once. They let one dataset description run in
several places: read ``gs://bucket/`` from a local copy on one cluster (``gs://bucket/=/mnt/data/``) and from a
mirror on another. Then, when ``SHARDSTREAM_USE_AIS_FOR`` lists the URL's scheme, the URL is routed through the
AIStore gateway ``AIS_ENDPOINT`` (:mod:`shardstream.io.aistore`).

>>> rules = RewriteRules.parse(["gs://bucket/=/mnt/data/", "gs://=https://mirror.example/"])
>>> rules("gs://bucket/train-000.tar"), rules("gs://other/a.tar"), rules("s3://b/a.tar")
('/mnt/data/train-000.tar', 'https://mirror.example/other/a.tar', 's3://b/a.tar')
>>> RewriteRules(ais_endpoint="http://gw:51080", ais_schemes=("gs",))("gs://b/a.tar")
'http://gw:51080/v1/objects/b/a.tar?provider=gcp'
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

from ..config import Settings, get_settings, secure_mode, secure_refusal
from ..errors import ConfigError
from ..redact import redact
from .aistore import ais_url

__all__ = ["RewriteRules", "rewrite_url", "rewrites"]


@dataclasses.dataclass(frozen=True)
class RewriteRules:
    """Ordered prefix rules ``(FROM, TO)`` and the AIStore routing (see the module docstring)."""

    rules: tuple[tuple[str, str], ...] = ()
    ais_endpoint: str | None = None
    ais_schemes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, specs: Iterable[str], **kw: object) -> RewriteRules:
        """From ``"FROM=TO"`` strings (split at the first ``=``)."""
        rules = []
        for spec in specs:
            old, sep, new = spec.partition("=")
            if not sep or not old:
                raise ConfigError(f"URL rewrite rule {spec!r} is not FROM=TO (e.g. 'gs://bucket/=/mnt/data/')")
            rules.append((old, new))
        return cls(tuple(rules), **kw)  # type: ignore[arg-type]

    @classmethod
    def from_settings(cls, settings: Settings) -> RewriteRules:
        """The rules of ``SHARDSTREAM_URL_REWRITES``, ``AIS_ENDPOINT`` and ``SHARDSTREAM_USE_AIS_FOR``."""
        return _from_settings(settings.url_rewrites, settings.ais_endpoint, settings.use_ais_for)

    def __call__(self, url: str) -> str:
        for old, new in self.rules:
            if url.startswith(old):
                url = new + url[len(old):]
                break
        if self.ais_schemes:
            scheme = url.partition("://")[0].lower()
            if scheme in self.ais_schemes and "://" in url:
                url = ais_url(url, self.ais_endpoint)
        return url


@functools.lru_cache(maxsize=8)
def _from_settings(specs: tuple[str, ...], endpoint: str | None, schemes: tuple[str, ...]) -> RewriteRules:
    return RewriteRules.parse(specs, ais_endpoint=endpoint, ais_schemes=tuple(s.lower() for s in schemes))


def rewrites(settings: Settings) -> bool:
    """Whether the settings rewrite any URL (prefix rules, or AIStore routing): without, every URL stays as is.

    >>> rewrites(Settings()), rewrites(Settings(url_rewrites=("gs://b/=/data/",)))
    (False, True)
    """
    return bool(settings.url_rewrites or settings.use_ais_for)


def rewrite_url(url: str, settings: Settings | None = None) -> str:
    """``url`` after the rules of the settings (the process environment by default); unchanged without rules.

    >>> rewrite_url("gs://b/a.tar", Settings(url_rewrites=("gs://b/=file:/data/",)))
    'file:/data/a.tar'
    """
    settings = settings or get_settings()
    if not rewrites(settings):
        return url
    if settings.url_rewrites and secure_mode(settings):
        raise secure_refusal("rewrite", f"rewriting {redact(url)!r} by rules from the environment",
                             "unset SHARDSTREAM_URL_REWRITES / GOPEN_REWRITE / WDS_REWRITE, or secure mode")
    return RewriteRules.from_settings(settings)(url)

