"""Transformer encoder blocks: pre-norm (the ViT default) and post-norm (for comparison).

Pre-norm:  ``x = x + DropPath(LS(MHSA(LN(x))));  x = x + DropPath(LS(MLP(LN(x))))``
Post-norm: ``x = LN(x + MHSA(x));  x = LN(x + MLP(x))``  (needs warmup to train).
Optional parts (layer scale, stochastic depth) are ``nn.Identity`` when off.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadSelfAttention, Rope
from .drop import DropPath, LayerScale
from .mlp import MLP


class Block(nn.Module):
    """Pre-norm transformer block: tokens ``(B, N, D) -> (B, N, D)``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 qk_norm: bool = False, dropout: float = 0.0, attn_drop: float = 0.0,
                 drop_path: float = 0.0, layer_scale: float | None = None, norm_eps: float = 1e-6) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = MultiHeadSelfAttention(dim, num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm,
                                           attn_drop=attn_drop, proj_drop=dropout, norm_eps=norm_eps)
        self.ls1 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout=dropout)
        self.ls2 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor, rope: Rope | None = None) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), rope)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class PostNormBlock(Block):
    """Post-norm block (the original Transformer's order), same parameters as :class:`Block`."""

    def forward(self, x: torch.Tensor, rope: Rope | None = None) -> torch.Tensor:
        x = self.norm1(x + self.drop_path1(self.ls1(self.attn(x, rope))))
        return self.norm2(x + self.drop_path2(self.ls2(self.mlp(x))))
