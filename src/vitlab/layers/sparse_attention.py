"""Sparse attention: full attention restricted to a fixed pattern of allowed query-key pairs.

The patch tokens (raster order) attend to

- a local band: keys within ``local`` raster positions, ``|i - j| <= local``;
- strided positions: keys a multiple of ``stride`` away, ``(i - j) mod stride == 0`` (Child et al.
  2019's strided pattern);

and the ``G`` global tokens -- the prefix tokens (class token, registers) -- attend to every token
and every token attends to them (Longformer / BigBird's global tokens). On a ``gh x gw`` grid,
``stride = gw`` is the token's column and ``local = gw`` its row neighbourhood: any two patches are
two hops apart. With ``local ~ stride ~ sqrt(N)`` a token has ``~ 3 sqrt(N)`` keys, so the pattern
holds ``P ~ 3 N^1.5`` pairs instead of ``N^2`` (:func:`vitlab.models.cost.sparse_attention`).

Both paths compute ``softmax(Q K^T / sqrt(d) + M) V`` with ``M = 0`` on allowed pairs and ``-inf``
elsewhere: the fast path passes the bool pattern, built once per token count and cached, to PyTorch's
fused kernel; the explicit path returns the weights ``(B, H, N, N)``, zero outside the pattern. A
masked dense kernel still computes all ``N^2`` scores: the saving the cost model prices needs a
block-sparse kernel.
"""

from __future__ import annotations

import torch
from torch import nn

from ..ops.attention import sparse_pattern
from .attention import MultiHeadSelfAttention


class SparseAttention(MultiHeadSelfAttention):
    """Attention over a local band, strided positions and global tokens: ``(B, N, D) -> (B, N, D)``.

    Args:
        grid: the patch grid ``(gh, gw)`` the layer is built for; ``local`` and ``stride`` left ``None``
            default to its width ``gw``.
        local: band radius: a patch token attends to those within ``local`` raster positions (``0``:
            itself only).
        stride: and to those a multiple of ``stride`` positions away (``stride >= N``: none).
        global_tokens: the first ``G`` tokens are global (a model passes its prefix tokens).
        The rest as :class:`~vitlab.layers.attention.MultiHeadSelfAttention` (``rel_pos`` included).
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
        qkv_bias: bool = True,
        qk_norm: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        norm_eps: float = 1e-6,
        fused: bool = True,
        rel_pos: nn.Module | None = None,
    ) -> None:
        super().__init__(
            dim,
            num_heads,
            qkv_bias=qkv_bias,
            qk_norm=qk_norm,
            attn_drop=attn_drop,
            proj_drop=proj_drop,
            norm_eps=norm_eps,
            fused=fused,
            kind="sparse",
            rel_pos=rel_pos,
        )
        for name, value, low in (("local", local, 0), ("stride", stride, 1), ("global_tokens", global_tokens, 0)):
            if value is not None and value < low:
                raise ValueError(f"sparse attention's {name} must be >= {low}, got {value}")
        self.grid = (grid[0], grid[1])
        self.local = grid[1] if local is None else local
        self.stride = grid[1] if stride is None else stride
        self.global_tokens = global_tokens
        self._patterns: dict[tuple[int, torch.device], torch.Tensor] = {}

    def allowed(self, n: int, device: torch.device) -> torch.Tensor:
        """The ``(N, N)`` bool pattern (:func:`~vitlab.ops.attention.sparse_pattern`), cached per token count."""
        key = (n, device)
        if key not in self._patterns:
            self._patterns[key] = sparse_pattern(n, self.local, self.stride, self.global_tokens, device)
        return self._patterns[key]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, local={self.local}, stride={self.stride}, global_tokens={self.global_tokens}"
