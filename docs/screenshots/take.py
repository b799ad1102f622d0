"""The README's screenshots of `vitlab explore`, on models worth looking at.

    python docs/screenshots/take.py                 # trains vit-digits (30 epochs) and cnn-digits first, ~1 min
    python docs/screenshots/take.py --runs DIR      # a runs folder holding `vit` and `cnn` runs already

Every page at 1400 and 390 px (Segment's are taken by the browser tests, on their promptable run:
`VITLAB_EXPLORE_SCREENSHOTS=docs/screenshots pytest tests/explore -k accessibility`), and the Runs page's
training panel after a watched training of 20 epochs. Needs Playwright and Debian's Chromium.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from playwright.sync_api import sync_playwright

from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

HERE = Path(__file__).parent
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
SCREENS = {"desktop": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}
PAGES = {  # page -> the units to wait for
    "tokens": ["#page-tokens"],
    "attention": ["#page-attention", "#attn-maps", "#layers-panel"],
    "forward": ["#page-forward"],
    "limits": ["#verdicts-panel", "#pair-panel", "#random-panel", "#deletion-panel"],
    "mechanics": ["#positions-panel", "#qk-panel", "#local-panel"],
    "cost": ["#page-cost", "#cost-textbook"],
    "runs": ["#run-detail"],
}


def make_runs(root: Path) -> Path:
    torch.set_num_threads(1)
    for model, epochs in (("vit-digits", 30), ("cnn-digits", 5)):
        torch.manual_seed(0)
        run("classify", TrainConfig(model=model, epochs=epochs, device="cpu", out_dir=str(root / model.split("-")[0])))
    return root


def shoot(base: str, browser, screen: str) -> None:
    page = browser.new_page(viewport=SCREENS[screen])
    page.goto(base + "/#tokens")
    page.wait_for_selector("body[data-ready=true]")
    for name, units in PAGES.items():
        page.evaluate(f"location.hash = '#{name}'")
        for unit in units:
            page.wait_for_selector(f"{unit}[data-state=ready]", timeout=60_000)
        if name == "attention":  # a patch of the digit as the query
            page.locator("#attn-image").click(position={"x": 175, "y": 105})
            page.wait_for_selector("#layers-panel[data-state=ready]")
        page.screenshot(path=HERE / f"{name}-{screen}.png", full_page=True)
    page.close()


def watch(base: str, browser) -> None:
    page = browser.new_page(viewport=SCREENS["desktop"])
    page.goto(base + "/#runs")
    page.wait_for_selector("#train-form")
    page.fill("#train-name", "watched")
    page.fill("#train-epochs", "20")
    page.click("#train-start")
    page.wait_for_selector("#train-panel[data-job=done]", timeout=600_000)
    page.locator("#train-epoch").fill("3")
    page.wait_for_selector("#train-snapshot[data-state=ready]")
    page.locator("#train-panel").screenshot(path=HERE / "training-desktop.png")
    page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", help="a runs folder holding `vit` and `cnn` (default: train them)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="explore-shots-") as tmp:
        runs = Path(args.runs) if args.runs else make_runs(Path(tmp) / "runs")
        watched = Path(tmp) / "watched"
        watched.mkdir()
        config = ExploreConfig(checkpoints=[runs / "vit", runs / "cnn"], runs=[watched, runs])
        with serve_in_background(create_app(config)) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, headless=True, args=FLAGS)
            for screen in SCREENS:
                shoot(base, browser, screen)
            watch(base, browser)
            browser.close()


if __name__ == "__main__":
    main()
