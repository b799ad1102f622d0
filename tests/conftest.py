"""Shared test settings: deterministic, offline, quiet, one CPU thread.

The suite trains many tiny models, which run fastest on one thread (and far faster than on two
threads that compete with anything else on the machine); DDP tests start their own processes.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def cache_repo(cache, repo: str, folder, commit: str = "0" * 39 + "1"):
    """``folder``'s files as the Hugging Face hub cache holds a downloaded repo: ``models--ORG--NAME/blobs/SHA256``,
    ``snapshots/COMMIT/FILE`` (a relative link to its blob) and ``refs/main`` holding the commit."""
    import hashlib
    from pathlib import Path

    root = Path(cache) / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir()
    for file in sorted(Path(folder).iterdir()):
        data = file.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(Path("..", "..", "blobs", blob.name))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache of this test's own, offline: ``hub_cache(repo, folder)`` adds a repo."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (home / "hub").mkdir(parents=True)
    return lambda repo, folder: cache_repo(home / "hub", repo, folder)


def _write_hue_photos(
    folder, count: int, seed: int, sides: tuple[int, int] = (60, 140), classes: tuple[str, ...] = ("ant", "bee", "cat")
) -> None:
    """``count`` JPEGs per class under ``folder/CLASS/`` of mixed, non-square sizes (sides drawn from ``sides``;
    odd crop margins among them), each class its own hue."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c, name in enumerate(classes):
        (folder / name).mkdir(parents=True)
        for i in range(count):
            height, width = (int(v) for v in rng.integers(*sides, size=2))
            pixels = rng.normal(60, 25, size=(height, width, 3))
            pixels[..., c] += 120
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / name / f"{i:03d}.jpg", quality=90)


@pytest.fixture
def hue_photos():
    """The writer of a small photo folder: ``hue_photos(folder, count, seed, sides=(60, 140))``."""
    return _write_hue_photos
