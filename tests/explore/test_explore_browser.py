"""End to end in headless Chromium (Debian's `chromium`, driven by Playwright): every page loads, the
patch slider changes the token count, a chosen patch becomes the query and the heatmaps change, the
runs table ranks by the chosen column, an upload and a drawing are tokenised, the 1-D position and
synthetic attention panels follow their controls, a click on a held-out shape overlays its mask;
linked views, colour bars and legends, keyboard use, the URL state, the errors beside their controls,
crisp canvases at any pixel ratio, no sideways scrolling at 390 px and an accessibility audit
(axe-core) of every page.

Screenshots of every page at desktop and phone widths are saved in $VITLAB_EXPLORE_SCREENSHOTS
(default: a pytest temporary folder); `VITLAB_EXPLORE_SCREENSHOTS=docs/screenshots` refreshes the
README's Segment pages (`python docs/screenshots/take.py` takes the others, on better-trained models)."""

import io
import re

import numpy as np
import pytest
from browser_support import (
    PAGES,
    SCREENS,
    SHAPES_SIDE,
    canvas_pixels,
    expect,
    highlight,
    new_page,
    open_page,
    read_the_image_itself,
    settle,
)
from PIL import Image

from vitlab.analysis.cost import ATTENTION_COSTS
from vitlab.explore import ExploreConfig, create_app, serve_in_background

pytestmark = pytest.mark.slow  # a real browser: outside the fast subset


def test_tokens_slider_changes_the_token_count(browser_page, shots):
    page = browser_page
    open_page(page, "tokens")
    expect(page.locator("#token-count")).to_have_text("16")
    assert page.input_value("#patch-slider") == "2" and page.input_value("#tokens-reader") == ""
    page.locator("#patch-slider").fill("4")
    expect(page.locator("#token-count")).to_have_text("4")
    assert page.text_content("#token-entries") == "16"
    page.locator("#patch-slider").fill("3")
    expect(page.locator("#token-count")).to_have_text("9")
    assert "zero-padded to 9×9" in page.text_content("#token-grid")
    expect(page.locator("#announce")).to_have_text("patch 3: 9 tokens of 9 values, 81 attention entries")
    assert page.get_attribute("#announce", "aria-live") == "polite"
    assert page.title() == "Tokens — vitlab explore"
    assert page.errors == []


def test_a_patch_its_tile_and_its_token_row_light_up_together(browser_page):
    page = browser_page
    open_page(page, "tokens")
    read_the_image_itself(page)
    page.locator("#patch-slider").fill("2")
    expect(page.locator("#token-count")).to_have_text("16")
    page.hover("#tokens-pixels", position={"x": 100, "y": 165})  # 4x4 cells of 65 px: patch 9
    for canvas in ("#tokens-pixels", "#tokens-patches", "#tokens-matrix"):
        assert highlight(page, canvas) == "9"
    box = page.eval_on_selector("#tokens-matrix", "c => [c.dataset.width, c.dataset.height]")
    assert box == ["260", "260"]
    page.hover("#tokens-matrix", position={"x": 150, "y": 22})  # the first token row, below the axis labels
    assert highlight(page, "#tokens-pixels") == "0" and highlight(page, "#tokens-patches") == "0"
    page.focus("#tokens-patches")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert highlight(page, "#tokens-matrix") == "5" and highlight(page, "#tokens-pixels") == "5"
    assert page.get_attribute("#tokens-patches", "aria-valuetext") == "patch 5: row 1, column 1"
    assert page.errors == []


def test_cost_ratios_have_one_format(browser_page):
    page = browser_page
    open_page(page, "tokens")
    read_the_image_itself(page)
    page.locator("#patch-slider").fill("8")  # 1 token: 1/256 of the reference
    expect(page.locator("#token-count")).to_have_text("1")
    assert page.text_content("#token-ratio").startswith("0.00391× the entries of 28×28")
    formats = page.evaluate("""async () => { const f = await import('/static/js/format.js');
        return [f.ratio(15006.25), f.ratio(3841600), f.ratio(2.25), f.count(3841600), f.prob(0.0625)]; }""")
    assert formats == ["15,006×", "3,841,600×", "2.25×", "3,841,600", "0.0625"]


