"""In headless Chromium: the forward-pass view shows the model's own numbers and its knock-outs re-run the
model; a CNN-only runs folder opens on its gradient and occlusion maps; a training started from the Runs page
streams its progress and ends as a run folder `vitlab evaluate` accepts; the limits-of-attention panels; and
each bug the explorer once had, fixed (dead ends, hidden data, what is drawn against what the model reads,
scales, the keyboard and the phone)."""

import copy
import json
import math
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from browser_support import (
    expect,
    highlight,
    new_page,
    open_page,
    settle,
)

from vitlab.cli.main import main
from vitlab.data import load_dataset, normalize
from vitlab.explain.record import attention_weights
from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.runs import load_checkpoint

pytestmark = pytest.mark.slow  # a real browser: outside the fast subset

FASHION = Path("/usr/share/datasets/fashion-mnist")
PIXEL = (
    "([selector, x, y]) => Array.from(document.querySelector(selector).getContext('2d').getImageData(x, y, 1, 1).data)"
)


def pixel(page, selector: str, x: float, y: float) -> list[int]:
    """The RGBA of a canvas at (x, y) of its backing store (CSS pixels at a pixel ratio of 1)."""
    return page.evaluate(PIXEL, [selector, int(x), int(y)])


@pytest.fixture(scope="module")
def trained(runs_root):
    return load_checkpoint(runs_root / "digits-vit")


@pytest.fixture(scope="module")
def cnn_server(cnn_root):
    """The explorer on a runs folder holding only a CNN."""
    with serve_in_background(create_app(ExploreConfig(checkpoints=[cnn_root / "cnn"], runs=[cnn_root]))) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def cnn_first_server(cnn_root, runs_root):
    """The explorer with the CNN loaded first and the ViT second (a runs folder in name order: cnn, vit)."""
    config = ExploreConfig(checkpoints=[cnn_root / "cnn", runs_root / "digits-vit"], runs=[cnn_root])
    with serve_in_background(create_app(config)) as url:
        yield url + "/"


def reference_scores(model, inputs, layer, head, token):
    """q.k / sqrt(d_k) of ``token`` against every key, from a forward hook on block ``layer``'s qkv projection,
    and the weights the recorder reads from the same run."""
    seen = {}
    hook = model.blocks[layer].attn.qkv.register_forward_hook(lambda m, a, out: seen.__setitem__("qkv", out))
    _, weights = attention_weights(model, inputs)
    hook.remove()
    q, k, _ = seen["qkv"].unflatten(-1, (3, model.blocks[layer].attn.num_heads, -1)).permute(2, 0, 3, 1, 4)
    scores = q[0, head, token] @ k[0, head].T / math.sqrt(q.shape[-1])
    return scores, weights[layer][0, head, token]


