"""A plain convolutional baseline to compare against the ViT.

    images (B, C, H, W)
      -> stage 1: convs_per_stage x [conv3x3 -> BatchNorm -> ReLU]         (B, w1, H, W)
      -> stage 2: maxpool 2x2, then the same                              (B, w2, H/2, W/2)
      -> ...                                                              (pooling stops at 1x1)
      -> global average pool                                              (B, widths[-1])
      -> optional hidden layer: linear -> ReLU                            (B, hidden)
      -> dropout -> linear head                                           logits (B, num_classes)

Activations and kernels go channels-last (NHWC in memory; shapes unchanged) whenever that is exact:
oneDNN's convolutions, BatchNorm and pooling run 2-3x faster that way on the CPU. The exception is
training with BatchNorm, which stays NCHW: the CPU's channels-last BatchNorm accumulates its batch
statistics in float32, which put the gradients ~5e-3 (relative) off a float64 reference where NCHW
is 2e-5 off, and an exact channels-last BatchNorm is no faster than NCHW. Parameters are stored in
PyTorch's default layout either way, so state dicts and optimiser states do not depend on it.

The interface mirrors :class:`~vitlab.models.vit.VisionTransformer` (``forward_features``,
``forward_head``, ``reset_classifier``, ``num_classes``, ``embed_dim``) so trainers and
comparisons treat both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import Check, Int, OneOf, Pair, Seq, as_pair, check_fields
from ..errors import ConfigError, DataError
from .config import MAX_CHANS, MAX_CLASSES, MAX_DEPTH, MAX_SIDE, MAX_WIDTH, RATE, ModelConfig, check_params
from .registry import register_builder, register_model

NORMS = ("batch", "none")


@dataclass
class CNNConfig(ModelConfig):
    """Everything that defines a :class:`SimpleCNN`.

    ``widths`` gives the channels of each stage; a 2x2 max-pool sits between consecutive stages
    unless the feature map is already 1 pixel high or wide. ``hidden`` > 0 puts a dense layer of
    that width (with ReLU) between the pooled features and the head, as Keras-style convnets have.
    """

    img_size: int | tuple[int, int] = 28
    in_chans: int = 1
    num_classes: int = 10
    widths: tuple[int, ...] = (32, 64, 80)
    convs_per_stage: int = 1
    norm: str = "batch"
    dropout: float = 0.0
    hidden: int = 0

    checks: ClassVar[dict[str, Check]] = {
        "img_size": Pair(Int(1, MAX_SIDE)),
        "in_chans": Int(1, MAX_CHANS),
        "num_classes": Int(0, MAX_CLASSES),
        "widths": Seq(Int(1, MAX_WIDTH), 1, 64),
        "convs_per_stage": Int(1, MAX_DEPTH),
        "norm": OneOf(NORMS),
        "dropout": RATE,
        "hidden": Int(0, MAX_WIDTH),
    }

    def __post_init__(self) -> None:
        self.widths = (self.widths,) if isinstance(self.widths, int) else self.widths
        check_fields(self, self.checks)
        check_params(self, self.approx_params, "widths or convs_per_stage")

    @property
    def approx_params(self) -> int:
        """The parameter count: 3x3 convolutions (no bias under BatchNorm, whose scale and shift count),
        the hidden layer, the head."""
        chans, per_channel = (self.in_chans,) + self.widths, 2 if self.norm == "batch" else 1
        convs = [(cout if i else cin, cout) for cin, cout in zip(chans, chans[1:]) for i in range(self.convs_per_stage)]
        hidden = (self.widths[-1] + 1) * self.hidden
        return (
            sum((9 * cin + per_channel) * cout for cin, cout in convs)
            + hidden
            + ((self.hidden or self.widths[-1]) + 1) * self.num_classes
        )

    @property
    def pools(self) -> tuple[bool, ...]:
        """Whether each stage starts with a 2x2 max-pool: never the first, nor once a side is 1."""
        side, flags = min(as_pair(self.img_size)), []
        for i in range(len(self.widths)):
            flags.append(i > 0 and side >= 2)
            side = side // 2 if flags[-1] else side
        return tuple(flags)


class ConvNormAct(nn.Module):
    """``(B, C_in, h, w) -> (B, C_out, h, w)``: 3x3 convolution (padding 1), BatchNorm, ReLU, computed
    in ``memory_format`` (input and kernel; the output keeps it).

    The convolution has no bias when BatchNorm follows (its shift would be redundant).
    """

    def __init__(self, in_chans: int, out_chans: int, norm: str = "batch") -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_chans, out_chans, kernel_size=3, padding=1, bias=norm == "none")
        self.norm = nn.BatchNorm2d(out_chans) if norm == "batch" else nn.Identity()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor, memory_format: torch.memory_format = torch.contiguous_format) -> torch.Tensor:
        conv = self.conv  # the kernel's layout decides oneDNN's when the input has a single channel
        kernel = conv.weight.contiguous(memory_format=memory_format)
        x = F.conv2d(x.contiguous(memory_format=memory_format), kernel, conv.bias, conv.stride, conv.padding)
        return self.act(self.norm(x))


class Stage(nn.Module):
    """An optional 2x2 max-pool followed by ``depth`` :class:`ConvNormAct` blocks."""

    def __init__(self, in_chans: int, out_chans: int, depth: int, norm: str, pool: bool) -> None:
        super().__init__()
        self.pool = nn.MaxPool2d(2) if pool else nn.Identity()
        self.blocks = nn.ModuleList(
            [ConvNormAct(in_chans if i == 0 else out_chans, out_chans, norm) for i in range(depth)]
        )

    def forward(self, x: torch.Tensor, memory_format: torch.memory_format = torch.contiguous_format) -> torch.Tensor:
        x = self.pool(x)
        for block in self.blocks:
            x = block(x, memory_format)
        return x


class SimpleCNN(nn.Module):
    """A CNN classifier: images ``(B, C, H, W)`` -> logits ``(B, num_classes)``.

    ``forward_features`` returns the last stage's map ``(B, widths[-1], h, w)`` (in
    :meth:`memory_format`); ``forward_head`` pools it globally, applies the hidden layer if any, and
    classifies.
    """

    def __init__(self, config: CNNConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = cfg = CNNConfig.resolve(config, overrides)
        chans = (cfg.in_chans,) + cfg.widths
        self.stages = nn.ModuleList(
            [Stage(chans[i], chans[i + 1], cfg.convs_per_stage, cfg.norm, pool) for i, pool in enumerate(cfg.pools)]
        )
        self.hidden = (
            nn.Sequential(nn.Linear(cfg.widths[-1], cfg.hidden), nn.ReLU()) if cfg.hidden > 0 else nn.Identity()
        )
        self.head_drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.head = nn.Linear(self.embed_dim, cfg.num_classes) if cfg.num_classes > 0 else nn.Identity()

    @property
    def embed_dim(self) -> int:
        """Width of the vector the head classifies: ``hidden``, or without it the last stage's channels."""
        return self.config.hidden or self.config.widths[-1]

    @property
    def num_classes(self) -> int:
        return self.config.num_classes

    def memory_format(self) -> torch.memory_format:
        """Channels-last, but NCHW while training with BatchNorm (see the module doc)."""
        exact = not (self.training and self.config.norm == "batch")
        return torch.channels_last if exact else torch.contiguous_format

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> feature map ``(B, widths[-1], h, w)``."""
        if images.ndim != 4 or images.shape[1] != self.config.in_chans:
            raise DataError(
                f"expected images (B, {self.config.in_chans}, H, W), got shape "
                f"{tuple(images.shape)}: convert them or build the model with the right in_chans"
            )
        x, memory_format = images, self.memory_format()
        for stage in self.stages:
            x = stage(x, memory_format)
        return x

    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Feature map ``(B, C, h, w)`` -> logits ``(B, num_classes)`` (or the head's input ``(B, embed_dim)``)."""
        x = self.head_drop(self.hidden(features.mean(dim=(-2, -1))))
        return x if pre_logits else self.head(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(images))

    def reset_classifier(self, num_classes: int) -> None:
        """Replace the head with a fresh one for ``num_classes`` (0 removes it)."""
        self.config.num_classes = num_classes
        device = next(self.parameters()).device
        self.head = nn.Linear(self.embed_dim, num_classes).to(device) if num_classes > 0 else nn.Identity()


