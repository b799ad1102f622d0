"""Mechanics page: softmax with temperature, token mixing, position encodings (2-D and 1-D), synthetic
local attention, and why scores are divided by sqrt(d_k)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..mechanics_views import local_attention_view, mixing_view, position_dots_view, position_view, softmax_view
from ..textbook import qk_scale_view
from . import Context


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
