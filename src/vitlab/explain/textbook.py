"""The textbook's attention demonstrations, computed (and drawn by :func:`textbook_figures`).

- Position similarity: the cosine of every pair of position vectors. A learned table shows what the
  model made of "where"; a 2-D sinusoidal one is similar along rows and columns by construction.
- Attention matrices for three kinds of tokens, with identity projections (``Q = K = Z``):
  random tokens (no structure: near-uniform off the diagonal), locally correlated tokens (a smooth
  random walk: a band around the diagonal) and a repeated pattern (period ``p``: stripes every ``p``).
- Softmax temperature: one query's weights ``softmax(s / T)`` sharpen as ``T`` falls and flatten
  towards ``1/N`` as it rises; the ``1/sqrt(d)`` scaling is one such temperature.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..ops.positions import sincos_1d, sincos_2d

TOKEN_KINDS = ("random", "local", "repeated")


def model_positions(model: nn.Module) -> torch.Tensor:
    """The absolute position table ``(gh*gw, D)`` a ViT adds to its patch tokens."""
    table = getattr(getattr(model, "pos_embed", None), "table", None)
    if table is None:
        raise ConfigError(
            f"{type(model).__name__} has no absolute position table (rotary, none, or not a "
            f"ViT): position similarity needs pos_embed learned, sincos1d/2d or rowcol"
        )
    config: Any = model.config
    return table(config.grid)[0].detach()


def make_tokens(kind: str, n: int = 16, dim: int = 16, period: int = 4, seed: int = 0) -> torch.Tensor:
    """``(N, D)`` tokens of one of :data:`TOKEN_KINDS`, each of unit variance per coordinate."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, dim, generator=g)
    if kind == "random":
        return noise
    if kind == "local":
        walk = noise.cumsum(0)
        return (walk - walk.mean(0)) / walk.std(0)
    if kind == "repeated":
        return noise[:period].repeat(-(-n // period), 1)[:n]
    raise ConfigError(f"token kind must be one of {TOKEN_KINDS}, got {kind!r}")


def self_attention(tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(Z Z^T / (sqrt(D) T))`` for tokens ``(N, D)``: ``(N, N)``, rows sum to 1."""
    if temperature <= 0:
        raise ConfigError(f"temperature must be > 0, got {temperature}")
    return (tokens @ tokens.T / (math.sqrt(tokens.shape[-1]) * temperature)).softmax(-1)


def temperature_sweep(scores: torch.Tensor, temperatures: Sequence[float]) -> torch.Tensor:
    """One query's weights at each temperature: scores ``(N,)`` -> ``(T, N)``."""
    if any(t <= 0 for t in temperatures):
        raise ConfigError(f"temperatures must be > 0, got {list(temperatures)}")
    return torch.stack([(scores / t).softmax(-1) for t in temperatures])


def textbook_figures(out_dir: str | Path, model: nn.Module | None = None, seed: int = 0) -> list[Path]:
    """Write ``positions.png``, ``token_attention.png`` and ``temperature.png`` into ``out_dir``.

    The position panel compares 1-D and 2-D sinusoidal tables with ``model``'s own table when it
    is given and has one (its grid and width; else a 7 x 7 grid of width 64).
    """
    from .figures import plot_matrices, plot_position_similarity, plot_temperature_sweep

    out = Path(out_dir)
    config: Any = getattr(model, "config", None)
    grid, dim = (config.grid, config.embed_dim) if hasattr(config, "grid") else ((7, 7), 64)
    tables = {"sinusoidal 1-D": sincos_1d(grid[0] * grid[1], dim), "sinusoidal 2-D": sincos_2d(grid, dim)}
    if model is not None and getattr(config, "pos_embed", None) in ("learned", "rowcol"):
        tables = {f"model ({config.pos_embed})": model_positions(model), **tables}
    tokens = {kind: make_tokens(kind, seed=seed) for kind in TOKEN_KINDS}
    query = tokens["random"]
    scores = query @ query[0] / math.sqrt(query.shape[-1])
    temperatures = (0.25, 0.5, 1.0, 2.0, 4.0)
    return [
        plot_position_similarity(tables, grid, out / "positions.png"),
        plot_matrices(
            {k: self_attention(z) for k, z in tokens.items()},
            out / "token_attention.png",
            title="self-attention with Q = K = tokens",
        ),
        plot_temperature_sweep(temperature_sweep(scores, temperatures), temperatures, out / "temperature.png"),
    ]
