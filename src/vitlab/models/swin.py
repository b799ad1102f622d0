"""The Swin Transformer (Liu et al. 2021): a hierarchical ViT with shifted windows.

    images (B, C, H, W)
      -> PatchEmbedding (P x P, zero-padded) + LayerNorm     feature map (B, H/P, W/P, C)
      -> stage 0: depths[0] x Block                          window attention, shifted in odd blocks
      -> stage s > 0: PatchMerging, depths[s] x Block        grid halved (rounded up), width doubled
      -> LayerNorm -> mean over tokens -> head               logits (B, num_classes)

Every block is vitlab's pre-norm :class:`~vitlab.layers.block.Block` with ``attention="window"``:
the same block a plain ViT uses, told the stage's token grid. Attention in a stage of ``N`` tokens
costs ``N M`` scores per head for windows of ``M = window_size^2`` tokens, and each stage has a
quarter of the previous one's tokens, so the whole model is linear in the image's pixel count.
A stage whose grid fits in one window uses one window of the grid's size, unshifted; a grid the
window does not divide is padded, the padding masked (:mod:`vitlab.ops.windows`).

Parameter names are timm's ``SwinTransformer`` names except ``stages`` (timm: ``layers``),
``patch_norm`` (``patch_embed.norm``) and ``head`` (``head.fc``); see :mod:`vitlab.interop.timm.swin`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..checks import Bool, Check, Float, Int, Pair, Seq, as_pair, check_fields
from ..errors import ConfigError
from ..layers.block import Block
from ..layers.patch_embed import PatchEmbedding
from ..layers.patch_merging import PatchMerging
from .config import (
    MAX_CHANS,
    MAX_CLASSES,
    MAX_DEPTH,
    MAX_HEADS,
    MAX_SIDE,
    MAX_WIDTH,
    RATE,
    ModelConfig,
    check_mlp_ratio,
    check_params,
    transformer_block_params,
)
from .registry import register_builder, register_model
from .vit import init_linears

MAX_STAGES = 8


@dataclass
class SwinConfig(ModelConfig):
    """Everything that defines a :class:`SwinTransformer`.

    ``depths`` and ``num_heads`` give one entry per stage; stage ``s`` has width
    ``embed_dim * 2^s``. ``window_size`` is the window side ``M`` in every stage.
    """

    img_size: int | tuple[int, int] = 224
    patch_size: int = 4
    in_chans: int = 3
    num_classes: int = 1000
    embed_dim: int = 96
    depths: tuple[int, ...] = (2, 2, 6, 2)
    num_heads: tuple[int, ...] = (3, 6, 12, 24)
    window_size: int = 7
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    norm_eps: float = 1e-5
    drop_rate: float = 0.0
    attn_drop_rate: float = 0.0
    drop_path_rate: float = 0.1

    checks: ClassVar[dict[str, Check]] = {
        "img_size": Pair(Int(1, MAX_SIDE)),
        "patch_size": Int(1, MAX_SIDE),
        "in_chans": Int(1, MAX_CHANS),
        "num_classes": Int(0, MAX_CLASSES),
        "embed_dim": Int(1, MAX_WIDTH),
        "depths": Seq(Int(1, MAX_DEPTH), 1, MAX_STAGES),
        "num_heads": Seq(Int(1, MAX_HEADS), 1, MAX_STAGES),
        "window_size": Int(1, MAX_SIDE),
        "mlp_ratio": Float(0, 64, low_open=True),
        "qkv_bias": Bool(),
        "norm_eps": Float(0, 1, low_open=True),
        "drop_rate": RATE,
        "attn_drop_rate": RATE,
        "drop_path_rate": RATE,
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        if len(self.depths) != len(self.num_heads):
            raise ConfigError(
                f"depths {self.depths} and num_heads {self.num_heads} need one entry per stage, as many of each"
            )
        if self.dims[-1] > MAX_WIDTH:
            raise ConfigError(
                f"the last stage's width embed_dim * 2^{len(self.depths) - 1} = {self.dims[-1]} "
                f"exceeds {MAX_WIDTH}: reduce embed_dim or the number of stages"
            )
        for stage, (dim, heads) in enumerate(zip(self.dims, self.num_heads)):
            if dim % heads:
                raise ConfigError(
                    f"stage {stage} has width {dim} (embed_dim * 2^{stage}), not divisible by "
                    f"num_heads[{stage}] = {heads}: choose head counts that divide the widths"
                )
        check_mlp_ratio(self.embed_dim, self.mlp_ratio)
        check_params(self, self.approx_params, "embed_dim, depths or window_size")

    @property
    def dims(self) -> tuple[int, ...]:
        """Token width per stage: ``embed_dim * 2^s``."""
        return tuple(self.embed_dim * 2**s for s in range(len(self.depths)))

    @property
    def grid(self) -> tuple[int, int]:
        """The patch grid of stage 0 (a partial patch is padded)."""
        h, w = as_pair(self.img_size)
        return -(-h // self.patch_size), -(-w // self.patch_size)

    @property
    def approx_params(self) -> int:
        """The parameter count, estimated before building: patch embedding, per stage its merging (from the
        second), blocks and relative position bias tables, the final norm and the head."""
        dims, bias = self.dims, (2 * self.window_size - 1) ** 2
        total = self.patch_size**2 * self.in_chans * dims[0] + 3 * dims[0] + 2 * dims[-1]
        for s, (depth, heads) in enumerate(zip(self.depths, self.num_heads)):
            merge = 4 * dims[s - 1] * (dims[s] + 2) if s else 0
            total += merge + depth * (transformer_block_params(dims[s], int(dims[s] * self.mlp_ratio)) + bias * heads)
        return total + (dims[-1] + 1) * self.num_classes

    @property
    def stage_grids(self) -> tuple[tuple[int, int], ...]:
        """Token grid per stage: each patch merging halves it, rounding up."""
        grids = [self.grid]
        for _ in self.depths[1:]:
            gh, gw = grids[-1]
            grids.append(((gh + 1) // 2, (gw + 1) // 2))
        return tuple(grids)


class SwinStage(nn.Module):
    """Stage ``stage`` of a Swin ``config``: feature map ``(B, H, W, C_in) -> (B, H', W', C)``, patch merging (or
    ``nn.Identity`` in the first stage), then its depth of blocks of windowed attention on its grid (``H' x W'``),
    shifted in odd blocks, the ``i``-th dropping its path at rate ``drop_paths[i]``."""

    def __init__(self, config: SwinConfig, stage: int, drop_paths: list[float]) -> None:
        super().__init__()
        dims, eps = config.dims, config.norm_eps
        dim = dims[stage]
        self.downsample = PatchMerging(dims[stage - 1], dim, norm_eps=eps) if stage > 0 else nn.Identity()
        self.blocks = nn.ModuleList(
            [
                Block(
                    dim,
                    config.num_heads[stage],
                    config.mlp_ratio,
                    qkv_bias=config.qkv_bias,
                    dropout=config.drop_rate,
                    attn_drop=config.attn_drop_rate,
                    drop_path=drop_paths[i],
                    norm_eps=eps,
                    attention="window",
                    attention_options=dict(
                        grid=config.stage_grids[stage], window_size=config.window_size, shift=i % 2 == 1
                    ),
                )
                for i in range(config.depths[stage])
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.downsample(x)
        b, h, w, c = x.shape
        x = x.reshape(b, h * w, c)
        for block in self.blocks:
            x = block(x, None, (h, w))
        return x.reshape(b, h, w, c)


class SwinTransformer(nn.Module):
    """A Swin classifier: images ``(B, C, H, W)`` -> logits ``(B, num_classes)``.

    ``forward_features`` returns the last stage's normalised feature map ``(B, H', W', C)``;
    ``forward_head`` averages it over the grid and classifies. Any image size runs: stage grids
    follow the image, windows the rule above.
    """

    def __init__(self, config: SwinConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = cfg = SwinConfig.resolve(config, overrides)
        self.patch_embed = PatchEmbedding(cfg.patch_size, cfg.in_chans, cfg.embed_dim, pad=True)
        self.patch_norm = nn.LayerNorm(cfg.embed_dim, eps=cfg.norm_eps)
        rates = torch.linspace(0, cfg.drop_path_rate, sum(cfg.depths)).split(list(cfg.depths))
        dims = cfg.dims
        self.stages = nn.ModuleList([SwinStage(cfg, s, rates[s].tolist()) for s in range(len(cfg.depths))])
        self.norm = nn.LayerNorm(dims[-1], eps=cfg.norm_eps)
        self.head_drop = nn.Dropout(cfg.drop_rate) if cfg.drop_rate > 0 else nn.Identity()
        self.head = nn.Linear(dims[-1], cfg.num_classes) if cfg.num_classes > 0 else nn.Identity()
        init_linears(self)

    @property
    def num_classes(self) -> int:
        return self.config.num_classes

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> the last stage's feature map ``(B, H', W', C)`` after the final norm."""
        x = self.patch_norm(self.patch_embed(images))
        gh, gw = self.patch_embed.grid_size(*images.shape[-2:])
        x = x.reshape(x.shape[0], gh, gw, -1)
        for stage in self.stages:
            x = stage(x)
        return self.norm(x)

    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Feature map ``(B, H', W', C)`` -> logits ``(B, num_classes)`` (or pooled ``(B, C)``)."""
        x = self.head_drop(features.mean(dim=(1, 2)))
        return x if pre_logits else self.head(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(images))

    def no_weight_decay(self) -> set[str]:
        """Names of parameters that weight decay should skip beyond norms and biases: the bias tables."""
        return {n for n, _ in self.named_parameters() if n.endswith("relative_position_bias_table")}


register_builder(SwinConfig, SwinTransformer)
register_model(
    "swin-tiny-patch4-window7-224",
    SwinConfig(drop_path_rate=0.2),
    "Swin-T at 224x224 (4 stages of 2-2-6-2 blocks, windows of 7x7), timm-compatible shapes",
)
# The textbook-sized Swin: 28x28 greyscale in 3 stages.
SWIN_NANO = SwinConfig(
    img_size=28,
    patch_size=2,
    in_chans=1,
    num_classes=10,
    embed_dim=32,
    depths=(2, 2, 2),
    num_heads=(2, 4, 8),
    window_size=7,
)
register_model(
    "swin-nano-patch2-window7-28",
    SWIN_NANO,
    "a 3-stage Swin for 28x28 greyscale: grids 14, 7, 4 (7 padded to 8 before merging)",
)
register_model(
    "swin-nano-patch2-window4-32",
    SwinConfig(**{**SWIN_NANO.to_dict(), "img_size": 32, "in_chans": 3, "window_size": 4}),
    "a 3-stage Swin for 32x32 colour: grids 16, 8, 4 in windows of 4x4",
)