def test_the_forward_pass_shows_the_models_own_scores_and_a_knock_out_re_runs_it(browser, server, trained):
    page = new_page(browser, server + "#forward?ref=digits:7")
    settle(page, "#page-forward")
    page.select_option("#fwd-layer", "2")
    settle(page, "#page-forward")
    page.select_option("#fwd-head", "3")
    settle(page, "#page-forward")
    page.locator("#fwd-image").click(position={"x": 125, "y": 75})  # 4x4 cells of 50 px: patch 6
    expect(page.locator("#fwd-scores-caption")).to_have_text(re.compile("^scores of patch 6 "))
    settle(page, "#page-forward")
    inputs = normalize(load_dataset("digits").test.images[7:8], trained.data.mean, trained.data.std)
    scores, weights = reference_scores(trained.model, inputs, 2, 3, 6)
    shown = json.loads(page.get_attribute("#fwd-scores", "data-values"))
    np.testing.assert_allclose(shown, scores.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(
        json.loads(page.get_attribute("#fwd-weights", "data-values")), weights.numpy(), atol=1e-5
    )
    assert "q·k / √d_k = q·k / √16" in page.text_content("#fwd-scale")
    assert page.locator("#fwd-table tbody tr").count() == 16
    page.focus("#fwd-weights")  # a key from the keyboard lights its row of K and V and its patch
    for key in ("Home", "ArrowRight", "ArrowRight"):
        page.keyboard.press(key)
    assert page.eval_on_selector_all("#fwd-keys canvas[role=slider]", "cs => cs.map(c => c.dataset.highlight)") == [
        "2",
        "2",
    ]
    assert highlight(page, "#fwd-image") == "2"
    page.click("#fwd-knockout button[data-knockout=head]")
    expect(page.locator("#fwd-change")).to_have_text(re.compile("^Re-run with head 3 of block 2 knocked out"))
    settle(page, "#page-forward")
    zeroed = copy.deepcopy(trained.model)
    attn = zeroed.blocks[2].attn
    rows = slice(2 * attn.qkv.in_features + 3 * attn.head_dim, 2 * attn.qkv.in_features + 4 * attn.head_dim)
    with torch.no_grad():
        attn.qkv.weight[rows] = 0
        attn.qkv.bias[rows] = 0
        expected = zeroed(inputs).softmax(-1)[0].numpy()
        original = trained.model(inputs).softmax(-1)[0].numpy()
    shown = json.loads(page.get_attribute("#fwd-prediction", "data-probabilities"))
    np.testing.assert_allclose(shown, expected, atol=1e-5)
    assert not np.allclose(shown, original, atol=1e-4)  # the bars moved
    assert "fwd=" not in page.url and "fk=head" in page.url
    page.click("#fwd-knockout button[data-knockout=layer]")
    expect(page.locator("#fwd-change")).to_have_text(re.compile("^Re-run with block 2's attention knocked out"))
    assert page.errors == []
    page.close()


def test_a_cnn_only_runs_folder_opens_on_its_gradient_and_occlusion_maps(browser, cnn_server):
    page = new_page(browser, cnn_server + "#attention")
    settle(page, "#page-attention")
    settle(page, "#attn-maps")
    expect(page.locator("#attn-maps figure")).to_have_count(2)  # each map drawn as it comes
    methods = page.eval_on_selector_all("#attn-maps figure", "fs => fs.map(f => f.dataset.method)")
    assert sorted(methods) == ["gradient", "occlusion"]
    expect(page.locator("#attention-absent")).to_contain_text("cnn-digits has no self-attention layers")
    assert not page.is_visible("#attn-heads") and not page.is_visible("#layers-panel")
    expect(page.locator("#attn-prediction .truth")).to_have_text(re.compile("^(✓ right|✗ wrong): the true label is"))
    expect(page.locator("#attn-target")).to_contain_text("each map scores 1×1-pixel squares")
    open_page(page, "runs")
    settle(page, "#run-detail")
    page.click("#run-links a")  # "Open its checkpoint on the Attention page": no dead end
    settle(page, "#attn-maps")
    expect(page.locator("#attn-maps figure")).to_have_count(2)
    open_page(page, "forward")
    expect(page.locator("#forward-none")).to_contain_text("can be traced: SimpleCNN is not a ViT")
    open_page(page, "mechanics")
    assert page.is_disabled("#pos-kind option[value=learned]")
    assert page.errors == []
    page.close()


def test_each_page_starts_on_a_model_it_can_show(browser, cnn_first_server):
    page = new_page(browser, cnn_first_server + "#attention")
    settle(page, "#attn-maps")
    assert page.input_value("#attn-model") == "1"  # the ViT, not the alphabetically first CNN
    open_page(page, "mechanics")
    page.select_option("#pos-kind", "learned")
    settle(page, "#positions-panel")
    assert page.input_value("#pos-model") == "1" and page.text_content("#pos-grid-value") == "4"
    assert "pmodel=1" in page.url and page.locator("#pos-model option").count() == 1  # the CNN has no table
    open_page(page, "forward")
    assert page.input_value("#fwd-model") == "1" and page.is_disabled("#fwd-model option[value='0']")
    assert page.errors == []
    page.close()


@pytest.fixture
def train_server(runs_root, tmp_path):
    """An explorer whose runs folder is empty, and that folder."""
    root = tmp_path / "runs"
    root.mkdir()
    app = create_app(ExploreConfig(checkpoints=[runs_root / "digits-vit"], runs=[root]))
    with serve_in_background(app) as url:
        yield url + "/", root


def test_a_training_started_on_the_runs_page_streams_and_ends_as_a_run_folder(browser, train_server, shots, capsys):
    url, root = train_server
    page = new_page(browser, url + "#runs")
    page.wait_for_selector("#train-form")
    page.fill("#train-name", "watched")
    page.fill("#train-epochs", "2")
    page.fill("#train-rows", "200")
    page.click("#train-start")
    page.wait_for_selector("#train-panel[data-job=done]", timeout=240_000)
    expect(page.locator("#train-status")).to_have_text(re.compile("^done: 2 epochs in"))
    assert page.get_attribute("#train-epoch", "max") == "2"
    assert page.locator("#train-legend button.series").count() >= 3  # running loss, per-epoch loss and accuracy
    settle(page, "#train-snapshot")
    page.locator("#train-panel").screenshot(path=shots / "training-desktop.png")
    page.locator("#train-epoch").fill("0")
    settle(page, "#train-snapshot")
    expect(page.locator("#train-facts")).to_contain_text("0: the seeded weights before any step")
    settle(page, "#page-runs")
    expect(page.locator("#runs-table tbody tr[data-label=watched]")).to_have_count(1)
    capsys.readouterr()
    assert main(["evaluate", str(root / "watched")]) == 0
    page.click("#train-links a")
    settle(page, "#page-attention")
    assert page.input_value("#attn-model") == "1"  # the new run, loaded
    open_page(page, "runs")
    page.fill("#train-name", "long")
    page.fill("#train-epochs", "60")
    page.click("#train-start")
    page.wait_for_function(  # the new run's first epoch (the panel shows the new run as soon as it starts)
        "() => document.getElementById('train-panel').dataset.job === 'running'"
        " && Number(document.getElementById('train-epoch').max) >= 1",
        timeout=120_000,
    )
    page.click("#train-cancel")
    page.wait_for_selector("#train-panel[data-job=cancelled]", timeout=120_000)
    expect(page.locator("#train-status")).to_contain_text("--resume")
    assert page.errors == []
    page.close()


def test_the_limits_of_attention(browser, server, client):
    verdicts = client.get("/api/limits/verdicts", params={"model": 0, "source": "digits"}).json()
    page = new_page(browser, server + "#cost")
    held, release = [], threading.Event()  # the randomised model's maps held back: the panel shows what it has
    page.route(re.compile(r"/api/limits/randomised\?"), lambda r: r.continue_() if release.is_set() else held.append(r))
    page.evaluate("location.hash = '#limits'")
    expect(page.locator("#random-progress")).to_have_text("1 of 8 maps…")
    assert page.get_attribute("#random-panel", "data-state") == "loading"
    assert page.locator("#random-grid canvas").count() == 1 and page.locator("#random-grid .pending").count() == 7
    settle(page, "#deletion-panel")
    settle(page, "#pair-panel")
    release.set()
    for route in held:
        route.continue_()
    settle(page, "#random-panel")
    assert page.text_content("#random-progress") == "" and page.get_attribute("#random-panel", "data-progress") == "8/8"
    assert page.locator("#random-grid canvas").count() == 8 and page.locator("#random-grid .pending").count() == 0
    assert page.locator("#lim-mistakes button").count() == len(verdicts["mistakes"])
    assert page.get_attribute("#lim-mistakes button:first-child", "data-ref") == verdicts["mistakes"][0]["ref"]
    pair = page.eval_on_selector_all("#pair-row figure", "fs => fs.map(f => f.dataset.kind)")
    assert pair == ["right", "wrong"] and page.get_attribute("#pair-scale", "data-lo") is not None
    expect(page.locator("#pair-row figure[data-kind=wrong] figcaption")).to_contain_text("✗ true")
    labels = page.eval_on_selector_all("#random-grid .label", "ls => ls.map(l => l.textContent)")
    assert any(label.startswith("rollout: ρ") for label in labels) and "random weights" in labels
    legend = page.eval_on_selector_all("#deletion-legend button.series", "bs => bs.map(b => b.textContent)")
    assert len(legend) == 5 and legend[-1].startswith("random orders (mean of 8)")
    deletion = client.get("/api/limits/deletion", params={"model": 0, "ref": verdicts["mistakes"][0]["ref"]}).json()
    assert f"area {deletion['area']['occlusion']:.4f}" in " ".join(legend)
    page.click("#lim-right button:nth-child(2)")
    expect(page.locator("#pair-row figure[data-kind=right] figcaption")).to_contain_text(
        verdicts["right"][1]["ref"].split(":")[0] and "✓"
    )
    assert "lright=" in page.url
    assert page.errors == []
    page.close()


def test_a_wrong_prediction_says_so_and_each_heads_statistics_are_shown(browser, server, client):
    mistake = client.get("/api/limits/verdicts", params={"model": 0, "source": "digits"}).json()["mistakes"][0]
    page = new_page(browser, server + f"#attention?ref={mistake['ref']}")
    settle(page, "#layers-panel")
    assert page.get_attribute("#attn-prediction", "data-correct") == "false"
    expect(page.locator("#attn-prediction .truth")).to_have_text(f"✗ wrong: the true label is {mistake['label']}")
    assert page.locator("#attn-stats tbody tr").count() == 16
    definitions = " ".join(page.text_content("#page-attention details.numbers").split())
    assert "spread = largest − smallest weight" in definitions and "Mean distance is the ViT paper's" in definitions
    layers = client.get("/api/layers", params={"model": 0, "ref": mistake["ref"]}).json()
    assert float(page.get_attribute("#layers-scale", "data-hi")) == pytest.approx(layers["max"])
    maps = client.get("/api/maps", params={"model": 0, "ref": mistake["ref"]}).json()["maps"]
    settle(page, "#attn-maps")  # filled in one map at a time, each drawn with the whole answer's range
    assert page.get_attribute("#attn-maps", "data-progress") == "3/3" and page.text_content("#maps-progress") == ""
    assert float(page.get_attribute("#map-scale-rollout", "data-hi")) == pytest.approx(maps["rollout"]["range"][1])
    reach = max(abs(v) for v in maps["occlusion"]["range"])
    assert float(page.get_attribute("#map-scale-occlusion", "data-hi")) == pytest.approx(reach)
    colours = {
        tuple(pixel(page, "#attn-maps figure[data-method=rollout] canvas", x, y)) for x in (3, 20, 38) for y in (4, 40)
    }
    assert len(colours) == 1  # one patch, one colour: the map is opaque over the 4x4 patch grid
    page.focus("#attn-maps figure[data-method=gradient] canvas")  # the maps are focusable and linked
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    assert highlight(page, "#attn-image") == "1" and highlight(page, "#attn-bars") == "1"
    page.locator("#attn-temperature").fill("-1")  # sharp: the largest weights reach the top of the bars
    settle(page, "#page-attention")
    top_band = [pixel(page, "#attn-bars", x, y) for x in range(40, 410, 3) for y in range(0, 18, 2)]
    assert not any(p[:3] == [59, 91, 219] for p in top_band)  # no bar under the uniform line's label
    assert any(p[0] > 150 and p[1] < 100 for p in top_band)  # the label, in red
    assert page.errors == []
    page.close()


def test_tokens_are_what_the_model_reads_and_padding_is_zero(browser, server):
    page = new_page(browser, server + "#tokens?ref=digits:0")
    settle(page, "#page-tokens")
    assert page.input_value("#tokens-reader") == "0"
    assert page.text_content("#token-width") == "4 = 2² × 1"
    assert pixel(page, "#tokens-matrix", 2, 2)[:3] == [230, 236, 248]  # a ground no pixel value has
    page.select_option("#tokens-reader", "")
    page.locator("#patch-slider").fill("3")  # 8x8 zero-padded to 9x9
    expect(page.locator("#token-count")).to_have_text("9")
    padding = [pixel(page, "#tokens-pixels", 250, y)[:3] for y in range(30, 230, 7)]
    greys = [p for p in padding if abs(p[0] - p[1]) < 8 and abs(p[1] - p[2]) < 8 and 40 < p[0] < 250]
    assert greys == [] and [0, 0, 0] in padding  # zero (black) under a red hatch, never the grey it was
    box = page.locator("#pad").bounding_box()
    page.mouse.move(box["x"] + 56, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + 56, box["y"] + 90, steps=8)
    page.mouse.up()
    expect(page.locator("#picker-current")).to_have_text(re.compile("^your drawing"))
    expect(page.locator("#token-count")).to_have_text("16")
    assert page.text_content("#token-width") == "4 = 2² × 1"  # 16 x 4, as vit-digits reads it: not 16 x 2,352
    page.click("#picker-thumbs button:nth-child(3)")
    settle(page, "#page-tokens")
    blank = page.evaluate(
        "() => { const c = document.getElementById('pad'); "
        "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)"
        ".every((v, i) => i % 4 === 3 || v === 0); }"
    )
    assert blank  # the pad no longer shows the old drawing
    page.focus("#pad")  # drawing from the keyboard: Shift+arrows draw, Enter reads
    for _ in range(6):
        page.keyboard.press("Shift+ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#picker-current")).to_have_text(re.compile("^your drawing"))
    assert page.errors == []
    page.close()


