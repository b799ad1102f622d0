"""Tokens page: an image cut into patches, as it is or as a model reads it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..cost_views import tokens_view
from ..images import RequestError, model_image
from . import Context


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/tokens")
    def tokens(ref: str, patch: int | None = None, model: int | None = None) -> dict[str, Any]:
        """The image's tokens at ``patch``; with ``model``, the image the model reads (its channels and
        size) cut at the model's patch size."""
        picture = ctx.book.get(ref)
        if model is None:
            if patch is None:
                raise RequestError("give a patch size (patch=P) or a model whose reading to show (model=INDEX)")
            return {**picture.describe(), "read_by": None, **tokens_view(picture.image, patch)}
        entry = ctx.shelf.get(model)
        if entry.patch_size is None:
            raise RequestError(f"{entry.name} reads no patches (it is a convolutional network): choose a ViT")
        image = model_image(picture, entry.preprocess)
        read_by = {
            "model": entry.index,
            "name": entry.name,
            "size": list(entry.image_size),
            "channels": entry.channels,
            "patch": entry.patch_size,
            "original": [picture.image.shape[-2], picture.image.shape[-1], picture.image.shape[1]],
        }
        return {**picture.describe(), "read_by": read_by, **tokens_view(image, entry.patch_size)}

    return api
