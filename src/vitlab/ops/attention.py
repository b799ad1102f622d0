"""Attention math as pure tensor functions.

Shapes: queries ``(B, H, Nq, d)``, keys and values ``(B, H, Nk, d)``, weights ``(B, H, Nq, Nk)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def attention_weights(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + mask)`` over the keys: ``(B, H, Nq, Nk)``, rows sum to 1.

    ``mask`` broadcasts to the scores: a bool mask keeps ``True`` entries, a float mask is added.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return scores.softmax(dim=-1)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    need_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention ``softmax(q k^T / sqrt(d)) v``.

    With ``need_weights=False`` this is one call to PyTorch's fused kernel (the fast path);
    with ``need_weights=True`` the scores are formed explicitly and the weights returned too.
    Both compute the same function (tests hold them to float tolerance).

    Returns:
        ``(out (B, H, Nq, d_v), weights (B, H, Nq, Nk) or None)``.
    """
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return out, None
    weights = attention_weights(q, k, mask, scale)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


def with_weights(result: tuple[torch.Tensor, torch.Tensor | None]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, weights)`` of an attention asked for its weights (``need_weights=True``), which it must give."""
    out, weights = result
    if weights is None:
        raise RuntimeError(
            "an attention asked for its weights returned none: its _attend must form them when need_weights=True"
        )
    return out, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, N, H*d) -> (B, H, N, d)``."""
    b, n, dim = x.shape
    return x.reshape(b, n, num_heads, dim // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, N, d) -> (B, N, H*d)``."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def sparse_pattern(
    num_tokens: int, local: int, stride: int, global_tokens: int = 0, device: torch.device | None = None
) -> torch.Tensor:
    """``(T, T)`` bool: ``True`` where query ``i`` may attend to key ``j`` under a fixed sparse pattern.

    The last ``N = T - G`` tokens (the patch tokens, raster order) attend to keys within ``local``
    positions of them (the band ``|i - j| <= local``) and to keys a multiple of ``stride`` away
    (``(i - j) mod stride == 0``; Child et al.'s strided pattern). The first ``G = global_tokens``
    (class token, registers) attend to every token and every token attends to them.
    """
    if global_tokens > num_tokens:
        raise ValueError(f"{global_tokens} global tokens among only {num_tokens} tokens: use at most {num_tokens}")
    index = torch.arange(num_tokens - global_tokens, device=device)
    offset = index[:, None] - index[None, :]
    patches = (offset.abs() <= local) | (offset.remainder(stride) == 0)
    return F.pad(patches, (global_tokens, 0, global_tokens, 0), value=True)
