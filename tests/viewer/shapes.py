"""A small detection-style dataset for the viewer's feature tests and the README screenshots, and a transform.

``build_shapes(root)`` writes ``root/shapes-000000.tar`` and ``root/shapes-000001.tar`` (12 samples each) and
``root/classes.txt``: 96x96 PNG images with one coloured square or disc, a ``.cls`` label and a COCO-like
``.json`` (``annotations[].bbox``, ``categories``) whose box is exactly the shape's. A few samples are broken on
purpose (``BROKEN``). ``transform`` is what a training pipeline might do: normalise to a CHW float tensor and
make a mask. Everything is deterministic (the screenshots must not change from run to run).
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import PIL.Image
from shardstream.testing import write_shards

CLASSES = ["square", "disc", "ring"]
SIZE = 96
PER_SHARD = 12
SAMPLES = 24
BROKEN = {5: "truncated png", 9: "bad json", 14: "no image", 19: "odd size"}
MEAN, STD = np.array([0.5, 0.5, 0.5]), np.array([0.25, 0.25, 0.25])


def box_of(i: int) -> list[int]:
    side = 20 + (i * 7) % 36
    x, y = (i * 13) % (SIZE - side), (i * 29) % (SIZE - side)
    return [x, y, side, side]


def picture(i: int, size: int = SIZE) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size]
    base = np.stack([40 + xx * 120 // size, 60 + yy * 100 // size, np.full_like(xx, 150 - 10 * (i % 5))], -1)
    x, y, w, h = (v * size // SIZE for v in box_of(i))
    cls = i % 3
    cx, cy, r = x + w / 2, y + h / 2, w / 2
    d = np.hypot(xx + 0.5 - cx, yy + 0.5 - cy)
    inside = {0: (xx >= x) & (xx < x + w) & (yy >= y) & (yy < y + h), 1: d <= r, 2: (d <= r) & (d >= r * 0.55)}[cls]
    colour = [(250, 200, 40), (240, 90, 60), (90, 230, 120)][cls]
    base[inside] = colour
    return base.astype(np.uint8)


def png(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def sample(i: int) -> dict:
    meta = {"id": i, "split": "train" if i % 4 else "val", "annotations": [{"bbox": box_of(i), "category_id": i % 3}],
            "categories": [{"id": k, "name": name} for k, name in enumerate(CLASSES)]}
    s = {"__key__": f"shape{i:04d}", "cls": str(i % 3).encode(), "png": png(picture(i)), "json": json.dumps(meta).encode()}
    if i == 5:
        s["png"] = s["png"][: len(s["png"]) // 2]
    if i == 9:
        s["json"] = b'{"id": 9, "annotations": [{"bbox": [1, 2'
    if i == 14:
        del s["png"]
    if i == 19:
        s["png"] = png(picture(i, 24))
    return s


def build_shapes(root: pathlib.Path) -> list[str]:
    """Write the shards and classes.txt under ``root``; returns the shard names (relative to ``root``)."""
    paths = write_shards(root, [PER_SHARD] * (SAMPLES // PER_SHARD), lambda shard, index, i: sample(i),
                         name="shapes-{shard:06d}.tar", encoder=False)
    names = [pathlib.Path(path).name for path in paths]
    (root / "classes.txt").write_text("".join(f"{c}\n" for c in CLASSES))
    return names


def transform(sample: dict) -> dict:
    """After ``--decode rgb``: a normalised CHW tensor, the label, and a mask of the box (as a training
    pipeline would make them)."""
    image = sample["png"]  # HxWx3 float in [0, 1]
    tensor = ((image - MEAN) / STD).transpose(2, 0, 1).astype(np.float32)
    mask = np.zeros(image.shape[:2], np.float32)
    for a in sample["json"]["annotations"]:
        x, y, w, h = a["bbox"]
        mask[y:y + h, x:x + w] = 1.0
    mask += np.linspace(0, 0.5, image.shape[1], dtype=np.float32)[None, :]
    return {"image": tensor, "label": sample["cls"], "mask": mask}
