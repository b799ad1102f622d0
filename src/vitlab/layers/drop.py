"""Stochastic depth: drop a whole residual branch per sample during training."""

from __future__ import annotations

import torch
from torch import nn


def drop_path(x: torch.Tensor, prob: float, training: bool) -> torch.Tensor:
    """Zero each sample's branch of ``x (B, ...)`` with probability ``prob`` and rescale survivors by
    ``1/(1-prob)``: the ``(B, 1, ..., 1)`` mask is scaled, then multiplies ``x`` once (as timm does), so the full
    activations are touched once, not twice."""
    if prob == 0.0 or not training:
        return x
    keep = 1.0 - prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    if keep > 0.0:
        mask.div_(keep)
    return x * mask


class DropPath(nn.Module):
    """Stochastic depth as a module; use ``nn.Identity`` when the rate is 0."""

    def __init__(self, prob: float = 0.0) -> None:
        super().__init__()
        self.prob = prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.prob, self.training)

    def extra_repr(self) -> str:
        return f"prob={self.prob}"


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (CaiT): ``x * gamma``, gamma ``(D,)``."""

    def __init__(self, dim: int, init_value: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(init_value * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma
