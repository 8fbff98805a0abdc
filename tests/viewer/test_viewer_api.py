"""The viewer's JSON API and file endpoints, on a generated dataset with a field of every kind."""

from __future__ import annotations

import gzip
import http.server
import io
import json
import os
import pathlib
import shutil
import threading

import numpy as np
import PIL.Image
import pytest
from viewer_helpers import (CLASSES, EXPECTED, NPY_SAMPLES, PER_SHARD, SAMPLES, get, get_json, image, key_of, running,
                            sample, wav_bytes)

from shardstream.cli import main
from shardstream.indexed import index_shard, sidecar_path
from shardstream.viewer import ViewerData


def fields_of(server, i: int) -> dict:
    return {f["ext"]: f for f in get_json(server, f"/api/sample/{i}")["fields"]}


# -- the dataset ---------------------------------------------------------------------------------------------


def test_info(server, dataset):
    info = get_json(server, "/api/info")
    assert info["samples"] == SAMPLES
    assert [s["samples"] for s in info["shards"]] == [PER_SHARD, PER_SHARD]
    assert info["classes"] == CLASSES
    assert {"cls", "json", "txt", "png", "jpg", "npy", "npz", "wav", "pyd", "tiff"} == set(info["extensions"])
    assert info["problems"] == []


def test_listing_pages_filters_and_caps(server):
    page = get_json(server, "/api/samples?offset=20&limit=8")
    assert page["total"] == SAMPLES and [item["index"] for item in page["items"]] == list(range(20, 28))
    last = get_json(server, "/api/samples?offset=24&limit=24")
    assert len(last["items"]) == SAMPLES - 24
    item = get_json(server, "/api/samples?offset=3&limit=1")["items"][0]
    assert item["key"] == "sample0003" and item["label"] == 0 and item["class_name"] == "cat"
    assert item["thumb"] == "png" and item["caption"] == "caption of sample 3"
    assert "wav" in item["fields"]
    npy = get_json(server, "/api/samples?ext=npy&limit=100")
    assert npy["total"] == len(NPY_SAMPLES) and [it["index"] for it in npy["items"]] == NPY_SAMPLES
    assert get_json(server, "/api/samples?ext=npy&offset=2&limit=2")["items"][0]["index"] == NPY_SAMPLES[2]
    assert len(get_json(server, "/api/samples?limit=100000")["items"]) == SAMPLES  # capped, not an error
    plain = get_json(server, f"/api/samples?offset={EXPECTED['plain']}&limit=1")["items"][0]
    assert plain["thumb"] is None  # no image: the tile shows fields and caption


def test_find_and_random(server):
    assert get_json(server, "/api/find?key=sample0013")["index"] == 13
    assert get_json(server, "/api/find?key=%3Cscript%3Ealert(1)%3C%2Fscript%3E")["index"] == EXPECTED["xss"]
    assert get_json(server, "/api/find?key=nope") == {"index": None, "key": "nope"}
    for _ in range(10):
        assert get_json(server, "/api/random?ext=npy")["index"] in NPY_SAMPLES
        assert 0 <= get_json(server, "/api/random")["index"] < SAMPLES


# -- fields --------------------------------------------------------------------------------------------------


def test_every_kind_of_field_is_described(server):
    f = fields_of(server, 2)
    assert f["png"]["kind"] == "image" and f["png"]["native"] and (f["png"]["width"], f["png"]["height"]) == (56, 40)
    assert f["cls"] == {"ext": "cls", "size": 1, "kind": "label", "value": 2, "name": "<b>bird</b>"}
    assert f["json"]["kind"] == "json" and json.loads(f["json"]["text"]) == {"i": 2, "name": "sample 2"}
    assert "\n  " in f["json"]["text"]  # pretty-printed
    assert f["txt"] == {"ext": "txt", "size": 19, "kind": "text", "text": "caption of sample 2", "truncated": False}
    arrays = {a["name"]: a for a in f["npz"]["arrays"]}
    assert arrays["image"]["shape"] == [16, 16, 3] and arrays["image"]["dtype"] == "uint8" and arrays["image"]["image"]
    assert arrays["vec"]["shape"] == [5] and not arrays["vec"]["image"] and "0.25" in arrays["vec"]["preview"]
    npy = fields_of(server, NPY_SAMPLES[0])["npy"]
    assert npy["kind"] == "array" and npy["arrays"][0]["shape"] == [32, 48] and npy["arrays"][0]["image"]
    assert fields_of(server, EXPECTED["wav"])["wav"]["kind"] == "audio"
    assert fields_of(server, EXPECTED["tiff"])["tiff"]["native"] is False
    assert fields_of(server, 0)["jpg"]["format"] == "JPEG"


def test_unsafe_and_broken_fields_are_hex_never_a_crash(server):
    pyd = fields_of(server, EXPECTED["pyd"])["pyd"]
    assert pyd["kind"] == "unsafe" and pyd["note"].startswith("unsafe: not decoded")
    assert pyd["hex"].startswith("00000000  80 04")  # the pickle's bytes, never unpickled
    broken = fields_of(server, EXPECTED["broken_json"])["json"]
    assert broken["kind"] == "error" and "json" in broken["error"] and '|{"not": json|' in broken["hex"]


