"""Secure mode for opening URLs (webdataset's ``WDS_SECURE=1`` / ``utils.enforce_security = True``).

The rule lives in :mod:`shardstream.io.trust` (:func:`~shardstream.io.trust.check_url`, beside the rule for URLs
read out of documents); the setting is read by :mod:`shardstream.config` (``SHARDSTREAM_SECURE`` /
``WDS_SECURE``). This module keeps webdataset's place for it.

>>> from shardstream.config import Settings
>>> check_url("https://example.com/a.tar", Settings(secure=True))
"""

from __future__ import annotations

from .trust import check_url

__all__ = ["check_url"]
