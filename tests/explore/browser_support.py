"""What the explorer's browser tests share: Debian's Chromium driven by Playwright, a page at desktop or phone
size that collects its JavaScript errors, and small helpers. The fixtures (the browser, the app served by
uvicorn in a thread, a shared page) are in conftest.py.

Imported by the browser test modules (``from browser_support import ...``), which this skips where Playwright
or Chromium is missing.
"""

import os
import shutil
from pathlib import Path

import pytest

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
