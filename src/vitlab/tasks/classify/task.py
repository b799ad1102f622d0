"""Supervised classification, the engine's standard task, and DeiT distillation on top of it.

:class:`TrainConfig` extends :class:`~vitlab.engine.config.RunConfig` with the model, augmentation,
label smoothing, and the fine-tuning (``init``, ``layer_decay``) and distillation (``teacher``,
``distill``) settings; :data:`RECIPES` name whole settings. :class:`ClassificationTask` computes
cross-entropy on augmented, normalised batches; given a teacher module it trains a ViT with a
distillation token by DeiT's loss ``(1 - alpha) CE(cls, y) + alpha D(dist, teacher)``, where ``D`` is
``T^2 KL(softmax(teacher / T) || softmax(student / T))`` (``soft``) or ``CE(dist, argmax teacher)``
(``hard``). Loading ``init`` and ``teacher`` checkpoints is the caller's (:func:`vitlab.tasks.train`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ...checks import Check, Fields, Float, Maybe, OneOf, Options, Text, shown
from ...data import AugmentConfig, BatchAugment, DataConfig, DataSplits, ImageDataset
from ...data.augment import PRESETS
from ...data.options import DataOptions
from ...data.preprocess import BatchBuffer, Statistics, unit_pixels
from ...data.stream import StreamDataset, bad_report
from ...engine.config import ModelFields, RunConfig
from ...engine.distributed import all_reduce_sum
from ...engine.evaluate import dataset_logits
from ...engine.loop import epoch_seed
from ...engine.metrics import calibration_bins, ece_from_bins
from ...engine.optim import build_optimizer, layer_decay_groups
from ...engine.task import Task
from ...errors import ConfigError
from ...models import build_registered
from ...models.registry import build_from_config, get_config
from ...models.tuning import TuneMode, TuneOptions, Tuning, merged
from ..distill import DISTILL_KINDS, distillation_loss

# Named recipes: TrainConfig field overrides. "default" is the TrainConfig defaults themselves:
# AdamW (weight decay 0.05), 3 warmup epochs then cosine, label smoothing 0.1, clipping at 1, random
# erasing 0.25 (the "light" preset's 1-pixel shifts of 8x8 digits slow a patch-2 ViT badly).
RECIPES: dict[str, dict[str, Any]] = {
    "default": {},
    "plain": {
        "optimizer": "adam",
        "lr": 1e-3,
        "batch_size": 64,
        "schedule": "constant",
        "warmup_epochs": 0.0,
        "weight_decay": 0.0,
        "augment": "none",
        "label_smoothing": 0.0,
        "clip_grad": None,
        "ema_decay": None,
    },
    # vit-seed-small-data (shifted patches + locality self-attention) at 4,000 MNIST rows, 15 epochs:
    # best val 0.9735 / 0.971 / 0.968 over seeds 0-2 (plain vit-seed: ~0.89). See models/__init__.py.
    "small-data": {
        "model": "vit-seed-small-data",
        "optimizer": "adamw",
        "lr": 3e-3,
        "batch_size": 32,
        "schedule": "cosine",
        "warmup_epochs": 2.0,
        "weight_decay": 0.05,
        "label_smoothing": 0.1,
        "clip_grad": 1.0,
        "augment": AugmentConfig(crop_padding=1),
        "ema_decay": None,
    },
    # Fine-tuning a pretrained ViT on a folder of photos (timm's and DeiT's practice, scaled to a small
    # batch): the new head re-initialised, layer-wise decay 0.75, a tenth of the scratch rate with one
    # warmup epoch, drop-path 0.1, RandomResizedCrop + flip on the decoded photos, label smoothing, and the
    # model's own preprocessing and mean/std (DataOptions left at None).
    "finetune": {
        "optimizer": "adamw",
        "lr": 3e-4,
        "min_lr": 1e-6,
        "batch_size": 32,
        "epochs": 10,
        "schedule": "cosine",
        "warmup_epochs": 1.0,
        "weight_decay": 0.05,
        "layer_decay": 0.75,
        "label_smoothing": 0.1,
        "clip_grad": 1.0,
        "augment": AugmentConfig(resized_crop=0.08, hflip=True),
        "model_overrides": {"drop_path_rate": 0.1},
        "ema_decay": None,
    },
}


@dataclass
class TrainConfig(RunConfig):
    """A classification run. ``TrainConfig()`` is the ``default`` recipe; :meth:`from_recipe` builds
    another (``recipe`` records which).

    ``augment`` is an :class:`~vitlab.data.AugmentConfig` or a preset name (sized to the images;
    flips only where the dataset allows them); ``augment_overrides`` replace single fields of it
    (``vitlab train --set augment.color_jitter=0.4``). ``model_overrides`` replace model config fields;
    ``num_classes``, ``in_chans`` and ``img_size`` follow the data unless overridden.
    ``normalization``: ``standardize`` (the training mean/std) or ``unit`` (pixels in [0, 1], the
    textbook's). Fine-tuning: ``init`` is any checkpoint whose matching weights start the model;
    ``layer_decay`` scales block ``i``'s rate by ``layer_decay ** (depth - i)``. Distillation:
    ``teacher`` a checkpoint, ``distill`` ``soft`` | ``hard``, weight ``distill_alpha``, temperature
    ``distill_temperature``. ``data`` (:class:`~vitlab.data.options.DataOptions`) says how the images
    are read: size, crop, filter, mean/std, in memory or streamed. ``tune`` says which weights train
    (:data:`~vitlab.models.tuning.TUNE_MODES`: ``head`` freezes the vision encoder and trains the head;
    ``last-K``, ``lora``, ``bitfit``, ``prompt``), ``tune_options`` its settings (``--set tune.rank=8``).
    """

    model: str = "vit-digits"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    label_smoothing: float = 0.1
    augment: str | AugmentConfig = field(default_factory=lambda: AugmentConfig(erasing=0.25))
    augment_overrides: dict[str, Any] = field(default_factory=dict)
    normalization: str = "standardize"
    recipe: str = "default"
    init: str | None = None
    layer_decay: float | None = None
    teacher: str | None = None
    distill: str | None = None
    distill_alpha: float = 0.5
    distill_temperature: float = 4.0
    data: DataOptions = field(default_factory=DataOptions)
    tune: str = "full"
    tune_options: TuneOptions = field(default_factory=TuneOptions)

    HELP: ClassVar[dict[str, str]] = {
        **RunConfig.HELP,
        "model": "registered model name (see `vitlab models`), timm name or hub id",
        "augment": "augmentation preset",
        "init": "start from this checkpoint's matching weights (run folder, file, hub id)",
        "layer_decay": "scale block i's learning rate by this ** (depth - i)",
        "teacher": "distil from this checkpoint (DeiT)",
        "distill": "distillation target",
        "distill_alpha": "weight of the distillation loss",
        "distill_temperature": "temperature of soft distillation",
    }

    def checks(self) -> dict[str, Check]:
        source = Maybe(Text("a checkpoint: a run folder, a model file or a hub id", path=True))
        return {
            **super().checks(),
            "model": Text("a registered model name (see `vitlab models`), or 'init'"),
            "model_overrides": ModelFields(self.model),
            "label_smoothing": Float(0.0, 1.0, high_open=True),
            "augment": AugmentChoice(),
            "augment_overrides": Fields(tuple(f.name for f in fields(AugmentConfig)), "augment"),
            "normalization": OneOf(("standardize", "unit")),
            "recipe": OneOf(tuple(RECIPES)),
            "init": source,
            "layer_decay": Maybe(Float(0.0, 1.0, low_open=True)),
            "teacher": source,
            "distill": Maybe(OneOf(DISTILL_KINDS)),
            "distill_alpha": Float(0.0, 1.0),
            "distill_temperature": Float(0.0, 100.0, low_open=True),
            "data": Options(DataOptions, "data", null_ok=True),
            "tune": TuneMode(),
            "tune_options": Options(TuneOptions, "tune"),
        }

    # ``--recipe NAME`` picks the recipe: ``--set recipe=`` would only relabel the run.
    CLI_OWNED = {**RunConfig.CLI_OWNED, "recipe": "--recipe NAME"}
    OVERRIDES = "model_overrides"
    NESTED = {"augment": "augment_overrides", "data": "data", "tune": "tune_options"}
    RECIPES = RECIPES

    def check_relations(self) -> None:
        if self.data is None:
            self.data = DataOptions()
        try:  # the overrides' values, checked now rather than when the data is loaded
            if isinstance(self.augment, AugmentConfig):
                replace(self.augment, **self.augment_overrides)
            else:
                AugmentConfig.preset(self.augment, **self.augment_overrides)
        except ConfigError as error:
            raise ConfigError(f"augment.{error}") from None
        if (self.teacher is None) != (self.distill is None):
            raise ConfigError(
                "distillation needs both a teacher checkpoint and a kind: --teacher CKPT --distill soft|hard"
            )

    @classmethod
    def from_recipe(cls, recipe: str = "default", **overrides: Any) -> TrainConfig:
        """The named recipe's settings, then ``overrides`` (any TrainConfig field)."""
        if recipe not in RECIPES:
            raise ConfigError(f"unknown recipe {recipe!r}: choose one of {list(RECIPES)}")
        base = RECIPES[recipe]
        merged = {k: {**base[k], **overrides[k]} for k in ("model_overrides",) if k in base and k in overrides}
        return cls(**{**base, **overrides, **merged, "recipe": recipe})

    @classmethod
    def assemble(cls, options: dict[str, Any]) -> TrainConfig:
        """As :meth:`RunConfig.assemble`; a ``recipe`` among the options supplies the fields not given
        (see :meth:`from_recipe`); ``init`` without a ``model`` trains the init checkpoint's own architecture."""
        if options.get("init") is not None and "model" not in options:
            options = {**options, "model": INIT_MODEL}
        if "recipe" not in options:
            return super().assemble(options)
        given = cls.gather_options({k: v for k, v in options.items() if k != "recipe"})
        return cls.from_recipe(options["recipe"], **given)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if isinstance(self.augment, AugmentConfig):
            d["augment"] = asdict(self.augment)
        d["data"] = self.data.to_dict()
        d["tune_options"] = self.tune_options.to_dict()
        return d

    @property
    def tuning(self) -> Tuning:
        """The training mode with its options (``--tune last-2`` sets ``blocks``)."""
        return Tuning.of(self.tune, self.tune_options)


@dataclass(frozen=True)
class AugmentChoice(Check):
    """An augmentation preset's name (:data:`~vitlab.data.augment.PRESETS`), an :class:`AugmentConfig`, or a
    mapping of its fields."""

    def describe(self) -> str:
        return f"a preset {PRESETS} or a mapping of augment fields"

    def __call__(self, name: str, value: Any) -> str | AugmentConfig:
        if isinstance(value, str):
            if value not in PRESETS:
                raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
            return value
        return Options(AugmentConfig, "augment")(name, value)


INIT_MODEL = "init"
"""``model="init"``: the architecture of the ``init`` checkpoint (``vitlab train --init SOURCE`` without
``--model``), reshaped for the data like any other."""


def build_model(config: TrainConfig, splits: DataSplits, init_config: Any = None) -> nn.Module:
    """``build_registered(config.model)`` shaped for the data (classes, channels, image size), then
    ``config.model_overrides``; ``model="init"`` builds ``init_config`` (the init checkpoint's model config)."""
    chans, height, width = splits.image_shape
    base = init_config if config.model == INIT_MODEL else get_config(config.model)
    tuned = config.tuning.model_overrides() if hasattr(base, "prompt_tokens") else {}  # else refused when tuned
    overrides = {
        "num_classes": splits.num_classes,
        "in_chans": chans,
        "img_size": (height, width),
        **tuned,
        **config.model_overrides,
    }
    if overrides["num_classes"] < 1:
        raise ConfigError(f"num_classes={overrides['num_classes']}: a classifier needs at least one class")
    if overrides["num_classes"] < splits.num_classes:
        raise ConfigError(
            f"num_classes={overrides['num_classes']} but {splits.name} has {splits.num_classes} "
            f"classes: drop the override or set num_classes={splits.num_classes}"
        )
    if config.model == INIT_MODEL:
        if init_config is None:
            raise ConfigError("model 'init' is the architecture of the --init checkpoint: pass --init SOURCE")
        return build_from_config(type(init_config).__name__, {**init_config.to_dict(), **overrides})
    return build_registered(config.model, **overrides)


def resolve_augment(
    augment: str | AugmentConfig, splits: DataSplits, overrides: dict[str, Any] | None = None
) -> AugmentConfig:
    """A preset name sized to the images (and flipping only where ``splits.hflip_ok``), or the config;
    then ``overrides`` (single fields)."""
    if isinstance(augment, AugmentConfig):
        return replace(augment, **(overrides or {}))
    return AugmentConfig.preset(
        augment, image_size=min(splits.image_shape[1:]), hflip_ok=splits.hflip_ok, **(overrides or {})
    )


def _on(data: ImageDataset | Any, device: torch.device) -> ImageDataset | Any:
    """An in-memory split moved to ``device``; a streamed split decoding there when its ``decode`` is ``gpu``
    (its batches travel as uint8)."""
    if isinstance(data, StreamDataset):
        return data.on(device)
    if not isinstance(data, ImageDataset):
        return data
    return ImageDataset(data.images.to(device), data.labels.to(device), data.classes)


def as_pixels(images: torch.Tensor, device: torch.device, into: BatchBuffer | None = None) -> torch.Tensor:
    """A batch on ``device`` as float pixels in [0, 1]: a streamed uint8 batch is scaled there, after the
    copy (a quarter of the bytes of float32), into ``into``'s tensor when the last batch let it go."""
    return unit_pixels(images.to(device, non_blocking=True), into)


class ClassificationTask(Task):
    """Cross-entropy on ``splits`` (augmented, normalised); validation loss, accuracy and ECE; test
    of the model chosen by validation. With a ``teacher`` (a classifier module, frozen) the model
    must carry a distillation token (``distill_token=True``) and learns by DeiT's loss.

    The splits are in memory (float batches by indexing, augmented on the device) or streamed (uint8
    batches from ``DataLoader`` workers that decode and random-resize-crop and flip each photo; the rest
    of the augmentation runs batched on the device). ``preprocess`` is recorded in the checkpoints."""

    run_kind = "classify"
    monitor = "val_acc"

    def __init__(
        self,
        model: nn.Module,
        splits: DataSplits,
        config: TrainConfig,
        teacher: nn.Module | None = None,
        preprocess: Any = None,
    ) -> None:
        self.model, self.splits, self.config, self.teacher = model, splits, config, teacher
        self.preprocess = preprocess
        if teacher is not None and not getattr(getattr(model, "config", None), "distill_token", False):
            raise ConfigError(
                "distillation trains a ViT with a distillation token: build it with "
                "distill_token=True (vitlab train --teacher does)"
            )
        self.checkpoint_kind = "distilled-classifier" if teacher is not None else "classifier"
        augment = resolve_augment(config.augment, splits, config.augment_overrides)
        self.train_data = splits.train
        if isinstance(splits.train, StreamDataset):
            if augment.resized_crop > 0:  # the workers crop (and flip) each photo at full size
                self.train_data = splits.train.augmented(True, scale=(augment.resized_crop, 1.0), hflip=augment.hflip)
                augment = replace(augment, resized_crop=0.0, hflip=False)
            else:  # read as for evaluation; flips and the rest batched on the device
                self.train_data = splits.train.augmented(False)
        self.augment_config = augment
        self.augment: BatchAugment | None = None
        self.epoch_seed = 0
        self.inputs = Statistics(tuple(splits.mean), tuple(splits.std))
        self.pixels = BatchBuffer()  # a uint8 batch's float pixels, in one tensor step after step

    def prepare(self, env: Any, amp: bool) -> None:
        super().prepare(env, amp)
        device = env.device
        self.train_set = _on(self.train_data, device)
        self.val_set = _on(self.splits.val, device)
        self.test_set = _on(self.splits.test, device) if self.splits.test is not None else None
        mean, std = self.inputs.mean, self.inputs.std
        self.device_inputs = Statistics(torch.tensor(mean, device=device), torch.tensor(std, device=device))
        if self.teacher is not None:
            self.teacher = self.teacher.to(device).eval().requires_grad_(False)

    def train_size(self) -> int:
        return len(self.splits.train)

    def start_epoch(self, epoch: int, seed: int) -> None:
        # the workers' crops follow (run seed, epoch, image), never the rank: DDP sees what one process would
        self.epoch_seed = epoch_seed(self.config.seed, epoch, 0)
        self.augment = (
            BatchAugment(self.augment_config, self.splits.num_classes, generator_seed=seed)
            if self.augment_config != AugmentConfig()
            else None
        )

    def generators(self) -> dict[str, torch.Generator]:
        return {"augment": self.augment.generator} if self.augment is not None else {}

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        data = self.train_set
        index = index.to(data.images.device)
        return data.images[index], data.labels[index]

    def batches(self, index: torch.Tensor, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if not isinstance(self.train_set, StreamDataset):
            return super().batches(index, batch_size)
        return self.train_set.batches(index, batch_size, seed=self.epoch_seed)

    def step(
        self, net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], epoch: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        images, labels = batch  # this batch's own tensor (indexing and the uint8 conversion copy)
        images, labels = as_pixels(images, self.env.device, self.pixels), labels.to(self.env.device)
        targets = labels
        if self.augment is not None:
            images, targets = self.augment(images, labels)
        inputs = self.device_inputs.normalize(images, in_place=True)
        outputs = net(inputs)
        cfg = self.config
        if self.teacher is None:
            logits = outputs
            loss = F.cross_entropy(logits.float(), targets, label_smoothing=cfg.label_smoothing)
        else:
            with torch.no_grad():
                teacher_logits = self.teacher(inputs).float()
            cls, dist = (o.float() for o in outputs)
            loss = (1 - cfg.distill_alpha) * F.cross_entropy(
                cls, targets, label_smoothing=cfg.label_smoothing
            ) + cfg.distill_alpha * distillation_loss(
                dist, teacher_logits, cfg.distill or "soft", cfg.distill_temperature
            )
            logits = (cls + dist) / 2
        correct = (logits.detach().argmax(dim=1) == labels).sum()
        return loss, {"loss": loss.detach() * len(labels), "acc": correct}, len(labels)

    def parameters_to_optimise(self, config: RunConfig) -> torch.optim.Optimizer:
        cfg = self.config
        if cfg.layer_decay is None:
            return build_optimizer(self.model, cfg.optimizer, cfg.lr, cfg.weight_decay)
        groups = [
            {**g, "lr": cfg.lr * g["lr_scale"]}
            for g in layer_decay_groups(self.model, cfg.weight_decay, cfg.layer_decay)
        ]
        return build_optimizer(self.model, cfg.optimizer, cfg.lr, cfg.weight_decay, groups=groups)

    def deliverable(self, model: nn.Module) -> nn.Module:
        """The model, LoRA merged into plain weights when tuned (:func:`~vitlab.models.tuning.merged`): every
        command loads a tuned run's checkpoint as a plain ViT (prompt tuning's tokens are part of its config)."""
        return model if self.config.tune == "full" else merged(model)

    def scores(self, model: nn.Module, data: ImageDataset) -> dict[str, float]:
        """Loss (NLL), accuracy and ECE of ``model`` on ``data``; each rank scores every
        ``world_size``-th image and the sums are all-reduced."""
        rank, world = self.env.rank, self.env.world_size
        index = torch.arange(rank, len(data), world)
        logits, labels = dataset_logits(model, data, self.inputs, amp=self.amp, index=index)
        logits, labels = logits.to(self.env.device), labels.to(self.env.device)
        loss = F.cross_entropy(logits, labels, reduction="sum").double().reshape(1)
        sums = all_reduce_sum(torch.cat([loss, calibration_bins(logits.softmax(dim=1), labels).flatten()]))
        bins = sums[1:].reshape(3, -1)
        n = bins[0].sum().item()
        return {"loss": sums[0].item() / n, "acc": bins[2].sum().item() / n, "ece": ece_from_bins(bins)}

    def validate(self, model: nn.Module) -> dict[str, float]:
        return {f"val_{k}": v for k, v in self.scores(model, self.val_set).items()}

    def test(self, model: nn.Module) -> dict[str, float] | None:
        return None if self.test_set is None else self.scores(model, self.test_set)

    def skipped(self) -> dict[str, str]:
        return dict(getattr(self.splits.train, "bad", {}))  # shared by a streamed dataset's splits

    def notes(self) -> list[str]:
        bad = self.skipped()
        return [f"{self.splits.name}: {bad_report(bad)}"] if bad else []

    def data_config(self) -> DataConfig:
        cfg = self.config
        data = DataConfig.from_splits(self.splits, data_dir=cfg.data_dir, seed=cfg.seed, rows=cfg.rows)
        data.splits = self.splits.identity()
        return data if self.preprocess is None else data.with_preprocess(self.preprocess)
