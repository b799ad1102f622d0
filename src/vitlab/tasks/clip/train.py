"""CLIP runs on the engine: ``train_clip(CLIPTrainConfig) -> CLIPResult``, and their evaluation.

:class:`CLIPTask` learns by symmetric InfoNCE (:func:`~vitlab.tasks.clip.contrastive.clip_loss`) on
captioned shapes (:mod:`vitlab.data.captions`); a caption true of several images in a batch counts as
positive for each, and ``negatives`` captions one attribute away from each image's caption join the
batch as hard negatives. Validation and test report retrieval recall@1 / @5 both ways between the
split's images and its distinct captions (a caption is relevant to every image it is true of; see
:func:`evaluate_clip`) and zero-shot accuracy on the shape-class task
(the images showing one shape class, classified from :data:`~vitlab.tasks.clip.zeroshot.TEMPLATES`).
``best/`` holds the epoch with the best validation image->text recall@1. The engine owns the rest:
AdamW, warmup + cosine, clipping, EMA, the run folder with a ``clip`` checkpoint that
:func:`vitlab.runs.load_checkpoint` rebuilds, exact resume, DDP.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from ...checks import Check, Fields, Float, Int, OneOf, Text
from ...data import DataConfig, list_datasets, load_caption_dataset
from ...data.captions import (
    CaptionedShapes,
    CaptionSplits,
    caption_holds,
    description_codes,
    hard_negatives,
    parse_caption,
    tokenize,
)
from ...data.shapes import SHAPE_CLASSES, check_generated
from ...engine import Reporter, RunConfig, Task, seed_everything
from ...engine.distributed import DistEnv
from ...errors import ConfigError
from ...models import build_registered, get_config
from ...models.clip import CLIPConfig, CLIPModel
from ...models.config import MAX_SIDE
from ...models.vit_config import ViTConfig
from ..run import RunResult
from .contrastive import clip_loss, retrieval_metrics
from .zeroshot import TEMPLATES, classify, embed_images, embed_texts

CLIP_DATASETS = tuple(list_datasets("captions"))
VISION_FIELDS = Fields(tuple(f.name for f in fields(ViTConfig)), "vision", values=ViTConfig.checks, prefix=True)
"""``model_overrides["vision"]``: fields of the image tower's ViTConfig, each in its range."""
# CLIPConfig fields a run sets from its data, never from ``model_overrides``
DERIVED = ("mean", "std")


@dataclass
class CLIPTrainConfig(RunConfig):
    """A CLIP run: the shared run fields (:class:`~vitlab.engine.RunConfig`, here with CLIP defaults), the
    data (``count`` generated captioned ``shapes`` of ``image_size`` pixels, a share ``plain`` of captions
    naming no colours), ``negatives`` hard-negative captions per image in each batch (each a caption of
    the batch one said attribute away, :func:`~vitlab.data.captions.hard_negatives`, drawn afresh every
    epoch), the registered ``model`` and ``model_overrides`` of its :class:`CLIPConfig` fields
    (``vision`` a mapping of ViTConfig fields merged into the registered tower's). The defaults are the
    recipe of ``benchmarks/bench_clip.py`` (about 13 CPU minutes on one thread)."""

    OVERRIDES, OVERRIDES_OF = "model_overrides", "CLIPConfig"

    dataset: str = "shapes"
    count: int = 20_000
    image_size: int = 32
    plain: float = 0.2
    negatives: int = 2
    model: str = "clip-shapes"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    epochs: int = 50
    batch_size: int = 64
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.1
    warmup_epochs: float = 0.3
    eval_every: int = 10

    def checks(self) -> dict[str, Check]:
        return {
            **super().checks(),
            "dataset": OneOf(CLIP_DATASETS),
            "count": Int(7, 10_000_000),
            "image_size": Int(16, MAX_SIDE),
            "plain": Float(0.0, 1.0),
            "negatives": Int(0, 16),
            "model": Text("a registered CLIP model name, e.g. clip-shapes"),
            "model_overrides": Fields(
                tuple(f.name for f in fields(CLIPConfig) if f.name not in DERIVED),
                "CLIP model",
                nested=(("vision", VISION_FIELDS),),
                values={k: v for k, v in CLIPConfig.checks.items() if k not in DERIVED},
            ),
        }

    def check_relations(self) -> None:
        check_generated("captioned shapes", self.count, self.image_size)


def evaluate_clip(model: CLIPModel, data: CaptionedShapes, templates: tuple[str, ...] = TEMPLATES) -> dict[str, float]:
    """``i2t_r1``, ``i2t_r5``, ``t2i_r1``, ``t2i_r5`` between all of ``data``'s images and its distinct
    captions, and ``zero_shot_acc`` on its images showing one shape class (0 when none does).

    The text side holds each caption text once (many images share "a red circle"): an image's top-k
    are k different texts, and a text queries once. A caption is relevant to every image it is true of
    (:func:`~vitlab.data.captions.caption_holds`), so always to the image it was drawn for, and also to
    any image it describes as well ("a circle", or "a blue square below a red circle", of the image
    captioned "a red circle above a blue square")."""
    model.eval()
    captions = list(dict.fromkeys(data.captions))
    images = embed_images(model, data.images)
    texts = embed_texts(model, captions)
    relevant = caption_holds(description_codes(data.scenes), description_codes([parse_caption(c) for c in captions]))
    labels = data.shape_labels()
    keep = labels >= 0
    hits = (
        classify(model, data.images[keep], SHAPE_CLASSES, templates).argmax(-1).cpu() == labels[keep]
        if keep.any()
        else torch.zeros(1)
    )
    return {**retrieval_metrics(images.cpu(), texts.cpu(), relevant), "zero_shot_acc": hits.float().mean().item()}


