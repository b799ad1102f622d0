"""Mechanics page: softmax with temperature, token mixing, position encodings (2-D and 1-D), synthetic
local attention, and why scores are divided by sqrt(d_k).

The Mechanics page: the textbook's mechanisms on synthetic data (and a checkpoint's own positions).

- :func:`softmax_view`: one query's scores and weights at a temperature.
- :func:`mixing_view`: token mixing by a Gaussian kernel (:func:`gaussian_attention`, :func:`mixing_matrix`).
- :func:`position_view`, :func:`position_dots_view`: how alike position vectors are (sinusoidal, learned,
  random), as cosine similarities on a grid and as dot products along a line.
- :func:`local_attention_view`: local attention on a patch grid and how far it reaches.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from fastapi import APIRouter

from ...explain.maps import head_statistics
from ...layers.position import LearnedPosition, RowColumnPosition, SinCosPosition
from ...ops.attention import attention_weights
from ...ops.positions import sincos_1d, sincos_2d
from ..arrays import encode_array
from ..images import RequestError
from ..loaded import LoadedModel
from ..ranges import check_range
from ..textbook import qk_scale_view
from . import Context
from .attention import patch_grid

POSITION_KINDS = ("sincos", "learned", "random")


def softmax_view(temperature: float = 1.0, keys: int = 16, dim: int = 16, seed: int = 0) -> dict[str, Any]:
    """One query against a row of ``keys`` random keys: scores ``q.k / sqrt(d)`` and the weights
    ``softmax(scores / T)`` by :func:`vitlab.ops.attention.attention_weights`, with their statistics."""
    check_range("temperature", temperature, 0.01, 100.0)
    check_range("keys", keys, 2, 256)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, dim, generator=g)
    k = torch.randn(1, 1, keys, dim, generator=g)
    scores = (q @ k.transpose(-2, -1))[0, 0, 0] / math.sqrt(dim)
    weights = attention_weights(q, k, scale=1.0 / (temperature * math.sqrt(dim)))[0, 0, 0]
    return {
        "temperature": temperature,
        "keys": keys,
        "uniform": 1.0 / keys,
        "scores": encode_array(scores),
        "weights": encode_array(weights),
        "stats": {k: float(v) for k, v in head_statistics(weights).items()},
    }


def gaussian_attention(queries: torch.Tensor, keys: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """Row-stochastic ``(Q, K)``: ``A_ij = softmax_j(-|q_i - k_j|^2 / (2 h^2))`` for positions ``queries (Q, d)``
    and ``keys (K, d)``, attention as a Gaussian kernel smoother of bandwidth ``h``."""
    distance2 = ((queries[:, None, :] - keys[None, :, :]) ** 2).sum(-1)
    return torch.softmax(-distance2 / (2 * bandwidth**2), dim=-1)


def mixing_matrix(tokens: int, bandwidth: float) -> torch.Tensor:
    """:func:`gaussian_attention` ``(N, N)`` over token positions ``0 .. N-1`` (float64)."""
    position = torch.arange(tokens, dtype=torch.float64)[:, None]
    return gaussian_attention(position, position, bandwidth)


def mixing_view(bandwidth: float = 1.5, tokens: int = 24, seed: int = 0) -> dict[str, Any]:
    """Token mixing ``y = A v`` of a noisy step signal ``v`` by :func:`mixing_matrix`; ``reach`` is
    ``exp(entropy)`` of each row, the number of tokens it effectively averages, and ``mean_reach``
    its mean over rows."""
    check_range("bandwidth", bandwidth, 0.05, 1000.0)
    check_range("tokens", tokens, 2, 128)
    mixing = mixing_matrix(tokens, bandwidth)
    g = torch.Generator().manual_seed(seed)
    step = (torch.arange(tokens) >= tokens // 2).double()
    values = step + 0.3 * torch.randn(tokens, generator=g, dtype=torch.float64)
    reach = head_statistics(mixing)["entropy"].exp()
    return {
        "bandwidth": bandwidth,
        "tokens": tokens,
        "matrix": encode_array(mixing),
        "values": encode_array(values),
        "matrix_max": float(mixing.max()),
        "mixed": encode_array(mixing @ values),
        "row_sum_range": [float(mixing.sum(-1).min()), float(mixing.sum(-1).max())],
        "reach": encode_array(reach),
        "mean_reach": float(reach.mean()),
    }


def position_table(
    kind: str, grid: tuple[int, int], dim: int, base: float = 10000.0, seed: int = 0, entry: LoadedModel | None = None
) -> torch.Tensor:
    """Position vectors ``(gh*gw, D)``: 2-D sinusoids of frequency ``base``, the checkpoint's own
    table (``learned``; any absolute table the model has, at its grid), or seeded ``random`` ones."""
    if kind == "sincos":
        try:
            return sincos_2d(grid, dim, temperature=base)
        except ValueError as err:
            raise RequestError(str(err)) from err
    if kind == "random":
        return torch.randn(grid[0] * grid[1], dim, generator=torch.Generator().manual_seed(seed))
    if kind != "learned":
        raise RequestError(f"position kind must be one of {POSITION_KINDS}, got {kind!r}")
    if entry is None:
        raise RequestError(
            "learned positions come from a checkpoint: choose a model (start `vitlab explore --checkpoint RUN`)"
        )
    module = getattr(entry.model, "pos_embed", None)
    if not isinstance(module, (LearnedPosition, RowColumnPosition, SinCosPosition)):
        raise RequestError(
            f"{entry.name} adds no absolute position table (pos_embed="
            f"{getattr(entry.config, 'pos_embed', None)!r}): choose sincos or random"
        )
    with torch.no_grad():
        return module.table(patch_grid(entry))[0].detach().float()


def position_view(
    kind: str,
    grid: tuple[int, int] = (8, 8),
    dim: int = 64,
    base: float = 10000.0,
    seed: int = 0,
    reference: int = 0,
    entry: LoadedModel | None = None,
) -> dict[str, Any]:
    """Cosine similarity ``(N, N)`` between the position vectors of :func:`position_table` and its
    range, the reference patch's row on the grid, and the mean similarity of 4-neighbours and of
    all pairs of distinct patches."""
    if kind != "learned":
        check_range("grid side", min(grid), 1, 32)
        check_range("grid side", max(grid), 1, 32)
        check_range("dim", dim, 4, 1024)
        check_range("base", base, 1.0, 1e8)
    table = position_table(kind, grid, dim, base, seed, entry)
    if kind == "learned" and entry is not None:  # position_table refused a missing entry
        grid = patch_grid(entry)
    n = table.shape[0]
    check_range("reference", reference, 0, n - 1)
    unit = F.normalize(table.double(), dim=-1)
    similarity = unit @ unit.T
    rows, cols = torch.div(torch.arange(n), grid[1], rounding_mode="floor"), torch.arange(n) % grid[1]
    adjacent = (rows[:, None] - rows[None]).abs() + (cols[:, None] - cols[None]).abs() == 1
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    return {
        "kind": kind,
        "grid": list(grid),
        "dim": table.shape[1],
        "base": base,
        "reference": reference,
        "similarity": encode_array(similarity),
        "range": [float(similarity.min()), float(similarity.max())],
        "reference_map": encode_array(similarity[reference].reshape(grid)),
        "adjacent": float(similarity[adjacent].mean()) if adjacent.any() else None,
        "all_pairs": float(similarity[off_diagonal].mean()) if n > 1 else None,
    }


def sinusoid_positions(positions: int, dim: int, scale: float = 1.0) -> torch.Tensor:
    """1-D transformer sinusoids ``(N, D)`` of positions ``0 .. N-1`` with every frequency times ``scale``:
    :func:`~vitlab.ops.positions.sincos_1d` at positions ``scale * i`` (float64)."""
    return sincos_1d(torch.arange(positions, dtype=torch.float64) * scale, dim, dtype=torch.float64)


def random_positions(positions: int, dim: int, seed: int = 0) -> torch.Tensor:
    """Seeded Gaussian position vectors ``(N, D)`` of variance 1/2 per entry, so their squared norm is
    ``D / 2`` on average, a sinusoid's exactly: a learned table as it starts (float64)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(positions, dim, generator=g, dtype=torch.float64) * math.sqrt(0.5)