def test_clicking_a_patch_makes_it_the_query(browser_page):
    page = browser_page
    open_page(page, "attention")
    page.wait_for_selector("#attn-heads figure")
    page.locator("#attn-temperature").fill("-1")  # T = 0.1: sharp, so queries differ clearly
    expect(page.locator("#attn-scale")).to_have_text(re.compile(r"temperature 0\.1$"))
    settle(page, "#page-attention")
    before = canvas_pixels(page, "#attn-heads figure canvas"), canvas_pixels(page, "#attn-bars")
    page.locator("#attn-image").click(position={"x": 105, "y": 105})  # 4x4 grid of 70-pixel cells: patch 5
    page.wait_for_selector("#attn-heads[data-query='5']")
    settle(page, "#page-attention")
    assert page.text_content("#attn-query-caption").startswith("query: patch 5")
    after = canvas_pixels(page, "#attn-heads figure canvas"), canvas_pixels(page, "#attn-bars")
    assert after[0] != before[0] and after[1] != before[1]
    assert len(page.query_selector_all("#attn-heads figure")) == 16
    settle(page, "#attn-maps")
    assert sorted(page.eval_on_selector_all("#attn-maps figure", "fs => fs.map(f => f.dataset.method)")) == [
        "gradient",
        "occlusion",
        "rollout",
    ]
    assert page.title() == "Attention — vitlab explore"
    assert page.errors == []


def test_a_patch_lights_up_on_the_image_the_bars_every_head_and_map(browser_page, client):
    page = browser_page
    open_page(page, "attention")
    settle(page, "#attn-maps")
    prefix = client.get("/api/info").json()["models"][0]["prefix_tokens"]
    keys = prefix + 16
    page.hover("#attn-image", position={"x": 245, "y": 35})  # patch 3
    assert highlight(page, "#attn-bars") == str(prefix + 3)
    heads = page.eval_on_selector_all("#attn-heads canvas.heatmap", "cs => cs.map(c => c.dataset.highlight)")
    maps = page.eval_on_selector_all("#attn-maps canvas.heatmap", "cs => cs.map(c => c.dataset.highlight)")
    assert heads == ["3"] * 16 and maps == ["3"] * 3
    geometry = page.evaluate(
        "() => { const r = document.querySelector('#attn-bars').getBoundingClientRect(); return [r.width, r.height]; }"
    )
    step = (geometry[0] - 48) / keys  # 40 px of axis, 8 px margin
    page.hover("#attn-bars", position={"x": 40 + step * (prefix + 10.5), "y": 100})
    assert highlight(page, "#attn-image") == "10" and highlight(page, "#attn-bars") == str(prefix + 10)
    page.mouse.move(5, 5)
    assert highlight(page, "#attn-image") == ""
    assert page.errors == []


def test_the_query_and_the_head_are_chosen_from_the_keyboard(browser_page):
    page = browser_page
    open_page(page, "attention")
    page.focus("#attn-image")
    for key in ("Home", "ArrowRight", "ArrowRight", "ArrowDown", "Enter"):
        page.keyboard.press(key)
    page.wait_for_selector("#attn-heads[data-query='6']")
    settle(page, "#page-attention")
    page.focus("#attn-heads button[tabindex='0']")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    focused = page.evaluate(
        "() => { const f = document.activeElement.closest('figure'); return [f.dataset.layer, f.dataset.head]; }"
    )
    assert focused == ["2", "1"]
    page.keyboard.press("Enter")
    expect(page.locator("#attn-bars-caption")).to_have_text(re.compile("^layer 2, head 1:"))
    assert page.get_attribute("#attn-heads figure[data-layer='2'][data-head='1'] button", "aria-pressed") == "true"
    assert page.errors == []


