"""A transformer decoder: learned query tokens attend to image tokens.

    queries (B, Q, D) -> depth x [self-attention among queries, cross-attention to the image
    (Q from the queries, K and V from the image tokens (B, N, D)), MLP] -> (depth, B, Q, D)

Every layer's output is returned (normalised), so auxiliary losses can supervise each of them.
"""
from __future__ import annotations

import torch
from torch import nn

from ..layers.attention import MultiHeadSelfAttention
from ..layers.mlp import MLP
from ..ops.attention import merge_heads, scaled_dot_product_attention, split_heads


class CrossAttention(nn.Module):
    """Queries ``(B, Q, D)`` attend to tokens ``(B, N, D)`` -> ``(B, Q, D)``, ``H`` heads."""

    def __init__(self, dim: int, num_heads: int = 4, qkv_bias: bool = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"decoder dim {dim} is not divisible by num_heads {num_heads}: choose a divisor")
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.kv = nn.Linear(dim, 2 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def _attend(self, queries: torch.Tensor, tokens: torch.Tensor, need_weights: bool
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = split_heads(self.q(queries), self.num_heads)
        k, v = (split_heads(t, self.num_heads) for t in self.kv(tokens).chunk(2, dim=-1))
        out, weights = scaled_dot_product_attention(q, k, v, need_weights=need_weights)
        return self.proj(merge_heads(out)), weights

    def forward(self, queries: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self._attend(queries, tokens, need_weights=False)[0]

    def forward_with_weights(self, queries: torch.Tensor, tokens: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, Q, D), weights (B, H, Q, N))``; the weights sum to 1 over the tokens."""
        return self._attend(queries, tokens, need_weights=True)


class DecoderLayer(nn.Module):
    """Pre-norm decoder layer: queries ``(B, Q, D)``, image tokens ``(B, N, D)`` -> ``(B, Q, D)``."""

    def __init__(self, dim: int, num_heads: int = 4, mlp_ratio: float = 4.0, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = MultiHeadSelfAttention(dim, num_heads, proj_drop=dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = CrossAttention(dim, num_heads)
        self.norm3 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout=dropout)

    def _decode(self, queries: torch.Tensor, tokens: torch.Tensor, need_weights: bool
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = queries + self.self_attn(self.norm1(queries))
        attended, weights = self.cross_attn._attend(self.norm2(x), tokens, need_weights)
        x = x + attended
        return x + self.mlp(self.norm3(x)), weights

    def forward(self, queries: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self._decode(queries, tokens, need_weights=False)[0]

    def forward_with_weights(self, queries: torch.Tensor, tokens: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, Q, D), cross-attention weights (B, H, Q, N))``."""
        return self._decode(queries, tokens, need_weights=True)


class TransformerDecoder(nn.Module):
    """``num_queries`` learned queries decoded against image tokens ``(B, N, D)``.

    Returns every layer's normalised output, ``(depth, B, Q, D)``; the last is the prediction, the
    others feed auxiliary losses.
    """

    def __init__(self, dim: int, depth: int = 2, num_heads: int = 4, num_queries: int = 10,
                 mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(1, num_queries, dim) * 0.02)
        self.layers = nn.ModuleList([DecoderLayer(dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.queries.expand(tokens.shape[0], -1, -1)
        outs = []
        for layer in self.layers:
            x = layer(x, tokens)
            outs.append(self.norm(x))
        return torch.stack(outs)

    def cross_attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's cross-attention weights ``(B, heads, queries, tokens)``."""
        x, weights = self.queries.expand(tokens.shape[0], -1, -1), []
        for layer in self.layers:
            x, w = layer.forward_with_weights(x, tokens)
            weights.append(w)
        return weights