@pytest.mark.skipif(not FASHION.is_dir(), reason="apt-get install dataset-fashion-mnist")
def test_the_texts_16_by_49_matrix_is_the_default_view(browser, server):
    page = new_page(browser, server)
    settle(page, "#page-tokens")
    assert page.input_value("#picker-source") == "fashion-mnist"
    assert not page.is_disabled("#picker-source option[value=fashion-mnist]")
    expect(page.locator("#tokens-matrix-caption")).to_have_text("token matrix 16 × 49 (rows: tokens)")
    open_page(page, "attention")  # the model's own data on the page that reads it
    settle(page, "#page-attention")
    assert page.input_value("#picker-source") == "digits"
    assert page.errors == []
    page.close()


def test_mechanics_cost_and_runs_keep_their_promises(browser, server, client):
    page = new_page(browser, server + "#mechanics")
    settle(page, "#qk-panel")
    assert page.locator("#qk-table tbody tr").count() == 9
    page.click("#qk-table th[data-key=raw] button")
    first = page.text_content("#qk-table tbody tr:first-child td")
    assert first == "256"  # ranked by the raw variance, highest first
    settle(page, "#positions-panel")
    page.locator("#pos-matrix").hover(position={"x": 240 * 9.5 / 64, "y": 240 * 20.5 / 64})  # row 20, column 9
    assert highlight(page, "#pos-matrix") == "20"
    overlay = page.evaluate("""() => { const o = document.getElementById('pos-matrix').overlayCanvas;
        return Array.from(o.getContext('2d').getImageData(240 * 20.5 / 64, 240 * 20.5 / 64, 1, 1).data); }""")
    assert overlay[3] == 0  # the pointed-at cell stays visible: the frame runs outside it
    open_page(page, "cost")
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "/api/cost?" in r.url else None)
    page.fill("#cost-dim", "")
    page.dispatch_event("#cost-dim", "change")
    expect(page.locator("#cost-error")).to_have_text(re.compile("^Width D: enter a whole number from 8 to 4096"))
    assert requests == []  # never silently computed with 768
    page.fill("#cost-dim", "768")
    page.dispatch_event("#cost-dim", "change")
    settle(page, "#page-cost")
    settle(page, "#cost-textbook")
    assert page.locator("#cost-tokens tbody tr").count() == 5 and page.locator("#cost-pairs tbody tr").count() == 5
    page.click("#cost-pairs th[data-key=attention_per_conv] button")
    assert page.text_content("#cost-pairs tbody tr:first-child td") == "224×224"
    page.click("#cost-table th[data-key=tokens] button")
    assert "cost_sort=tokens" in page.url
    open_page(page, "runs")
    settle(page, "#run-detail")
    page.click("#runs-table th[data-key=best_val_acc] button")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc"))
    page.click("#runs-table th[data-key=best_val_acc] button")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("lowest first"))
    assert "rsort=best_val_acc" in page.url and "rdesc=0" in page.url
    widths = page.eval_on_selector_all("#runs-table td.ranked .fill", "fs => fs.map(f => f.style.width)")
    assert widths and all(w != "0%" for w in widths)  # bars from zero: the lowest value has its bar
    page.reload()
    page.wait_for_selector("#page-runs.active[data-state=ready]")
    expect(page.locator("#runs-table caption")).to_have_text(re.compile("^ranked by best val acc, lowest first"))
    assert page.errors == []
    page.close()


