"""Interleaved multimodal samples (MMC4 / OBELICS style): one document, N texts and M images in a given order.

The member layout of a document with key ``K`` (one tar sample, so any shard tool keeps it together)::

    K.json      {"interleaved": [{"text": "A cat."}, {"image": "0.jpg"}, {"text": "It sleeps."}, {"image": "1.png"}],
                 ...any other metadata of the document (url, license, similarity scores...)}
    K.0.jpg     the first image, in its own format
    K.1.png     the second image

Texts are inline in the JSON (they are small); each image is a member named ``<i>.<ext>``, numbered by its rank
among the images, so the default key rule (the first dot) groups them with ``K.json``. An item may also be any
other medium stored as a member (``{"audio": "2.flac"}``): the entry's one key is its kind, its value the field.

- :func:`interleaved_sample` builds the sample to write (with :class:`~shardstream.writer.TarWriter` or
  ``ShardWriter``, which encode each field by its extension);
- :func:`decode_interleaved` turns a read sample (raw bytes, or already decoded by ``.decode("pil")``) into an
  :class:`Interleaved` document: ``items`` is the sequence of ``(kind, value)`` in order;
- :func:`collate_interleaved` batches documents of different lengths: padded kinds, a mask, texts and images
  with their positions.

>>> import numpy as np
>>> from shardstream.writer import TarWriter
>>> doc = ["A cat.", np.zeros((4, 4, 3), np.uint8), "It sleeps.", np.ones((4, 4, 3), np.uint8)]
>>> with TarWriter("docs.tar") as sink:
...     n = sink.write(interleaved_sample("doc0", doc, meta={"url": "http://example.com"}, image_format="png"))
...     n = sink.write(interleaved_sample("doc1", ["Only text."]))
>>> import shardstream as wds
>>> docs = [decode_interleaved(s) for s in wds.WebDataset("docs.tar", shardshuffle=False)]
>>> [kind for kind, _ in docs[0].items], docs[0].meta, docs[0].images[1].shape
(['text', 'image', 'text', 'image'], {'url': 'http://example.com'}, (4, 4, 3))
>>> batch = collate_interleaved(docs)
>>> batch["kinds"].tolist(), batch["mask"].sum(axis=1).tolist()
([[1, 2, 1, 2], [1, 0, 0, 0]], [4, 1])
>>> batch["image_positions"], batch["texts"][1]
([[1, 3], []], ['Only text.'])
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .codecs import decode_field
from .errors import ConfigError, SampleFormatError

__all__ = ["KINDS", "Interleaved", "collate_interleaved", "decode_interleaved", "interleaved_sample"]

#: the codes of the item kinds in :func:`collate_interleaved`'s ``kinds`` (0 is padding); other kinds get 3
KINDS = {"text": 1, "image": 2}
_FIELD = "json"
_LIST = "interleaved"


def interleaved_sample(key: str, items: Iterable[Any], meta: Mapping[str, Any] | None = None,
                       image_format: str = "jpg") -> dict[str, Any]:
    """The sample (``__key__``, ``json`` and one field per image) of a document whose items are, in order,
    ``str`` (a text), encoded image ``bytes`` (written as ``image_format``), an array or PIL image (encoded as
    ``image_format`` by the writer), or ``(kind, extension, value)`` for any other medium.

    >>> s = interleaved_sample("d", ["hi", b"\\x89PNG...", ("audio", "flac", b"fLaC...")], image_format="png")
    >>> sorted(s), s["json"]["interleaved"]
    (['0.png', '1.flac', '__key__', 'json'], [{'text': 'hi'}, {'image': '0.png'}, {'audio': '1.flac'}])
    """
    meta = dict(meta or {})
    if _LIST in meta:
        raise ConfigError(f"interleaved_sample({key!r}): meta may not have the key {_LIST!r} (it holds the order)")
    order: list[dict[str, str]] = []
    sample: dict[str, Any] = {"__key__": key}
    media = 0
    for item in items:
        if isinstance(item, str):
            order.append({"text": item})
            continue
        if isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[1], str):
            kind, ext, value = item
        else:
            kind, ext, value = "image", image_format, item
        field = f"{media}.{ext.lstrip('.')}"
        order.append({kind: field})
        sample[field] = value
        media += 1
    sample[_FIELD] = {_LIST: order, **meta}
    return sample


@dataclasses.dataclass
class Interleaved:
    """One decoded document: ``items`` is the list of ``(kind, value)`` in document order (``kind`` is ``"text"``,
    ``"image"`` or another medium's name), ``meta`` the rest of its JSON."""

    key: str
    items: list[tuple[str, Any]]
    meta: dict[str, Any]

    @property
    def texts(self) -> list[str]:
        """The texts, in order."""
        return [value for kind, value in self.items if kind == "text"]

    @property
    def images(self) -> list[Any]:
        """The images, in order."""
        return [value for kind, value in self.items if kind == "image"]


def _decoded(value: Any, field: str, imagespec: str) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):

        return decode_field(field, bytes(value), imagespec=imagespec)
    return value


