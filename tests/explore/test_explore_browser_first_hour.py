"""In headless Chromium, a newcomer's first hour: in a fresh folder after `vitlab compare`, after fine-tuning a
224-px hub model on photos, and with nothing trained, every page shows a model (or, with none, one button that
trains one): no empty box, no dead control."""

from pathlib import Path

import pytest
from browser_support import new_page, open_page, sync_api
from test_explore_first_hour import tuned  # noqa: F401  (the fine-tuned run, a fixture)

from vitlab.cli.main import main
from vitlab.explore import create_app, serve_in_background
from vitlab.explore.launch import launch_config

pytestmark = pytest.mark.slow  # a real browser, and training

MODEL_PAGES = ("tokens", "attention", "forward", "limits")
BLANK = """canvas => {
  if (!canvas.width || !canvas.height || canvas.offsetParent === null) return false;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) return false;
  return true;
}"""
UNSETTLED = """name => [document.getElementById(`page-${name}`),
  ...document.querySelectorAll(`#page-${name} .unit`)].filter((u) => u.offsetParent !== null &&
  u.classList.contains('unit') && !['ready', 'error'].includes(u.dataset.state))
  .map((u) => `${u.id}:${u.dataset.state}`)"""
DEAD = """page => [...page.querySelectorAll('select')].filter((c) => c.offsetParent !== null &&
  (c.disabled || ![...c.options].some((o) => !o.disabled))).map((c) => c.id)"""  # a menu with nothing to choose


def check_page_shows_a_model(page, name: str) -> None:
    open_page(page, name)
    try:  # every shown box answers (ready, or an error said in it)
        page.wait_for_function(f"name => !({UNSETTLED})(name).length", arg=name, timeout=120_000)
    except sync_api.TimeoutError:
        raise AssertionError(f"{name}: boxes still waiting: {page.evaluate(UNSETTLED, name)}") from None
    root = page.locator(f"#page-{name}")
    errors = root.locator("[data-state=error] .error:visible").all_inner_texts()
    assert not errors, f"{name}: a box answered an error: {errors}"
    assert root.locator(".note[id$='-none']:visible").count() == 0, f"{name}: says it has no model"
    # An overlay (.overlay) is the transparent layer over a figure for highlights: empty until one is shown.
    blank = [c for c in root.locator("canvas:not(.overlay)").element_handles() if c.evaluate(BLANK)]
    assert not blank, f"{name}: {len(blank)} empty figure(s)"
    assert root.evaluate(DEAD) == [], f"{name}: a menu with nothing to choose"


@pytest.fixture
def compared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--rows", "48", "--epochs", "1", "--patches", "4", "--augment", "none", "--threads", "1"]
    assert main(argv) == 0
    with serve_in_background(create_app(launch_config())) as url:
        yield url + "/"


def test_after_compare_every_page_shows_a_model(browser, compared):
    page = new_page(browser, compared + "#attention")
    for name in MODEL_PAGES:
        check_page_shows_a_model(page, name)
    assert page.errors == []
    page.close()


def test_after_a_photo_fine_tune_every_page_shows_it(browser, tuned):  # noqa: F811
    with serve_in_background(create_app(launch_config(runs=[Path(tuned) / "runs"]))) as url:
        page = new_page(browser, url + "/#attention")
        for name in MODEL_PAGES:
            check_page_shows_a_model(page, name)
        assert page.locator("#pad-box").is_hidden()  # a photo model: no "draw a digit" pad
        assert "draw a digit" not in page.locator("#seen-try").inner_text()
        assert page.errors == []
        page.close()


def test_with_nothing_trained_a_page_offers_one_button_that_trains(browser, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with serve_in_background(create_app(launch_config())) as url:
        page = new_page(browser, url + "/#attention")
        open_page(page, "attention")
        offer = page.locator("#page-attention .train-offer")
        assert offer.is_visible() and offer.is_enabled()
        assert page.locator("#page-attention canvas:visible").count() == 0  # no empty figure beside it
        assert page.errors == []
        page.close()
