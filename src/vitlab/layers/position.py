"""Position embeddings, chosen by name: ``learned``, ``sincos1d``, ``sincos2d``, ``rowcol``, ``none``.

Each module maps patch tokens ``(B, N, D)`` on a ``(gh, gw)`` grid to tokens with positions added.
Only patch tokens get positions here: a learned position for a class token is a constant
added to that token, so it lives in the token itself (interop folds it in).
Rotary embedding (``rope``) acts on queries and keys instead: :class:`Rotary2d`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..ops.positions import resample_grid, rotary_2d_angles, sincos_1d, sincos_2d

POSITION_KINDS = ("learned", "sincos1d", "sincos2d", "rowcol", "rope", "none")


class LearnedPosition(nn.Module):
    """A trainable table ``weight (1, gh*gw, D)``; resampled bicubically for another grid."""

    def __init__(self, grid: tuple[int, int], dim: int) -> None:
        super().__init__()
        self.grid = (grid[0], grid[1])
        self.weight = nn.Parameter(torch.empty(1, grid[0] * grid[1], dim))
        nn.init.trunc_normal_(self.weight, std=0.02)

    def table(self, grid: tuple[int, int]) -> torch.Tensor:
        """Positions for ``grid``: ``(1, gh*gw, D)``."""
        return resample_grid(self.weight, self.grid, grid)

    def forward(self, x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        return x + self.table(grid)

    def resample_(self, grid: tuple[int, int]) -> None:
        """Replace the table by its bicubic resampling to ``grid`` (for a new image size)."""
        self.weight = nn.Parameter(self.table(grid).detach().clone())
        self.grid = (grid[0], grid[1])


class SinCosPosition(nn.Module):
    """Fixed (not trainable) sinusoidal positions, 1-D over raster index or 2-D over (row, col)."""

    cached: torch.Tensor

    def __init__(self, grid: tuple[int, int], dim: int, two_d: bool = True, temperature: float = 10000.0) -> None:
        super().__init__()
        self.grid, self.dim, self.two_d, self.temperature = (grid[0], grid[1]), dim, two_d, temperature
        self.register_buffer("cached", self.table(grid), persistent=False)

    def table(self, grid: tuple[int, int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Positions for ``grid``: ``(1, gh*gw, D)``."""
        if self.two_d:
            return sincos_2d(grid, self.dim, self.temperature, dtype)[None]
        return sincos_1d(grid[0] * grid[1], self.dim, self.temperature, dtype)[None]

    def forward(self, x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        table = self.cached if tuple(grid) == self.grid else self.table(grid, x.dtype).to(x.device)
        return x + table.to(x.dtype)

    def resample_(self, grid: tuple[int, int]) -> None:
        """Cache the table of ``grid`` (for a new image size)."""
        self.grid = (grid[0], grid[1])
        self.cached = self.table(self.grid, self.cached.dtype).to(self.cached.device)

    def _apply(self, fn, recurse: bool = True) -> SinCosPosition:
        # A cast (``.double()``) would keep the float32 rounding: recompute the table in the new dtype.
        super()._apply(fn, recurse)
        self.resample_(self.grid)
        return self


class RowColumnPosition(nn.Module):
    """Learned row + column positions: ``p(r, c) = row[r] + col[c]`` (``(gh + gw) * D`` parameters)."""

    def __init__(self, grid: tuple[int, int], dim: int) -> None:
        super().__init__()
        self.grid = (grid[0], grid[1])
        self.row = nn.Parameter(torch.empty(grid[0], dim))
        self.col = nn.Parameter(torch.empty(grid[1], dim))
        nn.init.trunc_normal_(self.row, std=0.02)
        nn.init.trunc_normal_(self.col, std=0.02)

    @staticmethod
    def _resize(axis: torch.Tensor, length: int) -> torch.Tensor:
        if axis.shape[0] == length:
            return axis
        return F.interpolate(axis.T[None], size=length, mode="linear", align_corners=False)[0].T

    def table(self, grid: tuple[int, int]) -> torch.Tensor:
        """Positions for ``grid``: ``(1, gh*gw, D)``."""
        row, col = self._resize(self.row, grid[0]), self._resize(self.col, grid[1])
        return (row[:, None, :] + col[None, :, :]).reshape(1, grid[0] * grid[1], -1)

    def forward(self, x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        return x + self.table(grid)


class NoPosition(nn.Module):
    """No absolute positions (rotary models and permutation-equivariance studies)."""

    def __init__(self, grid: tuple[int, int]) -> None:
        super().__init__()
        self.grid = (grid[0], grid[1])

    def forward(self, x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        return x


class Rotary2d(nn.Module):
    """2-D rotary position embedding for queries and keys.

    ``forward(grid)`` gives sine and cosine tables ``(num_prefix + gh*gw, head_dim)``; the prefix
    rows (class and register tokens) are the identity rotation (sin 0, cos 1).
    """

    sin: torch.Tensor
    cos: torch.Tensor

    def __init__(self, grid: tuple[int, int], head_dim: int, num_prefix: int = 0, temperature: float = 10000.0) -> None:
        super().__init__()
        self.grid = (grid[0], grid[1])
        self.head_dim, self.num_prefix, self.temperature = head_dim, num_prefix, temperature
        sin, cos = self.tables(grid)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("cos", cos, persistent=False)

    def tables(self, grid: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        sin, cos = rotary_2d_angles(grid, self.head_dim, self.temperature)
        pad = (0, 0, self.num_prefix, 0)
        return F.pad(sin, pad, value=0.0), F.pad(cos, pad, value=1.0)

    def forward(self, grid: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        if tuple(grid) == self.grid:
            return self.sin, self.cos
        sin, cos = self.tables(grid)
        return sin.to(self.sin.device), cos.to(self.cos.device)


Position = LearnedPosition | SinCosPosition | RowColumnPosition | NoPosition


def build_position(kind: str, grid: tuple[int, int], dim: int) -> Position:
    """The absolute position module for ``kind`` (``rope`` and ``none`` add nothing here)."""
    if kind == "learned":
        return LearnedPosition(grid, dim)
    if kind in ("sincos1d", "sincos2d"):
        return SinCosPosition(grid, dim, two_d=kind == "sincos2d")
    if kind == "rowcol":
        return RowColumnPosition(grid, dim)
    if kind in ("rope", "none"):
        return NoPosition(grid)
    raise ConfigError(f"unknown position embedding {kind!r}; choose one of {', '.join(POSITION_KINDS)}")
