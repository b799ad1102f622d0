"""Convolutional stems: small CNNs that turn an image into a feature map for the patch projection.

- :class:`ConvStem` (Xiao et al. 2021, "Early convolutions help transformers see better"): ``k``
  3x3 stride-2 convolutions, each followed by BatchNorm and ReLU, the width doubling up to ``D``:
  ``(B, C, H, W) -> (B, D, H / 2^k, W / 2^k)``.
- :class:`ResNetStem`: the stem of timm's ResNetV2 as its hybrid ViTs use it (``create_resnetv2_stem``
  with ``stem_type="same"``, ``preact=False``): a weight-standardised 7x7 stride-2 convolution,
  GroupNorm(32) + ReLU and a 3x3 stride-2 max pool, both with TensorFlow's "same" padding:
  ``(B, C, H, W) -> (B, 64, H / 4, W / 4)``.

Both are backbones of :class:`~vitlab.layers.hybrid_embed.HybridEmbedding`; their state-dict keys are
timm's (``conv``, ``norm``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's "same" padding of one axis: ``(before, after)``, so the output has ``ceil(size / stride)``
    positions; the odd pixel goes after."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def pad_same(x: torch.Tensor, kernel: int, stride: int, value: float = 0.0) -> torch.Tensor:
    """``(B, C, H, W)`` padded for a ``kernel x kernel`` window at ``stride`` with "same" padding."""
    (top, bottom), (left, right) = (same_padding(size, kernel, stride) for size in x.shape[-2:])
    return F.pad(x, (left, right, top, bottom), value=value)


def standardize_weight(weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Weight standardisation (Qiao et al. 2019): each output filter ``(C, k, k)`` of ``(O, C, k, k)``
    shifted and scaled to mean 0 and variance 1 (the biased variance, plus ``eps``)."""
    flat = weight.flatten(1)
    mean, var = flat.mean(dim=1, keepdim=True), flat.var(dim=1, unbiased=False, keepdim=True)
    return ((flat - mean) / torch.sqrt(var + eps)).view_as(weight)


class StdConv2dSame(nn.Conv2d):
    """A bias-free convolution with weight standardisation and "same" padding: ``(B, C, H, W) ->
    (B, O, ceil(H / s), ceil(W / s))`` (timm's ``StdConv2dSame``; its hybrid ViTs use ``eps=1e-8``)."""

    def __init__(self, in_chans: int, out_chans: int, kernel_size: int, stride: int = 1, eps: float = 1e-8) -> None:
        super().__init__(in_chans, out_chans, kernel_size, stride=stride, bias=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, s = self.kernel_size[0], self.stride[0]
        return F.conv2d(pad_same(x, k, s), standardize_weight(self.weight, self.eps), None, s)


class ConvNormAct(nn.Module):
    """``conv -> BatchNorm -> ReLU``: a 3x3 stride-2 convolution without bias, ``(B, C, H, W) ->
    (B, O, ceil(H / 2), ceil(W / 2))``."""

    def __init__(self, in_chans: int, out_chans: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_chans, out_chans, kernel_size=3, stride=2, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(out_chans)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.norm(self.conv(x)))


def conv_stem_widths(embed_dim: int, convs: int) -> list[int]:
    """Xiao et al.'s widths: doubling to ``embed_dim``, ``D / 2^(k-1), ..., D / 2, D`` (at least 1)."""
    return [max(1, embed_dim >> (convs - 1 - i)) for i in range(convs)]


class ConvStem(nn.Module):
    """``convs`` stride-2 :class:`ConvNormAct` layers: ``(B, C, H, W) -> (B, D, H / 2^k, W / 2^k)``.

    Attributes:
        reduction: ``2^k``, the factor by which the side shrinks.
        out_chans: ``D``, the feature map's channels.
    """

    def __init__(self, in_chans: int, embed_dim: int, convs: int) -> None:
        super().__init__()
        if convs < 1:
            raise ConfigError(f"a convolutional stem needs at least one stride-2 convolution, got {convs}")
        widths = conv_stem_widths(embed_dim, convs)
        self.layers = nn.ModuleList(ConvNormAct(c_in, c_out) for c_in, c_out in zip([in_chans, *widths], widths))
        self.reduction, self.out_chans = 2**convs, widths[-1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images
        for layer in self.layers:
            x = layer(x)
        return x


class ResNetStem(nn.Module):
    """timm's ResNetV2 "same" stem: ``(B, C, H, W) -> (B, width, ceil(H / 4), ceil(W / 4))``.

    ``conv`` (7x7, stride 2, weight-standardised, "same" padding) -> ``norm`` (GroupNorm of 32 groups,
    eps 1e-5) -> ReLU -> 3x3 stride-2 max pool ("same" padding, padded with ``-inf``).
    """

    def __init__(self, in_chans: int, width: int = 64, groups: int = 32) -> None:
        super().__init__()
        self.conv = StdConv2dSame(in_chans, width, kernel_size=7, stride=2)
        self.norm = nn.GroupNorm(groups, width, eps=1e-5)
        self.reduction, self.out_chans = 4, width

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm(self.conv(images)))
        return F.max_pool2d(pad_same(x, 3, 2, value=float("-inf")), kernel_size=3, stride=2)