def count_params(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameter entries (buffers such as BatchNorm statistics never count)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def cnn_widths(multiplier: float, stages: int = 3, growth: float = 2.0) -> tuple[int, ...]:
    """Stage widths ``round(multiplier * growth**i)`` (at least 1): nondecreasing in ``multiplier``."""
    return tuple(max(1, round(multiplier * growth**i)) for i in range(stages))


def cnn_for_budget(
    params: int,
    img_size: int | tuple[int, int] = 28,
    in_chans: int = 1,
    num_classes: int = 10,
    stages: int = 3,
    growth: float = 2.0,
    **config: Any,
) -> CNNConfig:
    """The :class:`CNNConfig` of the ``widths = cnn_widths(m, stages, growth)`` family whose
    trainable parameter count is closest to ``params``.

    ``config`` passes further fields (``convs_per_stage``, ``norm``, ``dropout``). Counting builds
    models on the meta device, so no memory is spent on weights.
    """
    base = CNNConfig(
        img_size=img_size, in_chans=in_chans, num_classes=num_classes, widths=cnn_widths(1.0, stages, growth), **config
    )

    def config_at(multiplier: float) -> tuple[CNNConfig, int]:
        cfg = replace(base, widths=cnn_widths(multiplier, stages, growth))
        with torch.device("meta"):
            return cfg, count_params(SimpleCNN(cfg))

    smallest = config_at(0.0)
    if params <= smallest[1]:
        if params < smallest[1]:
            raise ConfigError(
                f"a budget of {params:,} parameters is below the smallest {stages}-stage CNN "
                f"({smallest[1]:,}, all widths 1): raise the budget or use fewer stages"
            )
        return smallest[0]
    low, high = 0.0, 1.0
    while config_at(high)[1] < params:
        low, high = high, high * 2
    for _ in range(40):  # bisect to the jump across the budget
        middle = (low + high) / 2
        low, high = (middle, high) if config_at(middle)[1] < params else (low, middle)
    below, above = config_at(low), config_at(high)
    return min(below, above, key=lambda pair: abs(pair[1] - params))[0]


# Baselines sized to match the ViTs they are compared with.
register_builder(CNNConfig, SimpleCNN)
register_model(
    "cnn-seed",
    CNNConfig(img_size=28, in_chans=1, num_classes=10, widths=(32, 64, 80)),
    "a three-stage convnet for 28x28 greyscale, sized to compare with vit-seed",
)
register_model(
    "cnn-digits",
    CNNConfig(img_size=8, in_chans=1, num_classes=10, widths=(40, 80, 160)),
    "a three-stage convnet for 8x8 digits, sized to compare with vit-digits",
)
