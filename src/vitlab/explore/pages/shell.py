"""The page itself and what every page shares: the facts the front end starts from, sample images,
uploads and one image by reference.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ... import __version__
from ..arrays import encode_array
from ..images import RequestError
from . import Context
from .mechanics import POSITION_KINDS

STATIC = files("vitlab.explore") / "static"


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    config, book = ctx.config, ctx.book

    @api.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @api.get("/api/info")
    def info() -> dict[str, Any]:
        return {
            "version": __version__,
            "upload_limit": config.upload_limit,
            "max_side": config.max_side,
            "max_pixels": config.max_pixels,
            "samples": book.sources(),
            "models": [m.describe() for m in ctx.shelf.models],
            "runs": [str(r) for r in ctx.run_shelf.roots],
            "position_kinds": list(POSITION_KINDS),
            "training": ctx.trainer.limits(),
        }

    @api.get("/api/samples/{source}")
    def samples(source: str, start: int = 0, count: int = Query(24, ge=1, le=256)) -> dict[str, Any]:
        page = book.samples(source, start, count)
        return {**page, "images": encode_array(page["images"])}

    @api.post("/api/uploads")
    async def upload(request: Request) -> dict[str, Any]:
        form = await request.form(max_files=1, max_fields=1)  # the guard has capped the body's bytes
        part = form.get("file")
        if not isinstance(part, UploadFile):
            raise RequestError("send the image as multipart form field 'file'")
        data = await part.read(config.upload_limit + 1)
        picture = await run_in_threadpool(book.add_upload, data)
        return {**picture.describe(), "filename": part.filename, "image": encode_array(picture.image[0])}

    @api.get("/api/image")
    def image(ref: str) -> dict[str, Any]:
        picture = book.get(ref)
        return {**picture.describe(), "image": encode_array(picture.image[0])}

    return api
