"""Multi-head self-attention with a fused qkv projection.

``forward`` takes the fast path (PyTorch's fused ``scaled_dot_product_attention``);
``forward_with_weights`` forms the scores explicitly and also returns the attention weights
``(B, H, N, N)``. Both compute the same function.

Variants, chosen by name (``kind``):

- ``"full"``: ``softmax(Q K^T / sqrt(d)) V``, every token attends to every token.
- ``"lsa"``: Locality Self-Attention (Lee, Lee & Song 2021): ``softmax(M(Q K^T) / tau) V`` with a
  learnable temperature ``tau`` (initialised to ``sqrt(d)``) and ``M`` masking the diagonal, so no
  token attends to itself and the weights sharpen on the others.

The cheaper kinds are subclasses, one file each, that replace the token mixing and keep the
projections (``qkv``, ``proj``), the call ``forward(x, rope, grid)`` and ``forward_with_weights``
(so :mod:`vitlab.explain` records them too); :func:`vitlab.layers.build_attention` builds any kind
by name. Time and memory per head and layer, for ``N`` tokens of head width ``d``:

- ``"full"``, ``"lsa"``: ``O(N^2 d)`` time, ``O(N^2)`` scores.
- ``"window"`` (:mod:`~vitlab.layers.window_attention`): inside windows of ``M`` tokens, shifted in
  alternate blocks, with a relative position bias: ``O(N M d)``, ``O(N M)``.
- ``"linear"`` (:mod:`~vitlab.layers.efficient_attention`): ``phi(Q) (phi(K)^T V)`` with a positive
  feature map: ``O(N d^2)``, ``O(d^2)`` -- no ``N x N`` matrix at all.
- ``"lowrank"``: Linformer, keys and values projected along the tokens to ``k`` rows: ``O(N k d)``, ``O(N k)``.
- ``"latent"``: ``L`` learned latents summarise the keys and values, every token reads the summaries
  (Perceiver-style cross-attention both ways): ``O(N L d)``, ``O(N L)``.
- ``"sparse"`` (:mod:`~vitlab.layers.sparse_attention`): a fixed pattern -- a local band of ``b`` tokens,
  every ``s``-th token and ``G`` global prefix tokens -- by a blocked kernel: ``O(N (G + 3b + N/s) d)``,
  ``O(N (G + 3b + N/s))``; ``N^1.5`` for ``b ~ s ~ sqrt(N)``.

``causal=True`` (``full`` only) lets token ``i`` attend to tokens ``j <= i`` in sequence order -- a
language model's mask, which a classifier ViT does without (the texts' pitfall): the class token, first,
then sees itself alone, and patch ``i`` only the patches before it in raster order.

``full``, ``lsa`` and ``sparse`` take a relative position bias (``rel_pos``,
:mod:`~vitlab.layers.relative_position`): owned by the layer, or shared by every block of a model
(:meth:`MultiHeadSelfAttention.share_position_bias`).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ..errors import ConfigError
from ..ops.attention import merge_heads, scaled_dot_product_attention, with_weights
from ..ops.positions import apply_rotary

Rope = tuple[torch.Tensor, torch.Tensor]
Grid = tuple[int, int]  # the token grid (gh, gw)
Attended = tuple[torch.Tensor, torch.Tensor | None]  # output (B, N, D), weights (B, H, N, N) or None
ATTENTION_KINDS = ("full", "lsa", "window", "linear", "lowrank", "latent", "sparse")


def causal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """``(N, N)`` bool mask, ``True`` on and below the diagonal: query ``i`` may read keys ``j <= i``."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def off_diagonal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """``(N, N)`` bool mask, ``True`` off the diagonal: the keys a token may attend to under LSA."""
    if n < 2:
        raise ConfigError(
            f"locality self-attention masks each token's own key, so it needs at least 2 "
            f"tokens, got {n}: use a larger image or attention='full'"
        )
    return ~torch.eye(n, dtype=torch.bool, device=device)


class MultiHeadSelfAttention(nn.Module):
    """Tokens ``(B, N, D) -> (B, N, D)``: ``H`` heads of width ``d = D / H``.

    ``qkv`` is one ``Linear(D, 3D)`` whose output splits into ``Q, K, V``; ``proj`` is the output
    projection. ``qk_norm`` adds a LayerNorm on each head's queries and keys.

    Args:
        dim: token width ``D``.
        num_heads: heads ``H``; must divide ``D``.
        fused: use the fused kernel in ``forward`` (turn off to force the explicit path).
        kind: ``"full"`` or ``"lsa"`` (locality self-attention: adds one parameter,
            ``temperature``, a scalar initialised to ``sqrt(d)``); subclasses compute the others.
        rel_pos: a relative position bias of this layer's own, a module whose call gives the
            ``(1, H, N, N)`` bias added to the scores (:class:`~vitlab.layers.RelativePositionBias`).
        causal: mask every key after the query in sequence order (:func:`causal_mask`); ``full`` only.
    """

    kinds: tuple[str, ...] = ("full", "lsa")  # the kinds this class computes

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        qk_norm: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        norm_eps: float = 1e-6,
        fused: bool = True,
        kind: str = "full",
        rel_pos: nn.Module | None = None,
        causal: bool = False,
    ) -> None:
        super().__init__()
        for name, value in (("dim", dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if dim % num_heads:
            raise ConfigError(
                f"embed dim {dim} is not divisible by num_heads {num_heads}: choose a head count "
                f"that divides it (e.g. {', '.join(str(h) for h in range(1, 17) if dim % h == 0)})"
            )
        for name, rate in (("attn_drop", attn_drop), ("proj_drop", proj_drop)):
            if not 0 <= rate < 1:
                raise ConfigError(f"{name} must be a probability in [0, 1), got {rate}")
        if not norm_eps > 0:
            raise ConfigError(f"norm_eps must be positive, got {norm_eps}")
        if kind not in self.kinds:
            raise ConfigError(
                f"{type(self).__name__} computes kind {' or '.join(map(repr, self.kinds))}, "
                f"got {kind!r}; build any of {ATTENTION_KINDS} with "
                f"vitlab.layers.build_attention(kind, ...)"
            )
        if causal and kind != "full":
            raise ConfigError(
                f"a causal mask is built for full attention, got kind={kind!r} (locality self-attention would "
                f"leave the first token no key at all): use kind='full'"
            )
        self.num_heads, self.head_dim, self.fused, self.kind = num_heads, dim // num_heads, fused, kind
        self.causal = causal
        self.temperature = nn.Parameter(torch.tensor(math.sqrt(self.head_dim))) if kind == "lsa" else None
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=norm_eps) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, eps=norm_eps) if qk_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop) if proj_drop > 0 else nn.Identity()
        self.rel_pos = rel_pos
        self.shared_rel_pos: nn.Module | None = None

    def share_position_bias(self, rel_pos: nn.Module) -> None:
        """Add the bias of ``rel_pos``, a module the model owns (timm's ``shared_rel_pos``), to the scores.
        It is referenced, not registered, so its parameters appear once, under the model's name."""
        object.__setattr__(self, "shared_rel_pos", rel_pos)

    def allowed(self, n: int, device: torch.device) -> torch.Tensor | None:
        """``(N, N)`` bool, ``True`` where a query may attend to a key; ``None``: everywhere."""
        if self.causal:
            return causal_mask(n, device)
        return off_diagonal_mask(n, device) if self.kind == "lsa" else None

    def score_mask(self, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
        """What the scores of ``N`` tokens get: ``None``, the bool mask of :meth:`allowed` ``(N, N)``, or the
        relative position bias ``(1, H, N, N)`` with ``-inf`` where no attention is allowed."""
        allowed = self.allowed(n, device)
        rel_pos = self.rel_pos if self.rel_pos is not None else self.shared_rel_pos
        if rel_pos is None:
            return allowed
        bias = rel_pos().to(dtype)
        return bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))

    def qkv_heads(self, x: torch.Tensor, rope: Rope | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values per head, each ``(..., H, N, d)`` for tokens ``(..., N, D)``."""
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim))  # (..., N, 3, H, d)
        q, k, v = (t.transpose(-3, -2) for t in qkv.unbind(-3))  # (..., H, N, d) each
        q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        return q, k, v

    def _attend(
        self, x: torch.Tensor, rope: Rope | None, grid: Grid | None, need_weights: bool, queries: int | None = None
    ) -> Attended:
        """``(output (B, N, D), weights (B, H, N, N) if need_weights)``: the token mixing that subclasses
        replace. The explicit path runs when weights are needed or ``fused`` is off. With ``queries = n``
        only the first ``n`` tokens query (output ``(B, n, D)``, weights ``(B, H, n, N)``)."""
        q, k, v = self.qkv_heads(x, rope)
        q, scale = q[..., :queries, :], None
        if self.temperature is not None:
            q, scale = q / self.temperature, 1.0
        mask = self.score_mask(k.shape[-2], q.dtype, q.device)
        mask = None if mask is None else mask[..., :queries, :]
        dropout = self.attn_drop if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask=mask, dropout_p=dropout, scale=scale, need_weights=need_weights or not self.fused
        )
        return self.proj_drop(self.proj(merge_heads(out))), weights

    def forward(
        self, x: torch.Tensor, rope: Rope | None = None, grid: tuple[int, int] | None = None, queries: int | None = None
    ) -> torch.Tensor:
        """Tokens ``(B, N, D) -> (B, N, D)``. ``grid``: the patch grid ``(gh, gw)`` the tokens lie on,
        read by windowed attention only (global kinds mix tokens regardless of where they lie).
        ``queries = n``: only the first ``n`` tokens' outputs, ``(B, n, D)`` -- keys and values still come
        from every token (a class-token readout needs no more from the last block)."""
        return self._attend(x, rope, grid, need_weights=False, queries=queries)[0]

    def forward_with_weights(
        self, x: torch.Tensor, rope: Rope | None = None, grid: tuple[int, int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (B, N, D), attention weights (B, H, N, N))`` by the explicit path."""
        return with_weights(self._attend(x, rope, grid, need_weights=True))

    def extra_repr(self) -> str:
        return f"heads={self.num_heads}, head_dim={self.head_dim}, kind={self.kind!r}" + (
            ", causal=True" if self.causal else ""
        )
