"""Dense runs on the engine: :class:`DenseTrainConfig`, :class:`DenseTask` (:func:`build_task` for
:func:`vitlab.tasks.run`), and their evaluation.

Segmentation heads ``linear`` / ``decoder`` learn by per-pixel cross-entropy, ``queries`` by the
mask-classification set loss; ``detr`` by the detection set loss (:class:`DenseTask`). Augmentation:
a random horizontal flip of each batch (images, masks and boxes), drawn from the engine's per-epoch
seed. The engine owns the rest: AdamW, warmup + cosine (following elapsed time under a time
limit), clipping, the run folder with a ``segmenter`` / ``detector`` checkpoint that
:func:`vitlab.runs.load_checkpoint` rebuilds, exact resume, DDP. Validation runs at the end;
the test figures are those of the final model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import box_convert

from ...checks import Check, Fields, Int, Maybe, OneOf
from ...data import DataConfig, list_datasets, load_dense_dataset
from ...data.dense import DenseDataset, DenseSplits
from ...data.paths import recorded_data_dir
from ...data.shapes import SHAPES_COUNT, check_generated
from ...engine import Reporter, RunConfig, Task, seed_everything
from ...engine.distributed import DistEnv
from ...errors import ConfigError, DataError
from ...models.config import MAX_SIDE
from ...models.dense import HEADS, DenseConfig, DenseModel
from ...runs import RunDir, read_json
from ...runs.layout import CONFIG, EVALUATION
from ...settings import picked
from ..requests import EvaluateRequest
from ..run import RunResult
from .losses import DetectionLoss, MaskClassificationLoss
from .metrics import boundary_accuracy, box_map, segmentation_confusion, segmentation_report
from .predict import KINDS, dense_checkpoint, predict_boxes, predict_masks

TASKS = tuple(HEADS)
# DenseConfig fields a run sets from its own fields and its data, never from ``model``
DERIVED = ("task", "head", "num_classes", "img_size", "mean", "std")
SPLITS = ("train", "val", "test")


@dataclass
class ShapesRunConfig(RunConfig):
    """A run on generated ``shapes`` (or a dataset of their kind) with a model built from its data: the shared
    run fields (:class:`~vitlab.engine.RunConfig`, here with these tasks' defaults), the dataset's own settings
    (``count`` generated images of ``image_size`` pixels), and ``model``: overrides of the fields of
    :attr:`MODEL_CONFIG` a run does not set itself (:attr:`DERIVED`), e.g. ``{"patch_size": 4}``."""

    dataset: str = "shapes"
    count: int = SHAPES_COUNT
    image_size: int = 64
    epochs: int = 30
    batch_size: int = 16
    lr: float = 2e-3
    min_lr: float = 0.0
    warmup_epochs: float = 1.0
    model: dict[str, Any] = field(default_factory=dict)

    OVERRIDES = "model"
    MODEL_CONFIG: ClassVar[Any] = DenseConfig  # the model config ``model`` overrides
    DERIVED: ClassVar[tuple[str, ...]] = ()  # its fields a run sets from its own fields and its data
    WHAT: ClassVar[str] = "dense"  # what messages call these runs

    def checks(self) -> dict[str, Check]:
        cls = type(self)
        return {
            **super().checks(),
            "count": Int(7, 10_000_000),
            "model": Fields(
                tuple(f.name for f in fields(cls.MODEL_CONFIG) if f.name not in cls.DERIVED),
                f"{cls.WHAT} model",
                values={k: v for k, v in cls.MODEL_CONFIG.checks.items() if k not in cls.DERIVED},
            ),
        }

    @classmethod
    def known_options(cls) -> tuple[set[str], str]:
        return {f.name for f in fields(cls)} | {f.name for f in fields(cls.MODEL_CONFIG)} - set(cls.DERIVED), cls.WHAT


@dataclass
class DenseTrainConfig(ShapesRunConfig):
    """A dense run (:class:`ShapesRunConfig`): the ``task`` and its ``head`` (default: the task's first,
    ``linear`` / ``detr``), and ``model``: :class:`~vitlab.models.dense.DenseConfig` overrides."""

    task: str = "segment"
    head: str | None = None

    HELP: ClassVar[dict[str, str]] = {**RunConfig.HELP, "head": "the dense head on the ViT's features"}

    OVERRIDES_OF, DERIVED = "DenseConfig", DERIVED

    def checks(self) -> dict[str, Check]:
        return {
            **super().checks(),
            "task": OneOf(TASKS),
            "head": Maybe(OneOf(sum(HEADS.values(), ()))),
            "dataset": OneOf(tuple(list_datasets("dense"))),
            "image_size": Int(1, MAX_SIDE),
        }

    # ``vitlab train --task segment|detect`` names the task.
    CLI_OWNED = {**RunConfig.CLI_OWNED, "task": "--task segment|detect"}

    def check_relations(self) -> None:
        if self.dataset == "shapes":
            check_generated("shapes", self.count, self.image_size)
        self.head = self.head or HEADS[self.task][0]
        if self.head not in HEADS[self.task]:
            raise ConfigError(f"head {self.head!r} does not do {self.task}: choose one of {HEADS[self.task]}")


def detection_targets(
    boxes: list[torch.Tensor], labels: list[torch.Tensor], size: tuple[int, int], device: torch.device
) -> list[dict[str, torch.Tensor]]:
    """Pixel xyxy boxes -> ``{"labels", "boxes"}`` with boxes ``(cx, cy, w, h)`` relative to the image."""
    h, w = size
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    return [
        {"labels": lab.to(device), "boxes": box_convert(b / scale, "xyxy", "cxcywh").to(device)}
        for b, lab in zip(boxes, labels)
    ]


def hflip(
    images: torch.Tensor, masks: torch.Tensor | None, boxes: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    """Mirror a batch left-right: images ``(B, C, H, W)``, masks ``(B, H, W)``, pixel xyxy boxes."""
    w = images.shape[-1]
    flipped = [torch.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], 1) for b in boxes]
    return images.flip(-1), None if masks is None else masks.flip(-1), flipped


def dense_loss(config: DenseConfig) -> Callable[[dict, torch.Tensor | None, list | None], torch.Tensor]:
    """``(outputs, masks, targets) -> loss`` for the model's head."""
    if config.task == "detect":
        detection = DetectionLoss()
        return lambda out, masks, targets: detection(out, targets)["loss"]
    if config.head == "queries":
        mask_classification = MaskClassificationLoss()
        return lambda out, masks, targets: mask_classification(out, masks)

    def pixel_cross_entropy(out: dict, masks: torch.Tensor | None, targets: list | None) -> torch.Tensor:
        if masks is None:
            raise DataError("a segmentation loss needs target masks, got None: use a dataset with masks")
        return F.cross_entropy(out["logits"].float(), masks)

    return pixel_cross_entropy


def evaluate_dense(model: DenseModel, data: DenseDataset) -> dict[str, Any]:
    """Segmentation: ``pixel_acc``, ``mean_iou``, ``iou`` (per class), ``boundary_acc``; detection:
    ``map``, ``map50`` (COCO)."""
    if model.config.task == "segment":
        if data.masks is None:
            raise DataError("this dataset has no masks: evaluate a detection model on it instead")
        predicted = predict_masks(model, data.images)
        report = segmentation_report(segmentation_confusion(predicted, data.masks, data.num_classes + 1))
        return {**report, "boundary_acc": boundary_accuracy(predicted, data.masks)}
    return box_map(
        predict_boxes(model, data.images),
        [{"boxes": b, "labels": lab} for b, lab in zip(data.boxes, data.labels)],
        data.num_classes,
    )


def freeze_unreached(model: nn.Module, loss: torch.Tensor) -> list[str]:
    """Freeze the parameters of ``model`` that ``loss`` does not depend on (a backbone's classifier
    norm, blocks after the last map a head reads); returns their names. Their training is unchanged:
    the optimiser skips a parameter without a gradient."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    unreached = [(n, p) for (n, p), g in zip(named, grads) if g is None]
    for _, p in unreached:
        p.requires_grad_(False)
    return [n for n, _ in unreached]


def build_dense_model(config: DenseTrainConfig, splits: DenseSplits) -> DenseModel:
    """The :class:`DenseModel` for ``splits`` (its classes, image size and training statistics), then
    ``config.model``."""
    train = splits.train
    mean = train.images.mean((0, 2, 3)).tolist()
    std = train.images.std((0, 2, 3)).clamp(min=1e-3).tolist()
    return DenseModel(
        DenseConfig.from_dict(
            {
                "task": config.task,
                "head": config.head,
                "num_classes": train.num_classes,
                "img_size": train.images.shape[-1],
                "mean": mean,
                "std": std,
                **config.model,
            }
        )
    )


class DenseTask(Task):
    """Segmentation or detection on :class:`~vitlab.data.dense.DenseSplits`. The training images
    (and masks) live on the device; validation and test data stay on the CPU, scored in batches."""

    drop_last = False
    monitor = None

    def __init__(self, model: DenseModel, splits: DenseSplits, config: DenseTrainConfig) -> None:
        self.model, self.splits, self.config = model, splits, config
        self.run_kind, self.checkpoint_kind = config.task, KINDS[config.task]
        self.loss = dense_loss(model.config)

    def prepare(self, env: DistEnv, amp: bool) -> None:
        super().prepare(env, amp)
        train = self.splits.train
        self.images = train.images.to(env.device)
        self.masks = None if train.masks is None else train.masks.to(env.device)
        if env.world_size > 1:  # DDP expects a gradient for every trainable parameter
            probe = self.examples(torch.arange(min(2, len(train))), flip=False)
            freeze_unreached(self.model, self.step(self.model, probe, 0)[0])

    def train_size(self) -> int:
        return len(self.splits.train)

    def start_epoch(self, epoch: int, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, list | None]:
        """:meth:`examples` ``index``, mirrored with probability 1/2."""
        return self.examples(index, flip=bool(torch.rand((), generator=self.generator) < 0.5))

    def examples(self, index: torch.Tensor, flip: bool) -> tuple[torch.Tensor, torch.Tensor | None, list | None]:
        """Training images ``(B, 3, H, W)``, masks ``(B, H, W)`` (segmentation) and box targets
        (detection) of examples ``index (B,)``, all mirrored when ``flip``."""
        train, device = self.splits.train, self.images.device
        images = self.images[index.to(device)]
        masks = None if self.masks is None else self.masks[index.to(device)]
        rows = index.tolist()
        boxes, labels = [train.boxes[i] for i in rows], [train.labels[i] for i in rows]
        if flip:
            images, masks, boxes = hflip(images, masks, boxes)
        targets = (
            detection_targets(boxes, labels, (images.shape[-2], images.shape[-1]), device)
            if self.config.task == "detect"
            else None
        )
        return images, masks, targets

    def step(self, net: nn.Module, batch: tuple, epoch: int) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        images, masks, targets = batch
        loss = self.loss(net(images), masks, targets)
        return loss, {"loss": loss.detach() * len(images)}, len(images)

    def validate(self, model: nn.Module) -> dict[str, float]:
        report = evaluate_dense(cast(DenseModel, model), self.splits.val)
        return {f"val_{k}": v for k, v in report.items() if isinstance(v, float)}

    def test(self, model: nn.Module) -> dict[str, Any]:
        return evaluate_dense(cast(DenseModel, model), self.splits.test)

    def data_config(self) -> DataConfig:
        """Images in [0, 1] (the model normalises them itself), the object classes, where they came from."""
        return raw_pixel_data(self.config, self.splits, cast(DenseModel, self.model).config.img_size)


# The fields of a dense or promptable run's config that decide its splits, besides the dataset and its folder.
SPLIT_FIELDS = ("seed", "rows", "image_size", "count")


def config_splits(config: DenseTrainConfig | Any) -> DenseSplits:
    """The splits of the dataset a dense or promptable run's ``config`` names (its dataset, folder, seed,
    rows, image size and generated count)."""
    return load_dense_dataset(config.dataset, config.data_dir, **picked(config, *SPLIT_FIELDS))


def raw_pixel_data(config: RunConfig, splits: DenseSplits, size: int) -> DataConfig:
    """A dense or promptable checkpoint's data config: images in [0, 1] of ``size`` pixels (the model
    normalises them itself), the object classes, and where they came from."""
    return DataConfig.raw_pixels(size, splits.classes, splits.name, config.data_dir, config.seed, config.rows)


def build_task(config: DenseTrainConfig, splits: DenseSplits | None, reporter: Reporter) -> DenseTask:
    """The engine task of a dense run on ``splits`` (default: the dataset ``config`` names)."""
    splits = config_splits(config) if splits is None else splits
    if config.task == "segment" and splits.train.masks is None:
        raise DataError(f"dataset {splits.name!r} has no masks: use --task detect, or a dataset with masks")
    seed_everything(config.seed)
    return DenseTask(build_dense_model(config, splits), splits, config)


def run_line(result: RunResult) -> str:
    """What ``vitlab train --task segment|detect`` prints."""
    config, test = cast(DenseTrainConfig, result.config), result.test or {}
    scores = (
        f"pixel acc {test['pixel_acc']:.4f}, mean IoU {test['mean_iou']:.4f}"
        if config.task == "segment"
        else f"mAP@[.5:.95] {test['map']:.4f}, mAP@.5 {test['map50']:.4f}"
    )
    return (
        f"{config.head} {config.task} on {config.dataset}: {result.params:,} parameters, "
        f"{result.seconds:.1f}s, test {scores} (final model)"
    )


def run_settings(path: Path) -> dict[str, Any]:
    """The config of the dense run whose checkpoint is ``path`` (``RUN/best|last/model.safetensors``),
    or ``{}`` for a file outside its run folder."""
    run = RunDir(path.parent.parent)
    if run.existing_kind() in KINDS and (run / CONFIG).is_file():
        return read_json(run / CONFIG, "run config")
    return {}


def evaluate_dense_checkpoint(request: EvaluateRequest) -> dict[str, Any]:
    """Evaluate a ``segmenter`` / ``detector`` checkpoint on a split of its training dataset (or of
    ``request.dataset``): the splits are rebuilt from the checkpoint's data config (and, for generated
    ``shapes``, its run folder's ``count``; 5000 outside a run folder). With ``request.out``, writes
    ``metrics.json`` there (a run folder of kind ``evaluate``)."""
    split, dataset, data_dir = request.split, request.dataset, request.data_dir
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}: choose one of {SPLITS}")
    loaded = dense_checkpoint(request.checkpoint, request.device)
    model, data = cast(DenseModel, loaded.model), loaded.data  # dense_checkpoint admits only dense kinds
    name = dataset or data.dataset or "shapes"
    same = name == data.dataset
    count = run_settings(loaded.path).get("count", SHAPES_COUNT)
    splits = load_dense_dataset(
        name,
        recorded_data_dir(str(loaded.path), data.data_dir if same else None, data_dir or None),
        seed=data.seed,
        rows=data.rows if same else None,
        image_size=model.config.img_size,
        count=count,
    )
    part = getattr(splits, split)
    report = {
        "checkpoint": str(loaded.path),
        "task": model.config.task,
        "head": model.config.head,
        "dataset": splits.name,
        "split": split,
        "n": len(part),
        **evaluate_dense(model, part),
    }
    if request.out is not None:
        with RunDir(request.out).open("evaluate", overwrite=request.overwrite) as run_dir:
            run_dir.write_json(EVALUATION, report)
    return report


__all__ = [
    "DenseTask",
    "DenseTrainConfig",
    "build_task",
    "evaluate_dense",
    "evaluate_dense_checkpoint",
]
