"""One pass over a dataset for the viewer: per-sample facts, problems, statistics, a table, filters.

:class:`Catalog` reads every sample once (the first ``limit`` samples; built on first use, then kept): the
fields and their sizes, the class label (``.cls``, or a ``label``/``class``/``category_id`` number in the JSON),
the top-level scalar values of the JSON field, the size of the first image. It decodes every field with the
codec table on the way (images at a reduced scale when the format allows; unsafe fields such as ``.pyd`` are
never decoded) and records what is wrong with a sample:

- a field that does not decode (``.json does not decode: ...``), or an empty field;
- a missing field: one that at least half of the samples have (images count as one kind: a sample with a
  ``.jpg`` where others have ``.png`` misses nothing);
- an odd size: a field more than 20 times larger or smaller than the median of its extension (at least 5
  samples), an image whose size differs from the one at least 90% of the images share.

On top: :meth:`Catalog.stats` (label histogram, field presence and size histograms, image sizes),
:meth:`Catalog.table` (a page of rows, sorted by any column) and :meth:`Catalog.select` (sample numbers that
match filters: broken only, key substring, class, ``name OP value`` on a column).

>>> from shardstream.writer import TarWriter
>>> from shardstream.viewer.data import ViewerData
>>> with TarWriter("c.tar") as sink:
...     for i in range(6):
...         _ = sink.write({"__key__": f"s{i}", "cls": i % 2, "json": {"w": i * 10} if i != 4 else b"{oops"})
>>> with ViewerData(["c.tar"]) as data:
...     catalog = Catalog(data)
...     catalog.problems(4), catalog.select({"where": "w>=20"}).tolist(), catalog.stats()["labels"]
(['.json does not decode: DecodeError'], [2, 3, 5], [{'label': 0, 'name': None, 'count': 3}, \
{'label': 1, 'name': None, 'count': 3}])
"""

from __future__ import annotations

import io
import re
import threading
from collections import Counter
from typing import Any, TypeVar

import numpy as np
import PIL.Image

from ..codecs import IMAGE_EXTENSIONS, decode_field, get_codec
from ..errors import ConfigError

__all__ = ["Catalog", "parse_where"]

_LABEL_KEYS = ("label", "class", "cls", "category_id", "category", "target")
_DECODE_LIMIT = 16 << 20  # fields larger than this are not decoded by the scan
_WHERE = re.compile(r"^\s*([^<>=!~\s]+)\s*(<=|>=|!=|=|<|>|~)\s*(.*?)\s*$")


def parse_where(text: str) -> tuple[str, str, Any]:
    """``name OP value`` with OP one of ``= != < > <= >= ~`` (contains) -> ``(name, op, value)``.

    >>> parse_where("width>=64"), parse_where("caption ~ cat")
    (('width', '>=', 64.0), ('caption', '~', 'cat'))
    """
    match = _WHERE.match(text)
    if match is None:
        raise ConfigError(f"filter {text!r} is not 'name OP value' (OP: = != < > <= >= ~)")
    name, op, value = match.groups()
    try:
        return name, op, float(value) if op != "~" else value
    except ValueError:
        return name, op, value


def _is_image(ext: str) -> bool:
    return ext.rpartition(".")[2].lower() in IMAGE_EXTENSIONS


def _kind(ext: str) -> str:
    return "image" if _is_image(ext) else ext


def _check_image(data: bytes) -> tuple[int, int]:
    with PIL.Image.open(io.BytesIO(data)) as image:
        size = image.size
        if image.format == "JPEG":
            image.draft("RGB", (64, 64))  # decode at 1/8 scale: finds truncation, costs little
        image.load()
    return size


