"""Trained tiny models shared by the explain tests (trained once per session, one CPU thread)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from vitlab.data import DataSplits, load_dataset
from vitlab.explain.synthetic import key_patch_splits
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

KEY_PATCH = 5
SMALL_VIT = {"embed_dim": 32, "depth": 2, "num_heads": 2}


@contextmanager
def single_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, above all on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    with single_thread():
        yield


@dataclass
class Run:
    model: nn.Module
    splits: DataSplits
    config: TrainConfig
    val_acc: float
    key_patch: int | None = None


def _train(config: TrainConfig, splits: DataSplits, key_patch: int | None = None) -> Run:
    with single_thread():
        result = run("classify", config, splits)
    return Run(result.model.eval(), splits, config, result.best_val_acc, key_patch)


@pytest.fixture(scope="session")
def digits_run() -> Run:
    """A small ViT (2 blocks of width 32, mean-pooled) trained briefly on the 8x8 digits."""
    config = TrainConfig.from_recipe("plain", epochs=10, lr=3e-3, batch_size=32, model_overrides=SMALL_VIT)
    return _train(config, load_dataset("digits"))


@pytest.fixture(scope="session")
def key_patch_run() -> Run:
    """The same small ViT trained on the task whose label is the pattern in patch KEY_PATCH."""
    config = TrainConfig.from_recipe("plain", epochs=10, lr=3e-3, model_overrides=SMALL_VIT)
    return _train(config, key_patch_splits(num_images=1200, key_patch=KEY_PATCH), KEY_PATCH)
