"""The pages' S3 parts run against a real S3 service (the suite's Ceph RadosGW), configured as the page tells users.

A page's python blocks after a ``<!-- needs: s3 -->`` line (tests/test_docs.py runs the part before it) write to
and read from ``s3://my-bucket/``: here the whole page runs in order, with the bucket created on RadosGW and the
credentials and endpoint given through the AWS variables the page names. Skips, saying why, where RadosGW cannot
start (see tests/io/remote_servers.py).
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from remote_servers import RGW_KEYS, boto3_client

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ["docs/quickstart.md"]
BUCKET = "my-bucket"


def _test_docs():
    spec = importlib.util.spec_from_file_location("_test_docs", ROOT / "tests" / "test_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_on_s3(page, radosgw, tmp_path, monkeypatch):
    pytest.importorskip("s3fs", reason="pip install 'shardstream[s3]'")
    pytest.importorskip("torch", reason="pip install 'shardstream[torch]'")
    docs = _test_docs()
    path = ROOT / page
    assert docs.NEEDS.search(path.read_text()), f"{page} has no S3 part"
    client = boto3_client(radosgw.endpoint)
    client.create_bucket(Bucket=BUCKET)
    # what the page tells users to set
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", RGW_KEYS[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", RGW_KEYS[1])
    monkeypatch.setenv("AWS_ENDPOINT_URL", radosgw.endpoint)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for i, body in enumerate(docs.blocks(path, "python", services=True)):
        try:
            exec(compile(body, f"{path.name}[python block {i}]", "exec"), namespace)
        except Exception as e:  # pragma: no cover - failure path
            raise AssertionError(f"{page} python block {i} failed:\n{body}") from e
    listed = client.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert sorted(o["Key"] for o in listed) == [f"digits/digits-{n:06d}.tar" for n in range(3)]
