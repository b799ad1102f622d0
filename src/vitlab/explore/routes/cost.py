"""Cost page: every attention kind against resolution, and the texts' token-cost and pair-count tables."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..cost_views import cost_view
from ..textbook import textbook_cost_view
from . import Context


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
