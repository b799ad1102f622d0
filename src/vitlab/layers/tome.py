"""Token merging (ToMe; Bolya et al. 2023): fewer tokens after every block, without retraining.

In each block, after attention, ``r`` tokens are merged into their most similar partner:

1. Similarity is the cosine between the tokens' keys, averaged over heads (the keys already
   summarise what a token "offers", and come free from the attention just computed).
2. Bipartite soft matching: the (non-protected) tokens alternate into sets A and B; each A token
   finds its most similar B token; the ``r`` A tokens with the most similar matches are merged
   into those B tokens and the rest are kept. One ``(N/2) x (N/2)`` product, no iteration.
3. A merged token is the size-weighted mean of what it absorbed, and carries its size ``s`` (how
   many patches it stands for). Proportional attention adds ``log s`` to the scores of its key,
   so softmax weighs it as ``s`` copies of one token: ``softmax(q k^T / sqrt(d) + log s)``.

Protected prefix tokens (a class token, registers) are never merged. With ``r = 0`` nothing is
merged and the block computes exactly what it did before. Cost: ``L`` blocks with ``r`` per block
see ``N, N - r, ..., N - (L - 1) r`` tokens, so both the linear and the ``N^2`` parts shrink.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..ops.attention import merge_heads, scaled_dot_product_attention
from .attention import MultiHeadSelfAttention, Rope
from .block import Block

Merge = Callable[[torch.Tensor], torch.Tensor]


def bipartite_soft_matching(metric: torch.Tensor, r: int, protected: int = 0) -> Merge:
    """Match tokens by ``metric (B, N, C)`` and return ``merge(x)``: ``(B, N, C') -> (B, N - r, C')``,
    summing each merged pair (one scatter-add: every token goes to one output slot).

    The first ``protected`` tokens stay first and untouched; ``r`` must be at most half of the
    others. After them come the kept A tokens, then the B tokens, each set in its original order.
    """
    b, n, _ = metric.shape
    if not 0 < r <= (n - protected) // 2:
        raise ConfigError(f"can merge 1 .. {(n - protected) // 2} of {n - protected} tokens per block, got r={r}")
    with torch.no_grad():
        metric = metric[:, protected:]
        metric = metric / metric.norm(dim=-1, keepdim=True)
        scores = metric[:, ::2] @ metric[:, 1::2].transpose(-2, -1)  # (B, N_A, N_B)
        best, partner = scores.max(dim=-1)
        n_a, n_b = scores.shape[1:]
        first_b = protected + n_a - r  # output slot of B token 0
        merged = torch.zeros_like(best, dtype=torch.bool).scatter_(1, best.topk(r, dim=-1).indices, True)
        slot_a = torch.where(merged, first_b + partner, protected - 1 + (~merged).cumsum(dim=-1))
        slots = torch.empty(b, n, dtype=torch.long, device=metric.device)
        slots[:, :protected] = torch.arange(protected, device=metric.device)
        slots[:, protected::2] = slot_a
        slots[:, protected + 1 :: 2] = torch.arange(first_b, first_b + n_b, device=metric.device)

    def merge(x: torch.Tensor) -> torch.Tensor:
        index = slots[..., None].expand(-1, -1, x.shape[-1])
        return x.new_zeros(b, n - r, x.shape[-1]).scatter_add_(1, index, x)

    return merge


def merge_wavg(merge: Merge, x: torch.Tensor, size: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge tokens ``x (B, N, D)`` as size-weighted means; ``size (B, N, 1)`` (``None``: all 1).
    Returns the merged tokens and their sizes (how many original tokens each stands for)."""
    size = torch.ones_like(x[..., :1]) if size is None else size
    total = merge(size)
    return merge(x * size) / total, total


def check_mergeable(block: nn.Module) -> None:
    """Raise unless ``block`` is a pre-norm :class:`Block` with full multi-head self-attention (no relative bias)."""
    attn: Any = getattr(block, "attn", None)
    if type(block) is not Block or type(attn) is not MultiHeadSelfAttention or attn.kind != "full":
        raise ConfigError(
            f"token merging rewrites pre-norm blocks with full attention, got {type(block).__name__} "
            f"with {type(attn).__name__}{f' kind {attn.kind!r}' if hasattr(attn, 'kind') else ''}: "
            f"use a ViT built with block='prenorm', attention='full'"
        )
    if attn.rel_pos is not None or attn.shared_rel_pos is not None:
        raise ConfigError(
            "token merging averages tokens from different places, which a relative position bias (indexed "
            "by grid offsets) cannot follow: use a model with rel_pos='none'"
        )


def merging_block(
    block: Block, x: torch.Tensor, size: torch.Tensor | None, r: int, protected: int = 0, queries: int | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run ``block`` on tokens ``(B, N, D)`` with proportional attention, merging up to ``r`` tokens
    between its attention and its MLP: returns ``(B, N - r', D)`` and the sizes ``(B, N - r', 1)``
    (``None`` while nothing has been merged, so ``r = 0`` is exactly the block's own forward).
    ``queries = n``: only the first ``n`` tokens' outputs (attention reads every token; nothing
    is merged among ``n`` protected tokens)."""
    attn = block.attn
    q, k, v = attn.qkv_heads(block.norm1(x))
    bias = None if size is None else size.log().transpose(1, 2)[:, None]  # (B, 1, 1, N)
    dropout = attn.attn_drop if attn.training else 0.0
    out, _ = scaled_dot_product_attention(
        q[..., :queries, :], k, v, mask=bias, dropout_p=dropout, need_weights=not attn.fused
    )
    x = x[:, :queries] + block.drop_path1(block.ls1(attn.proj_drop(attn.proj(merge_heads(out)))))
    r = min(r, max(0, x.shape[1] - protected) // 2)
    if r > 0:
        x, size = merge_wavg(bipartite_soft_matching(k.mean(dim=1), r, protected), x, size)
    return x + block.drop_path2(block.ls2(block.mlp(block.norm2(x)))), size


class TokenMerging:
    """Token merging as an encoder's ``block_fn`` (see ``VisionTransformer.forward_features``): block ``i``
    runs as :func:`merging_block` with ``r[i]`` merges, never merging the first ``protected`` tokens.

    One object per forward pass: ``size (B, N', 1)`` holds the sizes of the tokens the last block
    returned (``None`` while nothing has been merged). Rotary tables are not read: a merged token has
    no single position (models with rotary positions are refused before).
    """

    def __init__(self, r: Sequence[int], protected: int = 0) -> None:
        self.r, self.protected = r, protected
        self.size: torch.Tensor | None = None

    def __call__(
        self, index: int, block: Block, x: torch.Tensor, rope: Rope | None, grid: tuple[int, int], queries: int | None
    ) -> torch.Tensor:
        x, self.size = merging_block(block, x, self.size, self.r[index], self.protected, queries)
        return x
