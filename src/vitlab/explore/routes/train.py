"""Training you can watch (Runs page): start a small run, follow it as a server-sent event stream,
cancel it, and read the model's snapshot after any finished epoch.

Starting and cancelling change the server's state, so they are POST requests, which the guard lets
through only with the explorer's own Origin (and its token off loopback), like uploads.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from ..images import RequestError
from . import Context

POLL = 0.1  # seconds between two looks at the job's events
MAX_BODY = 4096  # bytes of a training request (a name, a model, two numbers)
MAX_NESTING = 4  # lists and objects inside one another in a training request (it has 1)
STREAM_SECONDS = 20.0  # a stream ends after this long; the browser reconnects where it left off


def resume_at(last_event_id: str | None, number: int) -> int:
    """The index of the first event to send: after ``Last-Event-ID`` (``JOB.INDEX``) when it names job
    ``number``, else from the start."""
    job, _, index = (last_event_id or "").partition(".")
    return int(index) + 1 if job == str(number) and index.isdigit() else 0


def nesting(text: str) -> int:
    """How deep lists and objects nest in JSON ``text``, counted without parsing it (brackets inside strings
    skipped), so a body nested too deep is refused before the parser recurses into it."""
    deepest = level = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


def training_request(body: bytes) -> Any:
    """A training request's body parsed as JSON; :class:`RequestError` (400/413) for one over
    :data:`MAX_BODY` bytes, nested over :data:`MAX_NESTING` deep, or not JSON text, before any parsing."""
    usage = 'send the training as JSON {"name": ..., "model": ..., "epochs": ..., "rows": ...}'
    if len(body) > MAX_BODY:
        raise RequestError(f"the training request has {len(body):,} bytes, over {MAX_BODY:,}: {usage}", 413)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RequestError(f"the training request is not UTF-8 text ({err.reason}): {usage}") from err
    if nesting(text) > MAX_NESTING:
        raise RequestError(f"the training request nests lists or objects over {MAX_NESTING} deep: {usage}")
    try:
        return json.loads(text)
    except ValueError as err:
        raise RequestError(f"the training request is not JSON ({err}): {usage}") from err


def frame(event: dict[str, Any]) -> str:
    """One event in the text/event-stream format."""
    return f"id: {event['id']}\nevent: {event['event']}\ndata: {json.dumps(event['data'], allow_nan=False)}\n\n"


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    trainer = ctx.trainer

    @api.get("/api/train")
    def status() -> dict[str, Any]:
        return {**trainer.limits(), "job": trainer.job.describe() if trainer.job else None}

    @api.post("/api/train")
    async def start(request: Request) -> dict[str, Any]:
        return {"job": trainer.start(training_request(await request.body())).describe()}

    @api.post("/api/train/cancel")
    def cancel() -> dict[str, Any]:
        return {"job": trainer.cancel().describe()}

    @api.get("/api/train/snapshot")
    def snapshot(epoch: int) -> dict[str, Any]:
        return trainer.snapshot(epoch)

    @api.get("/api/train/events")
    async def events(request: Request) -> StreamingResponse:
        job = trainer.job
        if job is None:
            raise RequestError("no training has run yet: start one on the Runs page", 404)
        start = resume_at(request.headers.get("last-event-id"), job.number)

        async def stream() -> AsyncIterator[str]:
            sent, began = start, time.monotonic()
            yield "retry: 1000\n\n"
            while True:
                for event in job.events_from(sent):
                    yield frame(event)
                    sent += 1
                if job.finished and not job.events_from(sent):
                    return
                if time.monotonic() - began > STREAM_SECONDS or await request.is_disconnected():
                    return
                await asyncio.sleep(POLL)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    return api
