"""Fixtures of the conversion tests (helpers in convert_helpers.py)."""

from __future__ import annotations

import pytest
from convert_helpers import image_bytes


@pytest.fixture
def jpegs() -> list[bytes]:
    return [image_bytes(i) for i in range(12)]
