"""Global attention without the ``N x N`` score matrix: linear, low-rank (Linformer), latent.

Each keeps :class:`~vitlab.layers.attention.MultiHeadSelfAttention`'s projections and replaces
only how tokens are mixed, so it drops into the same block. ``N`` tokens, ``H`` heads of width ``d``:

- :class:`LinearAttention` (Katharopoulos et al. 2020): ``softmax(q.k)`` becomes a kernel
  ``phi(q).phi(k)`` with ``phi = elu + 1 > 0``, and associativity does the rest::

      out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))

  ``O(N d^2)`` time; the state ``sum_j phi(k_j) v_j^T`` is ``d x d`` per head, whatever ``N``.
- :class:`LowRankAttention` (Wang et al. 2020, Linformer): keys and values are projected along
  the token axis by learned ``E, F`` of shape ``(k, N)``: ``softmax(Q (E K)^T / sqrt(d)) (F V)``,
  ``N x k`` scores. With ``k = N`` and ``E = F = I`` it is full attention. Needs a fixed ``N``.
- :class:`LatentAttention` (Perceiver-style, as in Jaegle et al. 2021 and Set Transformer's
  induced points): ``L`` learned latent queries attend to the tokens and pool their keys and
  values, ``S = softmax(Z K^T / sqrt(d)) [K, V]``; every token then attends to the ``L`` summaries.
  Two ``N x L`` score matrices; the effective weights ``A_tokens A_latents`` rows sum to 1.

``forward_with_weights`` returns the effective ``(B, H, N, N)`` mixing matrix of each (the
matrix that multiplies ``V``), formed explicitly, for inspection at small ``N``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, DataError
from ..ops.attention import merge_heads, scaled_dot_product_attention, split_heads
from .attention import Attended, Grid, MultiHeadSelfAttention, Rope


def positive_features(x: torch.Tensor) -> torch.Tensor:
    """The feature map ``phi(x) = elu(x) + 1``: positive, so kernel weights normalise safely."""
    return F.elu(x) + 1.0


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Kernel attention with ``phi = elu + 1`` on ``(B, H, N, d)`` queries, keys, values.

    Without weights: ``phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1)``, ``O(N d^2)``, nothing ``N x N``.
    With weights: the same function through the explicit ``(B, H, N, N)`` row-normalised kernel.
    """
    q, k = positive_features(q), positive_features(k)
    if not need_weights:
        state = k.transpose(-2, -1) @ v  # (B, H, d, d_v)
        return (q @ state) / (q @ k.sum(dim=-2).unsqueeze(-1)), None
    weights = q @ k.transpose(-2, -1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ v, weights


class LinearAttention(MultiHeadSelfAttention):
    """Linear (kernel) attention: tokens ``(B, N, D) -> (B, N, D)`` in ``O(N d^2)`` time and memory
    independent of ``N^2``. It forms no weights, so ``attn_drop`` must be 0, and its one path is the
    fast one (``fused`` changes nothing; ``forward_with_weights`` forms the ``N x N`` kernel)."""

    kinds = ("linear",)

    def __init__(self, dim: int, num_heads: int = 8, **common: Any) -> None:
        """``common``: :class:`MultiHeadSelfAttention`'s options (``qkv_bias``, ``qk_norm``, ``proj_drop``,
        ``norm_eps``, ``fused``; ``attn_drop`` only 0)."""
        if common.get("attn_drop"):
            raise ConfigError(
                f"linear attention forms no attention weights to drop, got attn_drop={common['attn_drop']}: "
                f"set attn_drop=0 (use proj_drop or drop_path to regularise)"
            )
        super().__init__(dim, num_heads, kind="linear", **common)

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        out, weights = linear_attention(*self.qkv_heads(x, rope), need_weights=need_weights)
        return self.proj_drop(self.proj(merge_heads(out[..., :queries, :]))), weights


class LowRankAttention(MultiHeadSelfAttention):
    """Linformer attention over ``num_tokens`` tokens: ``(B, N, D) -> (B, N, D)`` with ``N x k`` scores.

    ``key_proj`` and ``value_proj`` (``(k, N)``, shared by the heads) are initialised with
    ``N(0, 1/N)`` entries, so a projected key has the spread of one key.
    """

    kinds = ("lowrank",)

    def __init__(self, dim: int, num_heads: int = 8, num_tokens: int = 197, rank: int = 64, **common: Any) -> None:
        """``common``: :class:`MultiHeadSelfAttention`'s options (``qkv_bias``, ``qk_norm``, ``attn_drop``,
        ``proj_drop``, ``norm_eps``, ``fused``)."""
        super().__init__(dim, num_heads, kind="lowrank", **common)
        if num_tokens < 1 or rank < 1:
            raise ConfigError(f"low-rank attention needs num_tokens >= 1 and rank >= 1, got {num_tokens} and {rank}")
        self.num_tokens, self.rank = num_tokens, rank
        self.key_proj = nn.Parameter(torch.randn(rank, num_tokens) / num_tokens**0.5)
        self.value_proj = nn.Parameter(torch.randn(rank, num_tokens) / num_tokens**0.5)

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        if x.shape[1] != self.num_tokens:
            raise DataError(
                f"low-rank attention was built for {self.num_tokens} tokens and got {x.shape[1]}: its "
                f"projections are (k, N); build the model for this image size (no dynamic sizes)"
            )
        q, k, v = self.qkv_heads(x, rope)
        k, v = self.key_proj @ k, self.value_proj @ v  # (B, H, k, d)
        dropout = self.attn_drop if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, need_weights=need_weights or not self.fused
        )
        # (B, H, N, N): out = weights @ V
        weights = weights @ self.value_proj if need_weights and weights is not None else None
        return self.proj_drop(self.proj(merge_heads(out[..., :queries, :]))), weights

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, tokens={self.num_tokens}, rank={self.rank}"


