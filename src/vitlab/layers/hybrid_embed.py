"""Hybrid patch embedding: a CNN backbone, then patches of its feature map projected to tokens.

    images (B, C, H, W) -> backbone -> (B, C', H / r, W / r) -> Conv2d(C', D, P / r, stride P / r)
                                                                  -> tokens (B, (H / P) (W / P), D)

The ViT paper's hybrid (and timm's ``HybridEmbed``): with a backbone of reduction ``r`` the tokens
are ``P / r`` patches of the feature map, so the token grid is ``H / P`` as for plain patches of side
``P``. ``P = r`` makes the projection a 1x1 convolution (Xiao et al.'s convolutional stem).
Backbones: :mod:`vitlab.layers.conv_stem`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ConfigError
from .conv_stem import ConvStem, ResNetStem
from .patch_embed import PatchTokenizer

STEMS = ("conv_stem", "resnet_stem")


def conv_stem_convs(patch_size: int) -> int:
    """How many stride-2 convolutions a conv stem for patch ``P`` has: the factors of 2 in ``P`` (at most 4,
    Xiao et al.'s ``P = 16``); the rest of ``P`` is the projection's kernel."""
    convs = 0
    while patch_size % 2 == 0 and convs < 4:
        patch_size, convs = patch_size // 2, convs + 1
    return convs


class HybridEmbedding(PatchTokenizer):
    """Images ``(B, C, H, W)`` -> tokens ``(B, N, D)``, ``N = (H / P) (W / P)``, through a convolutional stem.

    Args:
        stem: ``"conv_stem"`` (:class:`~vitlab.layers.conv_stem.ConvStem`, the factors of 2 in ``P`` as
            stride-2 convolutions, widths doubling to ``D``) or ``"resnet_stem"``
            (:class:`~vitlab.layers.conv_stem.ResNetStem`, reduction 4; ``P`` a multiple of 4).
        patch_size: ``P``, the side of the image region one token covers.
        in_chans, embed_dim: ``C`` and ``D``.

    ``backbone`` is the stem, ``proj`` the ``Conv2d(C', D, P / r, stride P / r)`` on its features.
    """

    def __init__(self, stem: str, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__(patch_size, in_chans, embed_dim, pad=False)
        backbone: ConvStem | ResNetStem
        if stem == "conv_stem":
            backbone = ConvStem(in_chans, embed_dim, conv_stem_convs(patch_size))
        elif stem == "resnet_stem":
            backbone = ResNetStem(in_chans)
        else:
            raise ConfigError(f"unknown stem {stem!r}: choose one of {STEMS}")
        if backbone.reduction > patch_size or patch_size % backbone.reduction:
            raise ConfigError(
                f"{stem} reduces the image by {backbone.reduction}, which does not divide patch_size {patch_size}: "
                f"use a patch size that is a multiple of {backbone.reduction}"
            )
        kernel = patch_size // backbone.reduction
        self.stem, self.backbone = stem, backbone
        self.proj = nn.Conv2d(backbone.out_chans, embed_dim, kernel_size=kernel, stride=kernel)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.check_images(images)
        self.grid_size(*images.shape[-2:])  # clear error before the convolutions
        return self.proj(self.backbone(images)).flatten(2).transpose(1, 2)

    def extra_repr(self) -> str:
        return f"stem={self.stem!r}, patch_size={self.patch_size}"
