"""The documentation site builds in strict mode, offline, with every tutorial executed and its figures in the
page; a browser finds every page whole (no broken internal link or image, no console error)."""

import functools
import http.server
import os
import re
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]

TUTORIALS = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.py"))
pytestmark = pytest.mark.slow


class Assets(HTMLParser):
    """The URLs a page loads by itself (scripts, styles, images, fonts), not the links a reader follows."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "video", "audio") and values.get("src"):
            self.loaded.append(values["src"] or "")
        if tag == "link" and values.get("href") and values.get("rel") not in ("canonical", "alternate"):
            self.loaded.append(values["href"] or "")


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


def test_every_page_loads_nothing_from_another_host(site):
    remote = {}
    for page in pages(site):
        parser = Assets()
        parser.feed(page.read_text(encoding="utf-8"))
        far = [url for url in parser.loaded if re.match(r"(https?:)?//", url)]
        if far:
            remote[str(page.relative_to(site))] = far
    css = [p for p in site.rglob("*.css") if re.search(r"url\((['\"]?)(https?:)?//", p.read_text(encoding="utf-8"))]
    assert not remote and not css, f"pages load from another host: {remote} {css}"


def test_every_tutorial_is_a_page_with_its_figures(site):
    assert len(TUTORIALS) == 6
    for name in TUTORIALS:
        html = (site / "tutorials" / f"{name}.html").read_text(encoding="utf-8")
        figures = sorted((site / "tutorials" / f"{name}_files").glob("*.png")) if name[:2] <= "04" else []
        assert html.count(f'src="{name}_files/') == len(figures), name
        if name[:2] <= "04":  # the tutorials that draw: tokens, attention, the study, the maps
            assert figures, f"tutorial {name} rendered no figure"
        assert (site / "tutorials" / f"{name}.py").is_file()  # the script, to download


def test_the_reference_pages_are_generated(site):
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    config = (site / "reference" / "config.html").read_text(encoding="utf-8")
    assert "vitlab train" in cli and "--recipe" in cli and "--qk-variance" in cli
    assert "ViTConfig" in config and "embed_dim" in config and "DataOptions" in config
    api = (site / "reference" / "api" / "data.html").read_text(encoding="utf-8")
    assert "load_dataset" in api


@pytest.fixture(scope="module")
def served(site):
    """The site on a local HTTP server (loopback, a free port), as a reader's browser would get it."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium, headless, driven by Playwright (skipped where either is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the system browser is used)")
    executable = os.environ.get("VITLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).is_file():
        pytest.skip(f"no Chromium at {executable}: apt-get install chromium (.ci/run does)")
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=flags)
        yield browser
        browser.close()


def test_a_browser_finds_every_page_whole(site, served, chromium):
    """Every page opened from the server: no console error, every image decoded, every internal link (and its
    anchor) found, and each tutorial's figures drawn."""
    page = chromium.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    broken: list[str] = []
    for path in pages(site):
        name = str(path.relative_to(site))
        url = urljoin(served, name)
        errors.clear()
        page.goto(url, wait_until="load")
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])"
        )
        broken += [f"{name}: image {src} does not load" for src, loaded in images if not loaded]
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target, anchor = urldefrag(href)
            if not target.startswith(served):
                continue
            file = site / urlparse(target).path.lstrip("/")
            if file.is_dir():
                file = file / "index.html"
            if not file.is_file():
                broken.append(f"{name}: link to {href} leads nowhere")
            elif anchor and file.suffix == ".html" and f'id="{anchor}"' not in file.read_text(encoding="utf-8"):
                broken.append(f"{name}: link to {href}: no such anchor")
        broken += [f"{name}: console error {text}" for text in errors]
        if name.startswith("tutorials/") and name[10:12] <= "04":
            drawn = [src for src, loaded in images if loaded and "_files/" in (src or "")]
            if not drawn:
                broken.append(f"{name}: no figure drawn")
    page.close()
    assert not broken, "\n".join(broken)
