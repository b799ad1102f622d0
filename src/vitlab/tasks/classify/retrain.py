"""A fresh copy of a classifier's recipe, trained a few epochs: the explanation audit's permuted-label check.

:func:`train_copy` trains a new model of a :class:`~vitlab.tasks.classify.TrainConfig`'s recipe on the splits
it is given (the audit passes them with the training labels shuffled); :func:`retrainer` binds it to a
checkpoint's recipe, read from its run folder (:func:`checkpoint_train_config`). Nothing is written to disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import nn

from ...data import DataSplits
from ...engine import fit
from ...errors import CheckpointError
from ...runs import Loaded
from ...runs.layout import CONFIG
from .task import ClassificationTask, TrainConfig, build_model


def checkpoint_train_config(ckpt: Loaded) -> TrainConfig:
    """The training run's config (``config.json`` of its run folder), else the default recipe for
    the checkpoint's model and config."""
    config_file = ckpt.path.parent.parent / CONFIG
    if config_file.is_file() and ckpt.kind == "classifier":
        saved = json.loads(config_file.read_text())
        if isinstance(saved, dict) and "model" in saved:
            return TrainConfig.from_dict(saved)
    if ckpt.name is None:
        raise CheckpointError(
            f"{ckpt.path} records no registered model name: the permuted-label check cannot "
            f"retrain it; pass --sanity-epochs 0"
        )
    model_config: Any = ckpt.model.config
    return TrainConfig(
        model=ckpt.name,
        model_overrides=model_config.to_dict(),
        dataset=ckpt.data.dataset or "digits",
        seed=ckpt.data.seed,
    )


def train_copy(config: TrainConfig, splits: DataSplits, epochs: int, device: torch.device | str) -> nn.Module:
    """A new model of ``config``'s recipe trained ``epochs`` epochs on ``splits`` on ``device`` (no
    files written, no resume), in eval mode; it maps images ``(B, C, H, W)`` to logits ``(B, classes)``."""
    config = replace(config, epochs=epochs, out_dir=None, resume=False, device=str(device))
    return fit(ClassificationTask(build_model(config, splits), splits, config), config).model.eval()


def retrainer(ckpt: Loaded) -> Callable[[DataSplits, int], nn.Module]:
    """``copy(splits, epochs)``: :func:`train_copy` of the checkpoint's recipe (:func:`checkpoint_train_config`,
    read now, so a checkpoint it cannot rebuild is refused before any work) on the device its model sits on."""
    return partial(train_copy, checkpoint_train_config(ckpt), device=next(ckpt.model.parameters()).device)