def build_clip_model(config: CLIPTrainConfig, splits: CaptionSplits) -> CLIPModel:
    """The registered ``config.model`` sized to the images (``vision.img_size``), normalising by the training
    images' statistics, then ``config.model_overrides``."""
    base: CLIPConfig = get_config(config.model)
    if not isinstance(base, CLIPConfig):
        raise ConfigError(f"model {config.model!r} is not a CLIP model: choose one of the clip-* models")
    train = splits.train.images
    overrides = dict(config.model_overrides)
    vision = {**base.vision.to_dict(), **overrides.pop("vision", {}), "img_size": train.shape[-1]}
    mean, std = train.mean((0, 2, 3)).tolist(), train.std((0, 2, 3)).clamp(min=1e-3).tolist()
    model = build_registered(config.model, **{**overrides, "vision": vision, "mean": tuple(mean), "std": tuple(std)})
    assert isinstance(model, CLIPModel)
    return model


class CLIPTask(Task):
    """Symmetric InfoNCE on :class:`CaptionSplits`, each batch's captions joined by ``config.negatives``
    hard negatives per image; the training images, word ids and scene codes live on the device,
    validation and test data on the CPU."""

    run_kind = "clip"
    checkpoint_kind = "clip"
    monitor = "val_i2t_r1"
    drop_last = True

    def __init__(self, model: CLIPModel, splits: CaptionSplits, config: CLIPTrainConfig) -> None:
        self.model, self.splits, self.config = model, splits, config
        self.context_length = model.config.context_length

    def prepare(self, env: DistEnv, amp: bool) -> None:
        super().prepare(env, amp)
        train = self.splits.train
        self.images = train.images.to(env.device)
        self.ids = tokenize(train.captions, self.context_length).to(env.device)
        self.scene_codes = description_codes(train.scenes).to(env.device)
        self.caption_codes = description_codes([parse_caption(c) for c in train.captions]).to(env.device)
        self.negative_ids = self.ids.new_zeros(0, *self.ids.shape)  # (K, N, L), drawn by start_epoch
        self.negative_codes = self.caption_codes.new_zeros(0, *self.caption_codes.shape)

    def train_size(self) -> int:
        return len(self.splits.train)

    def start_epoch(self, epoch: int, seed: int) -> None:
        """Draw the epoch's ``K = config.negatives`` hard negatives of every training caption."""
        if not self.config.negatives:
            return
        rng = np.random.default_rng(seed)
        drawn = [hard_negatives(self.splits.train.captions, rng) for _ in range(self.config.negatives)]
        device = self.ids.device
        self.negative_ids = torch.stack([tokenize(d, self.context_length) for d in drawn]).to(device)
        self.negative_codes = torch.stack([description_codes([parse_caption(c) for c in d]) for d in drawn]).to(device)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Images ``(B, 3, H, W)``, word ids ``((1 + K) B, L)`` (the images' captions, then ``K`` blocks of their
        hard negatives) and positives ``(B, (1 + K) B)`` (caption ``j`` true of image ``i``)."""
        index = index.to(self.images.device)
        ids = torch.cat([self.ids[index], *self.negative_ids[:, index]])
        codes = torch.cat([self.caption_codes[index], *self.negative_codes[:, index]])
        return self.images[index], ids, caption_holds(self.scene_codes[index], codes)

    def step(
        self, net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor], epoch: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        images, ids, positives = batch
        logits, _ = net(images, ids)
        loss = clip_loss(logits, positives)
        hits = positives.gather(1, logits.detach().argmax(1, keepdim=True)).sum()
        return loss, {"loss": loss.detach() * len(images), "acc": hits}, len(images)

    def validate(self, model: nn.Module) -> dict[str, float]:
        assert isinstance(model, CLIPModel)
        return {f"val_{k}": v for k, v in evaluate_clip(model, self.splits.val).items()}

    def test(self, model: nn.Module) -> dict[str, float]:
        assert isinstance(model, CLIPModel)
        return evaluate_clip(model, self.splits.test)

    def data_config(self) -> DataConfig:
        """Images in [0, 1] (the model normalises them itself); the classes of the zero-shot task."""
        cfg, size = self.config, self.images.shape[-1]
        return DataConfig.raw_pixels(size, SHAPE_CLASSES, self.splits.name, cfg.data_dir, cfg.seed, cfg.rows)


def build_task(config: CLIPTrainConfig, splits: CaptionSplits | None, reporter: Reporter) -> CLIPTask:
    """The engine task of a CLIP run on ``splits`` (default: ``config.count`` generated captioned shapes)."""
    if splits is None:
        splits = load_caption_dataset(
            config.dataset, seed=config.seed, count=config.count, image_size=config.image_size, plain=config.plain
        )
    if config.rows is not None:
        if config.rows > len(splits.train):
            raise ConfigError(f"rows={config.rows} but the training split has {len(splits.train)} scenes")
        splits.train = splits.train.subset(list(range(config.rows)))
    seed_everything(config.seed)
    return CLIPTask(build_clip_model(config, splits), splits, config)


def run_line(result: RunResult) -> str:
    """What ``vitlab train --task clip`` prints."""
    config, test = cast(CLIPTrainConfig, result.config), result.test or {}
    return (
        f"{config.model} on captioned {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, "
        f"test recall@1 image->text {test['i2t_r1']:.4f}, text->image {test['t2i_r1']:.4f}, zero-shot "
        f"shape accuracy {test['zero_shot_acc']:.4f} (best epoch's weights)"
    )