def test_heatmaps_have_colour_bars_on_honest_scales(browser_page):
    page = browser_page
    open_page(page, "attention")
    settle(page, "#attn-maps")
    page.locator("#attn-temperature").fill("1")  # T = 10: every weight near 1/17
    settle(page, "#page-attention")
    bars = page.eval_on_selector_all(
        "canvas[data-colourbar]",
        """cs => cs.filter(c => c.offsetParent).map(c => {
        const bar = document.getElementById(c.dataset.colourbar);
        return [bar.dataset.lo, bar.dataset.hi, bar.dataset.map, bar.offsetParent !== null]; })""",
    )
    assert len(bars) == 16 + 3 + 1 + 2 and all(bar[3] for bar in bars)  # heads, maps, input, layer and position grids
    scale = page.locator("#attn-heads-scale")
    assert (scale.get_attribute("data-lo"), scale.get_attribute("data-hi")) == ("0", "1")  # fixed: probabilities
    occlusion = page.locator("#map-scale-occlusion")
    assert occlusion.get_attribute("data-map") == "diverging"
    assert float(occlusion.get_attribute("data-lo")) == -float(occlusion.get_attribute("data-hi"))
    page.check("#attn-auto")
    stretched = float(page.get_attribute("#attn-heads-scale", "data-hi"))
    assert 0 < stretched < 0.2 and "stretched" in page.text_content("#attn-scale")
    page.uncheck("#attn-auto")
    page.locator("#attn-temperature").fill("0")
    settle(page, "#page-attention")
    assert page.errors == []


def test_canvases_are_crisp_at_any_pixel_ratio(browser, server):
    page = new_page(browser, server + "#attention", scale=2)
    page.wait_for_selector("#page-attention.active[data-state=ready]")
    settle(page, "#attn-maps")
    sizes = page.eval_on_selector_all(
        "canvas[data-width]",
        """cs => cs.filter(c => c.offsetParent)
        .map(c => [c.width / Number(c.dataset.width), c.height / Number(c.dataset.height)])""",
    )
    assert len(sizes) > 20 and all(size == [2, 2] for size in sizes)
    assert page.errors == []
    page.close()


def test_legends_sit_beside_the_plot_toggle_series_and_name_coinciding_lines(browser_page):
    page = browser_page
    open_page(page, "cost")
    page.select_option("#cost-metric", "flops")
    note = page.locator("#cost-legend .legend-note")
    expect(note).to_have_text(re.compile("^window, linear, lowrank, latent coincide"))
    legend = page.locator("#cost-legend button.series")
    assert legend.count() == len(ATTENTION_COSTS)  # one series per kind of attention the cost model prices
    colours = page.evaluate("async () => (await import('/static/js/draw.js')).SERIES")
    assert len(set(colours)) >= 12
    chart, box = page.locator("#cost-chart").bounding_box(), page.locator("#cost-legend").bounding_box()
    assert box["x"] >= chart["x"] + chart["width"] or box["y"] >= chart["y"] + chart["height"]
    before = canvas_pixels(page, "#cost-chart")
    legend.first.click()
    assert legend.first.get_attribute("aria-pressed") == "false" and canvas_pixels(page, "#cost-chart") != before
    legend.first.click()
    assert canvas_pixels(page, "#cost-chart") == before
    page.select_option("#cost-metric", "entries")
    settle(page, "#page-cost")
    assert page.text_content("#cost-table tbody tr:first-child td") == "16×16"
    assert page.errors == []


def test_mechanics_pages_draw_and_keep_the_reference_patch(browser_page):
    page = browser_page
    open_page(page, "mechanics")
    page.wait_for_selector("#softmax-facts dd")
    flat = page.text_content("#softmax-facts")
    page.locator("#softmax-temperature").fill("-1")
    expect(page.locator("#softmax-facts")).not_to_have_text(flat)
    assert page.get_attribute("#softmax-temperature", "aria-valuetext") == "temperature 0.1"
    page.locator("#mixing-bandwidth").fill("1.5")
    expect(page.locator("#mixing-bandwidth-value")).to_have_text("31.623")
    assert page.get_attribute("#mixing-bandwidth", "aria-valuetext") == "bandwidth 31.623"
    page.locator("#pos-map").click(position={"x": 225, "y": 225})  # 8x8 grid of 30-pixel cells
    expect(page.locator("#pos-ref-caption")).to_have_text(re.compile("^similarity to patch 63,"))
    page.select_option("#pos-dim", "32")
    settle(page, "#positions-panel")
    expect(page.locator("#pos-ref-caption")).to_have_text(re.compile("^similarity to patch 63,"))
    page.locator("#pos-grid").fill("4")
    expect(page.locator("#pos-ref-caption")).to_have_text(re.compile("^similarity to patch 15,"))  # the corner
    page.locator("#pos-grid").fill("8")
    page.select_option("#pos-kind", "learned")  # the model's 4x4 grid
    expect(page.locator("#pos-grid-value")).to_have_text("4")
    assert page.input_value("#pos-grid") == "4" and page.is_disabled("#pos-grid")
    settle(page, "#positions-panel")
    assert page.text_content("#pos-facts").startswith("positions4 × 4 grid")
    page.select_option("#pos-kind", "sincos")
    expect(page.locator("#pos-grid-value")).to_have_text("8")
    assert page.errors == []


