"""Image specs (dtype, shape, range, container), image encoding (lossless/lossy), errors."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
import pytest

from shardstream.codecs import IMAGE_SPECS, Decoder, decode_field, decode_image, encode_field, imagehandler
from shardstream.errors import ConfigError, DecodeError, EncodeError

torch = pytest.importorskip("torch")

# spec -> (container, dtype, shape for a 12x17 image)
EXPECTED = {
    "l8": ("numpy", np.uint8, (12, 17)),
    "rgb8": ("numpy", np.uint8, (12, 17, 3)),
    "rgba8": ("numpy", np.uint8, (12, 17, 4)),
    "l": ("numpy", np.float32, (12, 17)),
    "rgb": ("numpy", np.float32, (12, 17, 3)),
    "rgba": ("numpy", np.float32, (12, 17, 4)),
    "torchl8": ("torch", torch.uint8, (12, 17)),
    "torchrgb8": ("torch", torch.uint8, (3, 12, 17)),
    "torchrgba8": ("torch", torch.uint8, (4, 12, 17)),
    "torchl": ("torch", torch.float32, (12, 17)),
    "torchrgb": ("torch", torch.float32, (3, 12, 17)),
    "torch": ("torch", torch.float32, (3, 12, 17)),
    "torchrgba": ("torch", torch.float32, (4, 12, 17)),
    "pil": ("pil", "RGB", (17, 12)),
    "pilrgb": ("pil", "RGB", (17, 12)),
    "pilrgba": ("pil", "RGBA", (17, 12)),
    "pill": ("pil", "L", (17, 12)),
}


def test_expected_covers_every_spec():
    assert set(EXPECTED) == set(IMAGE_SPECS)


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_spec_type_dtype_shape_range(spec, rgb_image):
    png = encode_field("png", rgb_image)
    out = Decoder(spec)({"png": png})["png"]
    kind, dtype, shape = EXPECTED[spec]
    if kind == "pil":
        assert isinstance(out, PIL.Image.Image) and out.mode == dtype and out.size == shape
        return
    if kind == "torch":
        assert isinstance(out, torch.Tensor)
        out = out.numpy()
        dtype = {torch.uint8: np.uint8, torch.float32: np.float32}[dtype]
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == shape
    assert out.flags.writeable
    if dtype == np.float32:
        assert 0.0 <= out.min() and out.max() <= 1.0
    # the pixel values are the source's (scaled to [0, 1] for float specs; CHW for torch)
    if spec in ("rgb8", "rgb", "torchrgb8", "torchrgb", "torch"):
        hwc = out.transpose(1, 2, 0) if kind == "torch" else out
        scale = 255 if dtype == np.float32 else 1
        assert np.allclose(hwc * scale, rgb_image, atol=1e-3)


def test_rgba_from_rgb_has_opaque_alpha_and_rgb_drops_alpha(rgb_image, noise_image):
    rgba = decode_field("png", encode_field("png", rgb_image), imagespec="rgba8")
    assert (rgba[:, :, 3] == 255).all() and np.array_equal(rgba[:, :, :3], rgb_image)
    rgb = decode_field("png", encode_field("png", noise_image), imagespec="rgb8")
    assert np.array_equal(rgb, noise_image[:, :, :3])


def test_grayscale_source_to_every_layout():
    gray = np.arange(30, dtype=np.uint8).reshape(5, 6) * 8
    png = encode_field("png", gray)
    assert np.array_equal(decode_image(png, "l8"), gray)
    assert np.array_equal(decode_image(png, "rgb8"), np.repeat(gray[:, :, None], 3, axis=2))
    assert decode_image(png, "torchl8").shape == (5, 6)


@pytest.mark.parametrize("ext", ["png", "ppm", "tif", "tiff", "bmp", "webp"])
def test_lossless_formats_exact_pixels(ext, rgb_image):
    data = encode_field(ext, rgb_image)
    assert np.array_equal(decode_field(ext, data, imagespec="rgb8"), rgb_image)
    assert encode_field(ext, rgb_image) == data, "image encoding must be deterministic"


def test_png_keeps_alpha_exactly(noise_image):
    assert np.array_equal(decode_field("png", encode_field("png", noise_image), imagespec="rgba8"), noise_image)


@pytest.mark.parametrize("ext", ["jpg", "jpeg", "img"])
def test_jpeg_close_and_quality_settable(ext, rgb_image):
    best = encode_field(ext, rgb_image)
    assert best[:2] == b"\xff\xd8" and best == encode_field(ext, rgb_image)
    out = decode_field(ext, best, imagespec="rgb8").astype(int)
    assert np.abs(out - rgb_image).mean() < 3
    small = encode_field(ext, rgb_image, jpeg_quality=10)
    assert len(small) < len(best)


def test_float_and_torch_and_pil_inputs_round_trip(rgb_image):
    as_float = decode_image(encode_field("png", rgb_image), "rgb")
    assert encode_field("png", as_float) == encode_field("png", rgb_image)  # float -> nearest uint8 level
    as_tensor = decode_image(encode_field("png", rgb_image), "torchrgb8")
    assert encode_field("png", as_tensor) == encode_field("png", rgb_image)  # CHW tensors
    as_pil = decode_image(encode_field("png", rgb_image), "pil")
    assert encode_field("png", as_pil) == encode_field("png", rgb_image)
    assert encode_field("png", rgb_image[:, :, :1]) == encode_field("png", rgb_image[:, :, 0])  # HW1 is HW


def test_pgm_and_gif_for_grayscale():
    gray = np.arange(20, dtype=np.uint8).reshape(4, 5)
    for ext in ("pgm", "gif"):
        assert np.array_equal(decode_field(ext, encode_field(ext, gray), imagespec="l8"), gray)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("jpg", np.zeros((2, 2, 4), np.uint8), "JPEG cannot store a RGBA"),
        ("gif", np.zeros((2, 2, 3), np.uint8), "GIF cannot store a RGB"),
        ("png", np.full((2, 2), 2.0), "lie in"),
        ("png", np.zeros((2, 2), np.int32), "uint8, bool or float"),
        ("png", np.zeros((2, 2, 5), np.uint8), "1, 3 or 4 channels"),
        ("png", {"not": "an image"}, "numpy array, PIL image or torch tensor"),
        ("psd", np.zeros((2, 2), np.uint8), "cannot write .psd"),
    ],
)
def test_unencodable_images(field, value, message):
    with pytest.raises(EncodeError, match=message) as info:
        encode_field(field, value)
    assert info.value.field == field


def test_images_stay_bytes_without_a_spec(rgb_image):
    png = encode_field("png", rgb_image)
    assert Decoder()({"png": png, "cls": b"1"}) == {"png": png, "cls": 1}
    assert decode_field("png", png) == png


def test_undecodable_image_raises_decode_error():
    with pytest.raises(DecodeError) as info:
        Decoder("rgb")({"__key__": "s", "__url__": "shard-0.tar", "jpg": b"not a jpeg"})
    e = info.value
    assert (e.url, e.key, e.field) == ("shard-0.tar", "s", "jpg")
    assert isinstance(e.__cause__, PIL.UnidentifiedImageError)


def test_unknown_spec_lists_valid_specs():
    with pytest.raises(ConfigError, match="valid specs: .*rgb8.*torchrgb.*pilrgba"):
        Decoder("rgb9")
    with pytest.raises(ConfigError, match="valid specs"):
        imagehandler("bgr")


def test_spec_is_case_insensitive_and_handler_extensions():
    png = encode_field("png", np.zeros((2, 3), np.uint8))
    assert Decoder("RGB8")({"png": png})["png"].shape == (2, 3, 3)
    only_png = imagehandler("l8", extensions=["png"])
    assert only_png(".seg.PNG", png).shape == (2, 3)
    assert only_png(".jpg", png) is None


def test_pil_result_is_usable_after_decode(rgb_image):
    img = decode_image(encode_field("png", rgb_image), "pil")
    img.load()
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    assert img.size == (17, 12)
