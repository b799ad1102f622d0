"""Promptable segmentation on the engine: ``train_promptable(PromptableTrainConfig) -> PromptableResult``.

Each training image is encoded once and gives ``prompts_per_image`` objects (uniformly among its
instances, with replacement), each with one prompt, a point inside it or its jittered box
(:func:`~vitlab.tasks.promptable.sampling.training_prompts`); the loss is SAM's
(:func:`~vitlab.tasks.promptable.losses.promptable_loss`), averaged over the prompts. Held-out images are
scored per object by the mean IoU of the candidate with the highest predicted IoU, from one centre
point and from the exact box (:func:`evaluate_promptable`). The engine owns the rest (AdamW, warmup +
cosine following elapsed time under a time limit, clipping, EMA, a run folder with a ``promptable``
checkpoint that :func:`vitlab.runs.load_checkpoint` rebuilds, exact resume). Validation runs at the
end; the test figures are those of the final model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from ...checks import Check, Float, Int, OneOf
from ...data import DataConfig
from ...data.dense import DenseDataset, DenseSplits
from ...data.registry import dataset_specs
from ...data.shapes import check_generated
from ...engine import Reporter, Task, seed_everything
from ...engine.distributed import DistEnv
from ...errors import DataError
from ...models.config import MAX_SIDE
from ...models.promptable import PromptableConfig, PromptableModel, box_prompt
from ..dense.train import ShapesRunConfig, config_splits, raw_pixel_data
from ..run import RunResult
from .losses import mask_iou, promptable_loss
from .sampling import centre_points, point_prompt, training_prompts

KIND = "promptable"  # the run's and the checkpoint's kind
DATASETS = tuple(spec.name for spec in dataset_specs("dense") if "instances" in spec.provides)
DERIVED = ("img_size", "mean", "std")  # PromptableConfig fields a run sets from its data


@dataclass
class PromptableTrainConfig(ShapesRunConfig):
    """A promptable run (:class:`~vitlab.tasks.dense.train.ShapesRunConfig`): the prompts
    (``prompts_per_image`` per training image; a box with probability ``box_prob``, else a point; boxes
    jittered by ``box_jitter`` times their side), and ``model``:
    :class:`~vitlab.models.promptable.PromptableConfig` overrides."""

    prompts_per_image: int = 4
    box_prob: float = 0.5
    box_jitter: float = 0.1

    OVERRIDES_OF, MODEL_CONFIG, DERIVED, WHAT = "PromptableConfig", PromptableConfig, DERIVED, KIND

    def checks(self) -> dict[str, Check]:
        return {
            **super().checks(),
            "dataset": OneOf(DATASETS),
            "image_size": Int(16, MAX_SIDE),
            "prompts_per_image": Int(1, 1024),
            "box_prob": Float(0.0, 1.0),
            "box_jitter": Float(0.0, 1.0),
        }

    def check_relations(self) -> None:
        check_generated("shapes", self.count, self.image_size)


@dataclass
class ObjectPrompts:
    """Every object of a dataset with its evaluation prompts: the image ``(M,)`` it is in, its mask
    ``(M, H, W)`` bool, its centre point ``(M, 2)`` and its box ``(M, 4)``."""

    image: torch.Tensor
    targets: torch.Tensor
    centres: torch.Tensor
    boxes: torch.Tensor


def object_prompts(data: DenseDataset) -> ObjectPrompts:
    """The :class:`ObjectPrompts` of ``data`` (which needs instance masks)."""
    if data.instances is None:
        raise DataError("this dataset has no instance masks: promptable segmentation needs them (use shapes)")
    counts = torch.tensor([len(b) for b in data.boxes])
    image = torch.repeat_interleave(torch.arange(len(data)), counts)
    objects = torch.cat([torch.arange(int(n)) for n in counts])
    targets = data.instances[image] == (objects + 1)[:, None, None]
    boxes = torch.cat(data.boxes).reshape(-1, 4)
    return ObjectPrompts(image, targets, centre_points(targets), boxes)


@torch.no_grad()
def evaluate_promptable(
    model: PromptableModel, data: DenseDataset | ObjectPrompts, images: torch.Tensor | None = None, batch_size: int = 64
) -> dict[str, float]:
    """Mean IoU over every object of ``data`` from one centre point (``point_miou``) and from its
    box (``box_miou``), each scoring the candidate with the highest predicted IoU; ``*_best_of_k``
    score the best candidate (an oracle's choice). ``data`` may be precomputed :class:`ObjectPrompts`
    of ``images (N, 3, H, W)``. Each image is encoded once for all its objects' prompts."""
    prompts = data if isinstance(data, ObjectPrompts) else object_prompts(data)
    pixels = images if isinstance(data, ObjectPrompts) else data.images
    if pixels is None:
        raise DataError("evaluate_promptable needs the images of precomputed ObjectPrompts: pass images")
    model.eval()
    device = next(model.parameters()).device
    sums = dict.fromkeys(("point_miou", "box_miou", "point_miou_best_of_k", "box_miou_best_of_k"), 0.0)
    for s in range(0, len(pixels), batch_size):
        rows = ((prompts.image >= s) & (prompts.image < s + batch_size)).nonzero()[:, 0]
        encoding = model.encode_image(pixels[s : s + batch_size].to(device))
        image, targets = (prompts.image[rows] - s).to(device), prompts.targets[rows].to(device)
        for kind, (points, labels) in (
            ("point", point_prompt(prompts.centres[rows])),
            ("box", box_prompt(prompts.boxes[rows])),
        ):
            out = model.decode(encoding, points.to(device), labels.to(device), image)
            ious = mask_iou(out["masks"] > 0, targets[:, None])
            sums[f"{kind}_miou"] += float(ious.gather(1, out["iou"].argmax(1, keepdim=True)).sum())
            sums[f"{kind}_miou_best_of_k"] += float(ious.max(1).values.sum())
    n = max(1, len(prompts.image))
    return {**{k: v / n for k, v in sums.items()}, "objects": float(len(prompts.image))}


def build_promptable_model(config: PromptableTrainConfig, splits: DenseSplits) -> PromptableModel:
    """The :class:`PromptableModel` for ``splits`` (image size, training statistics), then ``config.model``."""
    train = splits.train
    mean = train.images.mean((0, 2, 3)).tolist()
    std = train.images.std((0, 2, 3)).clamp(min=1e-3).tolist()
    return PromptableModel(
        PromptableConfig.from_dict({"img_size": train.images.shape[-1], "mean": mean, "std": std, **config.model})
    )


class PromptableTask(Task):
    """Promptable segmentation on :class:`~vitlab.data.dense.DenseSplits` with instance masks.
    Prompts are drawn on the CPU from the task's per-epoch generator; batches then move to the device."""

    model: PromptableModel
    run_kind = KIND
    checkpoint_kind = KIND
    monitor = None

    def __init__(self, model: PromptableModel, splits: DenseSplits, config: PromptableTrainConfig) -> None:
        for name, part in (("train", splits.train), ("val", splits.val), ("test", splits.test)):
            if part.instances is None:
                raise DataError(f"the {name} split of {splits.name!r} has no instance masks: use --dataset shapes")
        self.model, self.splits, self.config = model, splits, config
        self.counts = torch.tensor([len(b) for b in splits.train.boxes])
        self.held_out: dict[str, ObjectPrompts] = {}

    def prepare(self, env: DistEnv, amp: bool) -> None:
        super().prepare(env, amp)
        if bool((self.counts == 0).any()):
            raise DataError("a training image has no object to prompt: every image needs at least one instance")

    def train_size(self) -> int:
        return len(self.splits.train)

    def start_epoch(self, epoch: int, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Images ``(B, 3, H, W)``; for ``Q = B * prompts_per_image`` objects drawn uniformly in the images
        ``index (B,)``: the image of each ``(Q,)``, prompt points ``(Q, 2, 2)`` and labels ``(Q, 2)``, and
        target masks ``(Q, H, W)``."""
        train, g, m = self.splits.train, self.generator, self.config.prompts_per_image
        image = torch.arange(len(index)).repeat_interleave(m)
        rows = index[image]
        objects = (torch.rand(len(rows), generator=g) * self.counts[rows]).long()
        assert train.instances is not None
        targets = train.instances[rows] == (objects + 1)[:, None, None]
        boxes = torch.stack([train.boxes[i][k] for i, k in zip(rows.tolist(), objects.tolist())])
        points, labels = training_prompts(targets, boxes, self.config.box_prob, self.config.box_jitter, g)
        device = self.env.device
        return tuple(t.to(device) for t in (train.images[index], image, points, labels, targets))

    def step(self, net: nn.Module, batch: tuple, epoch: int) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        images, image, points, labels, targets = batch
        out = net(images, points, labels, image)
        losses = promptable_loss(out["masks"], out["iou"], targets)
        n = len(images)
        sums = {
            "loss": losses["loss"].detach() * n,
            "iou_mse": losses["iou_mse"].detach() * n,
            "best_iou": losses["best_iou"].mean() * n,
        }
        return losses["loss"], sums, n

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """:func:`evaluate_promptable` on ``split`` (its object prompts computed once)."""
        data = getattr(self.splits, split)
        if split not in self.held_out:
            self.held_out[split] = object_prompts(data)
        return evaluate_promptable(cast(PromptableModel, model), self.held_out[split], data.images)

    def validate(self, model: nn.Module) -> dict[str, float]:
        return {f"val_{k}": v for k, v in self.evaluate(model, "val").items()}

    def test(self, model: nn.Module) -> dict[str, float]:
        return self.evaluate(model, "test")

    def data_config(self) -> DataConfig:
        """Images in [0, 1] (the model normalises them itself), the object classes, where they came from."""
        return raw_pixel_data(self.config, self.splits, self.model.config.img_size)


def build_task(config: PromptableTrainConfig, splits: DenseSplits | None, reporter: Reporter) -> PromptableTask:
    """The engine task of a promptable run on ``splits`` (default: the dataset ``config`` names)."""
    splits = config_splits(config) if splits is None else splits
    seed_everything(config.seed)
    return PromptableTask(build_promptable_model(config, splits), splits, config)


def run_line(result: RunResult) -> str:
    """What ``vitlab train --task promptable`` prints."""
    config, test = cast(PromptableTrainConfig, result.config), result.test or {}
    return (
        f"promptable on {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, test mean IoU "
        f"from one box {test['box_miou']:.4f}, from one point {test['point_miou']:.4f} (final model)"
    )
