"""A backbone with a dense head: ``DenseModel(images (B, 3, H, W)) -> dict`` (see ``heads``).

The backbone is any vitlab model with timm's ``forward_intermediates`` (maps ``(B, D_i, h_i, w_i)`` in
block order, through the final norm): a plain ViT by default, or a registered model by name, e.g. a
Swin once it has the method. The heads learn the maps' widths and the finest stride from one probe
image at build time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

import torch
from torch import nn

from ...checks import Check, Float, Int, Maybe, OneOf, Seq, check_fields, reject_unknown
from ...data.preprocess import Statistics
from ...errors import ConfigError
from ..config import (
    MAX_CLASSES,
    MAX_DEPTH,
    MAX_HEADS,
    MAX_SIDE,
    MAX_TOKENS,
    MAX_WIDTH,
    check_params,
    transformer_block_params,
)
from ..registry import build_registered, register_builder
from ..vit import patch_encoder
from .heads import ConvDecoderHead, DETRHead, LinearSegHead, QueryMaskHead

HEADS = {"segment": ("linear", "decoder", "queries"), "detect": ("detr",)}


@dataclass
class DenseConfig:
    """Backbone (a ViT of these sizes, or ``backbone`` = a registered model name), head and sizes.

    ``num_classes`` counts object classes; segmentation adds background. ``indices``: the blocks
    whose maps the decoder heads read (default: up to 4 evenly spaced, the last included).
    ``decoder_width``: the conv decoder's fused width and the query heads' width.
    ``detr_queries``: ``"tokens"`` (every image token proposes a box; the ``num_queries`` best
    distinct proposals, after class-agnostic NMS at IoU ``query_nms``, become the queries) or
    ``"learned"`` (``num_queries`` learned queries and anchors); see :class:`~vitlab.models.dense.heads.DETRHead`.
    """

    task: str = "segment"
    head: str = "linear"
    num_classes: int = 4
    img_size: int = 64
    patch_size: int = 8
    embed_dim: int = 96
    depth: int = 4
    num_heads: int = 4
    backbone: str | None = None
    indices: list[int] | None = None
    decoder_width: int = 64
    num_queries: int = 16
    decoder_depth: int = 3
    detr_queries: str = "tokens"
    query_nms: float = 0.5
    mean: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])
    std: list[float] = field(default_factory=lambda: [0.25, 0.25, 0.25])

    checks: ClassVar[dict[str, Check]] = {
        "task": OneOf(tuple(HEADS)),
        "num_classes": Int(1, MAX_CLASSES),
        "img_size": Int(1, MAX_SIDE),
        "patch_size": Int(1, MAX_SIDE),
        "embed_dim": Int(1, MAX_WIDTH),
        "depth": Int(1, MAX_DEPTH),
        "num_heads": Int(1, MAX_HEADS),
        "indices": Maybe(Seq(Int(-MAX_DEPTH, MAX_DEPTH - 1), container=list)),
        "decoder_width": Int(1, MAX_WIDTH),
        "num_queries": Int(1, MAX_TOKENS),
        "decoder_depth": Int(1, MAX_DEPTH),
        "detr_queries": OneOf(("learned", "tokens")),
        "query_nms": Float(0, 1),
        "mean": Seq(Float(-255, 255), 3, 3, container=list),
        "std": Seq(Float(0, 255, low_open=True), 3, 3, container=list),
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        if self.head not in HEADS[self.task]:
            raise ConfigError(f"head {self.head!r} does not do {self.task}: choose one of {HEADS[self.task]}")
        if self.head in ("queries", "detr") and self.decoder_width % 4:
            raise ConfigError(
                f"head {self.head!r} decodes with 4 heads and 2-D sine positions, so decoder_width "
                f"must be a multiple of 4, got {self.decoder_width}"
            )
        if (
            self.backbone is None
            and self.indices is not None
            and any(not -self.depth <= i < self.depth for i in self.indices)
        ):
            raise ConfigError(
                f"indices {self.indices} out of range for depth {self.depth}: "
                f"use 0..{self.depth - 1} or negative indices"
            )
        check_params(self, self.approx_params, "embed_dim, depth, decoder_width or decoder_depth")

    @property
    def approx_params(self) -> int:
        """The parameter count, from above: the ViT backbone of these sizes (unless ``backbone`` names one)
        and a query decoder of ``decoder_depth`` layers (self- and cross-attention, MLP)."""
        d, w = self.embed_dim, self.decoder_width
        vit = self.depth * transformer_block_params(d, 4 * d) + (self.img_size // self.patch_size) ** 2 * d
        decoder = self.decoder_depth * 2 * transformer_block_params(w, 4 * w) + self.num_queries * w
        return (0 if self.backbone else vit) + decoder

    def block_indices(self) -> list[int]:
        if self.head == "linear" or self.head == "detr":
            return [-1]
        if self.indices is not None:
            return list(self.indices)
        n = min(self.depth, 4)
        return sorted({round(self.depth * (i + 1) / n) - 1 for i in range(n)})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DenseConfig:
        reject_unknown(d, (f.name for f in fields(cls)), "dense")
        return cls(**d)


def build_backbone(cfg: DenseConfig) -> nn.Module:
    if cfg.backbone is not None:
        return build_registered(cfg.backbone, num_classes=0)
    return patch_encoder(cfg.img_size, cfg.patch_size, cfg.embed_dim, cfg.depth, cfg.num_heads)


def build_head(cfg: DenseConfig, dims: list[int], stride: int) -> nn.Module:
    """The head for maps of widths ``dims``, the finest ``stride`` pixels per cell."""
    k = cfg.num_classes + 1  # with background
    dim = dims[-1]
    if cfg.head == "linear":
        return LinearSegHead(dim, k)
    if cfg.head == "decoder":
        return ConvDecoderHead(dims, stride, k, width=cfg.decoder_width)
    if cfg.head == "queries":
        return QueryMaskHead(
            dims, stride, k, width=cfg.decoder_width, num_queries=cfg.num_queries, depth=cfg.decoder_depth
        )
    return DETRHead(
        dim,
        cfg.num_classes,
        width=cfg.decoder_width,
        num_queries=cfg.num_queries,
        depth=cfg.decoder_depth,
        queries=cfg.detr_queries,
        query_nms=cfg.query_nms,
    )


class DenseModel(nn.Module):
    """Images ``(B, 3, H, W)`` in [0, 1] -> normalised -> backbone maps -> head outputs (a dict)."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, config: DenseConfig) -> None:
        super().__init__()
        self.config = config
        backbone: Any = build_backbone(config)  # any registered model with timm's forward_intermediates
        self.backbone = backbone
        with torch.no_grad():  # the maps' widths and finest stride, from a probe image
            probe = torch.zeros(1, 3, config.img_size, config.img_size)
            maps = backbone.eval().forward_intermediates(
                probe, config.block_indices(), norm=True, stop_early=True, intermediates_only=True
            )
        backbone.train()
        stride = config.img_size // max(m.shape[-1] for m in maps)
        self.head = build_head(config, [m.shape[1] for m in maps], stride)
        self.register_buffer("mean", torch.tensor(config.mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(config.std).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> dict:
        x = Statistics(self.mean.flatten(), self.std.flatten()).normalize(images)
        maps = self.backbone.forward_intermediates(
            x, self.config.block_indices(), norm=True, stop_early=True, intermediates_only=True
        )
        return self.head(maps, x)


register_builder(DenseConfig, DenseModel)
