"""The viewer's bug-finding features in Chromium, on the shapes dataset (tests/viewer/shapes.py): broken samples
marked and filtered, statistics, the sortable table and filters, boxes drawn from COCO-like JSON, the pipeline's
output (--decode rgb, --transform shapes:transform) beside the stored fields, and the URL restoring the view.

These tests also take the README's screenshots: each ``shoot(page, NAME)`` writes ``docs/img/viewer-NAME.png``
(deterministic data, viewport and state), so the pictures in the README are what the code shows today.
"""

from __future__ import annotations

import io
import pathlib

import numpy as np
import PIL.Image
import pytest
import shapes
from viewer_helpers import needs_chromium, running

from shardstream.viewer.transform import TransformedView, load_function

pytestmark = needs_chromium
DOCS_IMG = pathlib.Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture(scope="module")
def shapes_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    names = shapes.build_shapes(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # relative shard names: the page shows "shapes-000000.tar", the same on every run
        transform = TransformedView("rgb", load_function("shapes:transform"))
        with running(names, server_kw={"transformed": transform}) as server:
            yield server


@pytest.fixture
def page(browser, shapes_server):
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.server = shapes_server
    yield page
    context.close()


def visit(page, fragment: str) -> None:
    page.goto(page.server.url + fragment)
    page.wait_for_selector("body[data-ready]")


def settled(page) -> None:
    page.wait_for_function("() => document.querySelector('#grid').hidden || document.body.dataset.marks")
    page.wait_for_function("() => [...document.images].every(i => i.complete)")
    page.wait_for_function("() => !document.querySelector('#detail:not([hidden])') || "
                           "!!document.querySelector('#transformed:not([hidden])') || !state.sample.transformed")


def shoot(page, name: str) -> None:
    """A screenshot for the README, in a fixed state: images loaded, no hover, no focus, no caret."""
    settled(page)
    page.mouse.move(0, 0)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    shot = page.screenshot(caret="hide", animations="disabled")
    path = DOCS_IMG / f"viewer-{name}.png"
    if not path.exists() or not same_picture(path.read_bytes(), shot):
        path.write_bytes(shot)


def same_picture(old: bytes, new: bytes) -> bool:
    """Whether two screenshots show the same (Chromium's anti-aliasing may move a few pixels by a few levels
    from run to run: those do not rewrite the file, anything more does)."""
    a = np.asarray(PIL.Image.open(io.BytesIO(old)).convert("RGB"), dtype=np.int16)
    b = np.asarray(PIL.Image.open(io.BytesIO(new)).convert("RGB"), dtype=np.int16)
    if a.shape != b.shape:
        return False
    changed = np.abs(a - b).max(axis=-1) > 8
    return int(changed.sum()) <= a.shape[0] * a.shape[1] // 10000


def tiles(page) -> list[int]:
    return [int(n) for n in page.eval_on_selector_all(".tile", "ts => ts.map(t => t.dataset.index)")]


def test_broken_samples_are_marked_and_filtered(page):
    visit(page, "#view=grid&limit=24")
    page.wait_for_selector("body[data-marks]")  # the scan for the marks runs in the background
    settled(page)
    broken = [int(n) for n in page.eval_on_selector_all(".tile.broken", "ts => ts.map(t => t.dataset.index)")]
    assert broken == sorted(shapes.BROKEN)
    problems = {i: page.text_content(f'.tile[data-index="{i}"] .problem') for i in broken}
    assert problems[5].startswith(".png does not decode") and problems[9].startswith(".json does not decode")
    assert problems[14] == "missing an image (in 23 of 24 samples)"
    assert problems[19] == "image is 24×24, most are 96×96"
    page.check("#broken")
    page.wait_for_function("() => document.querySelectorAll('.tile').length === 4")
    assert tiles(page) == broken and "broken=1" in page.url
    page.click('.tile[data-index="9"]')  # beside the grid: what is wrong, and what the pipeline makes of it
    page.wait_for_selector("#transformed .error")
    assert page.text_content("#detail-problems").startswith(".json does not decode: DecodeError")
    assert page.text_content("#transformed .error").startswith("the transform failed: DecodeError")
    assert page.text_content('.field[data-ext="json"] .error').startswith("does not decode")
    shoot(page, "broken")
    assert not page.errors


def test_sample_beside_the_grid_with_boxes_and_pipeline_output(page):
    visit(page, "#view=grid&limit=24&sample=3")
    page.wait_for_selector("#transformed .part")
    grid, detail = page.locator("#grid").bounding_box(), page.locator("#detail").bounding_box()
    assert grid["x"] + grid["width"] <= detail["x"] and page.is_visible(".tile[data-index='3'].current")  # side by side
    rect = page.eval_on_selector(".overlay rect", "r => ['x', 'y', 'width', 'height'].map(a => +r.getAttribute(a))")
    assert rect == shapes.box_of(3) and page.text_content(".overlay text") == "square"
    # what the pipeline makes of it: the normalised tensor's range, the mask as a heat map
    tensor = shapes.transform({"png": np.asarray(PIL.Image.open(io.BytesIO(shapes.sample(3)["png"])),
                                                 np.float32) / 255, "json": {"annotations": []}, "cls": 0})["image"]
    image_range = page.text_content('#transformed [data-part="image"] .range')
    assert image_range.startswith(f"range [{round(float(tensor.min()), 4)}, {round(float(tensor.max()), 4)}]")
    assert page.text_content('#transformed [data-part="label"] pre') == "0"
    assert page.eval_on_selector('#transformed [data-part="mask"] img', "i => i.src").endswith("&heatmap=1")
    settled(page)
    widths = page.eval_on_selector_all("#transformed img", "imgs => imgs.map(i => i.naturalWidth)")
    assert widths == [96, 96]
    shoot(page, "sample")
    assert not page.errors


def test_statistics(page):
    visit(page, "#view=stats")
    page.wait_for_selector(".cards")
    labels = page.eval_on_selector_all(".card:first-child .row", "rs => rs.map(r => r.textContent)")
    assert labels == ["square (0)8", "disc (1)8", "ring (2)8"]
    assert page.text_content('table.fields tr[data-ext="png"] td:nth-child(2)') == "23 of 24"
    sizes = page.eval_on_selector_all(".card:nth-child(2) .row", "rs => rs.map(r => r.textContent)")
    assert sizes == ["96×96 21", "24×24 1"] or sizes == ["96×9621", "24×241"]
    kinds = page.text_content(".card:nth-child(3)")
    assert all(k in kinds for k in (".png does not decode", ".json does not decode", "missing an image",
                                     "odd image size"))
    shoot(page, "stats")
    assert not page.errors


def rows(page) -> list[int]:
    return [int(n) for n in page.eval_on_selector_all("#table tbody tr", "rs => rs.map(r => r.dataset.index)")]


def test_table_sorts_and_filters(page):
    visit(page, "#view=table")
    page.wait_for_selector("#table tbody tr")
    assert rows(page) == list(range(24))
    page.click('#table th[data-column="size.png"]')
    page.click('#table th[data-column="size.png"]')  # twice: descending
    page.wait_for_function("() => document.querySelector('#table th[data-column=\"size.png\"]').textContent.endsWith('▼')")
    sizes = {i: len(s["png"]) for i, s in ((i, shapes.sample(i)) for i in range(24)) if "png" in s}
    assert rows(page) == sorted(sizes, key=lambda i: -sizes[i]) + [14]  # the sample without .png comes last
    assert "sort=size.png&desc=1" in page.url
    shoot(page, "table")
    page.fill("#where", "id>=20")
    page.press("#where", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#table tbody tr').length === 4")
    page.select_option("#label", "1")  # disc
    page.wait_for_function("() => document.querySelectorAll('#table tbody tr').length === 1")
    assert rows(page) == [22]
    page.click("#clear")
    page.fill("#key", "shape001")
    page.press("#key", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#table tbody tr').length === 10")
    assert sorted(rows(page)) == list(range(10, 20))
    assert not page.errors


def test_back_button_and_links_restore_the_view(page):
    visit(page, "#view=grid&limit=24")
    page.click('.tile[data-index="2"]')
    page.wait_for_function("() => location.hash.includes('sample=2')")
    page.click("#tab-table")
    page.wait_for_selector("#table tbody tr")
    page.click('#table tbody tr[data-index="7"]')
    page.wait_for_function("() => document.querySelector('#detail-title').textContent.startsWith('#7 ')")
    link = page.url
    page.go_back()  # the table, sample 2 still open
    page.wait_for_function("() => document.querySelector('#detail-title').textContent.startsWith('#2 ')")
    assert page.is_visible("#table-view") and page.is_hidden("#grid")
    page.go_back()  # the grid with sample 2
    page.wait_for_function("() => !document.querySelector('#grid').hidden")
    assert page.text_content("#detail-title").startswith("#2 ")
    page.go_back()  # the grid alone
    page.wait_for_function("() => document.querySelector('#detail').hidden")
    # a link opens the same view in a new page
    other = page.context.new_page()
    other.goto(link)
    other.wait_for_selector("body[data-ready]")
    assert other.is_visible("#table-view") and other.text_content("#detail-title").startswith("#7 ")
    assert not page.errors
