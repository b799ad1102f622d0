"""A checkpoint the explorer shows, and one model's analysis of one image.

:class:`LoadedModel` is a classifier ready to explain (its classes, normalisation and the facts the pages
read); :class:`Analysis` holds what it computed for an image. :func:`forward_unsupported` says why a model's
forward pass cannot be traced token by token (``None`` when it can).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.preprocess import Preprocess, Statistics
from ..explain.maps import applicable_methods, num_prefix_tokens
from ..layers.attention import MultiHeadSelfAttention
from ..layers.block import Block, PostNormBlock
from ..layers.patch_embed import PatchTokenizer
from ..layers.position import LearnedPosition, RowColumnPosition, SinCosPosition

DIGIT_SETS = ("digits", "mnist")  # datasets of handwritten digits: a digit drawn on the pad is one of theirs
MAP_CELLS = 8  # a model without patches is explained on about this many squares per side


def forward_unsupported(model: nn.Module) -> str | None:
    """Why one token's forward pass cannot be traced through ``model`` (``None`` when it can): it needs
    a ViT whose blocks hold plain self-attention (full or locality), whose weights it can read."""
    blocks = getattr(model, "blocks", None)
    name = type(model).__name__
    if blocks is None or not hasattr(model, "patch_embed") or not hasattr(model, "forward_head"):
        return f"{name} is not a ViT with patch tokens and blocks: see its gradient and occlusion maps"
    for block in blocks:
        if type(block) not in (Block, PostNormBlock) or type(block.attn) is not MultiHeadSelfAttention:
            kind = getattr(getattr(block, "attn", None), "kind", type(block).__name__)
            return (
                f"{name}'s blocks mix tokens by {kind!r} attention, which forms no single row of weights per "
                f"query: the forward-pass view follows full (or locality) self-attention"
            )
    return None


@dataclass
class LoadedModel:
    """A model ready to explain: eval mode, CPU, with its classes and its recorded input pipeline: ``preprocess``
    (the resize and crop of one picture, as ``vitlab predict`` and ``evaluate`` read it) and ``mean`` / ``std``.
    ``samples``: the sample source of its own held-out images (its dataset, or its own folder of photos read
    as it reads them); ``data_dir``: where that folder was found."""

    index: int
    path: Path
    model: nn.Module
    name: str
    classes: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    dataset: str | None
    preprocess: Preprocess
    samples: str | None = None
    data_dir: Path | None = None

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def statistics(self) -> Statistics:
        """The model's recorded ``mean`` / ``std``: ``statistics.normalize(pixels)`` is its input."""
        return Statistics(self.mean, self.std)

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)`` the model reads."""
        size = self.config.img_size
        return (size, size) if isinstance(size, int) else tuple(size)

    @property
    def channels(self) -> int:
        return self.config.in_chans

    @property
    def patch_size(self) -> int | None:
        return getattr(self.config, "patch_size", None)

    @property
    def map_patch(self) -> int:
        """The side of the squares its explanation maps score: the model's patch, or for a model without
        patches (a CNN) an eighth of the image's shorter side."""
        return self.patch_size or max(1, round(min(self.image_size) / MAP_CELLS))

    @property
    def grid(self) -> tuple[int, int]:
        """The grid of :attr:`map_patch` squares over the input (a ViT's patch grid)."""
        embed = getattr(self.model, "patch_embed", None)
        if self.patch_size is not None and isinstance(embed, PatchTokenizer):
            return embed.grid_size(*self.image_size)
        side = self.map_patch
        return (-(-self.image_size[0] // side), -(-self.image_size[1] // side))

    @property
    def absolute_positions(self) -> bool:
        """Whether the model adds a table of absolute positions (learned, sinusoidal, row + column)."""
        return isinstance(getattr(self.model, "pos_embed", None), (LearnedPosition, RowColumnPosition, SinCosPosition))

    def describe(self) -> dict[str, Any]:
        """JSON-ready facts about the model, all read from it."""
        cfg = self.config
        methods = applicable_methods(self.model)
        return {
            "index": self.index,
            "file": str(self.path),
            "model": self.name,
            "dataset": self.dataset,
            "samples": self.samples,
            "data_dir": None if self.data_dir is None else str(self.data_dir),
            "reads_digits": self.dataset in DIGIT_SETS,
            "classes": self.classes,
            "image_size": list(self.image_size),
            "channels": self.channels,
            "patch_size": self.patch_size,
            "grid": list(getattr(cfg, "grid", ())),
            "depth": getattr(cfg, "depth", None),
            "heads": getattr(cfg, "num_heads", None),
            "embed_dim": getattr(cfg, "embed_dim", None),
            "pool": getattr(cfg, "pool", None),
            "class_token": bool(getattr(cfg, "class_token", False)),
            "prefix_tokens": num_prefix_tokens(self.model),
            "pos_embed": getattr(cfg, "pos_embed", None),
            "params": sum(p.numel() for p in self.model.parameters()),
            "normalisation": {"mean": list(self.mean), "std": list(self.std)},
            "attention": "attention" in methods,
            "methods": methods,
            "map_patch": self.map_patch,
            "map_grid": list(self.grid),
            "absolute_positions": self.absolute_positions,
            "forward_pass": forward_unsupported(self.model),
        }


@dataclass
class Analysis:
    """One model on one image: the fitted image ``(1, C, H, W)``, its normalised input, the logits
    ``(1, K)``, every layer's attention ``(1, H, N, N)`` (empty without attention layers), and
    explanation maps computed so far, by key."""

    image: torch.Tensor
    inputs: torch.Tensor
    logits: torch.Tensor
    weights: list[torch.Tensor]
    maps: dict[tuple, torch.Tensor] = field(default_factory=dict)
