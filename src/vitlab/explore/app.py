"""The explorer's web app: JSON endpoints backed by vitlab, and the static front end.

``create_app(ExploreConfig(...))`` returns a FastAPI application; ``vitlab explore`` serves it
with uvicorn on 127.0.0.1. Every number a page shows comes from an endpoint; the front end
(``static/``: HTML, CSS and JavaScript modules, no third-party code, nothing fetched from
elsewhere) only draws. Every request passes :class:`~vitlab.explore.guards.Guard` first (Host
check, token off loopback, Origin check, body cap; see SECURITY.md) and every response carries a
Content-Security-Policy that allows this origin alone. The endpoints live in :mod:`.pages`, one
module per page holding its routes and its views.

Endpoints (GET unless noted; errors answer ``{"error": message}`` with a 4xx status)::

    /api/info                      version, limits, sample sources, models, run roots, training limits
    /api/samples/{source}          sample images (start, count) with labels; ``DATASET@INDEX`` is model INDEX's
                                   own photos, read as it reads them (found where its run recorded them)
    /api/uploads          POST     a PNG / JPEG file (multipart field "file") -> its image reference
    /api/image                     one image (ref)
    /api/tokens                    patches, token matrix, token count and cost (ref, patch), or as a
                                   model reads the image (ref, model)
    /api/attention                 per layer and head attention from a query (model, ref, query, temperature),
                                   the true label, and what the model sees (invert, keep_aspect)
    /api/maps                      rollout, gradient and occlusion maps (model, ref, query, invert, keep_aspect;
                                   method: that map alone, as the page asks for them one at a time)
    /api/layers                    raw, mixed and rolled-out attention layer by layer (model, ref, query)
    /api/forward                   one query token's forward pass (model, ref, query, layer, head,
                                   temperature, knockout)
    /api/limits/verdicts           a model on a whole sample split: its most confident mistakes (model, source)
    /api/limits/maps               the trained model's maps (model, ref, query, method)
    /api/limits/randomised         maps of the trained model and of one with random weights (model, ref, query,
                                   method)
    /api/limits/deletion           deletion curves of each map and of random orders (model, ref, query, method:
                                   one curve, "random" the random orders')
    /api/mechanics/softmax         softmax with temperature over a row of keys
    /api/mechanics/mixing          token mixing by a Gaussian row-stochastic matrix (bandwidth)
    /api/mechanics/positions       position-encoding similarity (kind, grid, dim, base, reference, model)
    /api/mechanics/position-dots   dot products of 1-D sinusoidal and random positions (positions, dim, scale,
                                   reference)
    /api/mechanics/local           synthetic local attention from a query patch on a grid (grid, sigma, query)
    /api/mechanics/qk-scale        the variance of q.k and the softmax's peak against d_k, raw and scaled
    /api/cost                      attention kinds against resolution (patch, dim, heads, depth)
    /api/cost/textbook             the texts' token-cost table and convolution-vs-attention pair counts
    /api/runs                      the runs found (a broken one with its reason) and their overview table, ranked
    /api/runs/{name}               one run: its table ranked, learning curves, figures, report
    /api/runs/{name}/figures/{file}  a figure of the run (PNG)
    /api/train                     the training limits and the current (or last) watched run
    /api/train            POST     start a watched run (JSON: name, model, epochs, rows; a small body, parsed
                                   only after its size and nesting are checked); without --runs, into ./runs
    /api/train/cancel     POST     stop the running one at its next step
    /api/train/events              its progress as a server-sent event stream (resumes at Last-Event-ID)
    /api/train/snapshot            the model's attention and positions after an epoch (epoch)
    /api/prompt/runs               the promptable runs found (a broken one with its reason)
    /api/prompt/runs/{name}        one promptable run: its model and held-out images
    /api/prompt/runs/{name}/segment  candidate masks and their IoU for a prompt (ref, points, labels, box)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from .. import __version__
from ..errors import ConfigError
from .checkpoints import ModelShelf
from .guards import ANY_ADDRESS, Guard, SecurityHeaders, bracketed, host_names, is_loopback
from .images import MAX_PIXELS, MAX_SIDE, UPLOAD_LIMIT, ImageBook, RequestError
from .pages import Context, attention, cost, forward, limits, mechanics, runs, segment, shell, tokens, train
from .pages.segment import PromptShelf
from .pages.shell import STATIC
from .pages.train import Trainer
from .run_files import real_path
from .run_index import RunShelf, run_kind

MULTIPART_SLACK = 64 * 1024  # bytes of form framing allowed on top of the file itself
MIN_TOKEN = 16  # characters of a token given by the caller
PAGES = (shell, tokens, attention, forward, limits, mechanics, cost, runs, train, segment)
DEFAULT_RUNS = Path("runs")  # the runs folder of the folder the explorer is started in
FIRST_SOURCES = ("fashion-mnist",)  # the Tokens page starts on the texts' images when they are found


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
    here; the first pages' sample sources are loaded too (the texts' Fashion-MNIST where it is found,
    and the first available), so the first page opens quickly."""
    config = config or ExploreConfig()
    book = ImageBook(config.data_dir, config.upload_limit, config.max_side, config.max_pixels)
    available = [s["name"] for s in book.sources() if s["available"]]
    for source in dict.fromkeys([*(name for name in FIRST_SOURCES if name in available), available[0]]):
        book.split(source)  # the first pages' samples, ready
    shelf = ModelShelf(config.checkpoints, book)
    # without a runs folder, watched trainings go to ./runs (made by the first one), which the Runs page then lists
    run_shelf = RunShelf(config.runs or [DEFAULT_RUNS.absolute()])
    # watched trainings are written into the first root that holds runs (not one that is a run itself)
    root = next((r for r in map(real_path, run_shelf.roots) if r is not None and run_kind(r) is None), None)
    if root is None and not config.runs:
        root = DEFAULT_RUNS.absolute()
    trainer = Trainer(root, book, on_done=lambda path: shelf.add(path).index)
    ctx = Context(config, book, shelf, run_shelf, PromptShelf(run_shelf, book), trainer)
    app = FastAPI(title="vitlab explore", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.context = ctx  # what it serves (images, models, runs), for callers that measure it
    app.add_middleware(
        Guard,
        names=host_names(config.host, config.allowed_hosts),
        any_ip=bracketed(config.host) in ANY_ADDRESS,
        token=config.token,
        body_limit=config.upload_limit + MULTIPART_SLACK,
    )
    app.add_middleware(SecurityHeaders)  # outermost: on the guard's refusals too
    add_error_handlers(app)
    for page in PAGES:
        app.include_router(page.router(ctx))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app


def add_error_handlers(app: FastAPI) -> None:
    """Every refusal as ``{"error": message}`` with its status: the explorer's own, a route not found, a
    value out of range (400) and a malformed parameter (422)."""

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
