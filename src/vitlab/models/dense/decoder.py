"""A transformer decoder: learned query tokens attend to image tokens.

    queries (B, Q, D) -> depth x [self-attention among queries, cross-attention to the image
    (Q from the queries, K and V from the image tokens (B, N, D)), MLP] -> (depth, B, Q, D)

Every layer's output is returned (normalised), so auxiliary losses can supervise each of them.
As in DETR, positional embeddings are optional extra inputs: ``token_pos (B or 1, N, D)`` is added
to the image tokens for the keys only (not the values), ``query_pos (B, Q, D)`` to the queries and
keys of the self-attention and the queries of the cross-attention; :func:`sine_pos_2d` gives the
fixed 2-D sine embedding of a patch grid. ``self_bias (B, H, Q, Q)``, also optional, is added to the
self-attention scores (a detection head's box relations, see ``heads.box_relations``).
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError
from ...layers.mlp import MLP
from ...ops.attention import merge_heads, scaled_dot_product_attention, split_heads, with_weights


def sine_embed(coords: torch.Tensor, dim: int, temperature: float = 20.0) -> torch.Tensor:
    """Coordinates in [0, 1] ``(..., C)`` -> sine embeddings ``(..., C * dim)``: ``dim`` (even)
    sin/cos features per coordinate, frequencies ``2 pi / temperature ** (2i / dim)``."""
    freqs = temperature ** (torch.arange(dim // 2, dtype=torch.float32, device=coords.device) * 2 / dim)
    x = coords[..., None] * 2 * math.pi / freqs  # (..., C, dim/2)
    return torch.cat([x.sin(), x.cos()], -1).flatten(-2)


def sine_pos_2d(h: int, w: int, dim: int) -> torch.Tensor:
    """The fixed 2-D sine embedding of an ``h x w`` grid (cell centres), ``(1, h * w, dim)``;
    ``dim`` a multiple of 4: half for y, half for x."""
    if dim % 4:
        raise ConfigError(f"the 2-D sine embedding needs a width divisible by 4, got {dim}")
    ys, xs = torch.meshgrid((torch.arange(h) + 0.5) / h, (torch.arange(w) + 0.5) / w, indexing="ij")
    return sine_embed(torch.stack([ys.flatten(), xs.flatten()], -1), dim // 2)[None]


class CrossAttention(nn.Module):
    """Queries ``(B, Q, D)`` attend to tokens ``(B, N, D)`` -> ``(B, Q, D)``, ``H`` heads (with the
    queries as their own tokens, the decoder's self-attention)."""

    def __init__(self, dim: int, num_heads: int = 4, qkv_bias: bool = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ConfigError(f"decoder dim {dim} is not divisible by num_heads {num_heads}: choose a divisor")
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.kv = nn.Linear(dim, 2 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def _attend(
        self,
        queries: torch.Tensor,
        tokens: torch.Tensor,
        need_weights: bool,
        token_pos: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = split_heads(self.q(queries), self.num_heads)
        if token_pos is None:
            k, v = (split_heads(t, self.num_heads) for t in self.kv(tokens).chunk(2, dim=-1))
        else:  # positions go into the keys only
            wk, wv = self.kv.weight.chunk(2, dim=0)
            bk, bv = (None, None) if self.kv.bias is None else self.kv.bias.chunk(2)
            k = split_heads(F.linear(tokens + token_pos, wk, bk), self.num_heads)
            v = split_heads(F.linear(tokens, wv, bv), self.num_heads)
        out, weights = scaled_dot_product_attention(q, k, v, mask=bias, need_weights=need_weights)
        return self.proj(merge_heads(out)), weights

    def forward(self, queries: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self._attend(queries, tokens, need_weights=False)[0]

    def forward_with_weights(self, queries: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, Q, D), weights (B, H, Q, N))``; the weights sum to 1 over the tokens."""
        return with_weights(self._attend(queries, tokens, need_weights=True))


class DecoderLayer(nn.Module):
    """Pre-norm decoder layer: queries ``(B, Q, D)``, image tokens ``(B, N, D)`` -> ``(B, Q, D)``."""

    def __init__(self, dim: int, num_heads: int = 4, mlp_ratio: float = 4.0, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = CrossAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = CrossAttention(dim, num_heads)
        self.norm3 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout=dropout)

    def _decode(
        self,
        queries: torch.Tensor,
        tokens: torch.Tensor,
        need_weights: bool,
        query_pos: torch.Tensor | None = None,
        token_pos: torch.Tensor | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.norm1(queries)
        x = (
            queries
            + self.self_attn._attend(h if query_pos is None else h + query_pos, h, False, query_pos, self_bias)[0]
        )
        h = self.norm2(x)
        attended, weights = self.cross_attn._attend(
            h if query_pos is None else h + query_pos, tokens, need_weights, token_pos
        )
        x = x + attended
        return x + self.mlp(self.norm3(x)), weights

    def forward(
        self,
        queries: torch.Tensor,
        tokens: torch.Tensor,
        query_pos: torch.Tensor | None = None,
        token_pos: torch.Tensor | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self._decode(queries, tokens, False, query_pos, token_pos, self_bias)[0]

    def forward_with_weights(self, queries: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, Q, D), cross-attention weights (B, H, Q, N))``."""
        return with_weights(self._decode(queries, tokens, need_weights=True))


class TransformerDecoder(nn.Module):
    """``num_queries`` learned queries decoded against image tokens ``(B, N, D)``.

    Returns every layer's normalised output, ``(depth, B, Q, D)``; the last is the prediction, the
    others feed auxiliary losses.
    """

    def __init__(
        self, dim: int, depth: int = 2, num_heads: int = 4, num_queries: int = 10, mlp_ratio: float = 4.0
    ) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(1, num_queries, dim) * 0.02)
        self.layers = nn.ModuleList([DecoderLayer(dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: torch.Tensor, token_pos: torch.Tensor | None = None) -> torch.Tensor:
        x = self.queries.expand(tokens.shape[0], -1, -1)
        outs = []
        for layer in self.layers:
            x = layer(x, tokens, token_pos=token_pos)
            outs.append(self.norm(x))
        return torch.stack(outs)

    def cross_attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's cross-attention weights ``(B, heads, queries, tokens)``."""
        x, weights = self.queries.expand(tokens.shape[0], -1, -1), []
        for layer in self.layers:
            x, w = cast(DecoderLayer, layer).forward_with_weights(x, tokens)
            weights.append(w)
        return weights
