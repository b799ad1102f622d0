"""Self-supervised pretraining on the engine: :class:`PretrainConfig`, and the tasks :func:`vitlab.tasks.run` trains.

``method="mae"`` trains a :class:`~vitlab.tasks.ssl.mae.MaskedAutoencoder` around the ViT
(:class:`MAETask`); ``method="dino"`` a student and its momentum teacher (:class:`DINOTask`,
:mod:`vitlab.tasks.ssl.dino`). Labels are never read. The images are the training split, or with
``images="all"`` every split's (train, val and test: for a pretrain-then-fine-tune protocol this
means the encoder has seen the validation images, without their labels).

Both are tasks on :func:`vitlab.engine.fit`, so a run gets the run folder, exact resume, the time
limit and DDP from the engine. The deliverable is the ViT without a classifier head (the DINO
teacher's backbone): a checkpoint of kind ``encoder`` in ``last/model.safetensors``, which
:func:`vitlab.runs.load_checkpoint` rebuilds and ``vitlab train --init`` starts from; ``loss.png``
and, for MAE, ``reconstructions.png`` sit beside it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, cast

import torch
from torch import nn

from ...checks import Check, Float, Int, Maybe, OneOf, Options, Text, as_pair
from ...data import DataConfig, DataSplits, load_dataset
from ...data.preprocess import Statistics
from ...engine import Reporter, RunConfig, Task, seed_everything
from ...engine.config import ModelFields
from ...engine.distributed import DistEnv, all_reduce_sum
from ...errors import ConfigError
from ...models import build_registered
from ...models.config import MAX_CLASSES, MAX_SIDE
from ...models.vit import VisionTransformer
from ...runs import RunDir
from ...runs.layout import METRICS
from ..run import RunResult
from .crops import multi_crop
from .dino import Centre, DINOHead, DINONet, cosine_momentum, dino_loss, ema_update_, teacher_temperature
from .mae import MAEConfig, MaskedAutoencoder

METHODS = ("mae", "dino")
IMAGE_SETS = ("train", "all")
TEMPERATURE = Float(0.0, 100.0, low_open=True)


@dataclass
class PretrainConfig(RunConfig):
    """A pretraining run: the shared run fields (:class:`~vitlab.engine.RunConfig`, here with
    pretraining's defaults), the ViT (``model`` with ``model_overrides``), the images, and each
    method's own fields: ``mae`` (an :class:`~vitlab.tasks.ssl.mae.MAEConfig`, or its fields as a mapping)
    for MAE; the projection width ``dino_out_dim``, ``local_crops`` crops of ``local_size`` pixels
    (default: half the image, whole patches), the temperatures (the teacher's warms up from
    ``warmup_teacher_temp`` over ``teacher_temp_epochs``), the teacher's EMA momentum (rising to 1
    on a cosine) and the centre's momentum for DINO.
    """

    method: str = "mae"
    model: str = "vit-digits"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    images: str = "train"
    epochs: int = 50
    batch_size: int = 128
    lr: float = 1.5e-3
    warmup_epochs: float = 5.0
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

    HELP: ClassVar[dict[str, str]] = {
        **RunConfig.HELP,
        "model": "registered ViT name (see `vitlab models`)",
        "images": "which split's images to pretrain on",
        "local_crops": "DINO: small crops per image",
    }

    def checks(self) -> dict[str, Check]:
        return {
            **super().checks(),
            "method": OneOf(METHODS),
            "images": OneOf(IMAGE_SETS),
            "dino_out_dim": Int(1, MAX_CLASSES),
            "local_crops": Int(0, 64),
            "local_size": Maybe(Int(1, MAX_SIDE)),
            "student_temp": TEMPERATURE,
            "teacher_temp": TEMPERATURE,
            "warmup_teacher_temp": TEMPERATURE,
            "teacher_temp_epochs": Int(0, 100_000),
            "teacher_momentum": Float(0.0, 1.0),
            "centre_momentum": Float(0.0, 1.0),
            "model": Text("a registered ViT name (see `vitlab models`)"),
            "model_overrides": ModelFields(self.model),
            "mae": Options(MAEConfig, "MAEConfig"),
        }

    OVERRIDES = "model_overrides"
    NESTED = {"mae": "mae"}
    # ``vitlab pretrain mae|dino`` names the method.
    CLI_OWNED = {**RunConfig.CLI_OWNED, "method": "vitlab pretrain mae|dino"}

    def check_relations(self) -> None:
        if self.method == "dino" and self.ema_decay is not None:
            raise ConfigError(
                "DINO's teacher is already a moving average of the student: leave ema_decay unset "
                "(tune teacher_momentum instead)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "mae": asdict(self.mae)}


def unlabelled_images(splits: DataSplits, which: str) -> torch.Tensor:
    """The images to pretrain on, ``(N, C, H, W)``: the train split, or every split (``all``)."""
    names = ["train"] if which == "train" else [n for n in ("train", "val", "test") if getattr(splits, n) is not None]
    return torch.cat([splits.in_memory(n, "pretraining").images for n in names])


def build_encoder(config: PretrainConfig, splits: DataSplits) -> VisionTransformer:
    """``build_registered(config.model)`` for the images, without a classifier head (DINO's local crops
    need ``dynamic_img_size``), then ``config.model_overrides``."""
    chans, height, width = splits.image_shape
    dynamic = {"dynamic_img_size": True} if config.method == "dino" else {}
    encoder = build_registered(
        config.model,
        **{"in_chans": chans, "img_size": (height, width), **dynamic, **config.model_overrides, "num_classes": 0},
    )
    if not isinstance(encoder, VisionTransformer):
        raise ConfigError(f"{config.model} is not a ViT: self-supervised pretraining here needs a vit-* model")
    return encoder


def scores_per_crop(net: nn.Module, crops: list[torch.Tensor]) -> list[torch.Tensor]:
    """``net``'s scores ``(B, K)`` for each crop ``(B, C, S, S)``; the crops of one size run as one batch."""
    out: list[torch.Tensor] = []
    for size in dict.fromkeys(c.shape[-1] for c in crops):
        group = [c for c in crops if c.shape[-1] == size]
        out += net(torch.cat(group)).chunk(len(group))
    return out