def test_raw_fields_have_safe_types(server, dataset):
    status, headers, body = get(server, "/api/field/1/png")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert np.array_equal(np.asarray(PIL.Image.open(io.BytesIO(body))), image(1))
    status, headers, body = get(server, f"/api/field/{EXPECTED['wav']}/wav")
    assert headers["Content-Type"] == "audio/wav" and body == wav_bytes()
    status, headers, body = get(server, f"/api/field/{EXPECTED['wav']}/wav", {"Range": "bytes=4-11"})
    assert status == 206 and body == wav_bytes()[4:12] and headers["Content-Range"].startswith("bytes 4-11/")
    status, headers, _ = get(server, f"/api/field/{EXPECTED['pyd']}/pyd")
    assert headers["Content-Type"] == "application/octet-stream" and headers["Content-Disposition"] == "attachment"
    status, headers, _ = get(server, "/api/field/1/txt")  # text is shown from the JSON, never served as a page
    assert headers["Content-Type"] == "application/octet-stream"
    for path in ("/", "/api/info", "/api/field/1/png"):
        headers = get(server, path)[1]
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_rendered_images_and_thumbnails(server):
    status, headers, body = get(server, f"/api/image/{EXPECTED['tiff']}/tiff")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert np.array_equal(np.asarray(PIL.Image.open(io.BytesIO(body)).convert("RGB")), image(EXPECTED["tiff"]))
    status, _, body = get(server, f"/api/image/{NPY_SAMPLES[0]}/npy")
    assert status == 200 and PIL.Image.open(io.BytesIO(body)).size == (48, 32)
    assert get(server, f"/api/image/{EXPECTED['npz']}/npz?array=image")[0] == 200
    assert get(server, f"/api/image/{EXPECTED['npz']}/npz?array=vec")[0] == 404  # 1-D: no image
    assert get(server, "/api/image/1/txt")[0] == 422
    assert get(server, f"/api/image/{EXPECTED['broken_json']}/json")[0] == 422
    status, headers, body = get(server, "/api/thumb/5")
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert PIL.Image.open(io.BytesIO(body)).size == (56, 40)
    assert (5, "jpg") in server.data.thumbnails  # cached: the next request does not decode again
    assert get(server, "/api/thumb/5")[2] == body
    assert get(server, f"/api/thumb/{NPY_SAMPLES[0]}?ext=npy")[0] == 200
    assert get(server, f"/api/thumb/{EXPECTED['plain']}")[0] == 404


# -- what the server refuses ---------------------------------------------------------------------------------

REFUSED = [
    "/../../../etc/passwd",
    "/static/../../../../etc/passwd",
    "/static/..%2f..%2f..%2fetc%2fpasswd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/%252e%252e%252fetc%252fpasswd",
    "//etc/passwd",
    "/static//etc/passwd",
    "/static/%2Fetc%2Fpasswd",
    "/etc/passwd",
    "/api/field/0/..%2f..%2f..%2fetc%2fpasswd",
    "/api/field/0/%2Fetc%2Fpasswd",
    "/api/field/%2Fetc%2Fpasswd/png",
    "/api/field/0/png/../../../etc/passwd",
    "/api/sample/%2Fetc%2Fpasswd",
    "/api/sample/..",
    "/api/sample/-1",
    "/api/sample/99999",
    "/api/sample/1e3",
    "/api/thumb/0?ext=/etc/passwd",
    "/api/thumb/0?ext=../../etc/passwd",
    "/api/image/2/npz?array=/etc/passwd",
    "/api/image/0/%2Fetc%2Fpasswd",
    "/api/samples?ext=/etc/passwd",
    "/api/samples?ext=..%2F..%2Fetc%2Fpasswd",
    "/api/samples?offset=/etc/passwd",
    "/api/random?ext=/etc/passwd",
    "/api/nothing",
    "/api/field/0/%ff",
]


@pytest.mark.parametrize("path", REFUSED)
def test_paths_outside_the_dataset_are_refused(server, path):
    status, headers, body = get(server, path)
    assert 400 <= status < 500, (path, status)
    assert b"root:" not in body and "error" in json.loads(body)


def test_keys_are_looked_up_never_opened(server):
    for key in ("/etc/passwd", "../../etc/passwd", "%2Fetc%2Fpasswd"):
        assert get_json(server, f"/api/find?key={key}")["index"] is None


