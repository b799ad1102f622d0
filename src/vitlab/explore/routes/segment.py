"""Segment page: the promptable runs, one run's model and held-out images, one prompt's masks."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    shelf = ctx.prompt_shelf

    @api.get("/api/prompt/runs")
    def prompt_runs() -> dict[str, Any]:
        return shelf.listing()

    @api.get("/api/prompt/runs/{name}")
    def prompt_run(name: str) -> dict[str, Any]:
        return shelf.detail(name)

    @api.get("/api/prompt/runs/{name}/segment")
    def prompt_segment(
        name: str, ref: str, points: str | None = None, labels: str | None = None, box: str | None = None
    ) -> dict[str, Any]:
        return shelf.segment(name, ref, points, labels, box)

    return api
