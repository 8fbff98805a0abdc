"""Video and audio fields for :class:`~shardstream.codecs.Decoder`: the ``torch_video`` and ``torch_audio``
handlers (webdataset's names). Each writes the field to a temporary ``file.EXT`` and loads it with an optional
library (torchvision, torchaudio), imported only when such a field is decoded; without it, decoding raises
:class:`~shardstream.errors.MissingDependencyError` naming the extra to install.

>>> torch_video.matches(".mp4"), torch_audio.matches(".flac"), torch_audio.matches(".txt")
(True, True, False)
"""

from __future__ import annotations

import functools
import importlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

from ..errors import MissingDependencyError
from .decode_handlers import ExtensionHandler

__all__ = ["torch_audio", "torch_video"]


class _MediaHandler(ExtensionHandler):
    """Writes the data to a temporary ``file.EXT`` and loads it with an optional library."""

    def __init__(self, extensions: str, module: str, extra: str, feature: str, load: Callable[[Any, str], Any]):
        super().__init__(extensions, self._decode_unknown)
        self.module, self.extra, self.feature, self._load = module, extra, feature, load

    def resolve(self, key: str) -> Callable[[bytes], Any] | None:
        if not self.matches(key):
            return None
        return functools.partial(self._decode, key.rpartition(".")[2].lower())

    def _decode_unknown(self, data: bytes) -> Any:  # pragma: no cover - resolve() always binds the extension
        return self._decode("bin", data)

    def _decode(self, ext: str, data: bytes) -> Any:
        try:
            module = importlib.import_module(self.module)
        except ImportError as e:
            raise MissingDependencyError(self.feature, self.extra, self.module) from e
        with tempfile.TemporaryDirectory() as dirname:  # pragma: no cover - needs torchvision/torchaudio
            path = os.path.join(dirname, f"file.{ext}")
            with open(path, "wb") as stream:
                stream.write(data)
            return self._load(module, path)

    def __repr__(self) -> str:
        return self.feature.split()[-1]


def _read_video(module: Any, path: str) -> Any:  # pragma: no cover - needs torchvision
    return importlib.import_module("torchvision.io").read_video(path, pts_unit="sec")


def _read_audio(module: Any, path: str) -> Any:  # pragma: no cover - needs torchaudio
    return module.load(path)


#: Handler decoding ``mp4 ogv mjpeg avi mov h264 mpg webm wmv`` with ``torchvision.io.read_video`` (as
#: webdataset). Needs torchvision (``pip install 'shardstream[video]'``); without it, decoding such a field
#: raises :class:`~shardstream.errors.MissingDependencyError`. Other fields are left to the next handler.
torch_video = _MediaHandler(
    "mp4 ogv mjpeg avi mov h264 mpg webm wmv",
    "torchvision",
    "video",
    "decoding video with torch_video",
    _read_video,
)

#: Handler decoding ``flac mp3 sox wav m4a ogg wma`` with ``torchaudio.load`` (as webdataset). Needs
#: torchaudio (``pip install 'shardstream[audio]'``); without it, such a field raises
#: :class:`~shardstream.errors.MissingDependencyError`.
torch_audio = _MediaHandler(
    "flac mp3 sox wav m4a ogg wma",
    "torchaudio",
    "audio",
    "decoding audio with torch_audio",
    _read_audio,
)
