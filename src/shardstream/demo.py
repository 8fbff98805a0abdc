"""The demo: build shards from an embedded dataset, then train a small model streaming from them.

``python -m shardstream.demo`` (what ``make demo`` runs) renders a deterministic digits dataset (no download:
digits 0-9 drawn with Pillow's bundled font under random rotation, scale, shift, stroke and noise, from a fixed
seed), writes it as WebDataset shards with :class:`~shardstream.ShardWriter`, and trains a small convolutional
network from those shards with a shuffling pipeline and 2 DataLoader workers, printing the accuracy per epoch,
the samples/s and where the shards are.

``python -m shardstream.demo --data DIR`` does the same for your own ImageFolder-style folder
(``DIR/<class name>/<image file>``).

The training needs PyTorch (``pip install 'shardstream[torch]'``, or ``make venv`` in a checkout): without it the
demo says so and exits with status 2 before writing anything.

Only public API is used here: this file doubles as an end-to-end example.
"""

from __future__ import annotations

import argparse
import importlib
import io
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

import shardstream as wds

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}


def render_digits(n: int, *, seed: int = 0, size: int = 28) -> Iterator[tuple[bytes, int]]:
    """Yield ``n`` deterministic ``(png_bytes, label)`` pairs of rendered handwriting-like digits.

    >>> first = list(render_digits(3, seed=1))
    >>> [label for _, label in first] == [label for _, label in render_digits(3, seed=1)]
    True
    >>> first[0][0][:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    rng = np.random.default_rng(seed)
    fonts = {s: ImageFont.load_default(size=s) for s in range(16, 27, 2)}
    for _ in range(n):
        label = int(rng.integers(10))
        font = fonts[int(rng.choice(list(fonts)))]
        canvas = Image.new("L", (size * 2, size * 2), 0)
        draw = ImageDraw.Draw(canvas)
        stroke = int(rng.integers(0, 2))
        draw.text((size, size), str(label), fill=255, font=font, anchor="mm", stroke_width=stroke, stroke_fill=255)
        canvas = canvas.rotate(float(rng.uniform(-25, 25)), resample=Image.Resampling.BILINEAR)
        dx, dy = rng.integers(-4, 5, size=2)
        canvas = canvas.crop((size // 2 - dx, size // 2 - dy, size // 2 - dx + size, size // 2 - dy + size))
        canvas = canvas.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 0.8))))
        pixels = np.asarray(canvas, dtype=np.float32) + rng.normal(0, 18, (size, size))
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        yield buf.getvalue(), label


def embedded_samples(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """The embedded dataset as WebDataset samples: ``png`` image bytes and ``cls`` label."""
    for i, (png, label) in enumerate(render_digits(n, seed=seed)):
        yield {"__key__": f"digit{i:06d}", "png": png, "cls": label}


def folder_samples(root: pathlib.Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """An ImageFolder-style tree as samples: image bytes unchanged (never re-encoded), ``cls`` = class index."""
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise SystemExit(f"{root} has no class folders; expected {root}/<class name>/<image file>")

    def gen() -> Iterator[dict[str, Any]]:
        for label, name in enumerate(classes):
            for path in sorted((root / name).rglob("*")):
                if path.suffix.lower() in IMAGE_SUFFIXES:
                    key = f"{name}/{path.stem}".replace(".", "_")
                    yield {"__key__": key, path.suffix.lower().lstrip("."): path.read_bytes(), "cls": label}

    return classes, gen()


def write_shards(samples: Iterator[dict[str, Any]], pattern: str, *, maxcount: int, total: int | None) -> list[str]:
    """Write samples with ShardWriter (progress bar on) and return the shard paths."""
    with wds.ShardWriter(pattern, maxcount=maxcount, progress=True, total=total) as sink:
        for sample in samples:
            sink.write(sample)
    return list(sink.shards)


def to_input(image: np.ndarray, size: int = 28) -> np.ndarray:
    """Grayscale float image -> fixed-size (1, size, size) float32 array in [0, 1]."""
    if image.shape != (size, size):
        image = np.asarray(Image.fromarray((image * 255).astype(np.uint8)).resize((size, size),
                                                                                  Image.Resampling.BILINEAR))
        image = image.astype(np.float32) / 255.0
    return image[None].astype(np.float32)


def make_loader(shards: list[str], *, train: bool, batch_size: int, workers: int, seed: int) -> Any:
    dataset = (
        wds.WebDataset(shards, shardshuffle=train, seed=seed, empty_check=False)
        .shuffle(1000 if train else 0, seed=seed)
        .decode("l")
        .to_tuple("png;jpg;jpeg;bmp;gif;tif;tiff;webp;ppm;pgm", "cls")
        .map_tuple(to_input, int)
        .batched(batch_size, partial=True)
    )
    return wds.WebLoader(dataset, batch_size=None, num_workers=workers, persistent_workers=False)


def train(shards: list[str], val_shards: list[str], n_classes: int, *, epochs: int, workers: int, seed: int) -> float:
    """Train a small CNN streaming from ``shards``; print accuracy per epoch; return the final accuracy."""
    import torch  # noqa: PLC0415 - optional: shardstream[torch]
    from torch import nn  # noqa: PLC0415 - optional: shardstream[torch]

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, n_classes),
    )
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    accuracy = 0.0
    loader = make_loader(shards, train=True, batch_size=64, workers=workers, seed=seed)
    for epoch in range(epochs):
        loader.set_epoch(epoch)  # a new shard and sample order every epoch, reproducible from (seed, epoch)
        model.train()
        seen, start = 0, time.perf_counter()
        for images, labels in loader:
            images, labels = torch.as_tensor(images), torch.as_tensor(labels)
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(labels)
        rate = seen / (time.perf_counter() - start)
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for images, labels in make_loader(val_shards, train=False, batch_size=256, workers=0, seed=seed):
                pred = model(torch.as_tensor(images)).argmax(1)
                correct += int((pred == torch.as_tensor(labels)).sum())
                total += len(labels)
        accuracy = correct / max(total, 1)
        print(f"epoch {epoch + 1}/{epochs}: {seen} samples, {rate:,.0f} samples/s, "
              f"loss {loss.item():.3f}, validation accuracy {accuracy:.1%}", flush=True)
    return accuracy


#: what the demo needs beyond shardstream's own dependencies: (module, what for, the command that installs it)
REQUIREMENTS = (("torch", "trains a model with PyTorch", "pip install 'shardstream[torch]'"),)


def missing_requirements() -> list[str]:
    """A line for each dependency the demo needs that is not installed (empty when it can run).

    >>> all(isinstance(line, str) for line in missing_requirements())
    True
    """
    missing = []
    for module, purpose, command in REQUIREMENTS:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(f"the demo {purpose}, but {module!r} is not installed: {command} "
                           "(in a checkout of shardstream: make venv)")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shardstream.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=pathlib.Path, help="an ImageFolder-style folder (default: embedded digits)")
    parser.add_argument("--out", type=pathlib.Path, help="where to write the shards (default: a temp directory)")
    parser.add_argument("--samples", type=int, default=10000, help="embedded dataset size (default 10000)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    missing = missing_requirements()  # before anything is written
    if missing:
        print("\n".join(missing), file=sys.stderr)
        return 2

    if args.data is not None:
        classes, samples = folder_samples(args.data)  # a folder without classes stops here, before writing

    out = args.out or pathlib.Path(tempfile.mkdtemp(prefix="shardstream-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"writing shards to {out}", flush=True)
    start = time.perf_counter()
    if args.data is not None:
        all_samples = list(samples)
        order = np.random.default_rng(args.seed).permutation(len(all_samples))
        n_val = max(1, len(all_samples) // 10)
        val = [all_samples[i] for i in order[:n_val]]
        trn = [all_samples[i] for i in order[n_val:]]
        train_shards = write_shards(iter(trn), str(out / "train-%06d.tar"), maxcount=1000, total=len(trn))
        val_shards = write_shards(iter(val), str(out / "val-%06d.tar"), maxcount=1000, total=len(val))
    else:
        classes = [str(d) for d in range(10)]
        n_val = max(1, args.samples // 6)
        train_shards = write_shards(
            embedded_samples(args.samples, args.seed), str(out / "train-%06d.tar"), maxcount=1000, total=args.samples
        )
        val_shards = write_shards(
            embedded_samples(n_val, args.seed + 1), str(out / "val-%06d.tar"), maxcount=1000, total=n_val
        )
    print(f"wrote {len(train_shards)} training and {len(val_shards)} validation shards in "
          f"{time.perf_counter() - start:.1f}s: {out}", flush=True)
    accuracy = train(train_shards, val_shards, len(classes), epochs=args.epochs, workers=args.workers, seed=args.seed)
    print(f"done: validation accuracy {accuracy:.1%}; shards are in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
