"""Attention math as pure tensor functions.

Shapes: queries ``(B, H, Nq, d)``, keys and values ``(B, H, Nk, d)``, weights ``(B, H, Nq, Nk)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..errors import ConfigError


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
        raise ConfigError(f"{global_tokens} global tokens among only {num_tokens} tokens: use at most {num_tokens}")
    index = torch.arange(num_tokens - global_tokens, device=device)
    offset = index[:, None] - index[None, :]
    patches = (offset.abs() <= local) | (offset.remainder(stride) == 0)
    return F.pad(patches, (global_tokens, 0, global_tokens, 0), value=True)


def sparse_blocks(num_patches: int, local: int, stride: int) -> tuple[int, int, int]:
    """``(b, r, m)`` of the blocked sparse kernel (:func:`sparse_attention`) for ``N = num_patches`` tokens:
    blocks of ``b = min(local, N)`` raster positions (at least 1), each query block reading its own and ``r``
    blocks either side (``r = 1`` covers the band ``|i - j| <= local``; ``0`` for one block or ``local = 0``),
    and ``m = ceil(N / stride)`` tokens of its residue class mod ``stride`` -- ``0`` when no multiple of
    ``stride`` beyond the band fits in the sequence (the band holds every strided key)."""
    block = max(1, min(local, num_patches))
    reach = max(0, min(-(-local // block), -(-num_patches // block) - 1))
    rows = -(-num_patches // stride) if stride * (local // stride + 1) < num_patches else 0
    return block, reach, rows


class SparseLayout(NamedTuple):
    """The keys of the blocked sparse kernel (:func:`sparse_attention`) for :func:`sparse_pattern`.

    A patch query ``i`` (``N`` of them, behind ``G`` global tokens) reads three sets of score slots: the ``G``
    global keys; the ``(2r + 1) b`` keys of its block of ``b`` raster positions and the ``r`` blocks either
    side (the band); the ``m`` keys of its residue class mod ``stride`` (the strided keys). ``band_keys
    (N/b, b, (2r + 1) b)`` (query ``i`` at ``[i // b, i % b]``) and ``strided_keys (s, m, m)`` (query ``i``
    at ``[i % s, i // s]``) hold the token (index among all ``T = G + N``) each slot reads, or ``-1`` where
    the slot does not count: beyond the sequence, outside the band for a band slot, inside it for a strided
    slot -- so a key that is both local and strided, the query itself included, counts once, as a band key.
    """

    global_tokens: int
    block: int
    reach: int
    stride: int
    rows: int
    band_keys: torch.Tensor
    strided_keys: torch.Tensor


def sparse_layout(
    num_tokens: int, local: int, stride: int, global_tokens: int = 0, device: torch.device | None = None
) -> SparseLayout:
    """The :class:`SparseLayout` of :func:`sparse_pattern` ``(num_tokens, local, stride, global_tokens)``."""
    n = num_tokens - global_tokens
    block, reach, rows = sparse_blocks(n, local, stride)
    queries = torch.arange(-(-n // block) * block, device=device).view(-1, block, 1)  # (N/b, b, 1)
    band = (queries // block - reach) * block + torch.arange((2 * reach + 1) * block, device=device)
    counted = (band >= 0) & (band < n) & ((queries - band).abs() <= local)
    band_keys = torch.where(counted, band + global_tokens, -1)
    queries = torch.arange(rows, device=device)[:, None] * stride + torch.arange(stride, device=device)[:, None, None]
    strided = queries.transpose(-2, -1)  # (s, m, m): query (c, r) -> key r' s + c
    counted = (strided < n) & ((queries - strided).abs() > local)
    strided_keys = torch.where(counted, strided + global_tokens, -1)
    return SparseLayout(global_tokens, block, reach, stride, rows, band_keys, strided_keys)


def blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """``(..., N, c) -> (..., ceil(N / b), b, c)``: consecutive rows in blocks of ``b``, zero-padded at the end."""
    return F.pad(x, (0, 0, 0, -x.shape[-2] % block)).unflatten(-2, (-1, block))


def from_blocks(x: torch.Tensor, num_rows: int) -> torch.Tensor:
    """The inverse of :func:`blocks`: ``(..., N/b, b, c) -> (..., N, c)``."""
    return x.flatten(-3, -2)[..., :num_rows, :]


def band_windows(x: torch.Tensor, block: int, reach: int) -> torch.Tensor:
    """``(..., N, d) -> (..., ceil(N / b), (2r + 1) b, d)``: for each block of ``b`` rows, the rows of it and of
    the ``r`` blocks either side (zeros beyond the ends) -- the keys or values of a query block."""
    n, width = x.shape[-2], (2 * reach + 1) * block
    padded = F.pad(x, (0, 0, reach * block, reach * block + -n % block))
    return padded.unfold(-2, width, block).transpose(-2, -1).contiguous()


def residue_classes(x: torch.Tensor, stride: int, rows: int) -> torch.Tensor:
    """``(..., N, c) -> (..., s, m, c)``: row ``i`` to class ``i mod s``, position ``i // s`` (zero-padded to
    ``m s`` rows)."""
    return F.pad(x, (0, 0, 0, rows * stride - x.shape[-2])).unflatten(-2, (rows, stride)).transpose(-3, -2)


def from_residue_classes(x: torch.Tensor, num_rows: int) -> torch.Tensor:
    """The inverse of :func:`residue_classes`: ``(..., s, m, c) -> (..., N, c)``."""
    return x.transpose(-3, -2).flatten(-3, -2)[..., :num_rows, :]


PairBias = tuple[torch.Tensor, torch.Tensor]  # (table (E, H), index (T, T)): pair (i, j) gets table[index[i, j]]


def pair_bias(bias: PairBias, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``table[index[rows, cols]]`` with the heads first: ``(H, *broadcast(rows, cols).shape)``."""
    table, index = bias
    return table[index[rows, cols]].movedim(-1, 0)


def slot_offsets(bias: PairBias | None, rows: torch.Tensor, keys: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """What the scores of query tokens ``rows`` against key tokens ``keys`` (``-1``: a slot that does not count)
    get added: the bias (``(H, *keys.shape)``) or zero (``keys.shape``), ``-inf`` where the slot does not count."""
    offsets = keys.new_zeros(keys.shape, dtype=dtype) if bias is None else pair_bias(bias, rows, keys.clamp(min=0))
    return offsets.masked_fill(keys < 0, float("-inf"))


def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: SparseLayout,
    bias: PairBias | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    queries: int | None = None,
) -> torch.Tensor:
    """Attention under :func:`sparse_pattern`, forming only the pattern's blocks: ``(B, H, T, d) -> (B, H, T, d)``.

    The ``G`` global queries attend to every key (``(B, H, G, T)`` scores); the patch queries as in
    :func:`patch_attention`. The same function as ``softmax(q k^T / sqrt(d) + M) v`` with :func:`sparse_pattern`
    as ``M``, in memory ``O(B H N (G + 3b + N/s))`` instead of ``O(B H N^2)``.

    Args:
        layout: :func:`sparse_layout` for ``T`` tokens.
        bias: a relative position bias ``(table (E, H), index (T, T))``, read at the pattern's slots only.
        queries: only the first ``n`` queries (output ``(B, H, n, d)``).
    """
    g = layout.global_tokens
    q = q * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    out = []
    if g:
        rows = torch.arange(min(g, queries or g), device=q.device)[:, None]
        mask = None if bias is None else pair_bias(bias, rows, torch.arange(k.shape[-2], device=q.device))
        weights = attention_weights(q[..., : rows.shape[0], :], k, mask, scale=1.0)
        out.append(F.dropout(weights, dropout_p) @ v if dropout_p > 0 else weights @ v)
    if queries is None or queries > g:
        out.append(patch_attention(q[..., g:, :], k, v, layout, bias, dropout_p))
    return torch.cat(out, -2)[..., :queries, :]


class KeySet(NamedTuple):
    """One set of a patch query's keys in :func:`patch_attention`, scored in its own layout of the queries."""

    scores: torch.Tensor  # (B, H, *layout, K'): the queries in this layout against their K' keys, -inf: not counted
    values: torch.Tensor  # the values the weights read, batched like the scores: (..., K', d)
    to_layout: Callable[[torch.Tensor], torch.Tensor]  # (B, H, N, c) -> (B, H, *layout, c)
    from_layout: Callable[[torch.Tensor], torch.Tensor]  # and back


def patch_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SparseLayout, bias: PairBias | None, dropout_p: float
) -> torch.Tensor:
    """The patch queries of :func:`sparse_attention`: scaled ``q (B, H, N, d)``, all ``k, v (B, H, T, d)``
    -> ``(B, H, N, d)``.

    Each set of keys is scored in its own layout (:class:`KeySet`) -- the global keys ``(B, H, N, G)``, each
    query block against its band window ``(B, H, N/b, b, (2r + 1) b)``, each residue class against itself
    ``(B, H, s, m, m)`` -- and the sets are normalised by one softmax over their union: shifted by each query's
    largest score over all of them, exponentiated, and the weighted values summed over the sets and divided by
    the sum of all the sets' exponentials. No score row is concatenated: each set stays one tensor throughout.
    """
    g, n, b, r, s, m = layout.global_tokens, q.shape[-2], layout.block, layout.reach, layout.stride, layout.rows
    rows = torch.arange(g, g + n, device=q.device)[:, None]  # (N, 1): the query tokens
    k_patch, v_patch = k[..., g:, :], v[..., g:, :]
    sets = [
        KeySet(
            (blocks(q, b) @ band_windows(k_patch, b, r).transpose(-2, -1)).add_(
                slot_offsets(bias, blocks(rows, b), layout.band_keys, q.dtype)
            ),
            band_windows(v_patch, b, r),
            lambda x: blocks(x, b),
            lambda x: from_blocks(x, n),
        )
    ]
    if g:
        keys = torch.arange(g, device=q.device).expand(n, g)
        scores = (q @ k[..., :g, :].transpose(-2, -1)).add_(slot_offsets(bias, rows, keys, q.dtype))
        sets.append(KeySet(scores, v[..., :g, :], lambda x: x, lambda x: x))
    if m:
        scores = residue_classes(q, s, m) @ residue_classes(k_patch, s, m).transpose(-2, -1)
        scores.add_(slot_offsets(bias, residue_classes(rows, s, m), layout.strided_keys, q.dtype))
        sets.append(
            KeySet(
                scores,
                residue_classes(v_patch, s, m),
                lambda x: residue_classes(x, s, m),
                lambda x: from_residue_classes(x, n),
            )
        )
    with torch.no_grad():  # the shift cancels in the softmax: no gradient through it
        shift = torch.stack([ks.from_layout(ks.scores.amax(-1, keepdim=True)) for ks in sets]).amax(0)  # (B, H, N, 1)
    total, out = torch.zeros_like(shift), torch.zeros_like(q)
    for ks in sets:
        exp = ks.scores.sub_(ks.to_layout(shift)).exp_()  # in place: one score tensor per set
        total = total + ks.from_layout(exp.sum(-1, keepdim=True))
        out = out + ks.from_layout((F.dropout(exp, dropout_p) if dropout_p > 0 else exp) @ ks.values)
    return out / total
