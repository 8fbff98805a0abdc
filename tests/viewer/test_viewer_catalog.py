"""The viewer's scan, filters, table, boxes and transforms through the JSON API (no browser), on the shapes
dataset, and the ``view`` command's --decode/--transform options."""

from __future__ import annotations

import numpy as np
import pytest
import shapes
from viewer_helpers import get, get_json, running

from shardstream.cli import main
from shardstream.viewer.boxes import boxes_of
from shardstream.viewer.transform import TransformedView


@pytest.fixture(scope="module")
def shapes_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes-api")
    return root, [str(root / n) for n in shapes.build_shapes(root)]


def failing(sample):
    if sample["__key__"] == "shape0002":
        raise ValueError("no luck with sample 2")
    return (np.zeros((2, 3), np.float32), sample["__key__"])


def test_filters_table_and_problems(shapes_dir):
    _, shards = shapes_dir
    with running(shards) as server:
        broken = get_json(server, "/api/samples?broken=1&limit=100")
        assert [i["index"] for i in broken["items"]] == sorted(shapes.BROKEN) and broken["total"] == 4
        assert [i["index"] for i in get_json(server, "/api/samples?label=disc&key=shape001")["items"]] == [10, 13, 16, 19]
        assert get_json(server, "/api/samples?where=split%3Dval")["total"] == 6  # 0, 4, 8... (9 has no JSON)
        assert get_json(server, "/api/samples?ext=png&where=width%3C50")["total"] == 1
        table = get_json(server, "/api/table?sort=id&desc=1&limit=3")
        assert [r[0] for r in table["rows"]] == [23, 22, 21] and "size.png" in table["columns"]
        assert get(server, "/api/table?sort=nope")[0] == 400
        assert get(server, "/api/samples?where=nonsense")[0] == 400
        assert get_json(server, "/api/random?broken=1")["index"] in shapes.BROKEN
        assert get(server, "/api/random?key=zzz")[0] == 404
        assert get(server, "/api/transformed/0")[0] == 404  # no transform given


def test_transform_failures_are_shown_not_raised(shapes_dir):
    _, shards = shapes_dir
    with running(shards, server_kw={"transformed": TransformedView(None, failing)}) as server:
        ok = get_json(server, "/api/transformed/1")
        assert [(p["name"], p["kind"]) for p in ok["parts"]] == [("0", "array"), ("1", "text")]
        assert ok["parts"][0]["heatmap"] and ok["parts"][0]["min"] == 0.0
        assert get(server, "/api/transformed/1/0?heatmap=1")[1]["Content-Type"] == "image/png"
        bad = get_json(server, "/api/transformed/2")
        assert bad["error"] == "ValueError: no luck with sample 2" and bad["parts"] == []
        assert get(server, "/api/transformed/1/9")[0] == 404


def test_yolo_and_points():
    found = boxes_of({"yolo": [[0.5, 0.5, 1.0, 0.5]], "points": [[3, 4]], "keypoints": [1, 2, 2, 5, 6, 0]}, 10, 20)
    assert found["boxes"] == [{"x": 0.0, "y": 5.0, "w": 10.0, "h": 10.0, "label": None}]
    assert found["points"] == [{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.0}]  # the invisible keypoint is skipped
    assert boxes_of({"bbox": "oops", "annotations": [None, {"bbox": [1, "x", 2, 3]}]}, 5, 5) == {"boxes": [], "points": []}


def test_view_command_with_decode_and_transform(shapes_dir, monkeypatch, capsys, tmp_path):
    _, shards = shapes_dir
    (tmp_path / "myfeatures.py").write_text("def f(sample):\n    return {'x': sample['png'].mean(axis=-1)}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["view", shards[0], "--decode", "rgb", "--transform", "myfeatures:f", "--check"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("--decode rgb then --transform f: x")
    assert main(["view", shards[0], "--transform", "myfeatures:missing", "--check"]) == 2
    assert "has no 'missing'" in capsys.readouterr().err
    assert main(["view", shards[0], "--transform", "no_such_module_here:f", "--check"]) == 2
    assert main(["view", shards[0], "--decode", "nonsense", "--check"]) == 2
