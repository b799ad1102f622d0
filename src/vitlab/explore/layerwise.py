"""Attention layer by layer: raw, mixed with the residual, and rolled out; and where each head looks.

- :func:`layerwise_view`: for one query, every layer's head-mean attention ``mean_h A_l``, the same with
  the residual added and rows renormalised, ``A_hat_l = rownorm((mean_h A_l + I) / 2)``, and the
  cumulative rollout ``R_l = A_hat_l ... A_hat_1`` (:func:`vitlab.explain.maps.rollout_matrix` on the
  first ``l + 1`` layers), all three on the patch grid and on one colour scale.
- :func:`mean_distances`: each head's mean attention distance (the ViT paper's Figure 7, right): for
  every patch query, the distance in patches to each patch key weighted by its attention (renormalised
  over the patch keys; prefix tokens have no place on the grid), averaged over the queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..explain.maps import num_prefix_tokens, query_rows, rollout_matrix, to_grid
from .arrays import encode_array
from .images import RequestError
from .loaded import Analysis, LoadedModel

Query = str | int


def patch_distances(grid: tuple[int, int]) -> torch.Tensor:
    """Euclidean distance in patches between every two cells of ``grid`` (raster order): ``(N, N)``."""
    index = torch.arange(grid[0] * grid[1])
    cells = torch.stack([index // grid[1], index % grid[1]], -1).double()
    return torch.cdist(cells, cells)


def mean_distances(weights: Sequence[torch.Tensor], prefix: int, grid: tuple[int, int]) -> torch.Tensor:
    """Mean attention distance ``(L, H)`` in patches of layers ``weights`` (each ``(1, H, N, N)``): see the
    module docstring."""
    distance = patch_distances(grid)
    out = []
    for layer in weights:
        patches = layer[0, :, prefix:, prefix:].double()  # (H, n, n): patch queries over patch keys
        patches = patches / patches.sum(-1, keepdim=True).clamp_min(1e-30)
        out.append((patches * distance).sum(-1).mean(-1))
    return torch.stack(out).float()


def _rows(matrix: torch.Tensor, query: Query, prefix: int, grid: tuple[int, int]) -> torch.Tensor:
    try:
        return to_grid(query_rows(matrix, query, prefix), prefix, grid)
    except ValueError as err:
        raise RequestError(str(err)) from err


def layerwise_view(entry: LoadedModel, analysis: Analysis, query: Query) -> dict[str, Any]:
    """Raw, mixed and rolled-out attention of ``query`` per layer ``(L, gh, gw)`` each, their common maximum,
    and the weight each kind leaves on the prefix tokens (which the patch grid cannot show)."""
    if not analysis.weights:
        raise RequestError(f"{entry.name} has no self-attention layers: nothing to roll out")
    prefix, grid = num_prefix_tokens(entry.model), getattr(entry.config, "grid", None)
    if grid is None:
        raise RequestError(f"{entry.name} has no patch grid to lay its attention on")
    raw, mixed, rolled = [], [], []
    for layer in range(len(analysis.weights)):
        mean = analysis.weights[layer].mean(1)  # (1, N, N)
        eye = torch.eye(mean.shape[-1], dtype=mean.dtype)
        hat = (mean + eye) / 2
        raw.append(_rows(mean, query, prefix, grid)[0])
        mixed.append(_rows(hat / hat.sum(-1, keepdim=True), query, prefix, grid)[0])
        rolled.append(_rows(rollout_matrix(analysis.weights[: layer + 1]), query, prefix, grid)[0])
    kinds = {"raw": torch.stack(raw), "mixed": torch.stack(mixed), "rollout": torch.stack(rolled)}
    return {
        "model": entry.index,
        "query": query,
        "grid": list(grid),
        "prefix": prefix,
        "layers": len(raw),
        "kinds": {name: encode_array(values) for name, values in kinds.items()},
        "max": max(float(values.max()) for values in kinds.values()),
        "on_prefix": {name: (1 - values.flatten(1).sum(-1)).tolist() for name, values in kinds.items()},
    }