def test_models_with_the_same_name_are_told_apart_by_their_paths(browser_page):
    labels = browser_page.evaluate("""async () => (await import('/static/js/api.js')).modelLabels([
        {model: 'vit-digits', pos_embed: 'learned', file: 'runs/a/best/model.safetensors'},
        {model: 'vit-digits', pos_embed: 'learned', file: 'runs/b/best/model.safetensors'},
        {model: 'vit-digits', pos_embed: 'sincos', file: 'runs/c'}])""")
    assert labels == [
        "vit-digits (learned) — a/best/model.safetensors",
        "vit-digits (learned) — b/best/model.safetensors",
        "vit-digits (sincos)",
    ]


@pytest.fixture(scope="module")
def bare_server(explore_config):
    """An explorer with no checkpoint (and the fixture's runs)."""
    with serve_in_background(create_app(ExploreConfig(runs=explore_config.runs))) as url:
        yield url + "/"


def test_without_a_checkpoint_learned_positions_say_why_beside_the_controls(browser, bare_server):
    page = new_page(browser, bare_server + "#mechanics?kind=learned")
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.wait_for_selector("#positions-panel[data-state=ready]")
    assert page.input_value("#pos-kind") == "sincos" and page.is_disabled("#pos-kind option[value=learned]")
    page.eval_on_selector("#pos-kind", "s => { s.value = 'learned'; s.dispatchEvent(new Event('input')); }")
    page.wait_for_selector("#positions-panel[data-state=error]")
    error = page.locator("#positions-error")
    expect(error).to_have_text(re.compile("choose a model"))
    assert error.get_attribute("role") == "alert"
    assert page.eval_on_selector("#positions-panel .result", "r => getComputedStyle(r).visibility") == "hidden"
    controls, message = page.locator("#positions-panel .controls").bounding_box(), error.bounding_box()
    assert 0 <= message["y"] - (controls["y"] + controls["height"]) < 40
    assert not any("model=" in url for url in asked if "/api/mechanics/positions" in url)
    assert all(e.startswith("Failed to load resource: the server responded with a status of 400") for e in page.errors)
    page.close()


def labels(page, table: str) -> list[str]:
    return page.eval_on_selector_all(f"{table} tbody tr", "rows => rows.map(r => r.dataset.label)")


def test_runs_table_ranks_by_the_clicked_column(browser_page, client):
    page = browser_page
    open_page(page, "runs")
    page.wait_for_selector("#run-detail[data-state=ready]")
    page.click("#runs-table th[data-key=best_val_acc]")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc, highest first"))
    ranked = client.get("/api/runs", params={"sort": "best_val_acc"}).json()["table"]["rows"]
    expected = [r["values"]["run"] for r in ranked]
    assert labels(page, "#runs-table") == expected
    page.focus("#runs-table th[data-key=best_val_acc] button")
    page.keyboard.press("Enter")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc, lowest first"))
    assert page.get_attribute("#runs-table th[data-key=best_val_acc]", "aria-sort") == "ascending"
    assert labels(page, "#runs-table") == [*expected[:2][::-1], "prompt"]  # a run without accuracy stays last
    page.focus("#runs-table tbody tr[data-label=study] button.link")
    page.keyboard.press("Enter")
    expect(page.locator("#run-title")).to_have_text("study (compare)")
    page.click("#run-table th[data-key=params]")
    expect(page.locator("#run-table caption")).to_have_text(re.compile("^ranked by params"))
    ranked = client.get("/api/runs/study", params={"sort": "params"}).json()["table"]["rows"]
    assert labels(page, "#run-table") == [r["values"]["label"] for r in ranked]
    for image in page.locator("#run-figures img").all():
        expect(image).to_have_js_property("complete", True)
        assert image.evaluate("img => img.naturalWidth") > 0
    page.click("#runs-table tbody tr[data-label=digits-vit] button.link")
    expect(page.locator("#run-links a")).to_have_text("Open its checkpoint on the Attention page")
    page.click("#run-links a")
    page.wait_for_selector("#page-attention.active[data-state=ready]")
    assert page.input_value("#attn-model") == "0"
    assert page.errors == []