class LatentAttention(MultiHeadSelfAttention):
    """Attention through ``num_latents`` learned latent tokens: ``(B, N, D) -> (B, N, D)``, ``2 N L`` scores.

    ``latents`` ``(L, D)`` are queries in head space (split like the tokens' queries); the block's
    ``qkv`` gives the tokens' queries, keys and values.
    """

    kinds = ("latent",)

    def __init__(self, dim: int, num_heads: int = 8, num_latents: int = 16, **common: Any) -> None:
        """``common``: :class:`MultiHeadSelfAttention`'s options (``qkv_bias``, ``qk_norm``, ``attn_drop``,
        ``proj_drop``, ``norm_eps``, ``fused``)."""
        super().__init__(dim, num_heads, kind="latent", **common)
        if num_latents < 1:
            raise ConfigError(f"num_latents must be >= 1, got {num_latents}")
        self.latents = nn.Parameter(torch.zeros(num_latents, dim))
        nn.init.trunc_normal_(self.latents, std=0.02)

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        q, k, v = self.qkv_heads(x, rope)
        latents = split_heads(self.latents.expand(x.shape[0], -1, -1), self.num_heads)  # (B, H, L, d)
        dropout, explicit = (self.attn_drop if self.training else 0.0), need_weights or not self.fused
        summary, pooled = scaled_dot_product_attention(
            latents, k, torch.cat([k, v], dim=-1), dropout_p=dropout, need_weights=explicit
        )  # (B, H, L, 2d)
        keys, values = summary.split(self.head_dim, dim=-1)
        out, read = scaled_dot_product_attention(q, keys, values, dropout_p=dropout, need_weights=explicit)
        weights = read @ pooled if need_weights and read is not None and pooled is not None else None  # (B, H, N, N)
        return self.proj_drop(self.proj(merge_heads(out[..., :queries, :]))), weights

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, latents={self.latents.shape[0]}"
