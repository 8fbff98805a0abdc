"""The viewer's JSON API and generated images: one function per endpoint, on top of the dataset access.

Endpoints (``GET``; samples by number, fields by extension, transformed parts by name)::

    /api/info                  samples, shards, extensions, class names, problems met while opening
    /api/samples?offset=&limit=&FILTERS     a page of grid tiles (each with its problems)
    /api/find?key=KEY          {"index": n} of the sample with that key (null if none)
    /api/random?FILTERS        {"index": n} of a random sample among those that pass the filters
    /api/sample/N              every field of sample N described for display, its problems, boxes to draw
    /api/image/N/EXT[?array=NAME]      a PNG of an image in a format browsers do not show, or of an array
    /api/thumb/N[?ext=EXT]     the sample's thumbnail (generated on first request, then cached)
    /api/stats                 label histogram, field presence and sizes, image sizes, problem counts
    /api/table?offset=&limit=&sort=&desc=&FILTERS    a page of the table of scalar values
    /api/transformed/N         the sample after --decode/--transform, part by part
    /api/transformed/N/NAME[?heatmap=1]   a PNG of one array part

FILTERS: ``ext`` (has that field), ``broken`` (only samples with a problem), ``key`` (substring), ``label``
(a class number or name), ``where`` (``name OP value``, see :func:`~shardstream.viewer.catalog.parse_where`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ..codecs import decode_field
from .boxes import boxes_of
from .catalog import Catalog
from .render import MAX_DECODE, bytes_to_describe, describe_field, rendered_image
from .transform import TransformedView

__all__ = ["Answer", "Api", "Problem"]

_MAX_LIMIT = 500
_FILTERS = ("broken", "key", "label", "where")


class Problem(Exception):
    """An answer other than 200: status code and message (sent as ``{"error": message}``)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Answer:
    """Bytes to send, with their content type (``cache``: may be cached by the browser)."""

    def __init__(self, body: bytes, kind: str, cache: bool = True):
        self.body, self.kind, self.cache = body, kind, cache


def number(text: str, what: str = "sample number") -> int:
    if not (text.isdigit() or (text.startswith("-") and text[1:].isdigit())) or len(text) > 18:
        raise Problem(400, f"{what} {text!r} is not an integer")
    return int(text)


