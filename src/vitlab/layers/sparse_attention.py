"""Sparse attention: full attention restricted to a fixed pattern of allowed query-key pairs.

The patch tokens (raster order) attend to

- a local band: keys within ``local`` raster positions, ``|i - j| <= local``;
- strided positions: keys a multiple of ``stride`` away, ``(i - j) mod stride == 0`` (Child et al.
  2019's strided pattern);

and the ``G`` global tokens -- the prefix tokens (class token, registers) -- attend to every token
and every token attends to them (Longformer / BigBird's global tokens). On a ``gh x gw`` grid,
``stride = gw`` is the token's column and ``local = gw`` its row neighbourhood: any two patches are
two hops apart. With ``local ~ stride ~ sqrt(N)`` a token has ``~ 3 sqrt(N)`` keys, so the pattern
holds ``P ~ 3 N^1.5`` pairs instead of ``N^2``, of which the blocked kernel forms ``~ 4 N^1.5`` scores
(:func:`vitlab.analysis.cost.sparse_attention`).

Both paths compute ``softmax(Q K^T / sqrt(d) + M) V`` with ``M = 0`` on allowed pairs and ``-inf``
elsewhere. The fast path is the blocked kernel :func:`~vitlab.ops.attention.sparse_attention`: the band as
blocks of ``b = local`` tokens against their neighbouring blocks, the strided keys as attention inside each
residue class mod ``stride``, the global tokens densely, one softmax over the union -- ``~ N (G + 3b + N/s)``
scores instead of ``N^2``. Below :data:`BLOCKED_FROM` tokens the fast path passes the bool pattern instead
(built once per token count and cached) to PyTorch's fused dense kernel, which is faster there. The explicit
path returns the weights ``(B, H, N, N)``, zero outside the pattern.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ConfigError
from ..ops.attention import PairBias, SparseLayout, merge_heads, sparse_attention, sparse_layout, sparse_pattern
from .attention import Attended, Grid, MultiHeadSelfAttention, Rope
from .relative_position import RelativePositionBias

# Tokens from which the blocked kernel is the fast path. On one CPU thread (widths 64-192, batches 1-32) the masked
# fused kernel is faster up to ~400 tokens (blocked 0.6-0.9x its speed), the blocked one from 576 (1.25-1.4x),
# growing with N (1.4-1.7x at 1,024, 3-6x at 4,096 tokens).
BLOCKED_FROM = 512


class SparseAttention(MultiHeadSelfAttention):
    """Attention over a local band, strided positions and global tokens: ``(B, N, D) -> (B, N, D)``.

    Args:
        grid: the patch grid ``(gh, gw)`` the layer is built for; ``local`` and ``stride`` left ``None``
            default to its width ``gw``.
        local: band radius: a patch token attends to those within ``local`` raster positions (``0``:
            itself only).
        stride: and to those a multiple of ``stride`` positions away (``stride >= N``: none).
        global_tokens: the first ``G`` tokens are global (a model passes its prefix tokens).
        common: :class:`~vitlab.layers.attention.MultiHeadSelfAttention`'s options (``rel_pos`` included).
    """

    kinds = ("sparse",)

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        grid: tuple[int, int] = (14, 14),
        local: int | None = None,
        stride: int | None = None,
        global_tokens: int = 0,
        **common: Any,
    ) -> None:
        super().__init__(dim, num_heads, kind="sparse", **common)
        for name, value, low in (("local", local, 0), ("stride", stride, 1), ("global_tokens", global_tokens, 0)):
            if value is not None and value < low:
                raise ConfigError(f"sparse attention's {name} must be >= {low}, got {value}")
        self.grid = (grid[0], grid[1])
        self.local = grid[1] if local is None else local
        self.stride = grid[1] if stride is None else stride
        self.global_tokens = global_tokens
        self._patterns: dict[tuple[int, torch.device], torch.Tensor] = {}
        self._layouts: dict[tuple[int, torch.device], SparseLayout] = {}

    def allowed(self, n: int, device: torch.device) -> torch.Tensor:
        """The ``(N, N)`` bool pattern (:func:`~vitlab.ops.attention.sparse_pattern`), cached per token count."""
        key = (n, device)
        if key not in self._patterns:
            self._patterns[key] = sparse_pattern(n, self.local, self.stride, self.global_tokens, device)
        return self._patterns[key]

    def layout(self, n: int, device: torch.device) -> SparseLayout:
        """The blocked kernel's :func:`~vitlab.ops.attention.sparse_layout` for ``N`` tokens, cached per token count."""
        key = (n, device)
        if key not in self._layouts:
            self._layouts[key] = sparse_layout(n, self.local, self.stride, self.global_tokens, device)
        return self._layouts[key]

    def pair_bias(self, dtype: torch.dtype) -> PairBias | None:
        """The relative position bias as ``(table (E, H), index (T, T))``, for the kernel to read at its slots."""
        rel_pos = self.rel_pos if self.rel_pos is not None else self.shared_rel_pos
        if rel_pos is None:
            return None
        if not isinstance(rel_pos, RelativePositionBias):
            raise ConfigError(
                f"sparse attention reads its bias at the pattern's pairs from a RelativePositionBias table, got "
                f"{type(rel_pos).__name__}: use vitlab.layers.RelativePositionBias"
            )
        return rel_pos.relative_position_bias_table.to(dtype), rel_pos.relative_position_index

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        """The blocked kernel (:func:`~vitlab.ops.attention.sparse_attention`); the masked dense kernel when
        the weights are needed, ``fused`` is off or there are fewer than :data:`BLOCKED_FROM` tokens."""
        if need_weights or not self.fused or x.shape[1] < BLOCKED_FROM:
            return super()._attend(x, rope, grid, need_weights, queries)
        q, k, v = self.qkv_heads(x, rope)
        out = sparse_attention(
            q,
            k,
            v,
            self.layout(x.shape[1], x.device),
            bias=self.pair_bias(q.dtype),
            dropout_p=self.attn_drop if self.training else 0.0,
            queries=queries,
        )
        return self.proj_drop(self.proj(merge_heads(out))), None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, local={self.local}, stride={self.stride}, global_tokens={self.global_tokens}"