def test_an_uploaded_image_is_tokenised(browser_page):
    page = browser_page
    open_page(page, "tokens")
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(2).integers(0, 256, (40, 24, 3), dtype=np.uint8)).save(buffer, "PNG")
    page.set_input_files(
        "#picker-upload", files=[{"name": "mine.png", "mimeType": "image/png", "buffer": buffer.getvalue()}]
    )
    expect(page.locator("#picker-current")).to_have_text(re.compile(r"^mine\.png \(40×24"))
    expect(page.locator("#token-count")).to_have_text("16")  # as the model reads it: 8x8 grey, patch 2
    assert page.input_value("#tokens-reader") == "0" and page.is_disabled("#patch-slider")
    expect(page.locator("#tokens-reading")).to_contain_text("RGB image RGB to greyscale, resized from 40×24 to 8×8")
    read_the_image_itself(page)
    page.locator("#patch-slider").fill("6")
    expect(page.locator("#token-count")).to_have_text("28")  # patch 6: a 7 x 4 grid
    assert page.text_content("#token-grid") == "7 × 4 (image 40×24 zero-padded to 42×24)"
    assert page.errors == []


def test_a_drawn_digit_is_read_and_shown_as_the_model_sees_it(browser, server):
    page = new_page(browser, server + "#attention")
    settle(page, "#page-attention")
    box = page.locator("#pad").bounding_box()
    page.mouse.move(box["x"] + 56, box["y"] + 15)
    page.mouse.down()
    for y in range(15, 100, 5):  # a vertical stroke: a "1"
        page.mouse.move(box["x"] + 56, box["y"] + y)
    page.mouse.up()
    expect(page.locator("#picker-current")).to_have_text(re.compile(r"^your drawing \(112×112, greyscale"))
    page.wait_for_function("() => location.hash.includes('ref=upload')")
    settle(page, "#page-attention")
    expect(page.locator("#seen-steps")).to_contain_text("resized (bilinear) from 112×112 to 8×8")
    assert "colour to grey" not in page.text_content("#seen-steps")  # the pad's drawing is grey already
    page.check("#attn-invert")  # black ink on white: far off
    settle(page, "#page-attention")
    expect(page.locator("#seen-warning")).to_be_visible()
    expect(page.locator("#seen-warning")).to_contain_text("far from the images the model was trained on")
    expect(page.locator("#seen-warning")).to_contain_text("untick 'invert the image'")  # not "try" it: it is on
    assert "try 'invert the image'" not in page.text_content("#seen-warning")
    assert page.errors == []
    page.close()


def test_the_view_is_kept_in_the_url(browser, server):
    exact = new_page(browser, server + "#attention?ref=digits:7&t=0.3")
    settle(exact, "#page-attention")
    assert exact.text_content("#attn-temperature-value") == "0.3"  # not the slider's nearest step, 0.302
    assert exact.text_content("#attn-scale").endswith("temperature 0.3") and "t=0.3&" in exact.url + "&"
    exact.close()
    page = new_page(browser, server + "#attention?ref=digits:7&query=5&head=1.2&t=0.501")
    settle(page, "#page-attention")
    assert page.text_content("#attn-query-caption").startswith("query: patch 5")
    assert page.text_content("#attn-bars-caption").startswith("layer 1, head 2:")
    assert page.text_content("#attn-temperature-value") == "0.501"
    assert page.text_content("#picker-current").startswith("digits #7")
    page.locator("#attn-image").click(position={"x": 35, "y": 35})  # patch 0
    page.wait_for_selector("#attn-heads[data-query='0']")
    url = page.url
    assert "query=0" in url and "ref=digits%3A7" in url
    page.goto(server + "#tokens?ref=digits:7&patch=4")
    page.wait_for_selector("#page-tokens.active[data-state=ready]")
    expect(page.locator("#token-count")).to_have_text("4")
    page.reload()
    page.wait_for_selector("#page-tokens.active[data-state=ready]")
    expect(page.locator("#token-count")).to_have_text("4")
    assert page.text_content("#picker-current").startswith("digits #7")
    assert page.errors == []
    page.close()


