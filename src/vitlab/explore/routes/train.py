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
STREAM_SECONDS = 20.0  # a stream ends after this long; the browser reconnects where it left off


def resume_at(last_event_id: str | None, number: int) -> int:
    """The index of the first event to send: after ``Last-Event-ID`` (``JOB.INDEX``) when it names job
    ``number``, else from the start."""
    job, _, index = (last_event_id or "").partition(".")
    return int(index) + 1 if job == str(number) and index.isdigit() else 0


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
        try:
            body = await request.json()
        except ValueError as err:
            raise RequestError(f'send the training as JSON {{"name": ..., "epochs": ...}} ({err})') from err
        return {"job": trainer.start(body).describe()}

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