def test_only_get_and_loopback_host_names(server):
    assert get(server, "/api/info", method="POST")[0] == 405
    assert get(server, "/api/info", {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    assert get(server, "/api/info", {"Host": "localhost"})[0] == 200


# -- opening datasets ----------------------------------------------------------------------------------------


def test_no_index_is_written_beside_the_data_and_fresh_sidecars_are_used(tmp_path, dataset):
    shards = [shutil.copy(s, tmp_path) for s in dataset]
    with ViewerData(shards) as data:
        assert len(data) == SAMPLES
    assert not any(os.path.exists(sidecar_path(s)) for s in shards)
    index_shard(shards[0])
    with ViewerData(shards) as data:
        assert data.problems == [] and data.key(PER_SHARD - 1) == key_of(PER_SHARD - 1)
    with open(shards[0], "ab") as f:
        f.write(bytes(10240))  # the shard changes: its sidecar is stale
    with ViewerData(shards) as data:
        assert len(data) == SAMPLES and "stale" in data.problems[0] and "in memory" in data.problems[0]


def test_dataset_index_directory_glob_braces_and_compressed_shards(tmp_path, dataset):
    for s in dataset:
        shutil.copy(s, tmp_path)
    shutil.copy(pathlib.Path(dataset[0]).parent / "classes.txt", tmp_path)
    assert main(["index", "--quiet", str(tmp_path / "mixed-000000.tar"), str(tmp_path / "mixed-000001.tar"),
                 "--dataset", str(tmp_path / "mixed.json")]) == 0
    for inputs in ([str(tmp_path / "mixed.json")], [str(tmp_path)], [str(tmp_path / "mixed-*.tar")],
                   [str(tmp_path / "mixed-{000000..000001}.tar")]):
        with ViewerData(inputs) as data:
            assert len(data) == SAMPLES and data.classes == CLASSES, inputs
    (tmp_path / "c.tar.gz").write_bytes(gzip.compress(pathlib.Path(dataset[1]).read_bytes()))
    with ViewerData([str(tmp_path / "c.tar.gz")]) as data:
        assert len(data) == PER_SHARD and data.read(0, "txt") == sample(PER_SHARD)["txt"].encode()


def test_a_broken_shard_is_reported_not_fatal(tmp_path, dataset):
    (tmp_path / "broken.tar").write_bytes(b"this is not a tar file at all" * 40)
    with ViewerData([dataset[0], str(tmp_path / "broken.tar")]) as data:
        assert len(data) == PER_SHARD and "broken.tar" in data.problems[0]


@pytest.fixture
def http_dir(tmp_path):
    """A plain HTTP server (the standard library's) on a free port, serving ``tmp_path / "www"``."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_remote_shards_through_the_cache(http_dir, dataset, tmp_path):
    root, base = http_dir
    for s in dataset:
        shutil.copy(s, root)
    shutil.copy(pathlib.Path(dataset[0]).parent / "classes.txt", root)
    cache = tmp_path / "cache"
    urls = [f"{base}/mixed-{{000000..000001}}.tar"]
    with running(urls, cache_dir=str(cache)) as server:
        info = get_json(server, "/api/info")
        assert info["samples"] == SAMPLES and info["classes"] == CLASSES
        assert info["shards"][1]["url"] == f"{base}/mixed-000001.tar"
        assert fields_of(server, 20)["cls"]["name"] == CLASSES[20 % 3]
        assert get(server, "/api/thumb/20")[0] == 200
    assert len([n for n in os.listdir(cache) if n.endswith(".tar")]) == 2  # downloaded once, kept in the cache


def test_an_unknown_shard_fails_with_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing.tar"), "--check"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("shardstream: error:") and err.count("\n") == 1


# -- the command ---------------------------------------------------------------------------------------------


def test_view_check(dataset, capsys):
    assert main(["view", *dataset, "--check", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("http://127.0.0.1:") and f"ok: {SAMPLES} samples in 2 shards" in out
    assert main(["view", dataset[0], "--port", "70000"]) == 2
    assert main(["view", "-", "--check"]) == 2


#: ``python -m shardstream`` with Ctrl-C raising KeyboardInterrupt, as in a terminal. A process started with SIGINT
#: ignored (the suite run as a background job of a script: ``make test &``) passes that on to its children, and
#: Python then leaves SIGINT ignored: the viewer would rightly not stop (it timed out once in a fresh-clone run).
WITH_CTRL_C = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
               "runpy.run_module('shardstream', run_name='__main__', alter_sys=True)")


def test_view_serves_until_interrupted(dataset):
    import signal
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-c", WITH_CTRL_C, "view", *dataset], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "api/info", timeout=30) as answer:
            assert json.load(answer)["samples"] == SAMPLES
        proc.send_signal(signal.SIGINT)
        try:  # communicate drains stdout and stderr while it waits: a full pipe cannot block the viewer's exit
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"the viewer did not stop on SIGINT within 60 s; its stderr: {err[-3000:]}") from None
        assert proc.returncode == 0, err
        assert "viewing 30 samples of 2 shards" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nothing_readable_is_an_error(tmp_path, capsys):
    (tmp_path / "broken.tar").write_bytes(b"not a tar" * 200)
    assert main(["view", str(tmp_path / "broken.tar"), "--check"]) == 3
    assert "no shard could be read" in capsys.readouterr().err
