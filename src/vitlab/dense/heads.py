"""Dense heads on backbone feature maps ``(B, D, H/P, W/P)`` (from ``forward_intermediates``).

- :class:`LinearSegHead`: a linear classifier on every patch token, upsampled bilinearly to pixels.
- :class:`ConvDecoder`: fuses the maps of several blocks, then upsamples by 2 per stage, each stage
  joined by a skip connection from the image at that scale, to recover boundary detail.
- :class:`QueryMaskHead`: learned queries decode mask embeddings and classes (MaskFormer-style).
- :class:`DETRHead`: object queries decode boxes ``(cx, cy, w, h)`` in [0, 1] and classes.

Each head is called as ``head(maps, images)``, ``maps`` a list of ``(B, D, h, w)``, ``images``
``(B, C, H, W)``, and returns a dict (keys in each docstring).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..layers.mlp import MLP
from .decoder import TransformerDecoder


def map_tokens(feature_map: torch.Tensor) -> torch.Tensor:
    """``(B, D, h, w) -> (B, h * w, D)``."""
    return feature_map.flatten(2).transpose(1, 2)


class LinearSegHead(nn.Module):
    """Last map ``(B, D, h, w)`` -> per-patch logits -> bilinear upsampling: ``{"logits": (B, K, H, W)}``."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.classifier = nn.Conv2d(dim, num_classes, 1)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.classifier(maps[-1])
        return {"logits": F.interpolate(logits, size=images.shape[-2:], mode="bilinear", align_corners=False)}


class ConvBlock(nn.Module):
    """Two ``3x3 conv -> BatchNorm -> ReLU``: ``(B, C_in, h, w) -> (B, C_out, h, w)``."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class DecoderStage(nn.Module):
    """Upsample ``x`` by 2, concatenate a skip from the image at that scale, convolve."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int, in_chans: int) -> None:
        super().__init__()
        self.skip = nn.Conv2d(in_chans, skip_channels, 3, padding=1)
        self.block = ConvBlock(in_channels + skip_channels, out_channels)

    def forward(self, x: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        image = F.adaptive_avg_pool2d(images, x.shape[-2:])
        return self.block(torch.cat([x, F.relu(self.skip(image))], dim=1))


class ConvDecoder(nn.Module):
    """Maps of several blocks -> ``(B, out_channels, H, W)`` through ``log2(P)`` upsampling stages.

    The maps are resized to the largest one and fused by a 1x1 conv of width ``width``; stage ``s``
    doubles the resolution and halves the width (at least 16), with a skip from the image.
    """

    def __init__(self, dims: list[int], patch_size: int, out_channels: int, in_chans: int = 3,
                 width: int = 96) -> None:
        super().__init__()
        stages = int(math.log2(patch_size))
        if 2 ** stages != patch_size:
            raise ValueError(f"the decoder upsamples by 2 per stage, so patch_size must be a power of 2, "
                             f"got {patch_size}: use patch 4, 8, 16 or the linear head")
        self.fuse = nn.Conv2d(sum(dims), width, 1)
        widths = [width] + [max(16, width >> (s + 1)) for s in range(stages)]
        self.stages = nn.ModuleList([DecoderStage(widths[s], max(8, widths[s + 1] // 2), widths[s + 1], in_chans)
                                     for s in range(stages)])
        self.out = nn.Conv2d(widths[-1], out_channels, 1)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> torch.Tensor:
        size = max((m.shape[-2:] for m in maps), key=lambda s: s[0] * s[1])
        x = self.fuse(torch.cat([F.interpolate(m, size=size, mode="bilinear", align_corners=False)
                                 if m.shape[-2:] != size else m for m in maps], dim=1))
        for stage in self.stages:
            x = stage(x, images)
        return self.out(x)


class ConvDecoderHead(nn.Module):
    """Encoder-decoder segmentation: ``{"logits": (B, K, H, W)}`` from :class:`ConvDecoder`."""

    def __init__(self, dims: list[int], patch_size: int, num_classes: int, in_chans: int = 3,
                 width: int = 96) -> None:
        super().__init__()
        self.decoder = ConvDecoder(dims, patch_size, num_classes, in_chans, width)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.decoder(maps, images)}


class QueryHeadBase(nn.Module):
    """Image tokens from the last map, projected to ``width``, decoded by learned queries."""

    def __init__(self, dim: int, num_logits: int, width: int, num_queries: int, depth: int, num_heads: int) -> None:
        super().__init__()
        self.input_proj = nn.Linear(dim, width)
        self.decoder = TransformerDecoder(width, depth, num_heads, num_queries)
        self.class_head = nn.Linear(width, num_logits)

    def decode(self, maps: list[torch.Tensor]) -> torch.Tensor:
        """``(depth, B, Q, width)``: every decoder layer's query states."""
        return self.decoder(self.input_proj(map_tokens(maps[-1])))


class QueryMaskHead(QueryHeadBase):
    """Mask classification. Returns ``{"logits": (B, Q, K + 1), "masks": (B, Q, H, W), "aux": [...]}``.

    ``K`` semantic classes (background included) plus a no-object logit (last); each query's mask is
    the dot product of its mask embedding with per-pixel embeddings from a :class:`ConvDecoder`.
    """

    def __init__(self, dims: list[int], patch_size: int, num_classes: int, in_chans: int = 3, width: int = 64,
                 num_queries: int = 10, depth: int = 2, num_heads: int = 4) -> None:
        super().__init__(dims[-1], num_classes + 1, width, num_queries, depth, num_heads)
        self.pixel_decoder = ConvDecoder(dims, patch_size, width, in_chans)
        self.mask_mlp = MLP(width, width)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict:
        states = self.decode(maps)
        pixels = self.pixel_decoder(maps, images)
        outs = [{"logits": self.class_head(s), "masks": torch.einsum("bqc,bchw->bqhw", self.mask_mlp(s), pixels)}
                for s in states]
        return {**outs[-1], "aux": outs[:-1]}


def semantic_from_queries(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Mask-classification outputs -> per-pixel class scores ``(B, K, H, W)``:
    ``sum_q p(class | q) * sigmoid(mask_q)``, the no-object class dropped."""
    return torch.einsum("bqk,bqhw->bkhw", logits.softmax(-1)[..., :-1], masks.sigmoid())


class DETRHead(QueryHeadBase):
    """Detection. Returns ``{"logits": (B, Q, K + 1), "boxes": (B, Q, 4), "aux": [...]}``:
    ``K`` object classes plus no-object (last), boxes ``(cx, cy, w, h)`` relative to the image."""

    def __init__(self, dim: int, num_classes: int, width: int = 64, num_queries: int = 10, depth: int = 2,
                 num_heads: int = 4) -> None:
        super().__init__(dim, num_classes + 1, width, num_queries, depth, num_heads)
        self.box_mlp = MLP(width, width)
        self.box_out = nn.Linear(width, 4)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict:
        outs = [{"logits": self.class_head(s), "boxes": self.box_out(F.relu(self.box_mlp(s))).sigmoid()}
                for s in self.decode(maps)]
        return {**outs[-1], "aux": outs[:-1]}
