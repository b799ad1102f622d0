"""Runs page: the runs found, one run's table, curves and figures."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from ..run_index import overview, rank_table, run_detail, run_table
from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    shelf = ctx.run_shelf

    @api.get("/api/runs")
    def runs(sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = shelf.runs()
        table, broken = overview(found)
        return {
            "roots": [str(r) for r in shelf.roots],
            "runs": [{"name": r.name, "kind": r.kind, "broken": broken.get(r.name)} for r in found.values()],
            "table": rank_table(table, sort, descending),
        }

    @api.get("/api/runs/{name}")
    def run(name: str, sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = shelf.get(name)
        return {**run_detail(found), "table": rank_table(run_table(found), sort, descending)}

    @api.get("/api/runs/{name}/figures/{file}")
    def figure(name: str, file: str) -> FileResponse:
        return FileResponse(shelf.figure(name, file), media_type="image/png")

    return api
