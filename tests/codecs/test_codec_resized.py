"""decode_resized: the exact centre-crop-and-resize path, and the documented difference of draft=True."""

import io

import numpy as np
import PIL.Image
import pytest

from shardstream.codecs import decode_resized, encode_image
from shardstream.errors import ConfigError


def photo(width: int, height: int) -> np.ndarray:
    """A smooth, natural-looking RGB image (gradients and a few soft blobs)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 128 + 100 * np.sin(x / 37.0) * np.cos(y / 53.0)
    g = 255 * x / width
    b = 128 + 90 * np.cos((x + y) / 71.0)
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(np.uint8)


def reference(data: bytes, size: int) -> np.ndarray:
    """The same transform written plainly: decode, crop the centred square, resize."""
    img = PIL.Image.open(io.BytesIO(data)).convert("RGB")
    w, h = img.size
    side = min(w, h)
    box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
    return np.asarray(img.resize((size, size), PIL.Image.Resampling.BILINEAR, box=box))


@pytest.mark.parametrize("shape", [(480, 640), (640, 480), (300, 300), (100, 150)])
@pytest.mark.parametrize("ext", ["jpg", "png"])
def test_exact_path_is_the_plain_transform(shape, ext):
    data = encode_image(photo(shape[1], shape[0]), ext)
    got = decode_resized(data, 64)
    assert got.shape == (64, 64, 3) and got.dtype == np.uint8
    assert np.array_equal(got, reference(data, 64))


def test_draft_differs_by_a_few_levels_on_jpeg():
    data = encode_image(photo(1200, 900), "jpg", quality=90)
    exact, fast = decode_resized(data, 224), decode_resized(data, 224, draft=True)
    assert fast.shape == exact.shape == (224, 224, 3)
    assert not np.array_equal(fast, exact)  # a reduced-scale decode: not the same pixels
    assert np.abs(fast.astype(int) - exact.astype(int)).mean() < 2.0


def test_draft_changes_nothing_when_there_is_nothing_to_reduce():
    small = encode_image(photo(400, 300), "jpg")  # shorter side < 2 x size: decoded at full scale
    assert np.array_equal(decode_resized(small, 224, draft=True), decode_resized(small, 224))
    png = encode_image(photo(1200, 900), "png")
    assert np.array_equal(decode_resized(png, 224, draft=True), decode_resized(png, 224))


def test_grayscale_and_bad_size():
    gray = encode_image(np.full((50, 80), 7, dtype=np.uint8), "png")
    assert decode_resized(gray, 10).tolist() == np.full((10, 10, 3), 7).tolist()
    with pytest.raises(ConfigError):
        decode_resized(gray, 0)
