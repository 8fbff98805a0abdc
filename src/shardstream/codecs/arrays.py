"""Codec functions for arrays and tensors: ``.npy``, ``.npz``, ``.ten``, ``.safetensors``, ``.pth``.

numpy formats are read with ``allow_pickle=False`` (safe). ``.pth`` is read with
``torch.load(weights_only=True)`` unless the caller opted in to a full (unsafe) load. torch and safetensors
are imported lazily, only when such a field is met.

>>> import numpy as np
>>> npy_loads(npy_dumps(np.arange(3))).tolist()
[0, 1, 2]
>>> sorted(npz_loads(npz_dumps({"a": np.zeros(2), "b": np.ones(1)})))
['a', 'b']
"""

from __future__ import annotations

import io
import math
import pickle
import re
import zipfile
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..errors import MissingDependencyError, UnsafeDecodeError
from . import tenbin
from .limits import check_bytes

if TYPE_CHECKING:
    import numpy as np
    import numpy.lib.format as npformat
else:
    np = lazy_module("numpy")  # loads with the first array, not with shardstream
    npformat = lazy_module("numpy.lib.format")

__all__ = [
    "npy_dumps",
    "npy_loads",
    "npz_dumps",
    "npz_loads",
    "safetensors_dumps",
    "safetensors_loads",
    "tenbin_dumps",
    "tenbin_loads",
    "torch_dumps",
    "torch_loads",
    "torch_loads_unsafe",
]

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _to_numpy(value: Any) -> np.ndarray:
    """numpy array, torch tensor or array-like -> numpy array; object arrays are refused (they need pickle)."""
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError(f"cannot store an object array (from {type(value).__name__}) without pickle")
    return array


def _npy_size(stream: io.BytesIO) -> int:
    """The bytes of array data an ``.npy`` header at the stream's position declares (the stream moves past it)."""
    version = npformat.read_magic(stream)
    read_header = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    return math.prod(shape) * dtype.itemsize


def npy_loads(data: bytes, *, max_size: int | None = None) -> np.ndarray:
    """``.npy`` bytes -> array (``allow_pickle=False``). The shape in the header must fit the data that follows
    it (and ``max_size``, as in :mod:`.limits`) before the array is allocated."""
    stream = io.BytesIO(data)
    declared = _npy_size(stream)
    check_bytes(declared, "the .npy array", max_size)
    if declared > len(data) - stream.tell():
        raise ValueError(f".npy header declares {declared} bytes of data, but {len(data) - stream.tell()} follow it")
    stream.seek(0)
    return npformat.read_array(stream, allow_pickle=False)


def npy_dumps(value: Any) -> bytes:
    """Array-like (numpy, torch tensor, nested lists) -> ``.npy`` bytes. Same as webdataset's ``numpy_dumps``.

    >>> npy_dumps(np.zeros(2, dtype="uint8"))[:6]
    b'\\x93NUMPY'
    """
    stream = io.BytesIO()
    npformat.write_array(stream, _to_numpy(value), allow_pickle=False)
    return stream.getvalue()


