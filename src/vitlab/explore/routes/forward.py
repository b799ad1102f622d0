"""Forward page: one query token's way through the model, every number read from its modules, with
a head or a layer's attention knocked out on request."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..arrays import encode_array
from ..attention_views import truth
from ..forward import forward_view, parse_probe
from ..input_views import prepared
from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/forward")
    def forward(
        model: int,
        ref: str,
        query: str = "0",
        layer: int = 0,
        head: int = 0,
        temperature: float = 1.0,
        knockout: str = "none",
        invert: bool = False,
        image: bool = True,
    ) -> dict[str, Any]:
        """The probe's trace; ``image=false`` leaves out the image the model read (the page has it)."""
        entry, original = ctx.shelf.get(model), ctx.book.get(ref)
        probe = parse_probe(entry, query, layer, head, temperature, knockout)
        with ctx.shelf.lock:
            analysis = ctx.shelf.analyse(entry, prepared(original, entry, invert))
            view = forward_view(entry, analysis, probe)
            return {
                "ref": ref,
                "image": encode_array(analysis.image[0]) if image else None,
                **view,
                "truth": truth(entry, original, view["prediction"]["class"]),
                "original_truth": truth(entry, original, view["original"]["class"]),
            }

    return api
