"""The viewer in a real browser: Debian's chromium driven by Playwright, on the generated dataset.

Skipped only when chromium is not installed (``apt-get install -y --no-install-recommends chromium``). Screenshots
go to the test's ``tmp_path`` and, when ``SHARDSTREAM_ARTIFACTS`` names a directory, there too.
"""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest
from viewer_helpers import CLASSES, EXPECTED, NPY_SAMPLES, SAMPLES, XSS_KEY, XSS_TEXT, needs_chromium

pytestmark = needs_chromium


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors, page.dialogs = [], []
    page.on("console", lambda m: m.type == "error" and page.errors.append(f"{m.text} {m.location.get('url')}"))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    yield page
    context.close()


@pytest.fixture
def shoot(tmp_path):
    """``shoot(page, name)``: a full-page screenshot in tmp_path (and in $SHARDSTREAM_ARTIFACTS)."""
    artifacts = os.environ.get("SHARDSTREAM_ARTIFACTS")

    def shoot(page, name: str) -> pathlib.Path:
        page.wait_for_function("() => [...document.querySelectorAll('#fields img')].every(i => i.complete)")
        path = tmp_path / f"viewer-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if artifacts:
            os.makedirs(artifacts, exist_ok=True)
            shutil.copy(path, os.path.join(artifacts, path.name))
        return path

    return shoot


def open_viewer(page, server, fragment: str = "") -> None:
    page.goto(server.url + fragment)
    page.wait_for_selector("body[data-ready]")


# page functions are passed as arrow functions: under the page's Content-Security-Policy (no 'unsafe-eval'),
# Playwright cannot evaluate a bare expression string while waiting

def loaded_images(page, selector: str) -> list[int]:
    """naturalWidth of every image matching ``selector``, once they have all finished loading."""
    page.wait_for_function(f"() => [...document.querySelectorAll({selector!r})].every(i => i.complete)")
    return page.eval_on_selector_all(selector, "imgs => imgs.map(i => i.naturalWidth)")


def wait_for_title(page, index: int) -> None:
    page.wait_for_function(f"() => document.querySelector('#detail-title').textContent.startsWith('#{index} ')")


def tile_indices(page) -> list[int]:
    return [int(n) for n in page.eval_on_selector_all(".tile", "ts => ts.map(t => t.dataset.index)")]


def test_grid_paging_and_filter(page, server, shoot):
    open_viewer(page, server, "#limit=24")
    assert tile_indices(page) == list(range(24))
    assert page.text_content("#summary") == f"{SAMPLES} samples in 2 shards, {len(CLASSES)} classes"
    widths = loaded_images(page, ".tile img")
    assert len(widths) == 23 and all(w > 0 for w in widths)  # every sample but one has an image
    assert page.text_content(f'.tile[data-index="{EXPECTED["plain"]}"] .nopic').endswith("caption of sample 11")
    assert page.text_content('.tile[data-index="2"] .label') == "<b>bird</b> (2)"  # a class name, as text
    shoot(page, "grid")

    page.click("#next")
    page.wait_for_function("() => document.querySelectorAll('.tile').length === 6")
    assert tile_indices(page) == list(range(24, 30)) and page.text_content("#range") == "25–30 of 30"
    assert page.is_disabled("#next") and not page.is_disabled("#prev")
    assert "offset=24" in page.url

    page.select_option("#ext", "npy")
    page.wait_for_function(f"() => document.querySelectorAll('.tile').length === {len(NPY_SAMPLES)}")
    assert tile_indices(page) == NPY_SAMPLES
    assert all(w > 0 for w in loaded_images(page, ".tile img"))
    shoot(page, "filtered-npy")
    assert not page.errors and not page.dialogs


def test_open_a_sample_and_its_fields(page, server, shoot):
    open_viewer(page, server)
    page.fill("#jump", "sample0013")
    page.press("#jump", "Enter")
    page.wait_for_selector("#detail:not([hidden])")
    assert page.text_content("#detail-title") == "#13  sample0013"
    field = lambda ext: f'.field[data-ext="{ext}"]'  # noqa: E731
    assert page.text_content(f"{field('cls')} .label-name") == CLASSES[13 % 3]
    assert '"name": "sample 13"' in page.text_content(f"{field('json')} pre")
    assert page.text_content(f"{field('txt')} pre") == "caption of sample 13"
    assert loaded_images(page, f"{field('png')} img") == [56]
    assert loaded_images(page, f"{field('npy')} img") == [48]
    assert "shape (32, 48) dtype uint8" in page.text_content(f"{field('npy')} .shape")
    shoot(page, "sample-13")

    page.click("#detail-prev")  # sample 12 in shard 0
    wait_for_title(page, 12)

    page.fill("#jump", str(EXPECTED["npz"]))  # a sample number
    page.click("#go")
    wait_for_title(page, EXPECTED["npz"])
    assert loaded_images(page, f"{field('npz')} img") == [16]
    assert "vec: shape (5,) dtype float32" in page.text_content(field("npz"))
    page.keyboard.press("ArrowRight")
    page.wait_for_selector(f"{field('wav')} audio")
    token = page.evaluate("state.info.token")
    assert page.eval_on_selector(f"{field('wav')} audio", "a => a.src").endswith(f"/api/field/3/wav?v={token}")
    page.wait_for_function(f"() => document.querySelector('{field('wav')} audio').readyState >= 1")  # metadata decoded
    page.keyboard.press("ArrowRight")
    page.wait_for_selector(field("pyd"))
    assert page.text_content(f"{field('pyd')} .note").startswith("unsafe: not decoded")
    shoot(page, "sample-unsafe")
    page.evaluate(f"openSample({EXPECTED['broken_json']})")
    page.wait_for_selector(f"{field('json')} .error")
    assert page.text_content(f"{field('json')} .error").startswith("does not decode: DecodeError")
    page.evaluate(f"openSample({EXPECTED['tiff']})")
    assert loaded_images(page, f"{field('tiff')} img") == [56]  # converted to PNG by the server
    page.click("#detail-close")
    assert page.is_hidden("#detail") and page.is_visible("#grid")
    assert not page.errors and not page.dialogs


def test_markup_in_keys_and_fields_is_text(page, server, shoot):
    open_viewer(page, server)
    page.fill("#jump", XSS_KEY)
    page.press("#jump", "Enter")
    page.wait_for_selector("#detail:not([hidden])")
    assert page.text_content("#detail-title") == f"#{EXPECTED['xss']}  {XSS_KEY}"
    assert page.text_content('.field[data-ext="txt"] pre') == XSS_TEXT
    assert page.evaluate("window.__xss") is None and page.query_selector("#fields script") is None
    page.click("#detail-close")
    assert page.get_attribute(f'.tile[data-index="{EXPECTED["xss"]}"]', "title").startswith(XSS_KEY)
    shoot(page, "markup-as-text")
    assert not page.dialogs and not page.errors


def test_random_and_unknown_key(page, server):
    open_viewer(page, server, "#ext=npy")
    assert page.input_value("#ext") == "npy"
    page.click("#random")
    page.wait_for_selector("#detail:not([hidden])")
    assert int(page.text_content("#detail-title").split()[0][1:]) in NPY_SAMPLES
    page.fill("#jump", "no such key")
    page.press("#jump", "Enter")
    page.wait_for_function("() => document.querySelector('#message').textContent.includes('no sample')")
    assert not page.errors
