"""What the training pipeline makes of a sample: ``--decode SPEC`` and ``--transform module:func``, shown beside
the stored bytes.

``--decode SPEC`` decodes the sample with :class:`~shardstream.codecs.Decoder` (an image spec such as ``rgb``,
``torchrgb``, ``pil``; unsafe codecs stay off). ``--transform module:func`` imports ``func`` from ``module``
(the current directory is searched first, as ``python -m`` does) and calls it on the (decoded) sample; it may
return a dict, a tuple or list, an array or tensor, a PIL image, or anything else. The function is named by the
user on the command line: nothing in the data ever names code to run.

Each part of the result is described for the page: arrays and tensors with shape, dtype, value range, mean and
standard deviation, and as an image when they are one (HxW, HxWx3, CHW...: stretched from min to max, so a
normalised tensor shows its pixels and the range tells the scale) or as a heat map (one channel of numbers
that are not 8-bit pixels: masks, depth or feature maps);
numbers and strings as text.

>>> import numpy as np
>>> view = TransformedView(None, lambda s: {"x": np.arange(6.0).reshape(2, 3) - 1, "label": s["cls"]})
>>> parts = view.describe({"__key__": "k", "cls": b"2"})
>>> [(p["name"], p["kind"]) for p in parts], parts[0]["min"], parts[0]["max"], parts[0]["heatmap"]
([('x', 'array'), ('label', 'text')], -1.0, 4.0, True)
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..codecs import Decoder
from ..errors import ConfigError
from .render import _json_text, array_image, png_bytes

__all__ = ["TransformedView", "heatmap", "load_function"]

# a perceptually ordered colour ramp (dark blue -> teal -> yellow), interpolated linearly
_RAMP = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], dtype=np.float64)


def load_function(spec: str) -> Callable[[Any], Any]:
    """``module:func`` (also ``package.module:obj.attr``) -> the callable."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--transform {spec!r}: expected module:function, e.g. mytransforms:train_transform")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"--transform {spec!r}: cannot import {module_name!r}: {e}") from e
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"--transform {spec!r}: {module_name!r} has no {attr!r}") from None
    if not callable(value):
        raise ConfigError(f"--transform {spec!r} is not callable")
    return value


def heatmap(array: np.ndarray) -> np.ndarray:
    """A 2-D array as an RGB heat map (min -> dark blue, max -> yellow).

    >>> heatmap(np.array([[0.0, 1.0]])).tolist()
    [[[68, 1, 84], [253, 231, 37]]]
    """
    a = np.nan_to_num(np.asarray(array, dtype=np.float64))
    lo, hi = float(a.min()), float(a.max())
    t = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
    position = t * (len(_RAMP) - 1)
    low = np.clip(np.floor(position).astype(int), 0, len(_RAMP) - 2)
    frac = (position - low)[..., None]
    return np.round(_RAMP[low] * (1 - frac) + _RAMP[low + 1] * frac).astype(np.uint8)


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if type(value).__module__.startswith("PIL.") and hasattr(value, "size"):
        return np.asarray(value)
    return None


class TransformedView:
    """Apply ``decode`` (a Decoder spec or None) then ``transform`` (a callable or None) and describe the result."""

    def __init__(self, decode: str | None, transform: Callable[[Any], Any] | None):
        self.decoder = Decoder(decode) if decode else None
        self.transform = transform
        self.spec = " then ".join(x for x in (f"--decode {decode}" if decode else "",
                                              f"--transform {getattr(transform, '__name__', '')}" if transform else "")
                                  if x)

    def apply(self, sample: dict[str, Any]) -> Any:
        value: Any = dict(sample)
        if self.decoder is not None:
            value = self.decoder(value)
        if self.transform is not None:
            value = self.transform(value)
        return value

    def parts(self, value: Any) -> list[tuple[str, Any]]:
        """The named parts of a result: dict items (without ``__*`` entries), tuple positions, or the value."""
        if isinstance(value, dict):
            return [(str(k), v) for k, v in value.items() if not str(k).startswith("__")]
        if isinstance(value, (tuple, list)) and len(value) <= 64 and any(_as_array(v) is not None for v in value):
            return [(str(i), v) for i, v in enumerate(value)]
        return [("result", value)]

    def describe(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        """The parts of the transformed sample, described for the page (see the module docstring)."""
        return [self.describe_part(name, v) for name, v in self.parts(self.apply(sample))]

    @staticmethod
    def describe_part(name: str, value: Any) -> dict[str, Any]:
        array = _as_array(value)
        if array is None or array.dtype.kind not in "buif" or array.size == 0:
            text = value if isinstance(value, str) else _json_text(value)
            return {"name": name, "kind": "text", "type": type(value).__name__, "text": text[:20000]}
        data = array.astype(np.float64)
        finite = data[np.isfinite(data)]
        stats = {"min": float(finite.min()) if finite.size else None, "max": float(finite.max()) if finite.size else None,
                 "mean": float(finite.mean()) if finite.size else None, "std": float(finite.std()) if finite.size else None,
                 "nonfinite": int(data.size - finite.size)}
        squeezed = np.squeeze(array)
        # one channel of numbers (a mask, a depth map, a feature map): a heat map says more than gray levels
        heat = squeezed.ndim == 2 and array.dtype != np.uint8 and squeezed.size <= 16_000_000
        return {"name": name, "kind": "array", "type": type(value).__name__, "shape": list(array.shape),
                "dtype": str(array.dtype), **stats, "image": not heat and array_image(array) is not None,
                "heatmap": heat}

    @staticmethod
    def render_part(value: Any, as_heatmap: bool) -> bytes:
        """A PNG of an array part: as an image, or as a heat map."""
        array = _as_array(value)
        if array is None:
            raise KeyError("not an array")
        if as_heatmap:
            return png_bytes(heatmap(np.squeeze(array)))
        pixels = array_image(array)
        if pixels is None:
            raise KeyError("not an image")
        return png_bytes(pixels)
