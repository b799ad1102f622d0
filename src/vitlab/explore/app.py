"""The explorer's web app: JSON endpoints backed by vitlab, and the static front end.

``create_app(ExploreConfig(...))`` returns a FastAPI application; ``vitlab explore`` serves it
with uvicorn on 127.0.0.1. Every number a page shows comes from an endpoint here; the front end
(``static/``: HTML, CSS and JavaScript modules, no third-party code, nothing fetched from
elsewhere) only draws. Responses carry a Content-Security-Policy that allows this origin alone.

Endpoints (GET unless noted; errors answer ``{"error": message}`` with a 4xx status)::

    /api/info                      version, limits, sample sources, models, run roots
    /api/samples/{source}          sample images (start, count) with labels
    /api/uploads          POST     a PNG / JPEG file (multipart field "file") -> its image reference
    /api/image                     one image (ref)
    /api/tokens                    patches, token matrix, token count and cost (ref, patch)
    /api/attention                 per layer and head attention from a query (model, ref, query, temperature)
    /api/maps                      rollout, gradient and occlusion maps (model, ref, query)
    /api/mechanics/softmax         softmax with temperature over a row of keys
    /api/mechanics/mixing          token mixing by a Gaussian row-stochastic matrix (bandwidth)
    /api/mechanics/positions       position-encoding similarity (kind, grid, dim, base, reference, model)
    /api/cost                      attention kinds against resolution (patch, dim, heads, depth)
    /api/runs                      the runs found and their overview table, ranked (sort, descending)
    /api/runs/{name}               one run: its table ranked, learning curves, figures, report
    /api/runs/{name}/figures/{file}  a figure of the run (PNG)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from .arrays import encode_array
from .checkpoints import ModelShelf
from .images import MAX_SIDE, UPLOAD_LIMIT, ImageBook, RequestError
from .runs import RunShelf, overview_table, rank_table, run_detail, run_table
from .views import (POSITION_KINDS, attention_view, cost_view, maps_view, mixing_view, parse_query, position_view,
                    softmax_view, tokens_view)

STATIC = files("vitlab.explore") / "static"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
MULTIPART_SLACK = 64 * 1024          # bytes of form framing allowed on top of the file itself
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; script-src 'self'; "
                               "style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        await self.app(scope, receive, send_with_headers)


@dataclass
class ExploreConfig:
    """What the explorer may read: checkpoints, run roots and a data folder, given at start-up.

    ``allowed_hosts``: Host headers accepted (loopback names by default, which also stops DNS
    rebinding); ``["*"]`` when serving other machines.
    """
    checkpoints: list[str | Path] = field(default_factory=list)
    runs: list[str | Path] = field(default_factory=list)
    data_dir: str | Path | None = None
    upload_limit: int = UPLOAD_LIMIT
    max_side: int = MAX_SIDE
    allowed_hosts: list[str] = field(default_factory=lambda: list(LOOPBACK_HOSTS))


def create_app(config: ExploreConfig | None = None) -> FastAPI:
    """The explorer for ``config``. Checkpoints are loaded (and warmed up) now, so a bad one fails
    here; the first sample source is loaded too, so the first page opens quickly."""
    config = config or ExploreConfig()
    book = ImageBook(config.data_dir, config.upload_limit, config.max_side)
    book.split(next(s["name"] for s in book.sources() if s["available"]))  # the first page's samples, ready
    shelf = ModelShelf(config.checkpoints)
    run_shelf = RunShelf(config.runs)
    app = FastAPI(title="vitlab explore", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=config.allowed_hosts)

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=err.status)

    @app.exception_handler(HTTPException)
    async def not_served(request: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse({"error": f"{request.url.path}: {err.detail}"}, status_code=err.status_code,
                            headers=err.headers)

    @app.exception_handler(ValueError)
    async def invalid(request: Request, err: ValueError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, err: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']} (got {e.get('input')!r})"
                    for e in err.errors()]
        return JSONResponse({"error": "; ".join(problems)}, status_code=422)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        return {"version": __version__, "upload_limit": config.upload_limit, "max_side": config.max_side,
                "samples": book.sources(), "models": [m.describe() for m in shelf.models],
                "runs": [str(r) for r in run_shelf.roots], "position_kinds": list(POSITION_KINDS)}

    @app.get("/api/samples/{source}")
    def samples(source: str, start: int = 0, count: int = Query(24, ge=1, le=256)) -> dict[str, Any]:
        page = book.samples(source, start, count)
        return {**page, "images": encode_array(page["images"])}

    @app.post("/api/uploads")
    async def upload(request: Request) -> dict[str, Any]:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > config.upload_limit + MULTIPART_SLACK:
            raise RequestError(f"the upload has {int(length):,} bytes, over the limit of {config.upload_limit:,}: "
                               f"send a smaller PNG or JPEG", 413)
        form = await request.form(max_files=1, max_fields=1)
        part = form.get("file")
        if not isinstance(part, UploadFile):
            raise RequestError("send the image as multipart form field 'file'")
        data = await part.read(config.upload_limit + 1)
        picture = await run_in_threadpool(book.add_upload, data)
        return {**picture.describe(), "filename": part.filename, "image": encode_array(picture.image[0])}

    @app.get("/api/image")
    def image(ref: str) -> dict[str, Any]:
        picture = book.get(ref)
        return {**picture.describe(), "image": encode_array(picture.image[0])}

    @app.get("/api/tokens")
    def tokens(ref: str, patch: int) -> dict[str, Any]:
        picture = book.get(ref)
        return {**picture.describe(), **tokens_view(picture.image, patch)}

    @app.get("/api/attention")
    def attention(model: int, ref: str, query: str = "mean", temperature: float = 1.0) -> dict[str, Any]:
        entry, picture = shelf.get(model), book.get(ref)
        with shelf.lock:
            return {"ref": ref, **attention_view(entry, shelf.analyse(entry, picture), parse_query(query), temperature)}

    @app.get("/api/maps")
    def maps(model: int, ref: str, query: str = "mean") -> dict[str, Any]:
        entry, picture = shelf.get(model), book.get(ref)
        with shelf.lock:
            return {"ref": ref, **maps_view(entry, shelf.analyse(entry, picture), parse_query(query))}

    @app.get("/api/mechanics/softmax")
    def softmax(temperature: float = 1.0, keys: int = 16, seed: int = 0) -> dict[str, Any]:
        return softmax_view(temperature, keys, seed=seed)

    @app.get("/api/mechanics/mixing")
    def mixing(bandwidth: float = 1.5, tokens: int = 24, seed: int = 0) -> dict[str, Any]:
        return mixing_view(bandwidth, tokens, seed)

    @app.get("/api/mechanics/positions")
    def positions(kind: str = "sincos", grid: int = 8, dim: int = 64, base: float = 10000.0, seed: int = 0,
                  reference: int = 0, model: int | None = None) -> dict[str, Any]:
        entry = shelf.get(model) if model is not None else None
        return position_view(kind, (grid, grid), dim, base, seed, reference, entry)

    @app.get("/api/cost")
    def cost(patch: int = 16, dim: int = 768, heads: int = 12, depth: int = 12, max_image: int = 4096
             ) -> dict[str, Any]:
        return cost_view(patch, dim, heads, depth, max_image)

    @app.get("/api/runs")
    def runs(sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = run_shelf.runs()
        return {"roots": [str(r) for r in run_shelf.roots],
                "runs": [{"name": r.name, "kind": r.kind} for r in found.values()],
                "table": rank_table(overview_table(found), sort, descending)}

    @app.get("/api/runs/{name}")
    def run(name: str, sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = run_shelf.get(name)
        return {**run_detail(found), "table": rank_table(run_table(found), sort, descending)}

    @app.get("/api/runs/{name}/figures/{file}")
    def figure(name: str, file: str) -> FileResponse:
        return FileResponse(run_shelf.figure(name, file), media_type="image/png")

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app
