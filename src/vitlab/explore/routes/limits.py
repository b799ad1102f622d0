"""Limits page: what attention maps cannot tell. The model's most confident mistakes, the maps of a
model whose weights are noise beside the trained model's, and the deletion curve of each map."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..attention_views import parse_query, prediction, truth
from ..limits import deletion_view, encoded, map_set, randomised_view, verdicts
from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    book, shelf = ctx.book, ctx.shelf

    def trained_maps(entry: Any, analysis: Any, query: Any) -> Any:
        """The trained model's maps of the analysed image (each cached with the analysis)."""
        target = analysis.logits.argmax(-1)
        return map_set(
            entry.model, analysis, analysis.weights, target, query, entry.map_patch, entry.grid, analysis.maps
        )

    @api.get("/api/limits/verdicts")
    def judged(model: int, source: str) -> dict[str, Any]:
        entry, data = shelf.get(model), book.split(source)
        return shelf.memo(("verdicts", entry.index, source), lambda: verdicts(entry, data, source))

    @api.get("/api/limits/maps")
    def maps(model: int, ref: str, query: str = "mean") -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            predicted = prediction(entry, analysis.logits)
            return {
                "ref": ref,
                "model": entry.index,
                "grid": list(entry.grid),
                "target": predicted["class"],
                "maps": encoded(trained_maps(entry, analysis, parsed)),
                "prediction": predicted,
                "truth": truth(entry, picture, predicted["class"]),
            }

    @api.get("/api/limits/randomised")
    def randomised(model: int, ref: str, query: str = "mean") -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            view = randomised_view(
                entry, analysis, shelf.randomised(entry), parsed, trained_maps(entry, analysis, parsed)
            )
            predicted = prediction(entry, analysis.logits)
            return {"ref": ref, **view, "prediction": predicted, "truth": truth(entry, picture, predicted["class"])}

    @api.get("/api/limits/deletion")
    def deletion(model: int, ref: str, query: str = "mean") -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            return {"ref": ref, **deletion_view(entry, analysis, trained_maps(entry, analysis, parsed))}

    return api
