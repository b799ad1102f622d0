"""Fixtures for the explorer: a real `vitlab train` run, a promptable run and a real `vitlab compare`
study, made once.

All are tiny (a few dozen images, one to three epochs, one CPU thread), written by vitlab's own
trainers and report writer, so the explorer is tested against the files those commands write.
"""

import os
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from vitlab.experiments import CompareConfig, run_compare
from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig
from vitlab.tasks.promptable import PromptableTrainConfig

# The smallest promptable model that still answers masks of some size after three epochs on 84 images.
TINY_PROMPTABLE = {
    "patch_size": 4,
    "embed_dim": 32,
    "depth": 1,
    "num_heads": 2,
    "decoder_dim": 32,
    "decoder_depth": 1,
    "decoder_heads": 2,
}


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> Path:
    """``runs/`` holding ``digits-vit`` (train, vit-digits), ``prompt`` (train, a promptable model on
    32x32 shapes) and ``study`` (compare, patch 2)."""
    root = tmp_path_factory.mktemp("runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        run(
            "classify",
            TrainConfig(
                model="vit-digits",
                rows=96,
                epochs=3,
                batch_size=32,
                warmup_epochs=0.0,
                augment="none",
                device="cpu",
                out_dir=str(root / "digits-vit"),
            ),
        )
        torch.manual_seed(0)
        run(
            "promptable",
            PromptableTrainConfig(
                count=120,
                image_size=32,
                epochs=3,
                warmup_epochs=0.0,
                device="cpu",
                out_dir=str(root / "prompt"),
                model=TINY_PROMPTABLE,
            ),
        )
        run_compare(
            CompareConfig(
                name="study",
                rows=[48],
                patches=[2],
                augment=["none"],
                epochs=1,
                device="cpu",
                out_dir=str(root / "study"),
            )
        )
    finally:
        torch.set_num_threads(threads)
    return root


@pytest.fixture(scope="session")
def explore_config(runs_root: Path) -> ExploreConfig:
    return ExploreConfig(checkpoints=[runs_root / "digits-vit"], runs=[runs_root])


@pytest.fixture(scope="session")
def app(explore_config: ExploreConfig):
    return create_app(explore_config)


@pytest.fixture(scope="session")
def client(app) -> TestClient:
    """A test client that talks to the app as the browser's page does: on the loopback address,
    sending the page's origin (as fetch() does on a POST)."""
    return TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})


@pytest.fixture(scope="session")
def cnn_root(tmp_path_factory) -> Path:
    """``runs/`` holding one trained run, ``cnn`` (cnn-digits): a runs folder without a ViT."""
    root = tmp_path_factory.mktemp("cnn-runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        run(
            "classify",
            TrainConfig(
                model="cnn-digits",
                rows=96,
                epochs=1,
                batch_size=32,
                warmup_epochs=0.0,
                augment="none",
                device="cpu",
                out_dir=str(root / "cnn"),
            ),
        )
    finally:
        torch.set_num_threads(threads)
    return root


@pytest.fixture(scope="session")
def cnn_client(cnn_root: Path) -> TestClient:
    """The explorer on the CNN-only runs folder, as the page talks to it."""
    app = create_app(ExploreConfig(checkpoints=[cnn_root / "cnn"], runs=[cnn_root]))
    return TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})


# -- the browser tests' fixtures (their helpers are in browser_support.py) ------------------------------------


@pytest.fixture(scope="module")
def server(app):
    """The app served by uvicorn on a free loopback port, in a thread."""
    with serve_in_background(app) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: $VITLAB_EXPLORE_SCREENSHOTS (docs/screenshots refreshes the README's), else a
    temporary folder."""
    folder = os.environ.get("VITLAB_EXPLORE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (skipped where either is missing)."""
    from browser_support import CHROMIUM, CHROMIUM_FLAGS, sync_api

    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def browser_page(browser, server):
    """One page shared by a module's tests, started on the digits and the tokens of the image itself."""
    from browser_support import START, new_page

    page = new_page(browser, server + START)
    yield page
    page.close()