class PretrainTask(Task):
    """What MAE and DINO share: unlabelled, normalised images, the encoder checkpoint, the loss figure."""

    checkpoint_kind = "encoder"
    monitor = None
    drop_last = True

    def __init__(self, splits: DataSplits, config: PretrainConfig) -> None:
        self.splits, self.config = splits, config
        self.images = unlabelled_images(splits, config.images)

    def prepare(self, env: DistEnv, amp: bool) -> None:
        super().prepare(env, amp)
        self.images = self.images.to(env.device)
        self.inputs = Statistics(
            torch.tensor(self.splits.mean, device=env.device), torch.tensor(self.splits.std, device=env.device)
        )

    def train_size(self) -> int:
        return len(self.images)

    def batch(self, index: torch.Tensor) -> torch.Tensor:
        """Normalised images ``(B, C, H, W)``."""
        return self.inputs.normalize(self.images[index.to(self.images.device)])

    def data_config(self) -> DataConfig:
        cfg = self.config
        data = DataConfig.from_splits(self.splits, data_dir=cfg.data_dir, seed=cfg.seed, rows=cfg.rows)
        data.classes = []  # an encoder has no outputs to name
        return data

    def finish(self, run_dir: RunDir, model: nn.Module) -> None:
        from .figures import plot_pretrain_loss

        history = [json.loads(line) for line in (run_dir / METRICS).read_text().splitlines()]
        plot_pretrain_loss(
            history, run_dir.figure_path("loss.png"), title=f"{self.config.method} pretraining of {self.config.model}"
        )


