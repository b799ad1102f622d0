"""Positions and prefix tokens in NumPy: sinusoidal tables, row + column embeddings, class token.

Tables are ``(N, D)`` in raster order and are added to patch tokens ``(B, N, D)`` only; prefix
tokens (class token, registers) carry no position.
"""

from __future__ import annotations

import numpy as np


def sincos_1d(length: int, dim: int, temperature: float = 10000.0) -> np.ndarray:
    """``(length, dim)``: ``sin(p * w_i)`` in the first half, ``cos(p * w_i)`` in the second,
    with ``w_i = temperature ** (-i / (dim/2))``."""
    if dim % 2:
        raise ValueError(f"a sinusoidal table needs an even width, got dim={dim}")
    omega = temperature ** (-np.arange(dim // 2) / (dim // 2))
    angles = np.arange(length)[:, None] * omega[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def sincos_2d(grid_hw: tuple[int, int], dim: int, temperature: float = 10000.0) -> np.ndarray:
    """``(gh*gw, dim)``: the row's 1-D table in the first half of the width, the column's in the second."""
    if dim % 4:
        raise ValueError(f"a 2-D sinusoidal table needs a width divisible by 4, got dim={dim}")
    gh, gw = grid_hw
    rows, cols = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
    row_table = sincos_1d(gh, dim // 2, temperature)[rows.ravel()]
    col_table = sincos_1d(gw, dim // 2, temperature)[cols.ravel()]
    return np.concatenate([row_table, col_table], axis=1)


def add_2d_position(
    tokens: np.ndarray, grid_hw: tuple[int, int], row_embed: np.ndarray, col_embed: np.ndarray
) -> np.ndarray:
    """Add learned row + column embeddings ``(>=gh, D)``, ``(>=gw, D)`` to patch tokens ``(B, gh*gw, D)``."""
    gh, gw = grid_hw
    pos = row_embed[:gh, None, :] + col_embed[None, :gw, :]
    return tokens + pos.reshape(gh * gw, -1)[None, :, :]


def prepend_tokens(tokens: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """Put the same ``R`` prefix tokens ``(R, D)`` before every sequence: ``(B, N, D) -> (B, R + N, D)``."""
    batch = tokens.shape[0]
    prefix = np.broadcast_to(prefix, (batch,) + prefix.shape)
    return np.concatenate([prefix, tokens], axis=1)
