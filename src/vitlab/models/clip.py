"""A small CLIP (Radford et al. 2021): an image tower and a text tower meeting in one embedding space.

images (B, C, H, W) in [0, 1]
  -> (x - mean) / std -> VisionTransformer (num_classes=0)   pooled features (B, Dv)
  -> visual_projection (no bias) -> L2 normalise             image embeddings (B, E)
word ids (B, L) (``<eos>`` after the words, ``<pad>`` = 0 after it)
  -> token embedding + learned positions -> depth x Block -> LayerNorm      tokens (B, L, Dt)
  -> pool: the ``<eos>`` token's output (CLIP's) or the mean over words and ``<eos>``
  -> text_projection (no bias) -> L2 normalise               text embeddings (B, E)
logits_per_image = exp(logit_scale) * image @ text^T  (B, B'), exp(logit_scale) clamped to ``max_logit_scale``

The text tower is bidirectional (no causal mask): a caption is a whole sentence known at once. Every
caption is padded to ``context_length`` with ``<pad>``, which attention reads like any token, so a
caption's embedding depends on the caption alone, never on its batch. The image tower is any vitlab
:class:`~vitlab.models.vit_config.ViTConfig` with ``num_classes=0``, so a timm (or open_clip-style timm) ViT's
weights load into it (:func:`vitlab.tasks.clip.load_image_tower`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import Check, Float, Int, OneOf, Seq, check_fields
from ..data.captions import CONTEXT_LENGTH, VOCAB
from ..data.preprocess import Statistics
from ..errors import ConfigError
from ..layers.block import Block
from .config import MAX_DEPTH, MAX_HEADS, MAX_TOKENS, MAX_WIDTH, ModelConfig, check_params, transformer_block_params
from .registry import register_builder, register_model
from .vit import VisionTransformer, init_linears
from .vit_config import ViTConfig

TEXT_POOLS = ("eos", "mean")
EOS_ID = VOCAB.index("<eos>")


def _default_vision() -> ViTConfig:
    """A 4-block ViT over a 4 x 4 grid of 8 x 8 patches of a 32 x 32 image, embedded by a convolutional
    stem, with fixed 2-D sin-cos positions, pooled by the mean: on captioned shapes at equal CPU time it
    retrieves better than 4 x 4 patches (4x the tokens) and than a class token."""
    return ViTConfig(
        img_size=32,
        patch_size=8,
        in_chans=3,
        num_classes=0,
        embed_dim=96,
        depth=4,
        num_heads=4,
        mlp_ratio=2.0,
        pos_embed="sincos2d",
        pool="mean",
        class_token=False,
        patch_embed="conv_stem",
    )


@dataclass
class CLIPConfig(ModelConfig):
    """A :class:`CLIPModel`: ``vision`` the image tower's :class:`ViTConfig` (``num_classes=0``; a mapping of
    its fields is accepted), the text tower's ``vocab_size`` word ids in ``context_length`` slots of width
    ``text_width`` through ``text_depth`` blocks of ``text_heads`` heads, pooled by ``text_pool``; both
    projected to ``embed_dim``. ``logit_scale_init`` is the initial ``exp(logit_scale)`` (CLIP's 1 / 0.07),
    ``max_logit_scale`` its clamp (CLIP's 100). ``mean`` / ``std`` normalise images in [0, 1] per channel."""

    vision: ViTConfig = field(default_factory=_default_vision)
    vocab_size: int = len(VOCAB)
    context_length: int = CONTEXT_LENGTH
    text_width: int = 64
    text_depth: int = 2
    text_heads: int = 4
    text_mlp_ratio: float = 2.0
    text_pool: str = "eos"
    embed_dim: int = 64
    logit_scale_init: float = 1 / 0.07
    max_logit_scale: float = 100.0
    norm_eps: float = 1e-5
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)

    checks: ClassVar[dict[str, Check]] = {
        "vocab_size": Int(2, 2**20),
        "context_length": Int(1, MAX_TOKENS),
        "text_width": Int(1, MAX_WIDTH),
        "text_depth": Int(1, MAX_DEPTH),
        "text_heads": Int(1, MAX_HEADS),
        "text_mlp_ratio": Float(0, 64, low_open=True),
        "text_pool": OneOf(TEXT_POOLS),
        "embed_dim": Int(1, MAX_WIDTH),
        "logit_scale_init": Float(1.0, 1e4),
        "max_logit_scale": Float(1.0, 1e4),
        "norm_eps": Float(0, 1, low_open=True),
        "mean": Seq(Float(-1e3, 1e3)),
        "std": Seq(Float(0, 1e3, low_open=True)),
    }

    def __post_init__(self) -> None:
        if isinstance(self.vision, dict):
            self.vision = ViTConfig.from_dict(self.vision)
        if not isinstance(self.vision, ViTConfig):
            raise ConfigError(
                f"vision must be a ViTConfig or a mapping of its fields, got {type(self.vision).__name__}"
            )
        check_fields(self, self.checks)
        if self.vision.num_classes != 0:
            raise ConfigError(
                f"the image tower has no classifier: vision.num_classes must be 0, got {self.vision.num_classes}"
            )
        if self.text_width % self.text_heads:
            raise ConfigError(
                f"text_width {self.text_width} is not divisible by text_heads {self.text_heads}: "
                f"choose a head count that divides it"
            )
        if self.logit_scale_init > self.max_logit_scale:
            raise ConfigError(
                f"logit_scale_init {self.logit_scale_init:g} is above max_logit_scale "
                f"{self.max_logit_scale:g}: lower it or raise the clamp"
            )
        if not len(self.mean) == len(self.std) == self.vision.in_chans:
            raise ConfigError(
                f"mean and std need one value per image channel ({self.vision.in_chans}), got "
                f"{len(self.mean)} and {len(self.std)}"
            )
        if int(self.text_width * self.text_mlp_ratio) < 1:
            raise ConfigError(f"text_mlp_ratio {self.text_mlp_ratio} gives an MLP of 0 units: raise it")
        check_params(self, self.approx_params, "the towers' widths and depths, or vocab_size")

    @property
    def approx_params(self) -> int:
        """The parameter count, estimated before building."""
        w = self.text_width
        text = (self.vocab_size + self.context_length + 2) * w + self.text_depth * transformer_block_params(
            w, int(w * self.text_mlp_ratio)
        )
        return self.vision.approx_params + text + (self.vision.embed_dim + w) * self.embed_dim + 1

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "vision": self.vision.to_dict()}