class Api:
    """The answers of the endpoints (see the module docstring) for a dataset and, optionally, a transform."""

    def __init__(self, data: Any, transformed: TransformedView | None = None, scan_limit: int = 20000):
        self.data, self.transformed = data, transformed
        self.catalog = Catalog(data, limit=scan_limit)
        self._results: OrderedDict[int, Any] = OrderedDict()  # the last transformed samples
        self._lock = threading.Lock()

    def answer(self, name: str, args: list[str], query: dict[str, str]) -> Any:
        """A JSON-able value or an :class:`Answer`; raises :class:`Problem`, KeyError or IndexError."""
        handler = getattr(self, f"_{name}", None)
        if handler is None or name.startswith("_"):
            raise Problem(404, "no such endpoint")
        return handler(args, query)

    # -- filters ----------------------------------------------------------------------------------------------

    def rows(self, query: dict[str, str]) -> np.ndarray | None:
        """The sample numbers that pass the filters of ``query`` (None: all)."""
        by_ext = self.data.matching(query.get("ext") or None)
        chosen = self.catalog.select({k: query.get(k, "") for k in _FILTERS})
        if by_ext is None or chosen is None:
            return chosen if by_ext is None else by_ext
        return np.intersect1d(by_ext, chosen)

    # -- endpoints --------------------------------------------------------------------------------------------

    def _info(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        return {**self.data.info(), "transform": self.transformed.spec if self.transformed else None,
                "scan_limit": self.catalog.count}

    def _samples(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        offset = number(query.get("offset", "0"), "offset")
        limit = min(number(query.get("limit", "48"), "limit"), _MAX_LIMIT)
        page = self.data.listing(offset, limit, rows=self.rows(query))
        # the marks need the scan of the dataset: started in the background by the first page of local shards
        # ("scanning": the page asks again later); for remote shards (ranged reads) only once the statistics,
        # the table or a filter asked for it
        if not self.catalog.built and not any(s.remote for s in self.data.shards):
            self.catalog.start()
        page["marks"] = self.catalog.built
        page["scanning"] = not page["marks"] and not any(s.remote for s in self.data.shards)
        for item in page["items"]:
            item["problems"] = self.catalog.problems(item["index"]) if page["marks"] else []
        return page

    def _find(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        key = query.get("key", "")
        try:
            return {"index": self.data.find(key), "key": key}
        except KeyError:  # an answer, not an error: the page asks before trying the text as a number
            return {"index": None, "key": key}

    def _random(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        rows = self.rows(query)
        if rows is None:
            i = self.data.random()
        else:
            i = int(rows[np.random.default_rng().integers(len(rows))]) if len(rows) else None
        if i is None:
            raise Problem(404, "no sample to choose from")
        return {"index": i}

    def _sample(self, args: list[str], query: dict[str, str]) -> Any:
        if len(args) != 1:
            raise Problem(404, "no such endpoint")
        i = number(args[0])
        data = self.data
        shard, _ = data.locate(i)
        fields = []
        for ext, _, size in data.members(i):
            head = data.read(i, ext, bytes_to_describe(ext, size) if size <= MAX_DECODE else 1 << 20)
            fields.append(describe_field(ext, head, classes=data.classes, size=size))
        return {"index": i, "key": data.key(i), "shard": shard.url, "fields": fields,
                "problems": self.catalog.problems(i), "overlay": self._overlay(i, fields),
                "transformed": self.transformed is not None}

    def _overlay(self, i: int, fields: list[dict[str, Any]]) -> dict[str, Any] | None:
        image = next((f for f in fields if f.get("kind") == "image"), None)
        meta = next((f for f in fields if f["ext"] == "json" and f.get("kind") == "json"), None)
        if image is None or meta is None:
            return None
        try:
            value = decode_field("json", self.data.read(i, "json"))
        except Exception:
            return None
        found = boxes_of(value, image["width"], image["height"])
        if not found["boxes"] and not found["points"]:
            return None
        return {"ext": image["ext"], "width": image["width"], "height": image["height"], **found}

    def _image(self, args: list[str], query: dict[str, str]) -> Any:
        if len(args) != 2:
            raise Problem(404, "no such endpoint")
        i, ext = number(args[0]), self.ext(number(args[0]), args[1])
        try:
            png = rendered_image(ext, self.data.read(i, ext), query.get("array"))
        except (ValueError, OSError) as e:  # not an image, or one that does not decode
            raise Problem(422, f"field {ext!r} of sample {i} cannot be shown as an image: {e}") from e
        return Answer(png, "image/png")

    def _thumb(self, args: list[str], query: dict[str, str]) -> Any:
        if len(args) != 1:
            raise Problem(404, "no such endpoint")
        i = number(args[0])
        ext = query.get("ext") or None
        thumb = self.data.thumbnail(i, self.ext(i, ext) if ext else None)
        if thumb is None:
            raise Problem(404, f"sample {i} has no image to show")
        return Answer(thumb[0], thumb[1])

    def _stats(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        return self.catalog.stats()

    def _table(self, args: list[str], query: dict[str, str]) -> Any:
        self._no_args(args)
        offset = number(query.get("offset", "0"), "offset")
        limit = min(number(query.get("limit", "100"), "limit"), _MAX_LIMIT)
        return self.catalog.table(offset, limit, query.get("sort") or "index", query.get("desc") == "1",
                                  self.rows(query))

    def _transformed(self, args: list[str], query: dict[str, str]) -> Any:
        if self.transformed is None:
            raise Problem(404, "no --transform or --decode was given to the viewer")
        if len(args) not in (1, 2):
            raise Problem(404, "no such endpoint")
        i = number(args[0])
        self.data.locate(i)
        try:
            value = self._result(i)
        except Exception as e:  # the user's code failed on this sample: show it, it is what we look for
            if len(args) == 2:
                raise Problem(422, f"the transform failed on sample {i}") from e
            return {"index": i, "spec": self.transformed.spec, "error": f"{type(e).__name__}: {e}", "parts": []}
        parts = dict(self.transformed.parts(value))
        if len(args) == 2:
            if args[1] not in parts:
                raise Problem(404, f"the transformed sample has no part {args[1]!r}")
            try:
                return Answer(self.transformed.render_part(parts[args[1]], query.get("heatmap") == "1"), "image/png",
                              cache=False)
            except KeyError as e:
                raise Problem(422, f"part {args[1]!r} cannot be shown as an image") from e
        return {"index": i, "spec": self.transformed.spec, "error": None,
                "parts": [self.transformed.describe_part(name, v) for name, v in parts.items()]}

    def _result(self, i: int) -> Any:
        with self._lock:
            if i in self._results:
                self._results.move_to_end(i)
                return self._results[i]
        shard, _ = self.data.locate(i)
        sample = {"__key__": self.data.key(i), "__url__": shard.url,
                  **{ext: self.data.read(i, ext) for ext, _, _ in self.data.members(i)}}
        assert self.transformed is not None
        value = self.transformed.apply(sample)
        with self._lock:
            self._results[i] = value
            while len(self._results) > 8:
                self._results.popitem(last=False)
        return value

    # -- helpers ----------------------------------------------------------------------------------------------

    @staticmethod
    def _no_args(args: list[str]) -> None:
        if args:
            raise Problem(404, "no such endpoint")

    def ext(self, i: int, ext: str) -> str:
        """``ext`` when sample ``i`` has that field, else a 404."""
        if ext not in [name for name, _, _ in self.data.members(i)]:
            raise Problem(404, f"sample {i} has no field {ext!r}")
        return ext