class Catalog:
    """Per-sample facts of the first ``limit`` samples of a :class:`~shardstream.viewer.data.ViewerData`."""

    def __init__(self, data: Any, limit: int = 20000):
        self.data = data
        self.count = min(len(data), limit)
        self.rows: list[dict[str, Any]] = []
        self._problems: list[list[str]] = []
        self._lock = threading.Lock()
        self._built = False
        self._thread: threading.Thread | None = None
        self.error: str | None = None  #: what stopped a background scan

    @property
    def built(self) -> bool:
        """Whether the samples were read already."""
        return self._built

    def start(self) -> None:
        """Read the samples in a background thread (once), so that pages need not wait for it."""
        with self._lock:
            if self._built or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._background, name="viewer-catalog", daemon=True)
            self._thread.start()

    def _background(self) -> None:
        try:
            self.build()
        except Exception as e:  # e.g. the viewer stopped and closed the dataset under the scan
            self.error = f"{type(e).__name__}: {e}"

    # -- the scan ---------------------------------------------------------------------------------------------

    def build(self) -> Catalog:
        """Read the samples (once; later calls return at once, or wait for the reading under way)."""
        with self._lock:
            if not self._built:
                self.rows = [self._scan(i) for i in range(self.count)]
                self._problems = self._judge()
                for row, problems in zip(self.rows, self._problems, strict=False):
                    row["problems"] = len(problems)
                self._built = True
        return self

    def _scan(self, i: int) -> dict[str, Any]:
        members = self.data.members(i)
        row: dict[str, Any] = {"index": i, "key": self.data.key(i), "size": sum(s for _, _, s in members),
                               "sizes": {ext: size for ext, _, size in members}, "errors": []}
        for ext, _, size in members:
            if size == 0:
                row["errors"].append(f".{ext} is empty")
                continue
            codec = get_codec(ext.rpartition(".")[2] if _is_image(ext) else ext)
            if codec is None or not codec.safe or size > _DECODE_LIMIT:
                continue
            try:
                raw = self.data.read(i, ext)
                if _is_image(ext):
                    if "width" not in row:
                        row["width"], row["height"] = _check_image(raw)
                    else:
                        _check_image(raw)
                    continue
                value = decode_field(ext, raw)
            except Exception as e:  # any failure to decode is a problem of the data
                row["errors"].append(f".{ext} does not decode: {type(e).__name__}")
                continue
            self._facts(row, ext, value)
        return row

    def _facts(self, row: dict[str, Any], ext: str, value: Any) -> None:
        if ext in ("cls", "class") and isinstance(value, int):
            row["label"] = value
        elif ext == "json" and isinstance(value, dict):
            for name, v in value.items():
                if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                    continue
                if name in _LABEL_KEYS and isinstance(v, int) and "label" not in row:
                    row["label"] = v
                row.setdefault("json", {})[name] = v if not isinstance(v, str) else v[:200]

    def _judge(self) -> list[list[str]]:
        n = len(self.rows)
        kinds = Counter(k for row in self.rows for k in {_kind(e) for e in row["sizes"]})
        usual = {k for k, c in kinds.items() if c >= max(2, n / 2)}
        medians = {}
        for ext in {e for row in self.rows for e in row["sizes"]}:
            sizes = [row["sizes"][ext] for row in self.rows if ext in row["sizes"]]
            if len(sizes) >= 5:
                medians[ext] = float(np.median(sizes))
        shapes = Counter((r["width"], r["height"]) for r in self.rows if "width" in r)
        common = shapes.most_common(1)[0] if shapes else None
        common_shape = common[0] if common and common[1] >= 0.9 * sum(shapes.values()) else None
        out = []
        for row in self.rows:
            problems = list(row["errors"])
            have = {_kind(e) for e in row["sizes"]}
            problems += [f"missing {'an image' if k == 'image' else '.' + k} (in {kinds[k]} of {n} samples)"
                         for k in sorted(usual - have)]
            for ext, size in row["sizes"].items():
                median = medians.get(ext)
                if median and size and (size > 20 * median or size * 20 < median):
                    problems.append(f".{ext} is {size} bytes, the median is {median:.0f}")
            if common_shape and "width" in row and (row["width"], row["height"]) != common_shape:
                problems.append(f"image is {row['width']}×{row['height']}, most are {common_shape[0]}×{common_shape[1]}")
            out.append(problems)
        return out

    # -- answers ----------------------------------------------------------------------------------------------

    def problems(self, i: int) -> list[str]:
        """What is wrong with sample ``i`` (empty: nothing found, or beyond the scanned samples)."""
        self.build()
        return self._problems[i] if i < self.count else []

    def value(self, row: dict[str, Any], name: str) -> Any:
        """A column of a row: index, key, size, label, class, width, height, problems, a field's size
        (``size.EXT``) or a JSON scalar (its name)."""
        if name in ("index", "key", "size", "label", "width", "height", "problems"):
            return row.get(name)
        if name == "class":
            label, classes = row.get("label"), self.data.classes
            return classes[label] if classes and label is not None and 0 <= label < len(classes) else label
        if name.startswith("size."):
            return row["sizes"].get(name[5:])
        return row.get("json", {}).get(name)

    def columns(self) -> list[str]:
        """The table's columns: the fixed ones, the fields' sizes, then the JSON scalars (at most 24)."""
        self.build()
        exts = sorted({e for row in self.rows for e in row["sizes"]})
        names = Counter(k for row in self.rows for k in row.get("json", {}))
        fixed = ["index", "key", "size", "label", "width", "height", "problems"]
        return fixed + [f"size.{e}" for e in exts] + [k for k, _ in names.most_common(24) if k not in fixed]

    def select(self, filters: dict[str, str]) -> np.ndarray | None:
        """The sample numbers that pass ``filters`` (None when there is no filter): ``broken`` (any value),
        ``key`` (substring), ``label`` (a number or a class name), ``where`` (``name OP value``)."""
        active = {k: v for k, v in filters.items() if v}
        if not active:
            return None
        self.build()
        tests = []
        if "broken" in active:
            tests.append(lambda r: bool(self._problems[r["index"]]))
        if "key" in active:
            needle = active["key"].lower()
            tests.append(lambda r: needle in r["key"].lower())
        if "label" in active:
            want = active["label"]
            tests.append(lambda r: str(r.get("label")) == want or str(self.value(r, "class")) == want)
        if "where" in active:
            name, op, target = parse_where(active["where"])
            tests.append(lambda r: _compare(self.value(r, name), op, target))
        return np.array([r["index"] for r in self.rows if all(t(r) for t in tests)], dtype=np.int64)

    def table(self, offset: int, limit: int, sort: str = "index", descending: bool = False,
              rows: np.ndarray | None = None) -> dict[str, Any]:
        """A page of the table, sorted by column ``sort`` (missing values last)."""
        columns = self.columns()
        if sort not in columns:
            raise ConfigError(f"no column {sort!r} (columns: {', '.join(columns)})")
        chosen = self.rows if rows is None else [self.rows[int(i)] for i in rows]
        present = [r for r in chosen if self.value(r, sort) is not None]
        absent = [r for r in chosen if self.value(r, sort) is None]
        present.sort(key=lambda r: _sortable(self.value(r, sort)), reverse=descending)
        page = (present + absent)[max(0, offset): max(0, offset) + max(0, limit)]
        return {"columns": columns, "total": len(chosen), "offset": offset, "sort": sort, "descending": descending,
                "rows": [[self.value(r, c) for c in columns] for r in page], "scanned": self.count,
                "samples": len(self.data)}

    def stats(self) -> dict[str, Any]:
        """Label histogram, field presence and size distributions, image sizes, problem counts."""
        self.build()
        classes = self.data.classes
        labels = Counter(r["label"] for r in self.rows if r.get("label") is not None)
        fields = []
        for ext in sorted({e for r in self.rows for e in r["sizes"]}):
            sizes = np.array([r["sizes"][ext] for r in self.rows if ext in r["sizes"]], dtype=np.int64)
            fields.append({"ext": ext, "present": len(sizes), "min": int(sizes.min()),
                           "median": float(np.median(sizes)), "max": int(sizes.max()), "histogram": _histogram(sizes)})
        shapes = Counter((r["width"], r["height"]) for r in self.rows if "width" in r)
        return {
            "samples": len(self.data), "scanned": self.count,
            "broken": sum(1 for p in self._problems if p),
            "labels": [{"label": k, "name": classes[k] if classes and 0 <= k < len(classes) else None, "count": v}
                       for k, v in sorted(labels.items())],
            "unlabelled": self.count - sum(labels.values()),
            "fields": fields,
            "image_sizes": [{"width": w, "height": h, "count": c} for (w, h), c in shapes.most_common(20)],
            "problems": [{"problem": p, "count": c} for p, c in
                         Counter(_problem_kind(p) for ps in self._problems for p in ps).most_common(12)],
        }


