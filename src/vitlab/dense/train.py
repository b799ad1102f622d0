"""Train and evaluate dense models: ``train_dense(DenseTrainConfig) -> DenseResult``.

Segmentation heads ``linear`` / ``decoder`` learn by per-pixel cross-entropy, ``queries`` by the
mask-classification set loss; ``detr`` by the detection set loss. Augmentation: a seeded random
horizontal flip of each batch (images, masks and boxes). AdamW with warmup + cosine; with a time
limit the cosine follows the elapsed fraction of the budget when that is ahead of the step count, so
the learning rate has annealed when time runs out.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torchvision.ops import box_convert

from ..models.config import reject_unknown
from ..data.shapes import SHAPES_COUNT, DenseDataset, DenseSplits, load_dense_dataset
from ..train.optim import WarmupCosine, build_optimizer
from .losses import DetectionLoss, MaskClassificationLoss
from .metrics import boundary_accuracy, box_map, segmentation_confusion, segmentation_report
from .model import DenseConfig, DenseModel
from .predict import load_dense, predict_boxes, predict_masks, save_dense


@dataclass
class DenseTrainConfig:
    """A dense training run. ``model`` holds :class:`DenseConfig` overrides (e.g. ``patch_size``)."""
    task: str = "segment"
    head: str = "linear"
    dataset: str = "shapes"
    data_dir: str | None = None
    count: int = SHAPES_COUNT
    image_size: int = 64
    rows: int | None = None
    epochs: int = 30
    batch_size: int = 16
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup_epochs: int = 1
    seed: int = 0
    device: str = "cpu"
    time_limit_s: float | None = None
    out_dir: str | None = None
    model: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs={self.epochs}, batch_size={self.batch_size}: both must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DenseTrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class DenseResult:
    """The trained model, val/test metrics, per-epoch mean training loss, wall time."""
    model: DenseModel
    val: dict
    test: dict
    history: list[float]
    seconds: float
    params: int


def detection_targets(boxes: list[torch.Tensor], labels: list[torch.Tensor], size: tuple[int, int],
                      device: torch.device) -> list[dict[str, torch.Tensor]]:
    """Pixel xyxy boxes -> ``{"labels", "boxes"}`` with boxes ``(cx, cy, w, h)`` relative to the image."""
    h, w = size
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    return [{"labels": lab.to(device), "boxes": box_convert(b / scale, "xyxy", "cxcywh").to(device)}
            for b, lab in zip(boxes, labels)]


def hflip(images: torch.Tensor, masks: torch.Tensor | None, boxes: list[torch.Tensor]
          ) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    """Mirror a batch left-right: images ``(B, C, H, W)``, masks ``(B, H, W)``, pixel xyxy boxes."""
    w = images.shape[-1]
    flipped = [torch.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], 1) for b in boxes]
    return images.flip(-1), None if masks is None else masks.flip(-1), flipped


def dense_loss(model: DenseModel, task: str) -> Callable:
    """``(outputs, masks, targets) -> loss`` for the model's head."""
    if task == "detect":
        criterion = DetectionLoss()
        return lambda out, masks, targets: criterion(out, targets)["loss"]
    if model.config.head == "queries":
        criterion = MaskClassificationLoss()
        return lambda out, masks, targets: criterion(out, masks)
    return lambda out, masks, targets: F.cross_entropy(out["logits"], masks)


def evaluate_dense(model: DenseModel, data: DenseDataset) -> dict:
    """Segmentation: ``pixel_acc``, ``mean_iou``, ``iou``, ``boundary_acc``; detection: ``map``, ``map50`` (COCO)."""
    if model.config.task == "segment":
        if data.masks is None:
            raise ValueError("this dataset has no masks: evaluate a detection model on it instead")
        predicted = predict_masks(model, data.images)
        report = segmentation_report(segmentation_confusion(predicted, data.masks, data.num_classes + 1))
        return {**report, "boundary_acc": boundary_accuracy(predicted, data.masks)}
    return box_map(predict_boxes(model, data.images), [{"boxes": b, "labels": lab}
                                                       for b, lab in zip(data.boxes, data.labels)],
                   data.num_classes)


