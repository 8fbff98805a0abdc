"""Images: webdataset's image specs for decoding, and image encoding for writing.

An *image spec* says what a decoded image becomes (webdataset ``imagespecs`` semantics)::

    spec        type   dtype            layout
    l8          numpy  uint8            HW
    rgb8        numpy  uint8            HWC (C=3)
    rgba8       numpy  uint8            HWC (C=4)
    l           numpy  float32 in [0,1] HW
    rgb         numpy  float32 in [0,1] HWC
    rgba        numpy  float32 in [0,1] HWC
    torchl8     torch  uint8            HW      (as webdataset: grayscale tensors have no channel axis)
    torchrgb8   torch  uint8            CHW
    torchrgba8  torch  uint8            CHW
    torchl      torch  float32 in [0,1] HW
    torchrgb    torch  float32 in [0,1] CHW
    torch       alias of torchrgb
    torchrgba   torch  float32 in [0,1] CHW
    pil, pilrgb PIL.Image in mode RGB;  pill: mode L;  pilrgba: mode RGBA

torch is imported only when a torch spec decodes an image. Returned arrays and tensors are writable.

>>> import numpy as np
>>> png = encode_image(np.zeros((2, 3, 3), dtype=np.uint8), "png")
>>> a = decode_image(png, "rgb")
>>> a.shape, a.dtype.name, decode_image(png, "l8").shape
((2, 3, 3), 'float32', (2, 3))
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..errors import ConfigError, DecodeLimitError, MissingDependencyError
from .limits import check_pixels

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # loads with the first array, not with shardstream

__all__ = [
    "IMAGE_EXTENSIONS",
    "IMAGE_SPECS",
    "ImageHandler",
    "decode_image",
    "decode_resized",
    "encode_image",
    "image_loads",
    "imagehandler",
    "open_image",
]

#: spec -> (container, element type, PIL mode); the keys are every valid ``Decoder("...")`` string.
IMAGE_SPECS = MappingProxyType(
    {
        "l8": ("numpy", "uint8", "L"),
        "rgb8": ("numpy", "uint8", "RGB"),
        "rgba8": ("numpy", "uint8", "RGBA"),
        "l": ("numpy", "float", "L"),
        "rgb": ("numpy", "float", "RGB"),
        "rgba": ("numpy", "float", "RGBA"),
        "torchl8": ("torch", "uint8", "L"),
        "torchrgb8": ("torch", "uint8", "RGB"),
        "torchrgba8": ("torch", "uint8", "RGBA"),
        "torchl": ("torch", "float", "L"),
        "torchrgb": ("torch", "float", "RGB"),
        "torch": ("torch", "float", "RGB"),
        "torchrgba": ("torch", "float", "RGBA"),
        "pill": ("pil", None, "L"),
        "pil": ("pil", None, "RGB"),
        "pilrgb": ("pil", None, "RGB"),
        "pilrgba": ("pil", None, "RGBA"),
    }
)

#: Extensions decoded as images when an image spec is given (raster formats Pillow reads). webdataset's list
#: also has names that collide with other data (``mpg``, ``h5``, ``ps``, ``rgb``...); those are left out, and
#: ``imagehandler(spec, extensions=...)`` takes any list.
IMAGE_EXTENSIONS = frozenset(
    "jpg jpeg jpe jfif png apng ppm pgm pbm pnm tif tiff webp bmp dib gif ico tga pcx psd sgi "
    "jp2 j2k jpc jpf jpx j2c icns dds img image".split()
)

# extension -> (PIL format name, modes the format can store) for writing. img/image are JPEG, as in webdataset.
_WRITE_FORMATS = {
    "jpg": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "jpeg": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "jpe": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "jfif": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "img": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "image": ("JPEG", {"L", "RGB", "CMYK", "1"}),
    "png": ("PNG", None),
    "ppm": ("PPM", {"1", "L", "RGB", "I", "I;16"}),
    "pgm": ("PPM", {"1", "L", "RGB", "I", "I;16"}),
    "pbm": ("PPM", {"1", "L", "RGB", "I", "I;16"}),
    "pnm": ("PPM", {"1", "L", "RGB", "I", "I;16"}),
    "tif": ("TIFF", None),
    "tiff": ("TIFF", None),
    "webp": ("WEBP", {"L", "RGB", "RGBA"}),
    "bmp": ("BMP", {"1", "L", "P", "RGB"}),
    "dib": ("BMP", {"1", "L", "P", "RGB"}),
    "gif": ("GIF", {"1", "L", "P"}),
    "tga": ("TGA", {"1", "L", "LA", "P", "RGB", "RGBA"}),
}

#: JPEG quality used when none is given: 100, as webdataset's writer.
DEFAULT_JPEG_QUALITY = 100


def _check_spec(spec: str) -> str:
    if spec not in IMAGE_SPECS:
        raise ConfigError(f"unknown image spec {spec!r}; valid specs: {', '.join(IMAGE_SPECS)}")
    return spec


def _torch():
    try:
        import torch  # noqa: PLC0415 - optional: shardstream[torch]
    except ImportError as e:  # pragma: no cover - torch is installed in the test environment
        raise MissingDependencyError("decoding images to torch tensors", "torch", "torch") from e
    return torch


def open_image(data: bytes, max_pixels: int | None = None) -> Any:
    """``PIL.Image.open`` (the header only), refusing images over ``max_pixels`` (default
    ``SHARDSTREAM_MAX_IMAGE_PIXELS``) with :class:`~shardstream.errors.DecodeLimitError` before anything is decoded:
    every decoder of image bytes opens them here.

    >>> open_image(encode_image(np.zeros((2, 3), np.uint8), "png")).size
    (3, 2)
    """
    import PIL.Image  # noqa: PLC0415 - Pillow loads on the first image decode

    try:
        img = PIL.Image.open(io.BytesIO(data))
    except PIL.Image.DecompressionBombError as e:  # Pillow's own limit, 2 * PIL.Image.MAX_IMAGE_PIXELS
        raise DecodeLimitError(f"Pillow refuses the image: {e}") from e
    try:
        check_pixels(*img.size, f"{img.format or 'the'} image", max_pixels)
    except DecodeLimitError:
        img.close()
        raise
    return img


def image_loads(data: bytes, *, max_pixels: int | None = None) -> Any:
    """Bytes -> a loaded ``PIL.Image`` in the file's own mode (what the table's image codecs decode to); images over
    ``max_pixels`` (default ``SHARDSTREAM_MAX_IMAGE_PIXELS``, see :mod:`.limits`) raise ``DecodeLimitError``."""
    with open_image(data, max_pixels) as img:
        img.load()
        return img


def decode_image(data: bytes, spec: str = "rgb", *, max_pixels: int | None = None) -> Any:
    """Decode image bytes to ``spec`` (see the table in the module docstring). Images over ``max_pixels``
    (default ``SHARDSTREAM_MAX_IMAGE_PIXELS``) raise :class:`~shardstream.errors.DecodeLimitError` before decoding.

    >>> png = encode_image(np.full((4, 5), 255, dtype=np.uint8), "png")
    >>> decode_image(png, "rgb8").shape, float(decode_image(png, "l").max())
    ((4, 5, 3), 1.0)
    """
    kind, etype, mode = IMAGE_SPECS[_check_spec(spec)]
    with open_image(data, max_pixels) as img:
        img.load()
        if img.mode != mode:
            img = img.convert(mode)
        if kind == "pil":
            return img
        if etype == "float":
            result = np.asarray(img, dtype=np.float32)  # a fresh array we own
            result /= 255.0
        else:
            result = np.asarray(img)
    if kind == "numpy":
        return result if result.flags.writeable else result.copy()
    torch = _torch()
    if result.ndim == 3:
        result = np.ascontiguousarray(result.transpose(2, 0, 1))
    elif not result.flags.writeable:
        result = result.copy()
    return torch.from_numpy(result)


def decode_resized(data: bytes, size: int, *, draft: bool = False, scaled: bool = False) -> np.ndarray:
    """Image bytes -> a ``size`` x ``size`` RGB ``uint8`` array (HWC): the centred square crop of the image (the
    side of its shorter edge), resized with Pillow's bilinear filter (antialiased when shrinking).

    Pillow releases the GIL while it decodes and resizes, so ``parallel_map`` threads run this on every core.
    ``draft=True`` lets a JPEG decode at a reduced scale (1/2, 1/4 or 1/8, chosen so that the crop keeps at least
    ``size`` pixels; ``PIL.Image.draft``): several times less work for large photos, but not the same pixels.
    The DCT scaling averages blocks where the exact path decodes every pixel, so values differ by a few levels
    (tests bound the mean absolute difference by 2 of 255 on natural-looking images; edges differ most). Other
    formats, and JPEGs already close to ``size``, decode exactly either way.

    ``scaled=True`` (needs ``pip install 'shardstream[jpeg]'``: simplejpeg and OpenCV) decodes a JPEG with
    libjpeg-turbo at the smallest of its M/8 scales (M = 1..8) that keeps the shorter side >= ``size`` (5/8 for a
    500x375 photo and 224), then crops the centred square and resizes it with OpenCV's bilinear filter (not
    antialiased: the decoded crop is less than twice ``size``). Both release the GIL. Not the same pixels as the exact
    path: tests bound the mean absolute difference by 3 of 255 on natural-looking images. Anything simplejpeg does not
    decode (other formats, corrupt data) takes the exact path, which decides what is raised.

    >>> jpg = encode_image(np.full((300, 400, 3), 200, dtype=np.uint8), "jpg")
    >>> decode_resized(jpg, 224).shape, decode_resized(jpg, 224, draft=True).shape
    ((224, 224, 3), (224, 224, 3))
    """
    import PIL.Image  # noqa: PLC0415 - Pillow loads on the first image decode

    if not isinstance(size, int) or size < 1:
        raise ConfigError(f"size must be a positive number of pixels, got {size!r}")
    if scaled:
        out = _decode_scaled(data, size)
        if out is not None:
            return out
    with open_image(data) as img:
        width, height = img.size
        short = min(width, height)
        if draft and img.format == "JPEG" and short >= 2 * size:
            # the largest reduction that keeps the shorter side >= size (draft never goes below the request)
            img.draft("RGB", (-(-width * size // short), -(-height * size // short)))
        scale = img.size[0] / width  # 1 without draft
        img.load()
        if img.mode != "RGB":
            img = img.convert("RGB")
        side = short * scale
        left, top = (img.size[0] - side) / 2, (img.size[1] - side) / 2
        out = img.resize((size, size), PIL.Image.Resampling.BILINEAR, box=(left, top, left + side, top + side))
        return np.asarray(out)


def _decode_scaled(data: bytes, size: int) -> np.ndarray | None:
    """``decode_resized(scaled=True)``'s JPEG path; None when simplejpeg cannot decode ``data`` (the exact path will)."""
    try:
        import simplejpeg  # noqa: PLC0415 - optional: shardstream[jpeg]
    except ImportError as e:
        raise MissingDependencyError("decode_resized(scaled=True)", "jpeg", "simplejpeg") from e
    try:
        import cv2  # noqa: PLC0415 - optional: shardstream[jpeg]
    except ImportError as e:
        raise MissingDependencyError("decode_resized(scaled=True)", "jpeg", "opencv-python-headless") from e
    if data[:2] != b"\xff\xd8":  # not a JPEG
        return None
    try:
        height, width = simplejpeg.decode_jpeg_header(data)[:2]
    except ValueError:
        return None
    check_pixels(width, height, "JPEG image")
    try:  # min_factor=1 (the default) never decodes above full size
        img = simplejpeg.decode_jpeg(data, "RGB", min_height=size, min_width=size)
    except ValueError:  # corrupt or truncated data, a colour space libjpeg-turbo cannot convert
        return None
    height, width = img.shape[:2]
    side = min(width, height)
    top, left = (height - side) // 2, (width - side) // 2
    crop = img[top : top + side, left : left + side]
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_LINEAR)


