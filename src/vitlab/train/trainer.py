"""The training loop: ``train(TrainConfig) -> TrainResult``.

One epoch: the rank's shard of a seeded permutation in batches (:class:`~vitlab.data.BatchLoader`),
batched augmentation, normalisation, forward (bf16 autocast on CUDA), cross-entropy with label
smoothing, backward, gradient clipping, optimizer and per-step LR schedule, EMA update. Then
validation (all-reduced over ranks), a ``last`` checkpoint, a ``best`` one when validation accuracy
improves, and ``metrics.jsonl`` / ``metrics.csv`` rewritten from the history.

Determinism: every source of training randomness restarts at each epoch from a seed derived from
``(seed, epoch, rank)`` (global torch / NumPy / Python RNGs for dropout and stochastic depth, the
augmenter's generator; the loader's shuffle from ``seed + epoch``). So a run resumed from its
``last`` checkpoint at an epoch boundary ends with the same weights as an uninterrupted run, and
the checkpoint needs no RNG state.

A run folder (``out_dir``)::

    config.json  metrics.jsonl  metrics.csv  summary.json
    last/model.safetensors  last/state.pt      (every epoch; resume reads these)
    best/model.safetensors                     (best validation accuracy; EMA weights if EMA is on)
"""
from __future__ import annotations

import csv
import io
import json
import random
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .. import __version__
from ..data import AugmentConfig, BatchAugment, BatchLoader, DataSplits, ImageDataset, load_dataset, normalize
from ..data.augment import PRESETS
from ..models import create_model
from ..models.config import reject_unknown
from .checkpoint import WEIGHTS, STATE, atomic_write, load_state, read_metadata, save_state, save_weights
from .distributed import DistEnv, all_reduce_sum, setup, teardown
from .evaluate import predict_logits
from .metrics import calibration_bins, ece_from_bins
from .optim import OPTIMIZERS, SCHEDULES, ModelEma, build_optimizer, build_scheduler
from .report import Reporter

# Named recipes: TrainConfig field overrides. "default" is the TrainConfig defaults themselves:
# AdamW (weight decay 0.05), 3 warmup epochs then cosine, label smoothing 0.1, clipping at 1, random
# erasing 0.25 (the "light" preset's 1-pixel shifts of 8x8 digits slow a patch-2 ViT badly).
RECIPES: dict[str, dict[str, Any]] = {
    "default": {},
    "plain": {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "schedule": "constant", "warmup_epochs": 0.0,
              "weight_decay": 0.0, "augment": "none", "label_smoothing": 0.0, "clip_grad": None,
              "ema_decay": None},
    # vit-seed-small-data (shifted patches + locality self-attention) at 4,000 MNIST rows, 15 epochs:
    # best val 0.9735 / 0.971 / 0.968 over seeds 0-2 (plain vit-seed: ~0.89). See models/__init__.py.
    "small-data": {"model": "vit-seed-small-data", "optimizer": "adamw", "lr": 3e-3, "batch_size": 32,
                   "schedule": "cosine", "warmup_epochs": 2.0, "weight_decay": 0.05, "label_smoothing": 0.1,
                   "clip_grad": 1.0, "augment": AugmentConfig(crop_padding=1), "ema_decay": None},
}

# Fields a resumed run may change: they do not affect the weights.
RESUME_FREE = ("resume", "device", "eval_every", "out_dir")

METRIC_COLUMNS = ("epoch", "train_loss", "train_acc", "val_loss", "val_acc", "val_ece", "lr", "images_per_s",
                  "seconds")


