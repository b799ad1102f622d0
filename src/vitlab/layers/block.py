"""Transformer encoder blocks: pre-norm (the ViT default) and post-norm (for comparison).

Pre-norm:  ``x = x + DropPath(LS(MHSA(LN(x))));  x = x + DropPath(LS(MLP(LN(x))))``
Post-norm: ``x = LN(x + MHSA(x));  x = LN(x + MLP(x))``  (needs warmup to train).
Optional parts (layer scale, stochastic depth) are ``nn.Identity`` when off. The token mixer is
any kind of :data:`~vitlab.layers.attention.ATTENTION_KINDS`, built by :func:`build_attention`; the
two norms ``LN`` are LayerNorms, or BatchNorms over the tokens with ``norm="batchnorm"``
(:mod:`~vitlab.layers.norm`, the textbook's pitfall).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from .attention import ATTENTION_KINDS, MultiHeadSelfAttention, Rope
from .drop import DropPath, LayerScale
from .efficient_attention import LatentAttention, LinearAttention, LowRankAttention
from .mlp import MLP
from .norm import build_norm
from .sparse_attention import SparseAttention
from .window_attention import WindowAttention

# Each kind's own options: the name build_attention takes -> the name its layer takes.
KIND_OPTIONS: dict[str, dict[str, str]] = {
    "window": {"grid": "grid", "window_size": "window_size", "shift": "shift"},
    "sparse": {"grid": "grid", "sparse_local": "local", "sparse_stride": "stride", "global_tokens": "global_tokens"},
    "lowrank": {"num_tokens": "num_tokens", "lowrank_k": "rank"},
    "latent": {"num_latents": "num_latents"},
}
_ANY_KIND = {name for names in KIND_OPTIONS.values() for name in names} | {"num_tokens", "grid"}


def build_attention(kind: str, dim: int, num_heads: int, **options: Any) -> MultiHeadSelfAttention:
    """The self-attention layer of ``kind`` for tokens ``(B, N, D)``, ``D = dim``.

    Each kind reads only its own ``options`` (:data:`KIND_OPTIONS`): ``"window"`` the token ``grid``,
    ``window_size`` and ``shift``; ``"lowrank"`` ``num_tokens`` (sequence length) and ``lowrank_k``; ``"latent"``
    ``num_latents``; ``"sparse"`` the ``grid``, ``sparse_local``, ``sparse_stride`` and ``global_tokens``
    (:class:`SparseAttention`); the other options are :class:`MultiHeadSelfAttention`'s keyword arguments
    (``qkv_bias``, ``qk_norm``, ``attn_drop``, ``proj_drop``, ``norm_eps``, ``fused``; ``rel_pos`` for
    ``"full"``, ``"lsa"`` and ``"sparse"``).
    """
    own = {layer: options[name] for name, layer in KIND_OPTIONS.get(kind, {}).items() if name in options}
    common = {name: value for name, value in options.items() if name not in _ANY_KIND}
    if kind in MultiHeadSelfAttention.kinds:
        return MultiHeadSelfAttention(dim, num_heads, kind=kind, **common)
    if kind == "linear":
        return LinearAttention(dim, num_heads, **common)
    if kind == "latent":
        return LatentAttention(dim, num_heads, **own, **common)
    if kind in ("window", "sparse") and own.get("grid") is None:
        what = "windowed" if kind == "window" else kind
        raise ConfigError(f"{what} attention needs the token grid: pass grid=(gh, gw) (a model passes its own)")
    if kind == "window":
        return WindowAttention(dim, num_heads, **own, **common)
    if kind == "sparse":
        return SparseAttention(dim, num_heads, **own, **common)
    if kind == "lowrank":
        if own.get("num_tokens") is None:
            raise ConfigError("low-rank attention needs the sequence length: pass num_tokens (a model passes its own)")
        return LowRankAttention(dim, num_heads, **own, **common)
    raise ConfigError(f"unknown attention kind {kind!r}: choose one of {ATTENTION_KINDS}")


class Block(nn.Module):
    """Pre-norm transformer block: tokens ``(B, N, D) -> (B, N, D)``.

    ``attention`` names the self-attention variant (see ``layers.attention``), ``attention_options``
    its options (:func:`build_attention`); ``grid`` in ``forward`` is the token grid, which
    windowed attention needs. ``norm``: ``layernorm`` or ``batchnorm`` (:func:`~vitlab.layers.norm.build_norm`).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        qk_norm: bool = False,
        dropout: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
        layer_scale: float | None = None,
        norm_eps: float = 1e-6,
        attention: str = "full",
        attention_options: dict[str, Any] | None = None,
        norm: str = "layernorm",
    ) -> None:
        super().__init__()
        self.norm1 = build_norm(norm, dim, norm_eps)
        self.attn = build_attention(
            attention,
            dim,
            num_heads,
            qkv_bias=qkv_bias,
            qk_norm=qk_norm,
            attn_drop=attn_drop,
            proj_drop=dropout,
            norm_eps=norm_eps,
            **(attention_options or {}),
        )
        self.ls1 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = build_norm(norm, dim, norm_eps)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout=dropout)
        self.ls2 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(
        self, x: torch.Tensor, rope: Rope | None = None, grid: tuple[int, int] | None = None, queries: int | None = None
    ) -> torch.Tensor:
        """Tokens ``(B, N, D) -> (B, N, D)``; with ``queries = n`` the first ``n`` tokens' outputs
        ``(B, n, D)`` only (attention still reads every token)."""
        x = x[:, :queries] + self.drop_path1(self.ls1(self.attn(self.norm1(x), rope, grid, queries)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class PostNormBlock(Block):
    """Post-norm block (the original Transformer's order), same parameters as :class:`Block`."""

    def forward(
        self, x: torch.Tensor, rope: Rope | None = None, grid: tuple[int, int] | None = None, queries: int | None = None
    ) -> torch.Tensor:
        x = self.norm1(x[:, :queries] + self.drop_path1(self.ls1(self.attn(x, rope, grid, queries))))
        return self.norm2(x + self.drop_path2(self.ls2(self.mlp(x))))
