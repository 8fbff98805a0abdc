"""A small dataset with a field of every kind the viewer shows, and a way to run the viewer in a thread.

``build_dataset(root)`` writes ``root/mixed-000000.tar`` and ``root/mixed-000001.tar`` (15 samples each) and
``root/classes.txt``. What the tests rely on is in ``EXPECTED``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import pathlib
import pickle
import shutil
import struct
import threading
import wave
from collections.abc import Iterator

import numpy as np
import PIL.Image
import pytest
from shardstream.viewer import ViewerData, ViewerServer
from shardstream.testing import write_shards

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# flags for running as root in a container, without network side traffic (see shared/servers/README.md)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y "
                                                               "--no-install-recommends chromium chromium-driver)")

SAMPLES = 30
PER_SHARD = 15
CLASSES = ["cat", "dog", "<b>bird</b>"]
XSS_KEY = "<script>alert(1)</script>"
XSS_TEXT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
NPY_SAMPLES = [i for i in range(SAMPLES) if i % 4 == 1]
EXPECTED = {
    "npz": 2, "wav": 3, "pyd": 4, "broken_json": 6, "xss": 7, "tiff": 8, "plain": 11,  # sample numbers
}


def key_of(i: int) -> str:
    return XSS_KEY if i == EXPECTED["xss"] else f"sample{i:04d}"


def image(i: int, size: tuple[int, int] = (40, 56)) -> np.ndarray:
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 255 // w + 20 * i) % 256, (y * 255 // h) % 256, np.full_like(x, (70 * i) % 256)],
                    axis=-1).astype(np.uint8)


def wav_bytes(seconds: float = 0.25, rate: int = 8000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * t / rate)))
                               for t in range(int(seconds * rate))))
    return out.getvalue()


def tiff_bytes(i: int) -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(image(i)).save(out, format="TIFF")
    return out.getvalue()


def sample(i: int) -> dict:
    s: dict = {"__key__": key_of(i), "cls": i % 3, "json": {"i": i, "name": f"sample {i}"},
               "txt": f"caption of sample {i}"}
    s["jpg" if i % 5 == 0 else "png"] = image(i)
    if i in NPY_SAMPLES:
        s["npy"] = (np.add.outer(np.arange(32), np.arange(48)) * 3).astype(np.uint8)  # a gray ramp
    if i == EXPECTED["npz"]:
        s["npz"] = {"image": image(i, (16, 16)), "vec": np.linspace(0, 1, 5, dtype=np.float32)}
    if i == EXPECTED["wav"]:
        s["wav"] = wav_bytes()
    if i == EXPECTED["pyd"]:
        s["pyd"] = pickle.dumps({"payload": "would run code"})
    if i == EXPECTED["broken_json"]:
        s["json"] = b'{"not": json'
    if i == EXPECTED["xss"]:
        s["txt"] = XSS_TEXT
    if i == EXPECTED["tiff"]:
        del s["png"]
        s["tiff"] = tiff_bytes(i)
    if i == EXPECTED["plain"]:
        del s["png"]
    return s


def build_dataset(root: pathlib.Path) -> list[str]:
    """Write the shards and classes.txt under ``root``; returns the shard paths."""
    root.mkdir(parents=True, exist_ok=True)
    shards = write_shards(root, [PER_SHARD] * (SAMPLES // PER_SHARD), lambda shard, index, i: sample(i),
                          name="mixed-{shard:06d}.tar")
    (root / "classes.txt").write_text("".join(f"{name}\n" for name in CLASSES))
    return shards


@contextlib.contextmanager
def running(inputs: list[str], server_kw: dict | None = None, **kw) -> Iterator[ViewerServer]:
    """A viewer server on a free loopback port, serving in a thread (``server_kw``: for ViewerServer)."""
    data = ViewerData(inputs, **kw)
    server = ViewerServer(data, **(server_kw or {}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        data.close()


def get(server: ViewerServer, path: str, headers: dict | None = None, method: str = "GET"):
    """``(status, headers, body)`` of a request sent exactly as written (no normalisation of the path)."""
    import http.client

    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", (headers or {}).get("Host", f"127.0.0.1:{port}"))
        for name, value in (headers or {}).items():
            if name != "Host":
                conn.putheader(name, value)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def get_json(server: ViewerServer, path: str) -> dict:
    status, _, body = get(server, path)
    assert status == 200, (path, status, body)
    return json.loads(body)
