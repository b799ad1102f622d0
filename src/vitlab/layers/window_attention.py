"""Windowed self-attention with a relative position bias (Swin's W-MSA and SW-MSA).

Tokens ``(B, N, D)`` lie on a ``gh x gw`` grid in raster order. Their queries, keys and values
are gathered into ``nW`` windows of ``M = mh * mw`` slots (rolled by half a window first when
``shift=True``, padded at the bottom and right when the window does not divide the grid), attend
inside each window --
``softmax(Q K^T / sqrt(d) + B_rel + mask) V`` -- and are gathered back. ``B_rel`` is a learned
``((2mh-1) * (2mw-1), H)`` table read at each query-key offset; the mask keeps tokens that the
roll brought together across the grid's edge apart and hides padding (:mod:`vitlab.ops.windows`).

Cost per head and layer: ``nW * M^2`` scores and ``2 nW M^2 d`` multiply-adds each way, i.e.
``N M`` instead of ``N^2`` -- linear in ``N`` for a fixed window. One window covering the whole
grid with a zero bias table is full attention.

Prefix tokens (class token, registers) have no place on the grid; models using windowed
attention pool by the mean of the patch tokens instead.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..ops.attention import scaled_dot_product_attention
from ..ops.patches import _pair
from ..ops.windows import fit_window, relative_position_index, window_layout
from .attention import Attended, Grid, MultiHeadSelfAttention, Rope


class WindowAttention(MultiHeadSelfAttention):
    """Self-attention inside ``window_size`` windows of the token grid: ``(B, N, D) -> (B, N, D)``.

    Args:
        grid: the token grid ``(gh, gw)`` the layer is built for. On an axis where the grid fits
            in one window the window shrinks to the grid and that axis is not shifted (Swin's rule),
            which also fixes the size of the bias table. ``forward`` may be given another grid.
        window_size: window side ``M`` (or ``(mh, mw)``).
        shift: roll the grid by half a window before partitioning (every other block).
        The rest as :class:`~vitlab.layers.attention.MultiHeadSelfAttention`.

    ``forward_with_weights`` returns the weights scattered into ``(B, H, N, N)`` (zero outside
    each token's window), so they can be compared with, and recorded like, full attention.
    """

    kinds = ("window",)
    relative_position_index: torch.Tensor

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        grid: tuple[int, int] = (14, 14),
        window_size: int | tuple[int, int] = 7,
        shift: bool = False,
        **common: Any,
    ) -> None:
        """``common``: :class:`~vitlab.layers.attention.MultiHeadSelfAttention`'s options (``qkv_bias``,
        ``qk_norm``, ``attn_drop``, ``proj_drop``, ``norm_eps``, ``fused``)."""
        super().__init__(dim, num_heads, kind="window", **common)
        self.grid = _pair(grid, "grid")
        window = _pair(window_size, "window_size")
        self.window_size, self.shift_size = fit_window(
            self.grid, window, (window[0] // 2, window[1] // 2) if shift else (0, 0)
        )
        mh, mw = self.window_size
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * mh - 1) * (2 * mw - 1), num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("relative_position_index", relative_position_index(self.window_size), persistent=False)

    def relative_position_bias(self) -> torch.Tensor:
        """``(H, M, M)``: the bias every window adds to its scores, by query-key offset."""
        m = self.relative_position_index.shape[0]
        return self.relative_position_bias_table[self.relative_position_index.flatten()].view(m, m, -1).permute(2, 0, 1)

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        gh, gw = self.grid if grid is None else grid
        n = x.shape[1]
        if gh * gw != n:
            raise ConfigError(
                f"windowed attention got {n} tokens for a {gh}x{gw} grid: pass the grid the "
                f"tokens lie on (prefix tokens such as a class token have none: pool by the mean)"
            )
        shift = fit_window((gh, gw), self.window_size, self.shift_size)[1]
        layout = window_layout((gh, gw), self.window_size, shift, x.device)
        # windows and heads share one axis, so attention runs on 4-D tensors as everywhere else (and exports)
        q, k, v = (
            F.pad(t, (0, 0, 0, 1))[:, :, layout.index].transpose(1, 2).flatten(1, 2)  # (B, nW*H, M, d)
            for t in self.qkv_heads(x, rope)
        )  # slot N: zeros
        windows = layout.index.shape[0]
        bias = self.relative_position_bias().to(q.dtype).expand(windows, -1, -1, -1)  # (nW, H, M, M)
        mask = bias if layout.mask is None else bias.masked_fill(~layout.mask[:, None], float("-inf"))
        dropout = self.attn_drop if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask=mask.flatten(0, 1), dropout_p=dropout, need_weights=need_weights or not self.fused
        )
        out = out.unflatten(1, (windows, -1)).transpose(-3, -2).flatten(-2).flatten(1, 2)  # (B, nW*M, D)
        out = out[:, layout.inverse]  # (B, N, D)
        if need_weights and weights is not None:
            weights = scatter_window_weights(weights.unflatten(1, (windows, -1)), layout.index, n)
        return self.proj_drop(self.proj(out[:, :queries])), weights if need_weights else None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, grid={self.grid}, window={self.window_size}, shift={self.shift_size}"


def scatter_window_weights(weights: torch.Tensor, index: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """Per-window weights ``(B, nW, H, M, M)`` -> ``(B, H, N, N)``, zero between tokens of different
    windows; ``index (nW, M)`` holds each slot's token (``N`` for padding, dropped)."""
    b, _, h, _, _ = weights.shape
    dense = weights.new_zeros(b, h, num_tokens + 1, num_tokens + 1)
    dense[:, :, index[:, :, None], index[:, None, :]] = weights.transpose(1, 2)
    return dense[:, :, :num_tokens, :num_tokens]
