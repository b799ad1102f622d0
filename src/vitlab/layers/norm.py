"""The normalisation inside a transformer block, chosen by name: ``layernorm`` or ``batchnorm``.

- ``layernorm`` (the ViT's): each token normalised over its own ``D`` features -- no statistics shared
  between tokens or images, the same in training and evaluation, at any batch size.
- ``batchnorm`` (the textbook's pitfall, for comparison): each feature normalised over every token of
  every image in the batch (:class:`TokenBatchNorm`); in evaluation by the running mean and variance
  gathered in training. An image's output then depends on the rest of its batch while training, and on
  statistics that lag the weights afterwards.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ConfigError

NORM_KINDS = ("layernorm", "batchnorm")


class TokenBatchNorm(nn.BatchNorm1d):
    """BatchNorm over tokens ``(..., N, D) -> (..., N, D)``: per feature ``d``, the mean and (biased)
    variance over every token of every image in training, the running statistics in evaluation;
    ``weight`` / ``bias`` of shape ``(D,)`` as a LayerNorm's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        return super().forward(flat).reshape(x.shape)


def build_norm(kind: str, dim: int, eps: float = 1e-6) -> nn.Module:
    """The block norm of ``kind`` (:data:`NORM_KINDS`) for tokens of width ``dim``."""
    if kind == "layernorm":
        return nn.LayerNorm(dim, eps=eps)
    if kind == "batchnorm":
        return TokenBatchNorm(dim, eps=eps)
    raise ConfigError(f"block norm must be one of {NORM_KINDS}, got {kind!r}")