def decode_interleaved(sample: Mapping[str, Any], imagespec: str = "rgb8") -> Interleaved:
    """The :class:`Interleaved` document of a sample written by :func:`interleaved_sample`. Fields still in bytes
    are decoded by their extension (images with ``imagespec``, as in ``.decode(imagespec)``); fields a decoder
    already decoded are used as they are. A missing member raises a
    :class:`~shardstream.errors.SampleFormatError` naming the sample and the member.

    >>> d = decode_interleaved({"__key__": "d", "json": b'{"interleaved": [{"text": "hi"}], "lang": "en"}'})
    >>> d.items, d.meta
    ([('text', 'hi')], {'lang': 'en'})
    """
    key, url = sample.get("__key__"), sample.get("__url__")
    if _FIELD not in sample:
        raise SampleFormatError(f"an interleaved sample needs a {_FIELD!r} field with the order", url=url, key=key,
                                member=f"{key}.{_FIELD}")
    header = sample[_FIELD]
    if isinstance(header, (bytes, bytearray, memoryview)):
        header = json.loads(bytes(header))
    if not isinstance(header, Mapping) or not isinstance(header.get(_LIST), list):
        raise SampleFormatError(f"the {_FIELD!r} field has no {_LIST!r} list", url=url, key=key,
                                member=f"{key}.{_FIELD}")
    items: list[tuple[str, Any]] = []
    for i, entry in enumerate(header[_LIST]):
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise SampleFormatError(f"item {i} of the order is {entry!r}; each item is one {{kind: value}}",
                                    url=url, key=key, member=f"{key}.{_FIELD}")
        ((kind, value),) = entry.items()
        if kind == "text":
            items.append(("text", value))
            continue
        if value not in sample:
            raise SampleFormatError(f"item {i} ({kind}) names the member {value!r}, which the sample lacks",
                                    url=url, key=key, member=f"{key}.{value}")
        items.append((kind, _decoded(sample[value], value, imagespec)))
    meta = {k: v for k, v in header.items() if k != _LIST}
    return Interleaved(str(key), items, meta)


def _stack(images: Sequence[Sequence[Any]]) -> tuple[Any, np.ndarray]:
    """Images as ``[B, M, ...]`` zero-padded when they are arrays of one shape; else the lists as they are."""
    width = max((len(row) for row in images), default=0)
    mask = np.zeros((len(images), width), dtype=bool)
    for b, row in enumerate(images):
        mask[b, : len(row)] = True
    flat = [np.asarray(x) if isinstance(x, np.ndarray) else x for row in images for x in row]
    if flat and all(isinstance(x, np.ndarray) and x.shape == flat[0].shape for x in flat):
        out = np.zeros((len(images), width, *flat[0].shape), dtype=flat[0].dtype)
        for b, row in enumerate(images):
            for m, x in enumerate(row):
                out[b, m] = x
        return out, mask
    return [list(row) for row in images], mask


def collate_interleaved(docs: Sequence[Interleaved], max_items: int | None = None) -> dict[str, Any]:
    """Batch documents with different numbers of items. Returns:

    - ``kinds``: int array ``[B, L]`` (``L`` the longest document, or ``max_items``: longer ones are cut), codes
      from :data:`KINDS` (0 = padding, 3 = another medium); ``mask``: bool ``[B, L]``, True on real items;
    - ``texts``: per document, its texts; ``text_positions``: their positions in the sequence;
    - ``images``: ``[B, M, H, W, C]`` zero-padded when all images are arrays of one shape (else lists),
      ``image_mask``: bool ``[B, M]``, ``image_positions``: per document, the positions of its images;
    - ``keys``, ``meta``: per document.

    >>> docs = [Interleaved("a", [("text", "x"), ("image", np.ones((2, 2)))], {}), Interleaved("b", [], {})]
    >>> out = collate_interleaved(docs)
    >>> out["images"].shape, out["image_mask"].tolist(), out["mask"].tolist()
    ((2, 1, 2, 2), [[True], [False]], [[True, True], [False, False]])
    """
    if max_items is not None and max_items < 1:
        raise ConfigError(f"collate_interleaved: max_items must be >= 1, not {max_items}")
    items = [doc.items[:max_items] if max_items is not None else doc.items for doc in docs]
    length = max((len(row) for row in items), default=0)
    kinds = np.zeros((len(docs), length), dtype=np.int64)
    texts, text_positions, images, image_positions = [], [], [], []
    for b, row in enumerate(items):
        kinds[b, : len(row)] = [KINDS.get(kind, 3) for kind, _ in row]
        text_positions.append([i for i, (kind, _) in enumerate(row) if kind == "text"])
        image_positions.append([i for i, (kind, _) in enumerate(row) if kind == "image"])
        texts.append([row[i][1] for i in text_positions[-1]])
        images.append([row[i][1] for i in image_positions[-1]])
    stacked, image_mask = _stack(images)
    return {"kinds": kinds, "mask": kinds > 0, "texts": texts, "text_positions": text_positions,
            "images": stacked, "image_mask": image_mask, "image_positions": image_positions,
            "keys": [doc.key for doc in docs], "meta": [doc.meta for doc in docs]}
