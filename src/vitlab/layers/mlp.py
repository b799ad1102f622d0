"""The transformer MLP: ``Linear(D, hidden) -> GELU -> Linear(hidden, D)`` with dropout."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """Tokens ``(B, N, D) -> (B, N, D)`` through one hidden layer of width ``hidden_dim``.

    GELU is the exact (erf) form, as in the original ViT, timm, Hugging Face and Keras.
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim, bias=bias)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim, bias=bias)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))