@dataclass
class TrainConfig:
    """Everything that defines a training run. ``TrainConfig()`` is the ``default`` recipe; build
    another with :meth:`from_recipe` (``recipe`` records which one it came from).

    ``batch_size`` is per process (the global batch is ``batch_size * world_size``). ``augment`` is
    an :class:`~vitlab.data.AugmentConfig` or a preset name (sized to the images; flips only where
    the dataset allows them). ``model_overrides`` replace model config fields (e.g. ``drop_rate``,
    ``drop_path_rate``); ``num_classes``, ``in_chans`` and ``img_size`` follow the data unless
    overridden. ``out_dir=None`` writes no files. ``ema_decay`` (e.g. 0.999) keeps an EMA of the
    weights, which is then what validation, ``best`` and the returned model use.

    Fine-tuning: ``init`` is a checkpoint whose matching weights start the model (e.g. from
    ``vitlab pretrain``); ``layer_decay`` scales block ``i``'s LR by ``layer_decay ** (depth - i)``.
    Distillation (DeiT): ``teacher`` is a checkpoint, ``distill`` ``soft`` | ``hard``; the ViT gets a
    distillation token and head, the loss is ``(1 - distill_alpha) * CE + distill_alpha * distillation``
    at ``distill_temperature`` (see :mod:`vitlab.ssl.distill`).
    """
    model: str = "vit-digits"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    dataset: str = "digits"
    data_dir: str | None = None
    rows: int | None = None
    seed: int = 0
    epochs: int = 60
    batch_size: int = 64
    lr: float = 3e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    optimizer: str = "adamw"
    warmup_epochs: float = 3.0
    schedule: str = "cosine"
    label_smoothing: float = 0.1
    clip_grad: float | None = 1.0
    ema_decay: float | None = None
    augment: str | AugmentConfig = field(default_factory=lambda: AugmentConfig(erasing=0.25))
    eval_every: int = 1
    out_dir: str | None = None
    resume: bool = False
    device: str = "auto"
    amp: bool = True
    recipe: str = "default"
    init: str | None = None
    layer_decay: float | None = None
    teacher: str | None = None
    distill: str | None = None
    distill_alpha: float = 0.5
    distill_temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}: choose one of {list(RECIPES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}: choose one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}: choose one of {SCHEDULES}")
        if isinstance(self.augment, str) and self.augment not in PRESETS:
            raise ValueError(f"unknown augment preset {self.augment!r}: choose one of {PRESETS} "
                             f"or pass an AugmentConfig")
        for name in ("epochs", "batch_size", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or self.min_lr < 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError(f"need lr > 0 and min_lr, weight_decay, warmup_epochs >= 0; got lr={self.lr}, "
                             f"min_lr={self.min_lr}, weight_decay={self.weight_decay}, "
                             f"warmup_epochs={self.warmup_epochs}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")
        if self.clip_grad is not None and self.clip_grad <= 0:
            raise ValueError(f"clip_grad must be > 0 (or None to turn clipping off), got {self.clip_grad}")
        if (self.teacher is None) != (self.distill is None):
            raise ValueError("distillation needs both a teacher checkpoint and a kind: --teacher CKPT --distill "
                             "soft|hard")
        if self.distill is not None and self.distill not in ("soft", "hard"):
            raise ValueError(f"distill must be 'soft' or 'hard', got {self.distill!r}")
        if self.resume and self.out_dir is None:
            raise ValueError("resume=True needs the run folder to resume from: set out_dir (--out DIR)")

    @classmethod
    def from_recipe(cls, recipe: str = "default", **overrides: Any) -> "TrainConfig":
        """The named recipe's settings, then ``overrides`` (any TrainConfig field)."""
        if recipe not in RECIPES:
            raise ValueError(f"unknown recipe {recipe!r}: choose one of {list(RECIPES)}")
        return cls(**{**RECIPES[recipe], **overrides, "recipe": recipe})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (an AugmentConfig becomes a dict)."""
        d = asdict(self)
        if isinstance(self.augment, AugmentConfig):
            d["augment"] = asdict(self.augment)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        reject_unknown(d, (f.name for f in fields(cls)), "TrainConfig")
        if isinstance(d.get("augment"), dict):
            d = {**d, "augment": AugmentConfig(**d["augment"])}
        return cls(**d)


@dataclass
class TrainResult:
    """What :func:`train` returns. ``model`` is unwrapped, in eval mode, holding the final weights
    (the EMA when ``ema_decay`` is set). ``test`` has ``loss``, ``acc``, ``ece`` of that model on
    the test split (None without one). ``seconds`` sums the epochs' wall time (validation included)."""
    config: TrainConfig
    model: nn.Module
    history: list[dict[str, Any]]
    best_val_acc: float
    best_epoch: int
    train_acc: float
    test: dict[str, float] | None
    seconds: float
    params: int
    checkpoints: dict[str, Path]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def epoch_seed(seed: int, epoch: int, rank: int) -> int:
    """A well-mixed 63-bit seed for ``(seed, epoch, rank)``."""
    words = np.random.SeedSequence([seed, epoch, rank]).generate_state(2)
    return int(words[0]) << 31 ^ int(words[1])


def build_model(config: TrainConfig, splits: DataSplits) -> nn.Module:
    """``create_model(config.model)`` shaped for the data (classes, channels, image size), then
    ``config.model_overrides``."""
    chans, height, width = splits.image_shape
    return create_model(config.model, **{"num_classes": splits.num_classes, "in_chans": chans,
                                         "img_size": (height, width), **config.model_overrides})


def resolve_augment(augment: str | AugmentConfig, splits: DataSplits) -> AugmentConfig:
    """A preset name sized to the images (and flipping only where ``splits.hflip_ok``), or the config."""
    if isinstance(augment, AugmentConfig):
        return augment
    return AugmentConfig.preset(augment, image_size=min(splits.image_shape[1:]), hflip_ok=splits.hflip_ok)


def train(config: TrainConfig, splits: DataSplits | None = None, reporter: Reporter | None = None) -> TrainResult:
    """Train ``config.model`` on ``splits`` (default: ``load_dataset(config.dataset, ...)``).

    Under torchrun (``RANK``/``WORLD_SIZE`` set) this process joins the job and trains with DDP;
    rank 0 writes the files. ``reporter`` receives progress (default: silent).
    """
    env = setup(config.device)
    try:
        return _Run(config, splits, reporter or Reporter(), env).run()
    finally:
        teardown(env)


def _to_device(data: ImageDataset | None, device: torch.device) -> ImageDataset | None:
    return None if data is None else ImageDataset(data.images.to(device), data.labels.to(device), data.classes)


class _Run:
    """One call of :func:`train`: the objects it builds and the loop over epochs."""

    def __init__(self, config: TrainConfig, splits: DataSplits | None, reporter: Reporter, env: DistEnv) -> None:
        self.config, self.reporter, self.env = config, reporter, env
        self.splits = splits or load_dataset(config.dataset, config.data_dir, seed=config.seed, rows=config.rows)
        device = env.device
        seed_everything(config.seed)
        self.model = build_model(config, self.splits).to(device)
        self.teacher = None
        if config.init is not None or config.teacher is not None:
            self._prepare_ssl(device)
        self.net = (DistributedDataParallel(self.model, device_ids=[device.index] if device.type == "cuda" else None)
                    if env.world_size > 1 else self.model)
        self.train_set = _to_device(self.splits.train, device)
        self.val_set = _to_device(self.splits.val, device)
        self.test_set = _to_device(self.splits.test, device)
        self.mean = torch.tensor(self.splits.mean, device=device)
        self.std = torch.tensor(self.splits.std, device=device)
        self.augment = resolve_augment(config.augment, self.splits)
        self.loader = BatchLoader(self.train_set, config.batch_size, shuffle=True, seed=config.seed,
                                  rank=env.rank, world_size=env.world_size)
        steps = len(self.loader)
        if config.layer_decay is not None:
            from ..ssl.finetune import build_finetune_optimizer
            self.optimizer = build_finetune_optimizer(self.model, config.optimizer, config.lr, config.weight_decay,
                                                      config.layer_decay)
        else:
            self.optimizer = build_optimizer(self.model, config.optimizer, config.lr, config.weight_decay)
        self.scheduler = build_scheduler(self.optimizer, config.schedule, steps * config.epochs,
                                         round(config.warmup_epochs * steps), config.lr, config.min_lr)
        self.ema = ModelEma(self.model, config.ema_decay) if config.ema_decay else None
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.amp and device.type == "cuda")
        self.history: list[dict[str, Any]] = []
        self.best_val_acc, self.best_epoch, self.start_epoch = -1.0, 0, 0
        self.run_dir = Path(config.out_dir) if config.out_dir is not None else None
        if self.run_dir is not None:
            self._prepare_run_dir()

    @property
    def eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.model

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        cfg = self.config
        self.reporter.start(cfg.epochs, self.start_epoch, len(self.loader))
        for epoch in range(self.start_epoch, cfg.epochs):
            record = self.train_epoch(epoch)
            self.history.append(record)
            improved = record["val_acc"] is not None and record["val_acc"] > self.best_val_acc
            if improved:
                self.best_val_acc, self.best_epoch = record["val_acc"], record["epoch"]
            if self.run_dir is not None and self.env.is_main:
                self._write_checkpoints(record["epoch"], improved)
            self.reporter.epoch(record)
        self.reporter.close()
        test = self.evaluate(self.test_set) if self.test_set is not None else None
        result = TrainResult(
            config=cfg, model=self.eval_model.eval(), history=self.history, best_val_acc=self.best_val_acc,
            best_epoch=self.best_epoch, train_acc=self.history[-1]["train_acc"] if self.history else float("nan"),
            test=test, seconds=sum(r["seconds"] for r in self.history),
            params=sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            checkpoints={name: self.run_dir / name / WEIGHTS for name in ("last", "best")} if self.run_dir else {})
        if self.run_dir is not None and self.env.is_main:
            summary = {k: getattr(result, k) for k in ("best_val_acc", "best_epoch", "train_acc", "test", "seconds",
                                                       "params")}
            atomic_write(self.run_dir / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
        return result

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """One pass over this rank's shard, then validation; returns the epoch's record."""
        cfg, env = self.config, self.env
        seed = epoch_seed(cfg.seed, epoch, env.rank)
        seed_everything(seed)
        self.loader.set_epoch(epoch)
        augment = (BatchAugment(self.augment, self.splits.num_classes, generator_seed=seed)
                   if self.augment != AugmentConfig() else None)
        every = self.reporter.every
        self.net.train()
        totals = torch.zeros(2, device=env.device)  # sum of loss * batch, number correct
        count, start = 0, time.perf_counter()
        for step, (images, labels) in enumerate(self.loader, 1):
            targets = labels
            if augment is not None:
                images, targets = augment(images, labels)
            with self.autocast:
                inputs = normalize(images, self.mean, self.std)
                logits = self.net(inputs)
                teacher_logits = self._teacher_logits(inputs) if self.teacher is not None else None
            if teacher_logits is not None:
                loss, logits = self._distill_loss(logits, teacher_logits, targets)
            else:
                loss = F.cross_entropy(logits.float(), targets, label_smoothing=cfg.label_smoothing)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip_grad is not None:
                nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_grad)
            self.optimizer.step()
            self.scheduler.step()
            if self.ema is not None:
                self.ema.update(self.model)
            with torch.no_grad():
                totals[0] += loss.detach() * len(labels)
                totals[1] += (logits.argmax(dim=1) == labels).sum()
            count += len(labels)
            if every and (step % every == 0 or step == len(self.loader)):
                loss_sum, correct = totals.tolist()
                self.reporter.step(epoch + 1, step, loss_sum / count, correct / count,
                                   count * env.world_size / (time.perf_counter() - start))
        sums = all_reduce_sum(torch.cat([totals.double(), totals.new_tensor([count], dtype=torch.float64)]))
        train_seconds = time.perf_counter() - start
        loss_sum, correct, seen = sums.tolist()
        record = {"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_acc": correct / seen,
                  "val_loss": None, "val_acc": None, "val_ece": None, "lr": self.scheduler.get_last_lr()[0],
                  "images_per_s": seen / train_seconds}
        if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs:
            val = self.evaluate(self.val_set)
            record.update(val_loss=val["loss"], val_acc=val["acc"], val_ece=val["ece"])
        record["seconds"] = time.perf_counter() - start
        return record

    def _prepare_ssl(self, device: torch.device) -> None:
        """Load ``init`` weights into the model; wrap it for distillation and load the teacher."""
        from ..ssl.distill import distilled_from
        from ..ssl.finetune import load_pretrained
        from .checkpoint import load_checkpoint

        cfg = self.config
        if cfg.init is not None:
            load_pretrained(self.model, cfg.init)
        if cfg.teacher is not None:
            self.model = distilled_from(self.model)
            self.teacher = load_checkpoint(cfg.teacher, device).model.eval().requires_grad_(False)

    @torch.no_grad()
    def _teacher_logits(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.teacher(inputs).float()

    def _distill_loss(self, outputs: tuple[torch.Tensor, torch.Tensor], teacher_logits: torch.Tensor,
                      targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """DeiT's loss over the class and distillation heads, and the averaged logits."""
        from ..ssl.distill import distillation_loss

        cfg = self.config
        cls, dist = (o.float() for o in outputs)
        loss = ((1 - cfg.distill_alpha) * F.cross_entropy(cls, targets, label_smoothing=cfg.label_smoothing)
                + cfg.distill_alpha * distillation_loss(dist, teacher_logits, cfg.distill, cfg.distill_temperature))
        return loss, (cls + dist) / 2

    def evaluate(self, data: ImageDataset) -> dict[str, float]:
        """Loss (NLL), accuracy and ECE of :attr:`eval_model` on ``data``, each rank scoring every
        ``world_size``-th image and the sums all-reduced."""
        rank, world = self.env.rank, self.env.world_size
        images, labels = data.images[rank::world], data.labels[rank::world]
        logits = predict_logits(self.eval_model, images, self.mean, self.std, amp=self.config.amp)
        loss_sum = F.cross_entropy(logits, labels, reduction="sum").double().reshape(1)
        bins = all_reduce_sum(torch.cat([loss_sum, calibration_bins(logits.softmax(dim=1), labels).flatten()]))
        loss_sum, bins = bins[0].item(), bins[1:].reshape(3, -1)
        n = bins[0].sum().item()
        return {"loss": loss_sum / n, "acc": bins[2].sum().item() / n, "ece": ece_from_bins(bins)}

    # -- files ----------------------------------------------------------------------------------

    def _prepare_run_dir(self) -> None:
        """Start a fresh run folder, or load the ``last`` checkpoint when resuming."""
        cfg, run_dir = self.config, self.run_dir
        state_file, config_file = run_dir / "last" / STATE, run_dir / "config.json"
        if not cfg.resume:
            if state_file.exists():
                raise ValueError(f"{run_dir} already holds a run: resume it (--resume) or choose another "
                                 f"folder (--out)")
            if self.env.is_main:
                atomic_write(config_file, (json.dumps(cfg.to_dict(), indent=2) + "\n").encode())
            return
        if not state_file.exists():
            raise FileNotFoundError(f"nothing to resume in {run_dir}: no {state_file}; start without --resume")
        saved = json.loads(config_file.read_text())
        current = json.loads(json.dumps(cfg.to_dict()))
        changed = sorted(k for k in current if k not in RESUME_FREE and saved.get(k) != current[k])
        if changed:
            raise ValueError(f"resuming {run_dir} with different settings: "
                             + ", ".join(f"{k} (run has {saved.get(k)!r}, given {current[k]!r})" for k in changed)
                             + "; use the run's settings or start a new run")
        state = load_state(state_file)
        weights_file = run_dir / "last" / WEIGHTS
        if read_metadata(weights_file).get("epoch") != state["epoch"]:
            raise ValueError(f"{weights_file} and {state_file} are from different epochs (interrupted while "
                             f"saving?): start the run again")
        self.model.load_state_dict(load_file(str(weights_file), device=str(self.env.device)))
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.ema is not None:
            self.ema.load_state_dict(state["ema"])
        self.history = state["history"]
        self.best_val_acc, self.best_epoch, self.start_epoch = state["best_val_acc"], state["best_epoch"], state["epoch"]

    def _metadata(self, epoch: int, weights: str) -> dict[str, Any]:
        cfg, splits = self.config, self.splits
        return {"model": cfg.model, "config": self.model.config.to_dict(), "dataset": splits.name,
                "data_dir": cfg.data_dir, "rows": cfg.rows, "seed": cfg.seed, "classes": splits.train.classes,
                "mean": list(splits.mean), "std": list(splits.std), "epoch": epoch, "weights": weights,
                "vitlab": __version__, **({"distilled": True} if self.teacher is not None else {})}

    def _write_checkpoints(self, epoch: int, improved: bool) -> None:
        run_dir = self.run_dir
        save_weights(self.model, run_dir / "last" / WEIGHTS, self._metadata(epoch, "model"))
        save_state(run_dir / "last" / STATE, {
            "epoch": epoch, "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None, "history": self.history,
            "best_val_acc": self.best_val_acc, "best_epoch": self.best_epoch})
        if improved:
            meta = {**self._metadata(epoch, "ema" if self.ema is not None else "model"), "val_acc": self.best_val_acc}
            save_weights(self.eval_model, run_dir / "best" / WEIGHTS, meta)
        lines = "".join(json.dumps(r) + "\n" for r in self.history)
        atomic_write(run_dir / "metrics.jsonl", lines.encode())
        table = io.StringIO()
        writer = csv.DictWriter(table, METRIC_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.history)
        atomic_write(run_dir / "metrics.csv", table.getvalue().encode())
