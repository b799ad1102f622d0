"""Multi-head self-attention with a fused qkv projection.

``forward`` takes the fast path (PyTorch's fused ``scaled_dot_product_attention``);
``forward_with_weights`` forms the scores explicitly and also returns the attention weights
``(B, H, N, N)``. Both compute the same function.
"""
from __future__ import annotations

import torch
from torch import nn

from ..ops.attention import merge_heads, scaled_dot_product_attention
from ..ops.positions import apply_rotary

Rope = tuple[torch.Tensor, torch.Tensor]


class MultiHeadSelfAttention(nn.Module):
    """Tokens ``(B, N, D) -> (B, N, D)``: ``H`` heads of width ``d = D / H``.

    ``qkv`` is one ``Linear(D, 3D)`` whose output splits into ``Q, K, V``; ``proj`` is the output
    projection. ``qk_norm`` adds a LayerNorm on each head's queries and keys.

    Args:
        dim: token width ``D``.
        num_heads: heads ``H``; must divide ``D``.
        fused: use the fused kernel in ``forward`` (turn off to force the explicit path).
    """

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, qk_norm: bool = False,
                 attn_drop: float = 0.0, proj_drop: float = 0.0, norm_eps: float = 1e-6,
                 fused: bool = True) -> None:
        super().__init__()
        if num_heads < 1 or dim % num_heads:
            raise ValueError(f"embed dim {dim} is not divisible by num_heads {num_heads}: choose a head "
                             f"count that divides it (e.g. {', '.join(str(h) for h in range(1, 17) if dim % h == 0)})")
        self.num_heads, self.head_dim, self.fused = num_heads, dim // num_heads, fused
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=norm_eps) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, eps=norm_eps) if qk_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop) if proj_drop > 0 else nn.Identity()

    def qkv_heads(self, x: torch.Tensor, rope: Rope | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values per head, each ``(B, H, N, d)``."""
        b, n, dim = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        return q, k, v

    def _attend(self, x: torch.Tensor, rope: Rope | None, need_weights: bool
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q, k, v = self.qkv_heads(x, rope)
        dropout = self.attn_drop if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, dropout_p=dropout, need_weights=need_weights)
        return self.proj_drop(self.proj(merge_heads(out))), weights

    def forward(self, x: torch.Tensor, rope: Rope | None = None) -> torch.Tensor:
        return self._attend(x, rope, need_weights=not self.fused)[0]

    def forward_with_weights(self, x: torch.Tensor, rope: Rope | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, N, D), attention weights (B, H, N, N))`` by the explicit path."""
        return self._attend(x, rope, need_weights=True)