class MAETask(PretrainTask):
    """Masked autoencoding: the loss is the MSE on hidden patches; the masks come from a generator
    reseeded every epoch. Delivers the encoder."""

    run_kind = "mae"

    def __init__(self, encoder: VisionTransformer, splits: DataSplits, config: PretrainConfig) -> None:
        super().__init__(splits, config)
        # MAE reads the tokens before pooling, so fc_norm gets no gradient: frozen, it is also left
        # out of DDP's gradient reduction (which expects a gradient for every trainable parameter).
        encoder.fc_norm.requires_grad_(False)
        self.model = MaskedAutoencoder(encoder, config.mae)

    def start_epoch(self, epoch: int, seed: int) -> None:
        self.generator = torch.Generator(device=self.env.device).manual_seed(seed)

    def step(
        self, net: nn.Module, batch: torch.Tensor, epoch: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        loss, _, _ = net(batch, self.generator)
        return loss, {"loss": loss.detach() * len(batch)}, len(batch)

    def deliverable(self, model: nn.Module) -> nn.Module:
        return cast(MaskedAutoencoder, model).encoder

    def finish(self, run_dir: RunDir, model: nn.Module) -> None:
        from .figures import plot_reconstructions

        super().finish(run_dir, model)
        mae = cast(MaskedAutoencoder, copy.deepcopy(self.model)).eval()
        mae.encoder.load_state_dict(model.state_dict())  # the delivered weights (the EMA when on)
        with torch.no_grad():
            x = self.batch(torch.arange(min(8, len(self.images))))
            _, pred, mask = mae(x, torch.Generator(device=x.device).manual_seed(self.config.seed))
        plot_reconstructions(
            x,
            pred,
            mask,
            mae.patch_size,
            run_dir.figure_path("reconstructions.png"),
            norm_pix=self.config.mae.norm_pix_loss,
        )


class DINOTask(PretrainTask):
    """Self-distillation: the student (:attr:`model`) sees two global and ``local_crops`` local crops,
    the teacher (the student's EMA, updated after each optimiser step) the global ones. Teacher and
    centre are the task's state, so a resumed run continues exactly. Delivers the teacher's backbone."""

    run_kind = "dino"

    def __init__(self, encoder: VisionTransformer, splits: DataSplits, config: PretrainConfig) -> None:
        super().__init__(splits, config)
        self.model = DINONet(encoder, DINOHead(encoder.embed_dim, config.dino_out_dim))
        self.teacher = copy.deepcopy(self.model)  # runs under no_grad: no gradient ever reaches it
        self.centre = Centre(config.dino_out_dim, config.centre_momentum)
        size, patch = as_pair(encoder.config.img_size)[0], encoder.config.patch_size
        self.global_size = size
        self.local_size = config.local_size or max(patch, (size // 2) // patch * patch)
        if self.local_size % patch:
            raise ConfigError(
                f"local_size {self.local_size} is not a multiple of the patch size {patch}: "
                f"choose e.g. {max(patch, self.local_size // patch * patch)}"
            )

    def prepare(self, env: DistEnv, amp: bool) -> None:
        super().prepare(env, amp)
        self.teacher.to(env.device)
        self.centre.to(env.device)

    def start_epoch(self, epoch: int, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def step(
        self, net: nn.Module, batch: torch.Tensor, epoch: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        cfg = self.config
        crops = multi_crop(
            batch,
            self.global_size,
            self.local_size,
            cfg.local_crops,
            hflip=self.splits.hflip_ok,
            generator=self.generator,
        )
        self.teacher.eval()
        with torch.no_grad():
            teacher_out = scores_per_crop(self.teacher, crops[:2])
        student_out = scores_per_crop(net, crops)
        temp = teacher_temperature(epoch, cfg.teacher_temp_epochs, cfg.warmup_teacher_temp, cfg.teacher_temp)
        stats = dino_loss(student_out, teacher_out, self.centre, cfg.student_temp, temp)
        n = len(batch)
        return (
            stats.loss,
            {
                "loss": stats.loss.detach() * n,
                "teacher_entropy": stats.teacher_entropy * n,
                "teacher_student_kl": stats.teacher_student_kl * n,
            },
            n,
        )

    def after_step(self, step: int, total_steps: int) -> None:
        """The teacher follows the student; every process's centre becomes their mean, which (the
        update being linear in the batch means) is the centre of the global batch."""
        ema_update_(self.teacher, self.model, cosine_momentum(step - 1, total_steps, self.config.teacher_momentum))
        world = self.env.world_size
        if world > 1:
            all_reduce_sum(self.centre.centre).div_(world)

    def deliverable(self, model: nn.Module) -> nn.Module:
        return self.teacher.backbone

    def state_dict(self) -> dict[str, Any]:
        return {"teacher": self.teacher.state_dict(), "centre": self.centre.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.teacher.load_state_dict(state["teacher"])
        self.centre.load_state_dict(state["centre"])


def build_task(config: PretrainConfig, splits: DataSplits | None, reporter: Reporter) -> PretrainTask:
    """The engine task of a pretraining run on ``splits`` (default: the dataset ``config`` names), without labels."""
    splits = splits or load_dataset(config.dataset, config.data_dir, seed=config.seed, rows=config.rows)
    seed_everything(config.seed)
    encoder = build_encoder(config, splits)
    return (MAETask if config.method == "mae" else DINOTask)(encoder, splits, config)


def run_summary(result: RunResult) -> dict[str, Any]:
    """A pretraining run's ``summary.json``."""
    config = cast(PretrainConfig, result.config)
    return {
        "method": config.method,
        "epochs": len(result.history),
        "final_loss": result.last.get("train_loss"),
        "seconds": result.seconds,
        "params": result.params,
        "checkpoint": str(result.checkpoint),
    }


def run_line(result: RunResult) -> str:
    """What ``vitlab pretrain`` prints: the method, epochs, seconds, final loss and DINO's collapse monitors."""
    config, last = cast(PretrainConfig, result.config), result.last
    monitors = "".join(
        f", {k.removeprefix('train_')} {last[k]:.4f}"
        for k in ("train_teacher_entropy", "train_teacher_student_kl")
        if k in last
    )
    loss = f", final loss {last['train_loss']:.4f}" if last else ""
    return (
        f"{config.method} pretraining of {config.model} on {config.dataset}: {len(result.history)} epochs, "
        f"{result.seconds:.1f}s{loss}{monitors}"
    )


def run_handoff(result: RunResult) -> str | None:
    """Where the encoder is, and how to fine-tune it."""
    if result.checkpoint is None:
        return None
    return f"encoder: {result.checkpoint} (fine-tune with `vitlab train --init {result.config.out_dir}`)"
