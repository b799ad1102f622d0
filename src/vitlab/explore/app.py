"""The explorer's web app: JSON endpoints backed by vitlab, and the static front end.

``create_app(ExploreConfig(...))`` returns a FastAPI application; ``vitlab explore`` serves it
with uvicorn on 127.0.0.1. Every number a page shows comes from an endpoint here; the front end
(``static/``: HTML, CSS and JavaScript modules, no third-party code, nothing fetched from
elsewhere) only draws. Every request passes :class:`~vitlab.explore.guards.Guard` first (Host
check, token off loopback, Origin check, body cap; see SECURITY.md) and every response carries a
Content-Security-Policy that allows this origin alone.

Endpoints (GET unless noted; errors answer ``{"error": message}`` with a 4xx status)::

    /api/info                      version, limits, sample sources, models, run roots
    /api/samples/{source}          sample images (start, count) with labels
    /api/uploads          POST     a PNG / JPEG file (multipart field "file") -> its image reference
    /api/image                     one image (ref)
    /api/tokens                    patches, token matrix, token count and cost (ref, patch)
    /api/attention                 per layer and head attention from a query (model, ref, query, temperature),
                                   and what the model sees (invert, keep_aspect)
    /api/maps                      rollout, gradient and occlusion maps (model, ref, query, invert, keep_aspect)
    /api/mechanics/softmax         softmax with temperature over a row of keys
    /api/mechanics/mixing          token mixing by a Gaussian row-stochastic matrix (bandwidth)
    /api/mechanics/positions       position-encoding similarity (kind, grid, dim, base, reference, model)
    /api/mechanics/position-dots   dot products of 1-D sinusoidal and random positions (positions, dim, scale,
                                   reference)
    /api/mechanics/local           synthetic local attention from a query patch on a grid (grid, sigma, query)
    /api/cost                      attention kinds against resolution (patch, dim, heads, depth)
    /api/runs                      the runs found (a broken one with its reason) and their overview table, ranked
    /api/runs/{name}               one run: its table ranked, learning curves, figures, report
    /api/runs/{name}/figures/{file}  a figure of the run (PNG)
    /api/prompt/runs               the promptable runs found (a broken one with its reason)
    /api/prompt/runs/{name}        one promptable run: its model and held-out images
    /api/prompt/runs/{name}/segment  candidate masks and their IoU for a prompt (ref, points, labels, box)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from .. import __version__
from ..errors import ConfigError
from .arrays import encode_array
from .checkpoints import ModelShelf
from .guards import ANY_ADDRESS, Guard, SecurityHeaders, bracketed, host_names, is_loopback
from .images import MAX_PIXELS, MAX_SIDE, UPLOAD_LIMIT, ImageBook, RequestError
from .prompts import PromptShelf
from .runs import RunShelf, overview, rank_table, run_detail, run_table
from .views import (
    POSITION_KINDS,
    attention_view,
    cost_view,
    input_view,
    local_attention_view,
    maps_view,
    mixing_view,
    parse_query,
    position_dots_view,
    position_view,
    prepared,
    softmax_view,
    tokens_view,
)

STATIC = files("vitlab.explore") / "static"
MULTIPART_SLACK = 64 * 1024  # bytes of form framing allowed on top of the file itself
MIN_TOKEN = 16  # characters of a token given by the caller


@dataclass
class ExploreConfig:
    """What the explorer may read (checkpoints, run roots, a data folder), its limits, and where it
    is served.

    ``upload_limit`` bytes of an upload, ``max_pixels`` pixels it may declare (checked before
    decoding), ``max_side`` the side it is shrunk to. ``host``: the address it is served on; the
    Host header must name it (or a loopback name when it is loopback), and ``allowed_hosts`` adds
    names (e.g. this machine's DNS name). Off loopback every request needs ``token``; one is
    generated (``secrets.token_urlsafe``) when none is given. Raises ``ConfigError`` for a value
    out of range.
    """

    checkpoints: list[str | Path] = field(default_factory=list)
    runs: list[str | Path] = field(default_factory=list)
    data_dir: str | Path | None = None
    upload_limit: int = UPLOAD_LIMIT
    max_side: int = MAX_SIDE
    max_pixels: int = MAX_PIXELS
    host: str = "127.0.0.1"
    allowed_hosts: list[str] = field(default_factory=list)
    token: str | None = None

    def __post_init__(self) -> None:
        for name in ("upload_limit", "max_side", "max_pixels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} (--{name.replace('_', '-')}) must be a positive integer, got {value!r}")
        for host in (self.host, *self.allowed_hosts):
            if not host or any(c.isspace() or c in "/?#@," for c in host):
                raise ConfigError(f"host {host!r} is not an address or host name: give e.g. 127.0.0.1")
        if self.token is not None and len(self.token) < MIN_TOKEN:
            raise ConfigError(
                f"the token must have at least {MIN_TOKEN} characters, got {len(self.token)}: "
                f"leave it out and one is generated"
            )
        if self.token is None and not is_loopback(self.host):
            self.token = secrets.token_urlsafe(32)


def create_app(config: ExploreConfig | None = None) -> FastAPI:
    """The explorer for ``config``. Checkpoints are loaded (and warmed up) now, so a bad one fails
    here; the first sample source is loaded too, so the first page opens quickly."""
    config = config or ExploreConfig()
    book = ImageBook(config.data_dir, config.upload_limit, config.max_side, config.max_pixels)
    book.split(next(s["name"] for s in book.sources() if s["available"]))  # the first page's samples, ready
    shelf = ModelShelf(config.checkpoints)
    run_shelf = RunShelf(config.runs)
    prompt_shelf = PromptShelf(run_shelf, book)
    app = FastAPI(title="vitlab explore", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(
        Guard,
        names=host_names(config.host, config.allowed_hosts),
        any_ip=bracketed(config.host) in ANY_ADDRESS,
        token=config.token,
        body_limit=config.upload_limit + MULTIPART_SLACK,
    )
    app.add_middleware(SecurityHeaders)  # outermost: on the guard's refusals too

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=err.status)

    @app.exception_handler(HTTPException)
    async def not_served(request: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": f"{request.url.path}: {err.detail}"}, status_code=err.status_code, headers=err.headers
        )

    @app.exception_handler(ValueError)
    async def invalid(request: Request, err: ValueError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, err: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']} (got {e.get('input')!r})" for e in err.errors()
        ]
        return JSONResponse({"error": "; ".join(problems)}, status_code=422)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        return {
            "version": __version__,
            "upload_limit": config.upload_limit,
            "max_side": config.max_side,
            "max_pixels": config.max_pixels,
            "samples": book.sources(),
            "models": [m.describe() for m in shelf.models],
            "runs": [str(r) for r in run_shelf.roots],
            "position_kinds": list(POSITION_KINDS),
        }

    @app.get("/api/samples/{source}")
    def samples(source: str, start: int = 0, count: int = Query(24, ge=1, le=256)) -> dict[str, Any]:
        page = book.samples(source, start, count)
        return {**page, "images": encode_array(page["images"])}

    @app.post("/api/uploads")
    async def upload(request: Request) -> dict[str, Any]:
        form = await request.form(max_files=1, max_fields=1)  # the guard has capped the body's bytes
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
    def attention(
        model: int,
        ref: str,
        query: str = "mean",
        temperature: float = 1.0,
        invert: bool = False,
        keep_aspect: bool = False,
    ) -> dict[str, Any]:
        entry, original = shelf.get(model), book.get(ref)
        with shelf.lock:
            analysis = shelf.analyse(entry, prepared(original, entry, invert, keep_aspect))
            return {
                "ref": ref,
                **attention_view(entry, analysis, parse_query(query), temperature),
                "seen": input_view(entry, analysis, original.image, invert, keep_aspect),
            }

    @app.get("/api/maps")
    def maps(
        model: int, ref: str, query: str = "mean", invert: bool = False, keep_aspect: bool = False
    ) -> dict[str, Any]:
        entry = shelf.get(model)
        picture = prepared(book.get(ref), entry, invert, keep_aspect)
        with shelf.lock:
            return {"ref": ref, **maps_view(entry, shelf.analyse(entry, picture), parse_query(query))}

    @app.get("/api/mechanics/softmax")
    def softmax(temperature: float = 1.0, keys: int = 16, seed: int = 0) -> dict[str, Any]:
        return softmax_view(temperature, keys, seed=seed)

    @app.get("/api/mechanics/mixing")
    def mixing(bandwidth: float = 1.5, tokens: int = 24, seed: int = 0) -> dict[str, Any]:
        return mixing_view(bandwidth, tokens, seed)

    @app.get("/api/mechanics/positions")
    def positions(
        kind: str = "sincos",
        grid: int = 8,
        dim: int = 64,
        base: float = 10000.0,
        seed: int = 0,
        reference: int = 0,
        model: int | None = None,
    ) -> dict[str, Any]:
        entry = shelf.get(model) if model is not None else None
        return position_view(kind, (grid, grid), dim, base, seed, reference, entry)

    @app.get("/api/mechanics/position-dots")
    def position_dots(
        positions: int = 32, dim: int = 64, scale: float = 1.0, seed: int = 0, reference: int = 0
    ) -> dict[str, Any]:
        return position_dots_view(positions, dim, scale, seed, reference)

    @app.get("/api/mechanics/local")
    def local(grid: int = 14, sigma: float = 2.0, query: int | None = None) -> dict[str, Any]:
        return local_attention_view(grid, sigma, query)

    @app.get("/api/cost")
    def cost(
        patch: int = 16, dim: int = 768, heads: int = 12, depth: int = 12, max_image: int = 4096
    ) -> dict[str, Any]:
        return cost_view(patch, dim, heads, depth, max_image)

    @app.get("/api/runs")
    def runs(sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = run_shelf.runs()
        table, broken = overview(found)
        return {
            "roots": [str(r) for r in run_shelf.roots],
            "runs": [{"name": r.name, "kind": r.kind, "broken": broken.get(r.name)} for r in found.values()],
            "table": rank_table(table, sort, descending),
        }

    @app.get("/api/runs/{name}")
    def run(name: str, sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        found = run_shelf.get(name)
        return {**run_detail(found), "table": rank_table(run_table(found), sort, descending)}

    @app.get("/api/runs/{name}/figures/{file}")
    def figure(name: str, file: str) -> FileResponse:
        return FileResponse(run_shelf.figure(name, file), media_type="image/png")

    @app.get("/api/prompt/runs")
    def prompt_runs() -> dict[str, Any]:
        return prompt_shelf.listing()

    @app.get("/api/prompt/runs/{name}")
    def prompt_run(name: str) -> dict[str, Any]:
        return prompt_shelf.detail(name)

    @app.get("/api/prompt/runs/{name}/segment")
    def prompt_segment(
        name: str, ref: str, points: str | None = None, labels: str | None = None, box: str | None = None
    ) -> dict[str, Any]:
        return prompt_shelf.segment(name, ref, points, labels, box)

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app
