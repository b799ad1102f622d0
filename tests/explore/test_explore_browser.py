"""End to end in headless Chromium (Debian's `chromium`, driven by Playwright): every page loads, the
patch slider changes the token count, a clicked patch becomes the query and the heatmaps change, the
runs table ranks by the clicked column, an upload is tokenised. Screenshots of every page are saved
in $VITLAB_EXPLORE_SCREENSHOTS (default: a pytest temporary folder)."""
import io
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vitlab.explore import serve_in_background

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the system browser is used)")
expect = sync_api.expect
CHROMIUM = os.environ.get("VITLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium chromium-driver (.ci/run does)",
                allow_module_level=True)

# A closed network refuses Chromium's background connections; these flags keep it from trying.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server(app):
    """The app served by uvicorn on a free loopback port, in a thread."""
    with serve_in_background(app) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("VITLAB_EXPLORE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser_page(server, tmp_path_factory):
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.errors = []
        page.on("pageerror", lambda err: page.errors.append(str(err)))
        page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
        page.set_default_timeout(20_000)
        page.goto(server)
        page.wait_for_selector("body[data-ready=true]")
        yield page
        browser.close()


def open_page(page, name: str) -> None:
    page.evaluate(f"location.hash = '#{name}'")
    page.wait_for_selector(f"#page-{name}.active[data-state=ready]")


def settle(page, selector: str) -> None:
    """Wait until the latest request of the element's page has been drawn."""
    page.wait_for_selector(f"{selector}[data-state=ready]")


def test_tokens_slider_changes_the_token_count(browser_page, shots):
    page = browser_page
    open_page(page, "tokens")
    expect(page.locator("#token-count")).to_have_text("16")
    assert page.input_value("#patch-slider") == "2"
    page.locator("#patch-slider").fill("4")
    expect(page.locator("#token-count")).to_have_text("4")
    assert page.text_content("#token-entries") == "16"
    page.locator("#patch-slider").fill("3")
    expect(page.locator("#token-count")).to_have_text("9")
    assert "zero-padded to 9×9" in page.text_content("#token-grid")
    page.screenshot(path=shots / "tokens.png", full_page=True)
    assert page.errors == []


def canvas_pixels(page, selector: str) -> str:
    return page.eval_on_selector(selector, "canvas => canvas.toDataURL()")


def test_clicking_a_patch_makes_it_the_query(browser_page, shots):
    page = browser_page
    open_page(page, "attention")
    page.wait_for_selector("#attn-heads figure")
    page.locator("#attn-temperature").fill("-1")                     # T = 0.1: sharp, so queries differ clearly
    expect(page.locator("#attn-scale")).to_have_text(re.compile(r"temperature 0\.1$"))
    settle(page, "#page-attention")
    before = canvas_pixels(page, "#attn-heads figure canvas"), canvas_pixels(page, "#attn-bars")
    page.locator("#attn-image").click(position={"x": 105, "y": 105})   # 4x4 grid of 70-pixel cells: patch 5
    page.wait_for_selector("#attn-heads[data-query='5']")
    settle(page, "#page-attention")
    assert page.text_content("#attn-query-caption").startswith("query: patch 5")
    after = canvas_pixels(page, "#attn-heads figure canvas"), canvas_pixels(page, "#attn-bars")
    assert after[0] != before[0] and after[1] != before[1]
    assert len(page.query_selector_all("#attn-heads figure")) == 16
    settle(page, "#attn-maps")
    assert sorted(page.eval_on_selector_all("#attn-maps figure", "fs => fs.map(f => f.dataset.method)")) == \
        ["gradient", "occlusion", "rollout"]
    page.screenshot(path=shots / "attention.png", full_page=True)
    assert page.errors == []


def test_mechanics_and_cost_pages_draw(browser_page, shots):
    page = browser_page
    open_page(page, "mechanics")
    page.wait_for_selector("#softmax-facts dd")
    flat = page.text_content("#softmax-facts")
    page.locator("#softmax-temperature").fill("-1")
    expect(page.locator("#softmax-facts")).not_to_have_text(flat)
    page.locator("#mixing-bandwidth").fill("1.5")
    expect(page.locator("#mixing-bandwidth-value")).to_have_text("31.623")
    page.locator("#pos-map").click(position={"x": 225, "y": 225})           # 8x8 grid of 30-pixel cells
    expect(page.locator("#pos-ref-caption")).to_have_text(re.compile("^similarity to patch 63,"))
    page.screenshot(path=shots / "mechanics.png", full_page=True)
    open_page(page, "cost")
    page.wait_for_selector("#cost-table tr:nth-child(2)")
    assert page.text_content("#cost-table tr:nth-child(2) td") == "16×16"
    page.screenshot(path=shots / "cost.png", full_page=True)
    assert page.errors == []


def labels(page, table: str) -> list[str]:
    return page.eval_on_selector_all(f"{table} tbody tr", "rows => rows.map(r => r.dataset.label)")


def test_runs_table_ranks_by_the_clicked_column(browser_page, client, shots):
    page = browser_page
    open_page(page, "runs")
    page.wait_for_selector("#run-detail[data-state=ready]")
    page.click("#runs-table th[data-key=best_val_acc]")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc, highest first"))
    ranked = client.get("/api/runs", params={"sort": "best_val_acc"}).json()["table"]["rows"]
    expected = [r["values"]["run"] for r in ranked]
    assert labels(page, "#runs-table") == expected
    page.click("#runs-table th[data-key=best_val_acc]")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc, lowest first"))
    assert labels(page, "#runs-table") == expected[::-1]
    page.click("#runs-table tbody tr[data-label=study]")
    expect(page.locator("#run-title")).to_have_text("study (compare)")
    page.click("#run-table th[data-key=params]")
    expect(page.locator("#run-table caption")).to_have_text(re.compile("^ranked by params"))
    ranked = client.get("/api/runs/study", params={"sort": "params"}).json()["table"]["rows"]
    assert labels(page, "#run-table") == [r["values"]["label"] for r in ranked]
    for image in page.locator("#run-figures img").all():
        expect(image).to_have_js_property("complete", True)
        assert image.evaluate("img => img.naturalWidth") > 0
    page.screenshot(path=shots / "runs.png", full_page=True)
    assert page.errors == []


def test_an_uploaded_image_is_tokenised(browser_page, tmp_path):
    page = browser_page
    open_page(page, "tokens")
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(2).integers(0, 256, (40, 24, 3), dtype=np.uint8)).save(buffer, "PNG")
    page.set_input_files("#picker-upload",
                         files=[{"name": "mine.png", "mimeType": "image/png", "buffer": buffer.getvalue()}])
    expect(page.locator("#picker-current")).to_have_text(re.compile(r"^mine\.png \(40×24"))
    expect(page.locator("#token-count")).to_have_text("28")                     # patch 6: a 7 x 4 grid
    assert page.text_content("#token-grid") == "7 × 4 (image 40×24 zero-padded to 42×24)"
    assert page.errors == []