def train_dense(config: DenseTrainConfig, splits: DenseSplits | None = None,
                progress: Callable[[int, float], None] | None = None) -> DenseResult:
    """Train a dense model; ``progress(epoch, mean_loss)`` is called after each epoch. Training stops
    after ``epochs``, or at the first step past ``time_limit_s`` seconds.

    With ``out_dir``: writes ``model.safetensors`` (dense config, classes, training config in the
    metadata) and ``metrics.json``.
    """
    torch.manual_seed(config.seed)
    if splits is None:
        splits = load_dense_dataset(config.dataset, config.data_dir, seed=config.seed, rows=config.rows,
                                    image_size=config.image_size, count=config.count)
    if config.task == "segment" and splits.train.masks is None:
        raise ValueError(f"dataset {splits.name!r} has no masks: use --task detect, or a dataset with masks")
    train = splits.train
    size = tuple(train.images.shape[-2:])
    mean = train.images.mean((0, 2, 3)).tolist()
    std = train.images.std((0, 2, 3)).clamp(min=1e-3).tolist()
    model_cfg = DenseConfig.from_dict({"task": config.task, "head": config.head, "num_classes": train.num_classes,
                                       "img_size": size[0], "mean": mean, "std": std, **config.model})
    device = torch.device(config.device)
    model = DenseModel(model_cfg).to(device)
    optimizer = build_optimizer(model, "adamw", config.lr, config.weight_decay)
    steps = -(-len(train) // config.batch_size)
    total = steps * config.epochs
    rule = WarmupCosine(total, steps * config.warmup_epochs)
    loss_fn = dense_loss(model, config.task)
    start, history, step = time.perf_counter(), [], 0
    for epoch in range(config.epochs):
        model.train()
        gen = torch.Generator().manual_seed(config.seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=gen)
        epoch_loss, done_steps = 0.0, 0
        for i in range(steps):
            if config.time_limit_s is not None and time.perf_counter() - start > config.time_limit_s:
                break
            idx = order[i * config.batch_size:(i + 1) * config.batch_size]
            batch = train.subset(idx)
            images, masks, boxes = batch.images, batch.masks, batch.boxes
            if torch.rand((), generator=gen) < 0.5:
                images, masks, boxes = hflip(images, masks, boxes)
            targets = detection_targets(boxes, batch.labels, size, device) if config.task == "detect" else None
            loss = loss_fn(model(images.to(device)), None if masks is None else masks.to(device), targets)
            # the schedule follows steps, or the time budget when that runs out first
            done = step if config.time_limit_s is None else max(
                step, int(total * (time.perf_counter() - start) / config.time_limit_s))
            for group in optimizer.param_groups:
                group["lr"] = config.lr * rule(done)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            epoch_loss, done_steps = epoch_loss + float(loss.detach()), done_steps + 1
        if done_steps == 0:
            break
        history.append(epoch_loss / done_steps)
        if progress is not None:
            progress(epoch, history[-1])
    seconds = time.perf_counter() - start
    val, test = evaluate_dense(model, splits.val), evaluate_dense(model, splits.test)
    params = sum(p.numel() for p in model.parameters())
    if config.out_dir is not None:
        out = Path(config.out_dir)
        save_dense(model, out / "model.safetensors", train.classes, {"train": config.to_dict()})
        (out / "metrics.json").write_text(json.dumps({"val": val, "test": test, "history": history,
                                                      "seconds": seconds, "params": params}, indent=2))
    return DenseResult(model, val, test, history, seconds, params)


def dense_train_config(options: dict[str, Any]) -> DenseTrainConfig:
    """A :class:`DenseTrainConfig` from flat options: its own fields, and the rest as model overrides
    (e.g. ``{"task": "segment", "head": "decoder", "epochs": 5, "patch_size": 4}``)."""
    own = {f.name for f in fields(DenseTrainConfig)} - {"model"}
    derived = {"task", "head", "num_classes", "img_size", "mean", "std"}  # set from the run and its data
    known = own | ({f.name for f in fields(DenseConfig)} - derived)
    reject_unknown(options, known, "dense")
    model = {k: v for k, v in options.items() if k not in own}
    return DenseTrainConfig(**{k: v for k, v in options.items() if k in own}, model=model)


def evaluate_dense_checkpoint(path: str | Path, split: str = "test", dataset: str | None = None,
                              data_dir: str | None = None, device: str = "cpu") -> dict:
    """Evaluate a dense checkpoint on a split of its training dataset (or of ``dataset``)."""
    model, meta = load_dense(path, device)
    cfg = DenseTrainConfig.from_dict(meta.get("train", {}))
    splits = load_dense_dataset(dataset or cfg.dataset, data_dir or cfg.data_dir, seed=cfg.seed,
                                image_size=model.config.img_size, count=cfg.count)
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be train, val or test, got {split!r}")
    data = getattr(splits, split)
    return {"task": model.config.task, "head": model.config.head, "dataset": splits.name, "split": split,
            "n": len(data), **evaluate_dense(model, data)}


__all__ = ["DenseResult", "DenseTrainConfig", "dense_train_config", "evaluate_dense", "evaluate_dense_checkpoint",
           "train_dense"]