def _problem_kind(problem: str) -> str:
    """The kind of a problem, for counting: ``.json does not decode``, ``missing .png``, ``odd .png size``..."""
    if problem.startswith("image is "):
        return "odd image size"
    match = re.match(r"(\.\S+) is \d+ bytes", problem)
    if match:
        return f"odd {match.group(1)} size"
    return re.split(r":| \(", problem, maxsplit=1)[0]


def _sortable(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def _compare(value: Any, op: str, target: Any) -> bool:
    if value is None:
        return op == "!="
    if op == "~":
        return str(target).lower() in str(value).lower()
    if isinstance(target, float) and isinstance(value, (int, float)):
        return _ordered(float(value), op, target)
    target = target if not isinstance(target, float) or not target.is_integer() else int(target)
    return _ordered(str(value), op, str(target))


_Ordered = TypeVar("_Ordered", str, float)


def _ordered(a: _Ordered, op: str, b: _Ordered) -> bool:
    return {"=": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def _histogram(sizes: np.ndarray) -> list[dict[str, int]]:
    """Counts by power-of-two size ranges ``[from, to)``."""
    buckets = Counter(int(s).bit_length() for s in sizes)
    return [{"from": (1 << b) >> 1, "to": 1 << b, "count": buckets[b]} for b in sorted(buckets)]
