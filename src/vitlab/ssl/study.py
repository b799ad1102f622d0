"""The pretraining / distillation study: the same labelled budget, ViTs from scratch, from MAE or
DINO pretraining, with or without a CNN teacher (``vitlab compare --pretrain ... --distill ...``).

For each ``pretrain`` method other than ``none``, the ViT is pretrained once without labels on every
image of the dataset (``images="all"``: on MNIST's t10k protocol this includes the validation
images, labels unused). With ``cnn`` in ``distill``, the CNN is trained once on the labelled rows
and becomes the teacher. Every cell then trains the ViT on the labelled rows with the same recipe:
``init`` from the pretrained encoder (with layer-wise LR decay) and / or DeiT distillation.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, Callable

from ..data import load_dataset
from ..train import TrainConfig, train
from .mae import MAEConfig
from .pretrain import METHODS, PretrainConfig, pretrain

PRETRAIN_CHOICES = ("none",) + METHODS
DISTILL_CHOICES = ("none", "cnn")


@dataclass
class StudyConfig:
    """The grid ``pretrain x distill`` over one labelled budget; ``train`` is every supervised run's config
    (its ``model`` the ViT); ``cnn`` the teacher's model name, ``cnn_overrides`` its config fields."""
    train: TrainConfig = field(default_factory=TrainConfig)
    cnn: str = "cnn-digits"
    cnn_overrides: dict[str, Any] = field(default_factory=dict)
    pretrain: tuple[str, ...] = ("none", "mae")
    distill: tuple[str, ...] = ("none", "cnn")
    pretrain_epochs: int = 40
    mask_ratio: float = 0.75
    layer_decay: float = 0.75
    distill_kind: str = "hard"

    def __post_init__(self) -> None:
        for name, values, choices in (("pretrain", self.pretrain, PRETRAIN_CHOICES),
                                      ("distill", self.distill, DISTILL_CHOICES)):
            bad = [v for v in values if v not in choices]
            if bad or not values:
                raise ValueError(f"{name} values {bad or 'none given'}: choose from {choices}")


def run_study(config: StudyConfig, progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Train the grid; one record per run: ``run`` (``cnn`` or ``vit``), ``pretrain``, ``distill``,
    ``best_val_acc``, ``test_acc`` (None without a test split), ``seconds`` (wall, pretraining included)."""
    cfg = config.train
    splits = load_dataset(cfg.dataset, cfg.data_dir, seed=cfg.seed, rows=cfg.rows)
    records: list[dict[str, Any]] = []

    def record(run: str, pretrain_method: str, distill: str, result, seconds: float) -> None:
        rec = {"run": run, "model": result.config.model, "pretrain": pretrain_method, "distill": distill,
               "rows": len(splits.train), "best_val_acc": result.best_val_acc,
               "test_acc": result.test["acc"] if result.test else None, "seconds": seconds}
        records.append(rec)
        if progress is not None:
            progress(rec)

    with tempfile.TemporaryDirectory() as tmp:
        encoders: dict[str, tuple[str, float]] = {}
        for method in (m for m in config.pretrain if m != "none"):
            start, out = time.perf_counter(), str(Path(tmp) / method)
            pretrain(PretrainConfig(method=method, model=cfg.model, model_overrides=cfg.model_overrides,
                                    dataset=cfg.dataset, data_dir=cfg.data_dir, images="all", seed=cfg.seed,
                                    epochs=config.pretrain_epochs, mae=MAEConfig(mask_ratio=config.mask_ratio),
                                    device=cfg.device, out_dir=out))
            encoders[method] = (out, time.perf_counter() - start)
        teacher = None
        if "cnn" in config.distill:
            start, teacher = time.perf_counter(), str(Path(tmp) / "cnn")
            cnn = replace(cfg, model=config.cnn, model_overrides=config.cnn_overrides, out_dir=teacher)
            result = train(cnn, splits)
            record("cnn", "none", "none", result, time.perf_counter() - start)
        for method, distill in product(config.pretrain, config.distill):
            init, pre_seconds = encoders.get(method, (None, 0.0))
            start = time.perf_counter()
            result = train(replace(cfg, out_dir=None, init=init,
                                   layer_decay=config.layer_decay if init else cfg.layer_decay,
                                   teacher=teacher if distill == "cnn" else None,
                                   distill=config.distill_kind if distill == "cnn" else None), splits)
            record("vit", method, distill, result, time.perf_counter() - start + pre_seconds)
    return records