def npz_loads(data: bytes, *, max_size: int | None = None) -> dict[str, np.ndarray]:
    """``.npz`` bytes -> ``dict`` of arrays (``allow_pickle=False``), as ``np.load`` (members not in ``.npy`` format
    stay bytes). The members' uncompressed sizes count against ``max_size`` (see :mod:`.limits`) before any is
    inflated, and no member inflates past its declared size."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        check_bytes(sum(info.file_size for info in members), "the uncompressed .npz members", max_size)
        result: dict[str, Any] = {}
        for info in members:
            with archive.open(info) as member:
                raw = member.read(info.file_size + 1)  # ZipExtFile inflates in bounded steps
            if len(raw) != info.file_size:
                raise ValueError(f".npz member {info.filename!r} is not the size its header declares")
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            result[name] = npy_loads(raw, max_size=max_size) if raw[:6] == b"\x93NUMPY" else raw
        return result


def npz_dumps(value: Any) -> bytes:
    """``dict`` of arrays -> compressed ``.npz`` bytes, deterministically (fixed zip timestamps).

    ``np.savez_compressed`` stamps the current time into the archive; this writes the same layout with a
    fixed date, so encoding the same arrays twice gives the same bytes.

    >>> npz_dumps({"a": np.arange(3)}) == npz_dumps({"a": np.arange(3)})
    True
    """
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"an .npz field needs a dict of str -> array, not {type(value).__name__}")
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in value.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                npformat.write_array(member, _to_numpy(array), allow_pickle=False)
    return stream.getvalue()


def tenbin_loads(data: bytes) -> list[np.ndarray]:
    """``.ten`` bytes -> ``list`` of arrays (see :mod:`.tenbin`)."""
    return tenbin.decode_buffer(data)


def tenbin_dumps(value: Any) -> bytes:
    """One array or a list of arrays -> ``.ten`` bytes. Decoding always gives a list, as in webdataset."""
    if isinstance(value, (list, tuple)):
        return tenbin.encode_buffer([_to_numpy(v) for v in value])
    return tenbin.encode_buffer([_to_numpy(value)])


def _safetensors_numpy(feature: str):
    try:
        import safetensors.numpy  # noqa: PLC0415 - optional: shardstream[safetensors]
    except ImportError as e:
        raise MissingDependencyError(feature, "safetensors", "safetensors") from e
    return safetensors.numpy


def safetensors_loads(data: bytes) -> dict[str, np.ndarray]:
    """``.safetensors`` bytes -> ``dict`` of numpy arrays (needs the ``safetensors`` extra)."""
    return _safetensors_numpy("decoding .safetensors").load(bytes(data))


def safetensors_dumps(value: Any) -> bytes:
    """``dict`` of arrays (numpy or torch) -> ``.safetensors`` bytes (needs the ``safetensors`` extra)."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"a .safetensors field needs a dict of str -> array, not {type(value).__name__}")
    module = _safetensors_numpy("encoding .safetensors")
    return module.save({k: np.ascontiguousarray(_to_numpy(v)) for k, v in value.items()})


def _torch(feature: str):
    try:
        import torch  # noqa: PLC0415 - optional: shardstream[torch]
    except ImportError as e:
        raise MissingDependencyError(feature, "torch", "torch") from e
    return torch


_UNSAFE_MARKERS = ("allowed global", "Unsupported global", "Unsupported class")


def torch_loads(data: bytes, *, allow_unsafe: bool = False) -> Any:
    """``.pth`` bytes -> object, with ``torch.load(weights_only=True)`` unless ``allow_unsafe=True``.

    A weights-only load reads tensors and plain containers and runs no code. When the file needs more
    (arbitrary pickled classes), :class:`~shardstream.errors.UnsafeDecodeError` says how to opt in.
    Unlike webdataset, whose ``torch_loads`` does a full load, this is safe by default.

    >>> import torch
    >>> torch_loads(torch_dumps({"w": torch.ones(2)}))["w"].tolist()
    [1.0, 1.0]
    """
    torch = _torch("decoding .pth")
    stream = io.BytesIO(data)
    if allow_unsafe:
        return torch.load(stream, weights_only=False, map_location="cpu")
    try:
        return torch.load(stream, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        text = str(e)
        if any(marker in text for marker in _UNSAFE_MARKERS):
            found = re.search(r"GLOBAL ([\w.]+)", text)
            reason = f"it references {found.group(1)}" if found else "it holds more than tensors and plain containers"
            raise UnsafeDecodeError(
                f"refusing a full torch.load of .pth data: a weights-only load failed ({reason}), and a full load "
                "unpickles, which can run arbitrary code from the shard. If you trust this data, opt in with "
                "Decoder(..., allow_unsafe=True) or .decode(..., allow_unsafe=True)"
            ) from e
        raise


def torch_loads_unsafe(data: bytes) -> Any:
    """Full ``torch.load`` (runs pickled code): only used after an explicit ``allow_unsafe=True``."""
    return torch_loads(data, allow_unsafe=True)


def torch_dumps(value: Any) -> bytes:
    """Object -> ``torch.save`` bytes (deterministic for the same value). Same as webdataset's ``torch_dumps``."""
    torch = _torch("encoding .pth")
    stream = io.BytesIO()
    torch.save(value, stream)
    return stream.getvalue()
