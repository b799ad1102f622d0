"""Patch merging: halve the token grid and double the width between hierarchical stages (Swin)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class PatchMerging(nn.Module):
    """Feature map ``(B, H, W, C) -> (B, ceil(H/2), ceil(W/2), out_dim)``.

    Each 2x2 neighbourhood's four tokens are concatenated in Swin's order -- ``x[0::2, 0::2]``,
    ``x[1::2, 0::2]``, ``x[0::2, 1::2]``, ``x[1::2, 1::2]`` -- then ``LayerNorm(4C)`` and a linear map
    without bias to ``out_dim`` (``2C`` by default). An odd side is zero-padded at the bottom or right.
    """

    def __init__(self, dim: int, out_dim: int | None = None, norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim, eps=norm_eps)
        self.reduction = nn.Linear(4 * dim, out_dim or 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        x = x.reshape(b, (h + 1) // 2, 2, (w + 1) // 2, 2, c).permute(0, 1, 3, 4, 2, 5).flatten(3)
        return self.reduction(self.norm(x))