def _dot_facts(dots: torch.Tensor, reference: int) -> dict[str, Any]:
    """Dot products ``(N, N)``, the reference's row, and the mean over the diagonal (squared norms),
    over neighbours ``|i - j| = 1`` and over all pairs ``i != j``."""
    n = dots.shape[0]
    offset = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return {
        "dots": encode_array(dots),
        "row": encode_array(dots[reference]),
        "self": float(dots.diagonal().mean()),
        "neighbours": float(dots[offset.abs() == 1].mean()) if n > 1 else None,
        "all_pairs": float(dots[offset != 0].mean()) if n > 1 else None,
    }


def position_dots_view(
    positions: int = 32, dim: int = 64, scale: float = 1.0, seed: int = 0, reference: int = 0
) -> dict[str, Any]:
    """Pairwise dot products ``p_i . p_j`` ``(N, N)`` of 1-D sinusoidal positions at frequency ``scale``
    (:func:`sinusoid_positions`) beside random ones (:func:`random_positions`), with :func:`_dot_facts`
    of each and the largest magnitude of either, for one symmetric colour scale."""
    check_range("positions", positions, 2, 256)
    check_range("dim", dim, 2, 1024)
    check_range("frequency scale", scale, 0.01, 100.0)
    check_range("reference", reference, 0, positions - 1)
    if dim % 2:
        raise RequestError(f"a sinusoidal table needs an even width, got dim={dim}")
    tables = {"sincos": sinusoid_positions(positions, dim, scale), "random": random_positions(positions, dim, seed)}
    dots = {kind: table @ table.T for kind, table in tables.items()}
    return {
        "positions": positions,
        "dim": dim,
        "scale": scale,
        "reference": reference,
        "kinds": {kind: _dot_facts(value, reference) for kind, value in dots.items()},
        "magnitude": max(float(value.abs().max()) for value in dots.values()),
    }


