"""Self-supervised pretraining runs: ``pretrain(PretrainConfig) -> PretrainResult``.

``method="mae"`` trains a :class:`~vitlab.ssl.mae.MaskedAutoencoder` around the ViT;
``method="dino"`` a student / momentum-teacher pair (:mod:`vitlab.ssl.dino`). Labels are never
read. The images are the training split, or with ``images="all"`` every split's (train, val and
test: for a pretrain-then-fine-tune protocol this means the encoder has seen the validation
images, without their labels).

The result's ``encoder`` is the ViT (the DINO teacher's backbone), with its classifier head as
built. With ``out_dir`` it is saved as a vitlab checkpoint (``model.safetensors``, loadable by
``load_checkpoint`` and ``vitlab train --init``) beside ``metrics.jsonl``, ``loss.png`` and, for
MAE, ``reconstructions.png``.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import __version__
from ..data import BatchLoader, DataSplits, ImageDataset, load_dataset, normalize
from ..models.vit import VisionTransformer
from ..train.checkpoint import WEIGHTS, atomic_write, save_weights
from ..train.distributed import resolve_device
from ..train.optim import build_optimizer, build_scheduler
from ..train.trainer import TrainConfig, build_model, epoch_seed, seed_everything
from .crops import multi_crop
from .dino import Centre, DINOHead, DINONet, cosine_momentum, dino_loss, ema_update_, teacher_temperature
from .mae import MAEConfig, MaskedAutoencoder

METHODS = ("mae", "dino")
IMAGE_SETS = ("train", "all")


@dataclass
class PretrainConfig:
    """Everything that defines a pretraining run (``mae`` fields and ``dino`` fields apply to their method)."""
    method: str = "mae"
    model: str = "vit-digits"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    dataset: str = "digits"
    data_dir: str | None = None
    images: str = "train"
    seed: int = 0
    epochs: int = 50
    batch_size: int = 128
    lr: float = 1.5e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    warmup_epochs: float = 5.0
    clip_grad: float | None = 1.0
    mae: MAEConfig = field(default_factory=MAEConfig)
    dino_out_dim: int = 256
    local_crops: int = 4
    local_size: int | None = None
    student_temp: float = 0.1
    teacher_temp: float = 0.07
    warmup_teacher_temp: float = 0.04
    teacher_temp_epochs: int = 10
    teacher_momentum: float = 0.996
    centre_momentum: float = 0.9
    out_dir: str | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown pretraining method {self.method!r}: choose one of {METHODS}")
        if self.images not in IMAGE_SETS:
            raise ValueError(f"images must be one of {IMAGE_SETS}, got {self.images!r}")
        if isinstance(self.mae, dict):
            self.mae = MAEConfig(**self.mae)
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class PretrainResult:
    """The pretrained backbone (eval mode), per-epoch records, and the checkpoint (None without out_dir)."""
    config: PretrainConfig
    encoder: nn.Module
    history: list[dict[str, float]]
    seconds: float
    checkpoint: Path | None


def unlabelled_images(splits: DataSplits, which: str) -> torch.Tensor:
    """The images to pretrain on, ``(N, C, H, W)``: the train split, or every split (``all``)."""
    parts = [splits.train] if which == "train" else [s for s in (splits.train, splits.val, splits.test) if s]
    return torch.cat([p.images for p in parts])


def pretrain(config: PretrainConfig, splits: DataSplits | None = None) -> PretrainResult:
    """Pretrain ``config.model`` on ``splits`` (default ``load_dataset(config.dataset)``) without labels."""
    device = resolve_device(config.device)
    splits = splits or load_dataset(config.dataset, config.data_dir, seed=config.seed)
    seed_everything(config.seed)
    overrides = dict(config.model_overrides)
    if config.method == "dino":
        overrides.setdefault("dynamic_img_size", True)
    encoder = build_model(TrainConfig(model=config.model, model_overrides=overrides), splits).to(device)
    if not isinstance(encoder, VisionTransformer):
        raise ValueError(f"{config.model} is not a ViT: self-supervised pretraining here needs a vit-* model")
    images = unlabelled_images(splits, config.images).to(device)
    data = ImageDataset(images, torch.zeros(len(images), dtype=torch.long, device=device), ["?"])
    loader = BatchLoader(data, config.batch_size, shuffle=True, seed=config.seed,
                         drop_last=len(data) > config.batch_size)
    mean, std = torch.tensor(splits.mean, device=device), torch.tensor(splits.std, device=device)
    step_fn = (_MAEStep(encoder, config) if config.method == "mae" else _DINOStep(encoder, config, splits.hflip_ok,
                                                                                   len(loader)))
    step_fn.to(device)
    optimizer = build_optimizer(step_fn.student, "adamw", config.lr, config.weight_decay)
    steps = len(loader) * config.epochs
    scheduler = build_scheduler(optimizer, "cosine", steps, round(config.warmup_epochs * len(loader)), config.lr,
                                config.min_lr)
    history: list[dict[str, float]] = []
    for epoch in range(config.epochs):
        seed = epoch_seed(config.seed, epoch, 0)
        seed_everything(seed)
        generator = torch.Generator(device=device).manual_seed(seed)
        loader.set_epoch(epoch)
        step_fn.student.train()
        sums: dict[str, float] = {}
        start = time.perf_counter()
        for x, _ in loader:
            stats = step_fn(normalize(x, mean, std), epoch, generator)
            optimizer.zero_grad(set_to_none=True)
            stats["loss"].backward()
            if config.clip_grad is not None:
                nn.utils.clip_grad_norm_(step_fn.student.parameters(), config.clip_grad)
            optimizer.step()
            scheduler.step()
            step_fn.after_step()
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
        history.append({"epoch": epoch + 1, **{k: v / len(loader) for k, v in sums.items()},
                        "lr": scheduler.get_last_lr()[0], "seconds": time.perf_counter() - start})
    encoder = step_fn.backbone().eval()
    checkpoint = None
    if config.out_dir is not None:
        checkpoint = _write(config, splits, encoder, step_fn, history, images, mean, std)
    return PretrainResult(config, encoder, history, sum(r["seconds"] for r in history), checkpoint)


class _MAEStep(nn.Module):
    def __init__(self, encoder: VisionTransformer, config: PretrainConfig) -> None:
        super().__init__()
        self.student = MaskedAutoencoder(encoder, config.mae)

    def forward(self, x: torch.Tensor, epoch: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        loss, _, _ = self.student(x, generator)
        return {"loss": loss}

    def after_step(self) -> None:
        pass

    def backbone(self) -> VisionTransformer:
        return self.student.encoder


class _DINOStep(nn.Module):
    def __init__(self, encoder: VisionTransformer, config: PretrainConfig, hflip: bool, steps_per_epoch: int) -> None:
        super().__init__()
        self.config, self.hflip = config, hflip
        self.student = DINONet(encoder, DINOHead(encoder.embed_dim, config.dino_out_dim))
        self.teacher = copy.deepcopy(self.student).requires_grad_(False)
        self.centre = Centre(config.dino_out_dim, config.centre_momentum)
        self.total_steps, self.steps = steps_per_epoch * config.epochs, 0
        size = encoder.config.img_size[0]
        patch = encoder.config.patch_size
        self.global_size = size
        self.local_size = config.local_size or max(patch, (size // 2) // patch * patch)

    def forward(self, x: torch.Tensor, epoch: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        cfg = self.config
        cpu_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator,
                                                                   device=generator.device)))
        crops = multi_crop(x, self.global_size, self.local_size, cfg.local_crops, hflip=self.hflip,
                           generator=cpu_gen)
        self.teacher.eval()
        with torch.no_grad():
            teacher_out = [self.teacher(c) for c in crops[:2]]
        student_out = [self.student(c) for c in crops]
        temp = teacher_temperature(epoch, cfg.teacher_temp_epochs, cfg.warmup_teacher_temp, cfg.teacher_temp)
        stats = dino_loss(student_out, teacher_out, self.centre, cfg.student_temp, temp)
        return {"loss": stats.loss, "teacher_entropy": stats.teacher_entropy,
                "teacher_student_kl": stats.teacher_student_kl}

    def after_step(self) -> None:
        ema_update_(self.teacher, self.student, cosine_momentum(self.steps, self.total_steps,
                                                                self.config.teacher_momentum))
        self.steps += 1

    def backbone(self) -> VisionTransformer:
        return self.teacher.backbone


def _write(config: PretrainConfig, splits: DataSplits, encoder: VisionTransformer, step_fn: nn.Module,
           history: list[dict[str, float]], images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> Path:
    from .figures import plot_pretrain_loss, plot_reconstructions

    out = Path(config.out_dir)
    file = out / WEIGHTS
    meta = {"model": config.model, "config": encoder.config.to_dict(), "dataset": splits.name,
            "data_dir": config.data_dir, "rows": None, "seed": config.seed, "classes": splits.train.classes,
            "mean": list(splits.mean), "std": list(splits.std), "epoch": config.epochs,
            "weights": f"{config.method}-encoder", "pretrain": config.method, "vitlab": __version__}
    save_weights(encoder, file, meta)
    config_dict = {**asdict(config), "mae": asdict(config.mae)}
    atomic_write(out / "config.json", (json.dumps(config_dict, indent=2) + "\n").encode())
    atomic_write(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history).encode())
    plot_pretrain_loss(history, out / "loss.png", title=f"{config.method} pretraining of {config.model}")
    if config.method == "mae":
        mae = step_fn.student.eval()
        with torch.no_grad():
            x = normalize(images[:8], mean, std)
            _, pred, mask = mae(x, torch.Generator(device=x.device).manual_seed(config.seed))
        plot_reconstructions(x, pred, mask, mae.patch_size, out / "reconstructions.png",
                             norm_pix=config.mae.norm_pix_loss)
    return file
