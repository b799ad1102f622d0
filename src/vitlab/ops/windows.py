"""Windows over a token grid: partition and reverse, cyclic shift, masks, relative positions.

Tokens of a ``gh x gw`` grid are numbered in raster order ``0 .. N-1``. Windowed attention
(Liu et al. 2021, Swin) cuts the grid into non-overlapping ``mh x mw`` windows and lets a token
attend only inside its own window: ``nW = ceil(gh/mh) * ceil(gw/mw)`` windows of ``M = mh * mw``
tokens hold ``nW * M^2`` scores per head instead of ``N^2`` -- linear in ``N`` for a fixed window.

A shifted block first rolls the grid by ``(-sh, -sw)`` (``s = m // 2``) so its windows straddle
the previous block's window borders. The roll brings tokens from opposite edges of the grid into
the same window; a mask keeps them apart, so no token attends across the wrap-around boundary.
A grid the window does not divide is padded at the bottom and right with slots that are masked
out as keys for every real token.

All layouts are computed on an index map (the raster numbers of the tokens), so one gather puts
tokens into windows and one gather puts them back.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..errors import ConfigError

Pair = tuple[int, int]


def fit_window(grid: Pair, window: Pair, shift: Pair = (0, 0)) -> tuple[Pair, Pair]:
    """Swin's rule per axis: where the grid fits in one window, the window shrinks to the grid and
    that axis is not shifted (one window already sees every token). Returns ``(window, shift)``."""
    (gh, gw), (mh, mw), (sh, sw) = grid, window, shift
    return (min(gh, mh), min(gw, mw)), (0 if gh <= mh else sh, 0 if gw <= mw else sw)


def window_partition(x: torch.Tensor, window: Pair) -> torch.Tensor:
    """``(B, H, W, C) -> (B, nW, mh*mw, C)``: windows in raster order, tokens in raster order
    inside each. ``H`` and ``W`` must be multiples of the window (pad first)."""
    b, h, w, c = x.shape
    mh, mw = window
    if h % mh or w % mw:
        raise ConfigError(
            f"a {h}x{w} grid does not split into {mh}x{mw} windows: pad it to "
            f"{-(-h // mh) * mh}x{-(-w // mw) * mw} first"
        )
    x = x.reshape(b, h // mh, mh, w // mw, mw, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // mh) * (w // mw), mh * mw, c)


def window_reverse(windows: torch.Tensor, window: Pair, grid: Pair) -> torch.Tensor:
    """``(B, nW, mh*mw, C) -> (B, H, W, C)``, the inverse of :func:`window_partition`."""
    b, _, _, c = windows.shape
    (mh, mw), (h, w) = window, grid
    x = windows.reshape(b, h // mh, w // mw, mh, mw, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h, w, c)


def padded_grid(grid: Pair, window: Pair) -> Pair:
    """The grid rounded up to whole windows."""
    (gh, gw), (mh, mw) = grid, window
    return -(-gh // mh) * mh, -(-gw // mw) * mw


def window_token_index(grid: Pair, window: Pair, shift: Pair = (0, 0)) -> torch.Tensor:
    """``(nW, M)``: the raster number of the token in each window slot after rolling the grid by
    ``-shift``; padding slots hold ``N`` (one past the last token)."""
    (gh, gw), (ph, pw) = grid, padded_grid(grid, window)
    index = torch.arange(gh * gw).reshape(1, gh, gw, 1)
    index = torch.roll(index, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    index = F.pad(index, (0, 0, 0, pw - gw, 0, ph - gh), value=gh * gw)
    return window_partition(index, window)[0, :, :, 0]


def window_regions(grid: Pair, window: Pair, shift: Pair = (0, 0)) -> torch.Tensor:
    """``(Hp, Wp)`` region labels of the rolled, padded grid: tokens may attend to each other only
    within one region. Along each axis the rolled grid has three segments -- tokens that did not
    wrap (``i < g - s``), tokens that wrapped around (``g - s <= i < g``) and padding (``i >= g``)."""
    segments = []
    for g, p, s in zip(grid, padded_grid(grid, window), shift):
        i = torch.arange(p)
        segments.append((i >= g - s).long() + (i >= g).long())
    return segments[0][:, None] * 3 + segments[1][None, :]


def window_mask(grid: Pair, window: Pair, shift: Pair = (0, 0)) -> torch.Tensor | None:
    """``(nW, M, M)`` bool, ``True`` where the query slot may attend to the key slot (same region);
    ``None`` when every pair may (no shift and no padding). The diagonal is always ``True``, so no
    row is empty."""
    if not any(shift) and padded_grid(grid, window) == tuple(grid):
        return None
    labels = window_partition(window_regions(grid, window, shift)[None, :, :, None], window)[0, :, :, 0]
    return labels[:, :, None] == labels[:, None, :]


def relative_position_index(window: Pair) -> torch.Tensor:
    """``(M, M)`` index into a ``((2mh-1) * (2mw-1), H)`` bias table: the row and column offset of
    key from query, each shifted to start at 0, as one number (Swin's and timm's layout)."""
    mh, mw = window
    coords = torch.stack(torch.meshgrid(torch.arange(mh), torch.arange(mw), indexing="ij")).flatten(1)
    rel = coords[:, :, None] - coords[:, None, :]  # (2, M, M)
    return (rel[0] + mh - 1) * (2 * mw - 1) + (rel[1] + mw - 1)


class WindowLayout(NamedTuple):
    """Where tokens go for one (grid, window, shift): ``index (nW, M)`` (``N`` = padding slot),
    ``inverse (N,)`` (each token's slot in the flattened ``nW * M`` windows) and ``mask``
    ``(nW, M, M)`` bool or ``None``."""

    index: torch.Tensor  # type: ignore[assignment]  # the field shadows tuple.index, which nothing here uses
    inverse: torch.Tensor
    mask: torch.Tensor | None


def window_layout(grid: Pair, window: Pair, shift: Pair = (0, 0), device: torch.device | None = None) -> WindowLayout:
    """The :class:`WindowLayout`, cached per arguments: treat its tensors as read-only. While
    ``torch.compile`` or ``torch.export`` traces, it is built afresh: the tracer's tensors hold no
    values, and a cache that kept them would poison every later eager call."""
    if torch.compiler.is_compiling():
        return _window_layout(grid, window, shift, device)
    return _cached_window_layout(grid, window, shift, device)


def _window_layout(grid: Pair, window: Pair, shift: Pair, device: torch.device | None) -> WindowLayout:
    index = window_token_index(grid, window, shift)
    n, flat = grid[0] * grid[1], index.flatten()
    real = flat < n
    inverse = torch.empty(n, dtype=torch.long)
    inverse[flat[real]] = torch.arange(flat.numel())[real]
    mask = window_mask(grid, window, shift)
    return WindowLayout(index.to(device), inverse.to(device), None if mask is None else mask.to(device))


_cached_window_layout = lru_cache(maxsize=64)(_window_layout)
