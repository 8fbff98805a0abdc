"""Boxes and points to draw over a sample's image, from its JSON when the keys follow COCO or YOLO habits.

Recognised (in the sample's ``.json``, the first match of each kind is used):

- COCO-like, pixels, ``[x, y, width, height]`` from the top-left corner: ``"bbox"`` (one box, or a list of
  boxes), ``"bboxes"``, or ``"annotations": [{"bbox": [...], "category_id": 3, "keypoints": [...]}, ...]``;
  ``"categories": [{"id": 3, "name": "cat"}]`` in the same JSON names the categories;
- YOLO-like, normalised to [0, 1], ``[cx, cy, width, height]`` of the box centre: ``"yolo"`` or ``"cxcywh"``
  (rows of 4, or 5 with the class first: ``[cls, cx, cy, w, h]``);
- points: ``"keypoints"`` (COCO's flat ``[x, y, visibility, ...]``) and ``"points"`` (``[[x, y], ...]``).

Everything comes out in pixels of the image, as ``{"x", "y", "w", "h", "label"}`` boxes and ``{"x", "y"}``
points; values that are not numbers are skipped, never raised on.

>>> boxes_of({"annotations": [{"bbox": [10, 20, 30, 40], "category_id": 1}], "categories": [{"id": 1, "name": "cat"}]},
...          100, 100)
{'boxes': [{'x': 10.0, 'y': 20.0, 'w': 30.0, 'h': 40.0, 'label': 'cat'}], 'points': []}
>>> boxes_of({"yolo": [[2, 0.5, 0.5, 0.2, 0.4]]}, 200, 100)["boxes"]
[{'x': 80.0, 'y': 30.0, 'w': 40.0, 'h': 40.0, 'label': '2'}]
"""

from __future__ import annotations

from typing import Any

__all__ = ["boxes_of"]

_MAX = 2000  # boxes or points drawn at most


def _numbers(row: Any, n: int) -> list[float] | None:
    if not isinstance(row, (list, tuple)) or len(row) != n:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row):
        return None
    return [float(v) for v in row]


def _rows(value: Any, n: int) -> list[list[float]]:
    one = _numbers(value, n)
    if one is not None:
        return [one]
    if isinstance(value, list):
        return [r for r in (_numbers(v, n) for v in value[:_MAX]) if r is not None]
    return []


def _keypoints(value: Any) -> list[dict[str, float]]:
    if not isinstance(value, list):
        return []
    if value and all(isinstance(v, (int, float)) for v in value) and len(value) % 3 == 0:
        triples = [value[i:i + 3] for i in range(0, len(value), 3)]
        return [{"x": float(x), "y": float(y)} for x, y, v in triples if v]
    return [{"x": p[0], "y": p[1]} for p in _rows(value, 2)]


def boxes_of(meta: Any, width: int, height: int) -> dict[str, list[dict[str, Any]]]:
    """Boxes and points (pixels) from a decoded JSON value (see the module docstring)."""
    out: dict[str, list[dict[str, Any]]] = {"boxes": [], "points": []}
    if not isinstance(meta, dict):
        return out
    names = {}
    if isinstance(meta.get("categories"), list):
        names = {c.get("id"): str(c.get("name")) for c in meta["categories"] if isinstance(c, dict)}

    def label(value: Any) -> str | None:
        return None if value is None else names.get(value, str(value))

    for key in ("bbox", "bboxes"):
        for x, y, w, h in _rows(meta.get(key), 4):
            out["boxes"].append({"x": x, "y": y, "w": w, "h": h, "label": label(meta.get("category_id"))})
    annotations = meta.get("annotations")
    if isinstance(annotations, list):
        for a in annotations[:_MAX]:
            if not isinstance(a, dict):
                continue
            box = _numbers(a.get("bbox"), 4)
            if box is not None:
                found = next((a[k] for k in ("category_id", "label", "category", "class") if k in a), None)
                out["boxes"].append({"x": box[0], "y": box[1], "w": box[2], "h": box[3], "label": label(found)})
            out["points"] += _keypoints(a.get("keypoints"))
    for key in ("yolo", "cxcywh"):
        rows = _rows(meta.get(key), 5) or _rows(meta.get(key), 4)
        for row in rows:
            cls, (cx, cy, w, h) = (row[0], row[1:]) if len(row) == 5 else (None, row)
            out["boxes"].append({"x": (cx - w / 2) * width, "y": (cy - h / 2) * height, "w": w * width,
                                 "h": h * height, "label": None if cls is None else str(int(cls))})
    out["points"] += _keypoints(meta.get("keypoints")) + _keypoints(meta.get("points"))
    out["boxes"], out["points"] = out["boxes"][:_MAX], out["points"][:_MAX]
    return out
