"""Moved to :mod:`shardstream.resume` (below ``pipeline/``, ``training/`` and ``indexed/``, which all use it);
re-exported here, the path of the unreleased development versions.

>>> from shardstream.pipeline.resumable import Resumable
>>> from shardstream import resume
>>> Resumable is resume.Resumable
True
"""

from __future__ import annotations

from ..resume import Progress, Resumable, check_state, envelope

__all__ = ["Progress", "Resumable", "check_state", "envelope"]