def _to_pil(value: Any):
    import PIL.Image  # noqa: PLC0415 - Pillow loads on the first image decode

    if isinstance(value, PIL.Image.Image):
        return value
    if type(value).__module__.startswith("torch"):
        array = value.detach().cpu().numpy()
        if array.ndim == 3:  # torch images are CHW
            array = array.transpose(1, 2, 0)
    elif isinstance(value, np.ndarray):
        array = value
    else:
        raise TypeError(f"an image field needs a numpy array, PIL image or torch tensor, not {type(value).__name__}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"an image must be HW, HWC or (torch) CHW with 1, 3 or 4 channels; got shape {value.shape}")
    if array.dtype.kind == "f":
        low, high = float(np.min(array)), float(np.max(array))
        if low <= -0.001 or high >= 1.001:
            raise ValueError(f"float image values must lie in [0, 1]; got [{low:g}, {high:g}]")
        array = np.rint(np.clip(array, 0.0, 1.0) * 255.0).astype(np.uint8)
    elif array.dtype == np.bool_:
        return PIL.Image.fromarray(array.astype(np.uint8) * 255).convert("1")
    elif array.dtype != np.uint8:
        raise ValueError(f"an image array must be uint8, bool or float in [0, 1]; got {array.dtype}")
    return PIL.Image.fromarray(np.ascontiguousarray(array))


def encode_image(value: Any, extension: str, *, quality: int | None = None) -> bytes:
    """Encode a numpy array (HW/HWC, uint8 or float in [0,1]), PIL image or torch tensor (CHW) as ``extension``.

    PNG/TIFF/PPM/BMP/WEBP are lossless (WEBP is written lossless); JPEG uses ``quality`` (default 100, as
    webdataset). Float arrays are rounded to the nearest of 256 levels, so decoding with ``"rgb"`` and
    encoding again gives the same PNG. Modes a format cannot store (RGBA as JPEG, RGB as GIF) are errors,
    never silent conversions.

    >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    >>> bool((decode_image(encode_image(img, "png"), "rgb8") == img).all())
    True
    """
    ext = extension.lower()
    if ext not in _WRITE_FORMATS:
        raise ValueError(f"cannot write images as .{ext}; writable: {', '.join(sorted(_WRITE_FORMATS))}")
    fmt, modes = _WRITE_FORMATS[ext]
    img = _to_pil(value)
    if modes is not None and img.mode not in modes:
        raise ValueError(f"{fmt} cannot store a {img.mode} image; convert it or choose another extension (e.g. png)")
    options: dict[str, Any] = {}
    if fmt == "JPEG":
        options["quality"] = DEFAULT_JPEG_QUALITY if quality is None else int(quality)
    elif fmt == "WEBP":
        options["lossless"] = True
    stream = io.BytesIO()
    img.save(stream, format=fmt, **options)
    return stream.getvalue()


_LAST_COMPONENT = re.compile(r".*[.]")


class ImageHandler:
    """A decoder handler ``(key, data) -> image or None`` for ``spec``, like webdataset's ``ImageHandler``.

    It decodes fields whose last extension component is in ``extensions`` and returns ``None`` for others.

    >>> h = ImageHandler("l8")
    >>> h(".txt", b"hello") is None, h(".png", encode_image(np.zeros((1, 2), np.uint8), "png")).shape
    (True, (1, 2))
    """

    def __init__(self, imagespec: str, extensions: Iterable[str] = IMAGE_EXTENSIONS):
        self.imagespec = _check_spec(imagespec.lower() if isinstance(imagespec, str) else imagespec)
        self.extensions = frozenset(e.lower().lstrip(".") for e in extensions)

    def resolve(self, key: str):
        """The function ``data -> image`` for field ``key``, or ``None`` when this handler does not apply."""
        if _LAST_COMPONENT.sub("", key).lower() in self.extensions:
            return self.decode
        return None

    def decode(self, data: bytes) -> Any:
        """Decode ``data`` to this handler's spec."""
        return decode_image(data, self.imagespec)

    def __call__(self, key: str, data: bytes) -> Any:
        return self.decode(data) if self.resolve(key) is not None else None

    def __repr__(self) -> str:
        return f"imagehandler({self.imagespec!r})"


def imagehandler(imagespec: str, extensions: Iterable[str] = IMAGE_EXTENSIONS) -> ImageHandler:
    """Make an image handler for ``Decoder``: ``Decoder(imagehandler("rgb8"))`` is ``Decoder("rgb8")``.

    >>> imagehandler("torchrgb")
    imagehandler('torchrgb')
    """
    return ImageHandler(imagespec, extensions)