# Visible canvases with no text alternative: neither a name of their own (an image or a control) nor inside an
# element hidden from assistive technology (an overlay, a thumbnail or head inside a labelled button).
UNLABELLED_CANVASES = """() => [...document.querySelectorAll("canvas")]
    .filter((c) => c.getClientRects().length && getComputedStyle(c).visibility !== "hidden")
    .filter((c) => !c.getAttribute("aria-label") && !c.closest("[aria-hidden=true]"))
    .map((c) => c.id || c.parentElement.id || c.parentElement.className)"""
# Visible controls smaller than 24 x 24 CSS pixels (WCAG 2.2's target size).
SMALL_TARGETS = """() => [...document.querySelectorAll(
    "button, select, input, summary, a[href], [role=slider], [tabindex='0']")]
    .filter((e) => e.getClientRects().length && getComputedStyle(e).visibility !== "hidden")
    .filter((e) => e.getBoundingClientRect().width * e.getBoundingClientRect().height > 0)  // shown (not folded)
    .filter((e) => !e.classList.contains("skip"))
    .filter((e) => { const r = e.getBoundingClientRect(); return r.width < 24 || r.height < 24; })
    .map((e) => `${e.tagName.toLowerCase()}#${e.id || e.className}: ${Math.round(e.getBoundingClientRect().width)}x` +
      `${Math.round(e.getBoundingClientRect().height)}`)"""


def drive(page, name: str, segment_target) -> None:
    """Bring page ``name`` to a state worth auditing: its figures drawn, some from the keyboard."""
    if name == "attention":  # patch 9 as the query, lit from the keyboard
        page.focus("#attn-image")
        for key in ["Home", *["ArrowRight"] * 9, "Enter"]:
            page.keyboard.press(key)
        page.wait_for_selector("#attn-heads[data-query='9']")
        settle(page, "#attn-maps")
        settle(page, "#layers-panel")
    if name == "limits":
        settle(page, "#deletion-panel")
        settle(page, "#pair-panel")
    if name == "runs":
        settle(page, "#run-detail")
    if name == "segment":  # a point on an object the model answers a mask for, from the keyboard
        index, x, y, _ = segment_target
        page.click(f"#seg-thumbs button:nth-child({index + 1})")
        settle(page, "#page-segment")
        point_with_keys(page, x, y)
        settle(page, "#seg-answer")


