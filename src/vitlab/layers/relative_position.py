"""Relative position bias for a plain ViT: a learned score offset per head for every 2-D displacement.

Tokens on a ``gh x gw`` grid (raster order) behind ``R`` prefix tokens. The bias added to the
score of query ``i`` and key ``j`` is ``table[index[i, j]]``, one entry per head, where the index
of two patch tokens is their row and column offset as one number (Swin's and timm's layout, the
offsets shifted to start at 0)::

    index = (dr + gh - 1) * (2 gw - 1) + (dc + gw - 1)        (2gh-1)(2gw-1) offsets

With prefix tokens, three more entries follow (BEiT's): prefix -> patch, patch -> prefix and
prefix -> prefix, shared by all prefix tokens. One prefix token is timm's ``RelPosBias`` with
``prefix_tokens=1``, its table ``relative_position_bias_table ((2gh-1)(2gw-1) + 3, H)``.

The model keeps it per block (each attention owns one, timm's default) or shares one between
all blocks (timm's ``shared_rel_pos=True``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ops.windows import relative_position_index

REL_POS_KINDS = ("none", "per_block", "shared")


def prefixed_position_index(grid: tuple[int, int], prefix_tokens: int) -> torch.Tensor:
    """``(R + N, R + N)`` index into a ``((2gh-1)(2gw-1) + 3 [R > 0], H)`` table: patch pairs by their
    2-D offset, then prefix -> patch, patch -> prefix, prefix -> prefix (the three entries after)."""
    index = relative_position_index(grid)
    if not prefix_tokens:
        return index
    offsets = (2 * grid[0] - 1) * (2 * grid[1] - 1)
    index = F.pad(index, (prefix_tokens, 0, prefix_tokens, 0), value=offsets + 1)  # patch -> prefix columns
    index[:prefix_tokens, prefix_tokens:] = offsets
    index[:prefix_tokens, :prefix_tokens] = offsets + 2
    return index


class RelativePositionBias(nn.Module):
    """A learned table ``relative_position_bias_table (K, H)`` read at every token pair: ``() -> (1, H, T, T)``
    for ``T = R + gh * gw`` tokens, to be added to the attention scores.

    Args:
        grid: the patch grid ``(gh, gw)``; the bias is for this grid only (no dynamic sizes).
        num_heads: heads ``H``.
        prefix_tokens: ``R`` tokens ahead of the patches, sharing three extra entries.
    """

    relative_position_index: torch.Tensor

    def __init__(self, grid: tuple[int, int], num_heads: int, prefix_tokens: int = 0) -> None:
        super().__init__()
        self.grid, self.prefix_tokens = (grid[0], grid[1]), prefix_tokens
        self.relative_position_bias_table = nn.Parameter(torch.zeros(self.num_entries(grid, prefix_tokens), num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer(
            "relative_position_index", prefixed_position_index(self.grid, prefix_tokens), persistent=False
        )

    @staticmethod
    def num_entries(grid: tuple[int, int], prefix_tokens: int) -> int:
        """Rows ``K`` of the table for ``grid`` and ``prefix_tokens``."""
        return (2 * grid[0] - 1) * (2 * grid[1] - 1) + (3 if prefix_tokens else 0)

    def forward(self) -> torch.Tensor:
        """The bias ``(1, H, T, T)``: ``bias[0, h, i, j] = table[index[i, j], h]``."""
        t = self.relative_position_index.shape[0]
        bias = self.relative_position_bias_table[self.relative_position_index.flatten()].view(t, t, -1)
        return bias.permute(2, 0, 1)[None]

    def extra_repr(self) -> str:
        return (
            f"grid={self.grid}, prefix_tokens={self.prefix_tokens}, heads={self.relative_position_bias_table.shape[1]}"
        )