def test_segment_names_the_candidates_honestly(browser, server, client):
    detail = client.get("/api/prompt/runs/prompt").json()
    page = new_page(browser, server + "#segment?pref=held-out:0&pts=16,16&plab=1")
    settle(page, "#seg-answer")
    names = page.eval_on_selector_all("#seg-thumbs button", "bs => bs.map(b => b.getAttribute('aria-label'))")
    assert not any(re.search(r"\b1 objects", n) for n in names)
    for name, objects in zip(names, detail["held_out"]["objects"]):
        assert name.endswith(f"{objects} object{'' if objects == 1 else 's'}")
    words = page.eval_on_selector_all("#seg-candidates button", "bs => bs.map(b => b.textContent)")
    assert "(best)" not in " ".join(words) and "highest predicted IoU" in words[0]
    answer = client.get("/api/prompt/runs/prompt/segment", params={"ref": "held-out:0", "points": "16,16"}).json()
    if answer["truth"]:
        best = int(np.argmax(answer["truth"]["iou"]))
        assert "highest actual IoU" in words[best]
    assert page.errors == []
    page.close()


def test_the_keyboard_skips_to_the_page_and_the_phone_keeps_the_page_on_screen(browser, server):
    page = new_page(browser, server + "#attention")
    settle(page, "#page-attention")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "attention-title"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "attn-model"
    page.close()
    phone = new_page(browser, server + "#attention", "phone")
    settle(phone, "#page-attention")
    assert phone.locator("#picker").bounding_box()["height"] < 330  # it was ~490 of 844 px
    captions = phone.eval_on_selector_all("#attn-heads figcaption", "cs => cs.map(c => c.offsetHeight > 0)")
    assert len(captions) == 16 and all(captions)
    assert phone.errors == []
    phone.close()