@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_page_fits_the_screen_and_passes_the_accessibility_audit(browser, server, shots, screen, segment_target):
    axe = pytest.importorskip("axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python")
    page = new_page(browser, server, screen)
    width = SCREENS[screen]["width"]
    for name in PAGES:
        open_page(page, name)
        drive(page, name, segment_target)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls sideways"
        assert page.title().startswith(name.capitalize())
        found = axe.Axe().run(page).response["violations"]
        serious = [
            (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in found
            if v["impact"] in ("serious", "critical")
        ]
        assert serious == [], f"{name} at {width} px"
        assert page.evaluate(UNLABELLED_CANVASES) == [], f"{name} at {width} px: canvases without a text alternative"
        assert page.evaluate(SMALL_TARGETS) == [], f"{name} at {width} px: controls under 24 px"
        page.screenshot(path=shots / f"{name}-{screen}.png", full_page=True)
    assert page.errors == []
    page.close()


def test_positions_on_a_line_follow_the_frequency_scale_and_chart_the_chosen_row(browser_page, client):
    page = browser_page
    open_page(page, "mechanics")
    settle(page, "#dots-panel")
    assert page.text_content("#dots-scale-value") == "1"
    before = canvas_pixels(page, "#dots-sincos"), canvas_pixels(page, "#dots-random")
    page.locator("#dots-scale").fill("1")  # frequency scale 10
    expect(page.locator("#dots-facts")).to_contain_text("frequency scale 10")
    settle(page, "#dots-panel")
    after = canvas_pixels(page, "#dots-sincos"), canvas_pixels(page, "#dots-random")
    assert after[0] != before[0] and after[1] == before[1]  # the scale is the sinusoids' alone
    expected = client.get("/api/mechanics/position-dots", params={"scale": 10}).json()["kinds"]["sincos"]
    assert page.text_content("#dots-facts").count(f"{expected['neighbours']:+.3f}") == 1
    bar = page.locator("#dots-sincos-scale")
    assert bar.get_attribute("data-map") == "diverging"
    assert float(bar.get_attribute("data-lo")) == -float(bar.get_attribute("data-hi"))
    page.focus("#dots-sincos")
    for key in ("Home", "ArrowDown", "ArrowDown", "ArrowDown"):
        page.keyboard.press(key)
    assert highlight(page, "#dots-sincos") == "3" and highlight(page, "#dots-random") == "3"
    assert page.get_attribute("#dots-sincos", "aria-valuetext").startswith("position 3: with position 0")
    page.keyboard.press("Enter")
    expect(page.locator("#dots-row-caption")).to_have_text("dot products with position 3")
    assert "ref1d=3" in page.url and "fs=10" in page.url
    page.locator("#dots-scale").fill("0")
    settle(page, "#dots-panel")
    assert page.errors == []


def test_synthetic_attention_is_the_chapters_figure_and_its_query_moves_by_keyboard(browser_page):
    page = browser_page
    open_page(page, "mechanics")
    settle(page, "#local-panel")
    expect(page.locator("#local-caption")).to_have_text("synthetic local attention from the centre patch (7, 7), σ = 2")
    bar = page.locator("#local-scale")
    assert bar.get_attribute("aria-label").startswith("colour scale, attention weight: 0.0000 to 0.0398")
    assert "not which patches caused a prediction" in page.text_content("#local-note")
    before = canvas_pixels(page, "#local-map")
    page.locator("#local-sigma").fill("0")  # sigma 1
    expect(page.locator("#local-caption")).to_have_text(re.compile("σ = 1$"))
    settle(page, "#local-panel")
    assert canvas_pixels(page, "#local-map") != before
    page.focus("#local-map")
    for key in ("Home", "ArrowRight", "ArrowRight", "ArrowDown"):
        page.keyboard.press(key)
    assert highlight(page, "#local-map") == "16"  # row 1, column 2 of 14
    assert page.get_attribute("#local-map", "aria-valuetext").startswith("patch (1, 2): weight")
    page.keyboard.press("Enter")
    expect(page.locator("#local-caption")).to_have_text(re.compile(r"^synthetic local attention from patch \(1, 2\)"))
    page.locator("#local-grid").fill("8")
    expect(page.locator("#local-caption")).to_have_text(re.compile(r"from patch \(1, 2\), σ = 1$"))  # kept
    page.uncheck("#local-auto")
    settle(page, "#local-panel")
    assert page.get_attribute("#local-scale", "data-hi") == "1"
    assert page.errors == []


@pytest.fixture(scope="module")
def segment_target(client):
    """A held-out image and a pixel (x, y) of one of its objects where the tiny model's best mask is not
    empty: ``(index, x, y, area)``."""
    detail = client.get("/api/prompt/runs/prompt").json()
    for index in range(len(detail["held_out"]["objects"])):
        for y in range(2, detail["image_size"] - 2, 3):
            for x in range(2, detail["image_size"] - 2, 3):
                answer = client.get(
                    "/api/prompt/runs/prompt/segment", params={"ref": f"held-out:{index}", "points": f"{x},{y}"}
                ).json()
                if answer["truth"] and answer["areas"][0] > 0:
                    return index, x, y, answer["areas"][0]
    pytest.fail(f"the tiny promptable model answers no mask on its {len(detail['held_out']['objects'])} images")


def pixel_position(page, x: int, y: int, side: int = SHAPES_SIDE) -> dict[str, float]:
    """Where pixel (x, y) of the Segment page's square image lies on its canvas (the image fills it)."""
    box = page.locator("#seg-image").bounding_box()
    return {"x": (x + 0.5) * box["width"] / side, "y": (y + 0.5) * box["height"] / side}


def point_with_keys(page, x: int, y: int) -> None:
    """Move the Segment page's cursor from the image's top-left pixel to (x, y) and press Enter."""
    page.focus("#seg-image")
    for key in ["Home", *["ArrowRight"] * x, *["ArrowDown"] * y, "Enter"]:
        page.keyboard.press(key)


def test_a_click_on_a_held_out_shape_overlays_its_mask(browser, server, client, segment_target):
    index, x, y, area = segment_target
    page = new_page(browser, server + f"#segment?pref=held-out:{index}")
    settle(page, "#page-segment")
    assert page.get_attribute(f"#seg-thumbs button:nth-child({index + 1})", "aria-pressed") == "true"
    assert "the model never saw it" in page.text_content("#seg-current")
    before = canvas_pixels(page, "#seg-image")
    page.locator("#seg-image").click(position=pixel_position(page, x, y))
    settle(page, "#seg-answer")
    expect(page.locator("#seg-image")).to_have_attribute("data-mask-area", str(area))
    assert canvas_pixels(page, "#seg-image") != before
    answer = client.get(
        "/api/prompt/runs/prompt/segment", params={"ref": f"held-out:{index}", "points": f"{x},{y}"}
    ).json()
    candidates = page.locator("#seg-candidates button")
    assert candidates.count() == len(answer["iou"])
    assert candidates.first.get_attribute("aria-pressed") == "true"
    assert f"predicted IoU {answer['iou'][0]:.4f}" in candidates.first.text_content()
    assert f"actual IoU {answer['truth']['iou'][0]:.4f}" in candidates.first.text_content()
    expect(page.locator("#seg-facts")).to_contain_text("actual IoU of the overlaid mask")
    candidates.nth(1).focus()
    page.keyboard.press("Enter")
    expect(page.locator("#seg-image")).to_have_attribute("data-candidate", "1")
    assert page.get_attribute("#seg-image", "data-mask-area") == str(answer["areas"][1])
    assert f"pts={x}%2C{y}" in page.url or f"pts={x},{y}" in page.url
    page.click("#seg-background")  # a background point from the keyboard: two points now
    point_with_keys(page, 0, 0)
    settle(page, "#seg-answer")
    both = client.get(
        "/api/prompt/runs/prompt/segment",
        params={"ref": f"held-out:{index}", "points": f"{x},{y};0,0", "labels": "1,0"},
    ).json()
    expect(page.locator("#seg-image")).to_have_attribute("data-mask-area", str(both["areas"][0]))
    start, end = pixel_position(page, 3, 4), pixel_position(page, 20, 25)  # a dragged box
    canvas = page.locator("#seg-image").bounding_box()
    page.mouse.move(canvas["x"] + start["x"], canvas["y"] + start["y"])
    page.mouse.down()
    page.mouse.move(canvas["x"] + end["x"], canvas["y"] + end["y"], steps=5)
    page.mouse.up()
    page.wait_for_function("() => decodeURIComponent(location.hash).includes('pbox=3,4,21,26')")
    settle(page, "#seg-answer")
    page.click("#seg-clear")
    expect(page.locator("#seg-candidates button")).to_have_count(0)
    assert page.get_attribute("#seg-image", "data-mask-area") == ""
    assert page.errors == []
    page.close()


def test_a_promptable_run_opens_on_the_segment_page_and_a_bad_prompt_says_why(browser, server):
    page = new_page(browser, server + "#runs?run=prompt")
    settle(page, "#run-detail")
    expect(page.locator("#run-links a")).to_have_text("Prompt it on the Segment page")
    page.click("#run-links a")
    settle(page, "#page-segment")
    assert page.input_value("#seg-run") == "prompt"
    page.goto(server + "#segment?pref=upload:0123456789abcdef")  # an upload the server no longer keeps
    page.reload()
    expect(page.locator("#segment-error")).to_have_text(re.compile("^no upload '0123456789abcdef'"))
    assert page.locator("#segment-error").get_attribute("role") == "alert"
    assert all(e.startswith("Failed to load resource: the server responded with a status of 404") for e in page.errors)
    page.close()
