"""Position tables: sinusoidal (1-D, 2-D), 2-D rotary angles, and resampling of a learned grid.

Every table is a plain tensor; the modules in :mod:`vitlab.layers.position` decide whether it is
a trainable parameter or a fixed buffer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import CheckpointError, ConfigError


def sincos_1d(
    positions: torch.Tensor | int, dim: int, temperature: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Transformer sinusoids: ``(N, dim)`` with ``sin`` in the first half, ``cos`` in the second.

    Column ``i`` of each half has frequency ``temperature ** (-i / (dim/2))``. Computed in float64,
    returned as ``dtype``.
    """
    if dim % 2:
        raise ConfigError(f"a sinusoidal table needs an even width, got dim={dim}")
    if isinstance(positions, int):
        positions = torch.arange(positions, dtype=torch.float64)
    omega = temperature ** (-torch.arange(dim // 2, dtype=torch.float64) / (dim // 2))
    angles = positions.to(torch.float64)[:, None] * omega[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1).to(dtype)


def sincos_2d(
    grid: tuple[int, int], dim: int, temperature: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """2-D sinusoids for a ``(gh, gw)`` grid in raster order: ``(gh*gw, dim)``.

    The first half of the width encodes the row, the second half the column.
    """
    if dim % 4:
        raise ConfigError(f"a 2-D sinusoidal table needs a width divisible by 4, got dim={dim}")
    gh, gw = grid
    rows = sincos_1d(gh, dim // 2, temperature, dtype)  # (gh, D/2)
    cols = sincos_1d(gw, dim // 2, temperature, dtype)  # (gw, D/2)
    table = torch.cat([rows[:, None, :].expand(gh, gw, -1), cols[None, :, :].expand(gh, gw, -1)], dim=-1)
    return table.reshape(gh * gw, dim)


def rotary_2d_angles(
    grid: tuple[int, int], head_dim: int, temperature: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sine and cosine tables ``(gh*gw, head_dim)`` for 2-D rotary position embedding.

    The first half of each head's width rotates with the row index, the second with the column
    index; inside each half, dims ``j`` and ``j + half/2`` form a rotated pair.
    """
    if head_dim % 4:
        raise ConfigError(f"2-D rotary embedding needs a head width divisible by 4, got {head_dim}")
    gh, gw = grid
    quarter = head_dim // 4
    omega = temperature ** (-torch.arange(quarter, dtype=torch.float64) / quarter)
    rows = torch.arange(gh, dtype=torch.float64)[:, None].expand(gh, gw).reshape(-1)
    cols = torch.arange(gw, dtype=torch.float64)[None, :].expand(gh, gw).reshape(-1)
    row_angles = rows[:, None] * omega[None, :]  # (N, D/4)
    col_angles = cols[:, None] * omega[None, :]
    angles = torch.cat([row_angles, row_angles, col_angles, col_angles], dim=-1)  # (N, D)
    return angles.sin().float(), angles.cos().float()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Within each half of the last axis, map ``(a, b) -> (-b, a)``."""
    half = x.shape[-1] // 2
    quarter = half // 2
    parts = []
    for block in (x[..., :half], x[..., half:]):
        parts += [-block[..., quarter:], block[..., :quarter]]
    return torch.cat(parts, dim=-1)


def apply_rotary(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """Rotate queries or keys ``(B, H, N, d)`` by the angles of ``sin``, ``cos`` ``(N, d)``.

    Rows with ``sin = 0, cos = 1`` (prefix tokens such as a class token) are left unchanged.
    """
    return x * cos.to(x.dtype) + _rotate_half(x) * sin.to(x.dtype)


def resample_grid(
    table: torch.Tensor,
    old_grid: tuple[int, int],
    new_grid: tuple[int, int],
    mode: str = "bicubic",
    antialias: bool = True,
) -> torch.Tensor:
    """Resample a position table laid out on a grid: ``(1, gh*gw, D) -> (1, gh'*gw', D)``.

    Bicubic with anti-aliasing, as timm's ``resample_abs_pos_embed`` does, so a checkpoint
    trained at one image size runs at another.
    """
    gh, gw = old_grid
    if table.shape[-2] != gh * gw:
        raise CheckpointError(f"position table has {table.shape[-2]} rows, not {gh}x{gw} = {gh * gw}")
    if tuple(new_grid) == (gh, gw):
        return table
    dim = table.shape[-1]
    grid = table.reshape(1, gh, gw, dim).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=tuple(new_grid), mode=mode, antialias=antialias, align_corners=False)
    return grid.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], dim).to(table.dtype)
