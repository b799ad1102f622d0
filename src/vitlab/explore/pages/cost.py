"""Cost page: every attention kind against resolution, and the texts' token-cost and pair-count tables.

What a token count costs: the Tokens and Cost pages.

- :func:`tokens_view`: an image cut into patches (``patchify``, ``num_tokens``) and what the token
  count costs (the cost model's full attention).
- :func:`cost_view`: every attention kind in :data:`~vitlab.analysis.cost.ATTENTION_COSTS` against
  resolution; :func:`coinciding`: the series a log chart would draw on top of each other.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter

from ...analysis.cost import (
    ATTENTION_COSTS,
    TEXTBOOK_PAIRS,
    Workload,
    attention_cost,
    cost_table,
    flops,
    full_attention,
)
from ...ops.patches import num_tokens, patchify
from ..arrays import encode_array
from ..images import RequestError
from ..ranges import check_range
from ..textbook import textbook_cost_view
from . import Context

COST_METRICS = ("entries", "flops", "memory")
# Image sides for the cost chart, in patches: doubling, with the 1.5x steps between.
COST_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Cost series within this fraction of each other at every size draw as one line on a log chart
# spanning a few decades (5% is about the width of the line there).
COINCIDE = 0.05


def tokens_view(image: torch.Tensor, patch: int) -> dict[str, Any]:
    """``image (1, C, H, W)`` cut into ``patch``-pixel patches (zero-padded bottom and right).

    Returns the grid, the padded size, the token matrix ``(N, P*P*C)``, the token count ``N``,
    full attention's entries ``N^2`` per head and layer, and their ratio to the textbook's
    first row (28x28 at patch 7).
    """
    _, c, h, w = image.shape
    check_range("patch", patch, 1, min(h, w))
    tokens = num_tokens(h, w, patch, pad=True)
    grid = (-(-h // patch), -(-w // patch))
    matrix = patchify(image, patch, pad=True)[0]
    mix = full_attention(tokens, dim=matrix.shape[1], heads=1)
    reference = cost_table(TEXTBOOK_PAIRS[:1])[0]
    return {
        "patch": patch,
        "patch_range": [1, min(h, w)],
        "height": h,
        "width": w,
        "channels": c,
        "grid": list(grid),
        "padded": [grid[0] * patch, grid[1] * patch],
        "tokens": tokens,
        "token_width": matrix.shape[1],
        "matrix": encode_array(matrix),
        "entries": mix.entries,
        "score_flops": mix.score_flops,
        "reference": {
            "image": reference.image,
            "patch": reference.patch,
            "tokens": reference.tokens,
            "entries": reference.entries,
        },
        "ratio": mix.entries / reference.entries,
    }


def cost_view(
    patch: int = 16, dim: int = 768, heads: int = 12, depth: int = 12, max_image: int = 4096
) -> dict[str, Any]:
    """Every attention kind of :data:`ATTENTION_COSTS` at image sides ``patch * COST_STEPS`` up to
    ``max_image``: tokens, entries per head and layer, forward FLOPs and score memory per layer."""
    check_range("patch", patch, 1, 64)
    check_range("max_image", max_image, patch, 16384)
    sides = [patch * step for step in COST_STEPS if patch * step <= max_image]
    try:
        works = [Workload(image=side, patch=patch, dim=dim, heads=heads, depth=depth) for side in sides]
    except ValueError as err:
        raise RequestError(str(err)) from err
    series: dict[str, dict[str, list[float]]] = {}
    for kind in ATTENTION_COSTS:
        mixes = [attention_cost(work, kind) for work in works]
        series[kind] = {
            "entries": [m.entries for m in mixes],
            "memory": [m.memory for m in mixes],
            "flops": [flops(work, kind)["total"] for work in works],
        }
    coincide = {metric: coinciding({kind: series[kind][metric] for kind in series}) for metric in COST_METRICS}
    return {
        "patch": patch,
        "dim": dim,
        "heads": heads,
        "depth": depth,
        "images": sides,
        "tokens": [work.tokens for work in works],
        "kinds": list(ATTENTION_COSTS),
        "metrics": list(COST_METRICS),
        "series": series,
        "coincide": coincide,
        "coincide_tolerance": COINCIDE,
    }


def coinciding(series: dict[str, list[float]], tolerance: float = COINCIDE) -> list[list[str]]:
    """Groups of two or more series whose values lie within ``tolerance`` (relative) of their group's
    first series at every point, in the order given: lines a log chart draws on top of each other."""
    groups: list[list[str]] = []
    for name, values in series.items():
        for group in groups:
            first = series[group[0]]
            if all(abs(a - b) <= tolerance * max(abs(a), abs(b)) for a, b in zip(values, first)):
                group.append(name)
                break
        else:
            groups.append([name])
    return [group for group in groups if len(group) > 1]


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/cost")
    def cost(
        patch: int = 16, dim: int = 768, heads: int = 12, depth: int = 12, max_image: int = 4096
    ) -> dict[str, Any]:
        return cost_view(patch, dim, heads, depth, max_image)

    @api.get("/api/cost/textbook")
    def textbook() -> dict[str, Any]:
        return textbook_cost_view()

    return api