class TextTransformer(nn.Module):
    """Word ids ``(B, L)`` -> tokens ``(B, L, W)``: token embedding plus learned positions, ``depth``
    pre-norm :class:`~vitlab.layers.block.Block` s (bidirectional), a final LayerNorm."""

    def __init__(self, config: CLIPConfig) -> None:
        super().__init__()
        w = config.text_width
        self.token_embed = nn.Embedding(config.vocab_size, w)
        self.pos_embed = nn.Parameter(torch.empty(1, config.context_length, w))
        self.blocks = nn.ModuleList(
            [
                Block(w, config.text_heads, config.text_mlp_ratio, norm_eps=config.norm_eps)
                for _ in range(config.text_depth)
            ]
        )
        self.norm = nn.LayerNorm(w, eps=config.norm_eps)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        nn.init.normal_(self.pos_embed, std=0.01)
        init_linears(self.blocks)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Word ids ``(B, L)``, ``L <= context_length`` -> tokens ``(B, L, W)`` after the final norm."""
        if ids.shape[-1] > self.pos_embed.shape[1]:
            raise ConfigError(
                f"{ids.shape[-1]} word slots but the text tower reads at most {self.pos_embed.shape[1]}: "
                f"tokenize with context_length={self.pos_embed.shape[1]}"
            )
        x = self.token_embed(ids) + self.pos_embed[:, : ids.shape[-1]]
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def eos_positions(ids: torch.Tensor) -> torch.Tensor:
    """``(B,)`` the slot of each caption's ``<eos>`` in word ids ``(B, L)`` (the first one; the last slot
    when there is none)."""
    is_eos = ids == EOS_ID
    return torch.where(is_eos.any(-1), is_eos.int().argmax(-1), ids.shape[-1] - 1)


class CLIPModel(nn.Module):
    """Images ``(B, C, H, W)`` in [0, 1] and word ids ``(B', L)`` -> ``(logits_per_image (B, B'),
    logits_per_text (B', B))`` (see the module docstring); :meth:`encode_image` / :meth:`encode_text`
    give the unit-norm embeddings ``(B, E)``."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, config: CLIPConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = cfg = CLIPConfig.resolve(config, overrides)
        self.visual = VisionTransformer(cfg.vision)
        self.visual_projection = nn.Linear(cfg.vision.embed_dim, cfg.embed_dim, bias=False)
        self.text = TextTransformer(cfg)
        self.text_projection = nn.Linear(cfg.text_width, cfg.embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(cfg.logit_scale_init)))
        self.register_buffer("mean", torch.tensor(cfg.mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(cfg.std).view(1, -1, 1, 1), persistent=False)
        for proj, width in ((self.visual_projection, cfg.vision.embed_dim), (self.text_projection, cfg.text_width)):
            nn.init.normal_(proj.weight, std=width**-0.5)

    def image_features(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` in [0, 1] -> the image tower's pooled features ``(B, Dv)``, before the projection."""
        features = self.visual(Statistics(self.mean.flatten(), self.std.flatten()).normalize(images))
        assert isinstance(features, torch.Tensor)
        return features

    def text_features(self, ids: torch.Tensor) -> torch.Tensor:
        """Word ids ``(B, L)`` -> the text tower's pooled features ``(B, Dt)`` (before the projection)."""
        tokens = self.text(ids)
        if self.config.text_pool == "eos":
            return tokens[torch.arange(len(ids), device=ids.device), eos_positions(ids)]
        keep = (torch.arange(ids.shape[-1], device=ids.device) <= eos_positions(ids)[:, None]).to(tokens.dtype)
        return (tokens * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` in [0, 1] -> unit-norm embeddings ``(B, E)``."""
        return F.normalize(self.visual_projection(self.image_features(images)), dim=-1)

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        """Word ids ``(B, L)`` -> unit-norm embeddings ``(B, E)``."""
        return F.normalize(self.text_projection(self.text_features(ids)), dim=-1)

    def scale(self) -> torch.Tensor:
        """``exp(logit_scale)``, clamped to ``max_logit_scale`` (a scalar)."""
        return self.logit_scale.clamp(max=math.log(self.config.max_logit_scale)).exp()

    def forward(self, images: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits_per_image (B, B'), logits_per_text (B', B))`` for images ``(B, C, H, W)`` and ids ``(B', L)``."""
        logits = self.scale() * self.encode_image(images) @ self.encode_text(ids).T
        return logits, logits.T

    def no_weight_decay(self) -> set[str]:
        """Parameters weight decay skips beyond norms and biases: the towers' tokens and positions, the temperature."""
        return {f"visual.{n}" for n in self.visual.no_weight_decay()} | {
            "text.pos_embed",
            "text.token_embed.weight",
            "logit_scale",
        }


__all__ = ["CLIPConfig", "CLIPModel", "TextTransformer", "eos_positions"]


register_builder(CLIPConfig, CLIPModel)
register_model(
    "clip-shapes", CLIPConfig(), "a small CLIP for captioned 32x32 shapes: a 4-block ViT and a 2-block text tower"
)
