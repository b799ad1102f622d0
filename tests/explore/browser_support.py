"""What the explorer's browser tests share: Debian's Chromium driven by Playwright, the app served by uvicorn
in a thread, a page at desktop or phone size that collects its JavaScript errors, and small helpers.

Imported by the browser test modules (``from browser_support import ...``); pytest finds the fixtures there.
"""

import os
import shutil
from pathlib import Path

import pytest

from vitlab.explore import serve_in_background

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the system browser is used)")
expect = sync_api.expect
CHROMIUM = os.environ.get("VITLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"no Chromium at {CHROMIUM}: apt-get install chromium chromium-driver (.ci/run does)", allow_module_level=True
    )

# A closed network refuses Chromium's background connections; these flags keep it from trying.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = ["tokens", "attention", "forward", "limits", "mechanics", "segment", "cost", "runs"]
SHAPES_SIDE = 32  # the side of the promptable run's images (conftest)
SCREENS = {"desktop": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}
# The start of the explorer's pages in the tests: the digits (the model's own data), the tokens of the image itself.
START = "#tokens?ref=digits:0&reader=image"


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
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def new_page(browser, url: str, screen: str = "desktop", scale: float = 1):
    """A fresh page of the explorer at ``url`` (the hash names the page and its settings), collecting
    JavaScript errors in ``page.errors``."""
    page = browser.new_page(viewport=SCREENS[screen], device_scale_factor=scale)
    page.errors = []
    page.on("pageerror", lambda err: page.errors.append(str(err)))
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    page.set_default_timeout(30_000)
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    return page


@pytest.fixture(scope="module")
def browser_page(browser, server):
    page = new_page(browser, server + START)
    yield page
    page.close()


def open_page(page, name: str) -> None:
    page.evaluate(f"location.hash = '#{name}'")
    page.wait_for_selector(f"#page-{name}.active[data-state=ready]")


def settle(page, selector: str) -> None:
    """Wait until the latest request of the element's page has been drawn."""
    page.wait_for_selector(f"{selector}[data-state=ready]")


def canvas_pixels(page, selector: str) -> str:
    return page.eval_on_selector(selector, "canvas => canvas.toDataURL()")


def highlight(page, selector: str) -> str:
    return page.get_attribute(selector, "data-highlight")


def read_the_image_itself(page) -> None:
    """On the Tokens page, show the tokens of the image at its own size (the patch slider free)."""
    page.select_option("#tokens-reader", "")
    settle(page, "#page-tokens")
