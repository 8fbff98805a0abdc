"""Helpers of the conversion tests: small real JPEG/PNG files made with Pillow."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image


def image_bytes(i: int, fmt: str = "JPEG") -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(np.full((8, 8, 3), (i * 37) % 256, np.uint8)).save(out, format=fmt)
    return out.getvalue()