def grid_coordinates(grid: int) -> torch.Tensor:
    """``(row, column)`` of every cell of a ``grid x grid`` raster ``(grid^2, 2)`` (float64)."""
    index = torch.arange(grid * grid)
    return torch.stack([index // grid, index % grid], -1).double()


def local_attention_view(grid: int = 14, sigma: float = 2.0, query: int | None = None) -> dict[str, Any]:
    """Synthetic local attention of patch ``query`` (default: the centre) over a ``grid x grid`` raster:
    :func:`gaussian_attention` of the grid distance with bandwidth ``sigma``, the weights ``(grid, grid)``
    with the weight on the query, :func:`~vitlab.explain.maps.head_statistics`, ``reach`` = exp(entropy),
    the patches it effectively averages, and ``rms_distance``, the weighted root-mean-square distance."""
    check_range("grid", grid, 2, 64)
    check_range("sigma", sigma, 0.05, 1000.0)
    query = (grid // 2) * grid + grid // 2 if query is None else query
    check_range("query", query, 0, grid * grid - 1)
    cells = grid_coordinates(grid)
    weights = gaussian_attention(cells[query : query + 1], cells, sigma)[0]
    stats = head_statistics(weights)
    distance2 = ((cells - cells[query]) ** 2).sum(-1)
    return {
        "grid": grid,
        "sigma": sigma,
        "query": query,
        "weights": encode_array(weights.reshape(grid, grid)),
        "max": float(stats["max"]),
        "at_query": float(weights[query]),
        "sum": float(weights.sum()),
        "reach": float(stats["entropy"].exp()),
        "rms_distance": float((weights * distance2).sum().sqrt()),
        "uniform": 1.0 / (grid * grid),
    }


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/mechanics/softmax")
    def softmax(temperature: float = 1.0, keys: int = 16, seed: int = 0) -> dict[str, Any]:
        return softmax_view(temperature, keys, seed=seed)

    @api.get("/api/mechanics/mixing")
    def mixing(bandwidth: float = 1.5, tokens: int = 24, seed: int = 0) -> dict[str, Any]:
        return mixing_view(bandwidth, tokens, seed)

    @api.get("/api/mechanics/positions")
    def positions(
        kind: str = "sincos",
        grid: int = 8,
        dim: int = 64,
        base: float = 10000.0,
        seed: int = 0,
        reference: int = 0,
        model: int | None = None,
    ) -> dict[str, Any]:
        entry = ctx.shelf.get(model) if model is not None else None
        return position_view(kind, (grid, grid), dim, base, seed, reference, entry)

    @api.get("/api/mechanics/position-dots")
    def position_dots(
        positions: int = 32, dim: int = 64, scale: float = 1.0, seed: int = 0, reference: int = 0
    ) -> dict[str, Any]:
        return position_dots_view(positions, dim, scale, seed, reference)

    @api.get("/api/mechanics/local")
    def local(grid: int = 14, sigma: float = 2.0, query: int | None = None) -> dict[str, Any]:
        return local_attention_view(grid, sigma, query)

    @api.get("/api/mechanics/qk-scale")
    def qk_scale(keys: int = 64) -> dict[str, Any]:
        return qk_scale_view(keys)

    return api
