"""Attention page: a checkpoint's attention from a query per layer and head, what it sees, its
explanation maps, and its attention layer by layer (raw, mixed, rolled out)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..attention_views import attention_view, maps_view, parse_query, truth
from ..input_views import input_view, prepared
from ..layerwise import layerwise_view
from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    book, shelf = ctx.book, ctx.shelf

    @api.get("/api/attention")
    def attention(
        model: int,
        ref: str,
        query: str = "mean",
        temperature: float = 1.0,
        invert: bool = False,
        keep_aspect: bool = False,
    ) -> dict[str, Any]:
        entry, original = shelf.get(model), book.get(ref)
        reference = shelf.reference(entry)
        with shelf.lock:
            analysis = shelf.analyse(entry, prepared(original, entry, invert, keep_aspect))
            view = attention_view(entry, analysis, parse_query(query), temperature)
            return {
                "ref": ref,
                **view,
                "truth": truth(entry, original, view["prediction"]["class"]),
                "seen": input_view(entry, analysis, original.image, reference, invert, keep_aspect),
            }

    @api.get("/api/maps")
    def maps(
        model: int, ref: str, query: str = "mean", invert: bool = False, keep_aspect: bool = False
    ) -> dict[str, Any]:
        entry = shelf.get(model)
        picture = prepared(book.get(ref), entry, invert, keep_aspect)
        with shelf.lock:
            return {"ref": ref, **maps_view(entry, shelf.analyse(entry, picture), parse_query(query))}

    @api.get("/api/layers")
    def layers(
        model: int, ref: str, query: str = "mean", invert: bool = False, keep_aspect: bool = False
    ) -> dict[str, Any]:
        entry = shelf.get(model)
        picture = prepared(book.get(ref), entry, invert, keep_aspect)
        with shelf.lock:
            return {"ref": ref, **layerwise_view(entry, shelf.analyse(entry, picture), parse_query(query))}

    return api
