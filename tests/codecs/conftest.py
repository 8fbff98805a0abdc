"""Shared helpers for the codec tests: small images built in memory."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rgb_image() -> np.ndarray:
    """A 12x17 RGB uint8 image with smooth gradients (JPEG-friendly) and distinct channels."""
    y, x = np.mgrid[0:12, 0:17]
    return np.stack([x * 15, y * 20, (x + y) * 7], axis=2).astype(np.uint8)


@pytest.fixture
def noise_image() -> np.ndarray:
    """A 9x7 RGBA uint8 image of noise (for lossless checks)."""
    return np.random.default_rng(0).integers(0, 256, size=(9, 7, 4), dtype=np.uint8)
