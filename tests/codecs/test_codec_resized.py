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


# -- scaled=True: libjpeg-turbo's M/8 scaled decode + OpenCV bilinear resize (the `jpeg` extra) ----------------------


def _scaled_libs():
    for name in ("simplejpeg", "cv2"):
        pytest.importorskip(name, reason=f"{name} is not installed (pip install 'shardstream[jpeg]')")


@pytest.mark.parametrize("shape", [(375, 500), (500, 375), (900, 1200), (224, 224), (100, 150)])
def test_scaled_is_close_to_the_exact_path(shape):
    _scaled_libs()
    data = encode_image(photo(shape[1], shape[0]), "jpg", quality=90)
    exact, fast = decode_resized(data, 224), decode_resized(data, 224, scaled=True)
    assert fast.shape == exact.shape == (224, 224, 3) and fast.dtype == exact.dtype == np.uint8
    assert fast.flags.writeable and fast.flags.c_contiguous
    assert np.abs(fast.astype(int) - exact.astype(int)).mean() < 3.0  # measured: 0-1.5 here, 2.4 (max 3.0) on the benchmark photos


def test_scaled_decodes_at_a_reduced_scale():
    _scaled_libs()
    import simplejpeg

    data = encode_image(photo(500, 375), "jpg")
    assert simplejpeg.decode_jpeg(data, "RGB", min_height=224, min_width=224).shape == (235, 313, 3)  # 5/8


def test_scaled_other_formats_take_the_exact_path():
    _scaled_libs()
    for ext in ("png", "webp"):
        data = encode_image(photo(400, 300), ext)
        assert np.array_equal(decode_resized(data, 64, scaled=True), decode_resized(data, 64))


@pytest.mark.parametrize("mode", ["L", "CMYK", "progressive"])
def test_scaled_grayscale_cmyk_progressive(mode):
    _scaled_libs()
    img = PIL.Image.fromarray(photo(500, 375))
    buf = io.BytesIO()
    if mode == "progressive":
        img.save(buf, "JPEG", quality=90, progressive=True)
    else:
        img.convert(mode).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    exact, fast = decode_resized(data, 224), decode_resized(data, 224, scaled=True)
    assert fast.shape == exact.shape == (224, 224, 3)
    assert np.abs(fast.astype(int) - exact.astype(int)).mean() < 3.0  # libjpeg-turbo converts L and CMYK too


@pytest.mark.parametrize("data", [b"\xff\xd8\xff\xe0" + b"garbage" * 20, b"not an image at all"])
def test_scaled_corrupt_data_raises_like_the_exact_path(data):
    _scaled_libs()
    with pytest.raises(OSError) as exact:
        decode_resized(data, 64)
    with pytest.raises(OSError) as fast:
        decode_resized(data, 64, scaled=True)
    assert type(fast.value) is type(exact.value)


def test_scaled_truncated_jpeg_matches_the_exact_path():
    _scaled_libs()
    data = encode_image(photo(500, 375), "jpg")[:3000]
    try:
        want = decode_resized(data, 64)
    except OSError as e:
        with pytest.raises(type(e)):
            decode_resized(data, 64, scaled=True)
    else:  # Pillow decodes what it can; so does the fallback
        assert np.array_equal(decode_resized(data, 64, scaled=True), want)


def test_scaled_without_the_extra_names_it(monkeypatch):
    import sys

    from shardstream.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "simplejpeg", None)
    with pytest.raises(MissingDependencyError, match=r"shardstream\[jpeg\]"):
        decode_resized(encode_image(photo(50, 40), "jpg"), 16, scaled=True)
