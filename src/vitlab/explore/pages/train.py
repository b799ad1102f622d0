"""Training you can watch (Runs page): start a small run, follow it as a server-sent event stream,
cancel it, and read the model's snapshot after any finished epoch.

Starting and cancelling change the server's state, so they are POST requests, which the guard lets
through only with the explorer's own Origin (and its token off loopback), like uploads.

Training you can watch: a small classification run started from the Runs page, in a background thread.

One run at a time (:class:`Trainer`), on :data:`THREADS` torch thread (the process's setting, restored
afterwards), so the explorer keeps answering while it trains. It is an ordinary ``vitlab train`` run:
:func:`vitlab.tasks.train` writes the run folder under the first runs root (checkpoints, ``metrics.jsonl``,
``summary.json``), so ``vitlab evaluate`` and ``vitlab train --resume`` accept it and the Runs page lists it. A
:class:`WatchReporter` (a :class:`vitlab.engine.Reporter`) hears every step and epoch: it publishes
them as events (the page reads them as a server-sent event stream), stops the run when it is
cancelled, and after each epoch reads the checkpoint the engine has just written (``last/``) to take a
:class:`Snapshot` of the model on a fixed probe image: its attention per layer and head and the cosine
similarity of its learned positions. Epoch 0 is the run's seeded initial weights (``train`` seeds them
with the run's seed before building the model, and so does :func:`initial_model`).

A cancelled run stops at its next step. The epochs it finished stay in the folder (``vitlab train
--resume`` continues it); a run cancelled before its first epoch leaves no folder.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from torch import nn

from ...data import load_dataset
from ...data.preprocess import Statistics
from ...engine import Reporter, seed_everything
from ...errors import VitlabError
from ...explain.maps import head_statistics, num_prefix_tokens, query_rows, to_grid
from ...explain.record import attention_weights
from ...layers.position import LearnedPosition, RowColumnPosition, SinCosPosition
from ...runs import load_checkpoint
from ...runs.layout import LAST, WEIGHTS
from ...tasks.classify import TrainConfig
from ..arrays import encode_array
from ..images import ImageBook, LabeledImage, RequestError, fit_image
from . import Context

DATASET = "digits"
MODELS = {"vit-digits": "a small ViT for the 8×8 digits: 16 tokens of 4 pixels, 4 blocks of 4 heads"}
EPOCHS = (1, 60)  # the range of epochs a run may ask for
DEFAULT_EPOCHS = 20  # about 0.94 validation accuracy, in half a minute on one thread
THREADS = 1  # torch threads while a watched run trains: the explorer keeps answering beside it
ROWS = (50, 1797)  # training rows (the digits' training split has 1,258)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PROBE = f"{DATASET}:0"  # the image each snapshot is taken on: the first of the digits' test split
STEP_EVERY = 0.1  # seconds between two published step events


class Cancelled(Exception):  # noqa: N818 - the name says what happened
    """Raised from the reporter when the user cancels the run; the engine stops at once."""


@dataclass
class Snapshot:
    """The model after ``epoch`` epochs on the probe image: attention from the mean of the patch rows
    ``(L, H, gh, gw)`` with its per-head statistics, the cosine similarity of its position table ``(N, N)``
    (``None`` without one) and its prediction."""

    epoch: int
    heat: torch.Tensor
    stats: dict[str, torch.Tensor]
    similarity: torch.Tensor | None
    probabilities: list[float]

    def to_dict(self, classes: list[str]) -> dict[str, Any]:
        best = max(range(len(self.probabilities)), key=self.probabilities.__getitem__)
        return {
            "epoch": self.epoch,
            "heat": encode_array(self.heat),
            "heat_max": float(self.heat.max()),
            "stats": {name: encode_array(value) for name, value in self.stats.items()},
            "similarity": None if self.similarity is None else encode_array(self.similarity),
            "probabilities": self.probabilities,
            "predicted": classes[best],
        }


def snapshot(
    model: nn.Module, probe: LabeledImage, mean: tuple[float, ...], std: tuple[float, ...], epoch: int
) -> Snapshot:
    """:class:`Snapshot` of ``model`` (put in eval mode) on ``probe``."""
    model.eval()
    cfg: Any = model.config
    image = fit_image(probe.image, cfg.in_chans, _size(cfg))
    inputs = Statistics(mean, std).normalize(image)
    logits, weights = attention_weights(model, inputs)
    prefix = num_prefix_tokens(model)
    rows = query_rows(torch.stack([w.float() for w in weights], 1), "mean", prefix)[0]  # (L, H, N)
    heat = to_grid(rows, prefix, cfg.grid)
    table = getattr(model, "pos_embed", None)
    similarity = None
    if isinstance(table, (LearnedPosition, RowColumnPosition, SinCosPosition)):
        with torch.no_grad():
            unit = F.normalize(table.table(cfg.grid)[0].double(), dim=-1)
        similarity = (unit @ unit.T).float()
    probs = logits.float().softmax(-1)[0].tolist()
    return Snapshot(epoch, heat, head_statistics(rows), similarity, probs)


def _size(cfg: Any) -> tuple[int, int]:
    size = cfg.img_size
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def initial_model(config: TrainConfig) -> tuple[nn.Module, tuple[float, ...], tuple[float, ...]]:
    """The run's model before its first step, as :func:`vitlab.tasks.train` builds it (the run's seed, then
    the model), and the normalisation of its data."""
    from ...tasks import build_student

    splits = load_dataset(config.dataset, config.data_dir, seed=config.seed, rows=config.rows)
    seed_everything(config.seed)
    model, _ = build_student(config, splits)
    return model, tuple(splits.mean or (0.0,)), tuple(splits.std or (1.0,))


@dataclass
class TrainJob:
    """One watched run: its name, folder and config, its state (``running``, ``done``, ``cancelled``,
    ``failed``) and a one-line ``message``, the events published so far, the epoch records and snapshots."""

    number: int
    name: str
    path: Path
    config: TrainConfig
    classes: list[str]
    status: str = "running"
    message: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    model_index: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def publish(self, event: str, data: dict[str, Any]) -> None:
        with self.lock:
            self.events.append({"id": f"{self.number}.{len(self.events)}", "event": event, "data": data})

    def events_from(self, index: int) -> list[dict[str, Any]]:
        with self.lock:
            return self.events[index:]

    def describe(self) -> dict[str, Any]:
        """JSON-ready: what the Runs page shows of the job."""
        return {
            "number": self.number,
            "name": self.name,
            "folder": str(self.path),
            "model": self.config.model,
            "dataset": self.config.dataset,
            "epochs": self.config.epochs,
            "rows": self.config.rows,
            "status": self.status,
            "message": self.message,
            "records": list(self.records),
            "snapshots": sorted(self.snapshots),
            "model_index": self.model_index,
            "events": len(self.events),
        }


class WatchReporter(Reporter):
    """Publishes a :class:`TrainJob`'s progress, takes a snapshot after every epoch, and stops the run
    (raising :class:`Cancelled`) at the first step after it is cancelled."""

    every = 1

    def __init__(self, job: TrainJob, probe: LabeledImage, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        self.job, self.probe, self.mean, self.std = job, probe, mean, std
        self.published = 0.0

    def note(self, message: str) -> None:
        self.job.publish("note", {"message": message})

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        self.job.publish("start", {"epochs": epochs, "steps": steps_per_epoch})

    def step(self, epoch: int, step: int, running: dict[str, float], images_per_s: float) -> None:
        if self.job.cancel.is_set():
            raise Cancelled(f"cancelled during epoch {epoch}")
        now = time.perf_counter()
        if now - self.published >= STEP_EVERY:
            self.published = now
            self.job.publish("step", {"epoch": epoch, "step": step, **running, "images_per_s": images_per_s})

    def epoch(self, record: dict[str, Any]) -> None:
        job = self.job
        loaded = load_checkpoint(job.path / LAST / WEIGHTS)  # what the engine has just written
        job.snapshots[record["epoch"]] = snapshot(loaded.model, self.probe, self.mean, self.std, record["epoch"])
        job.records.append(record)
        job.publish("epoch", {"record": record})


class Trainer:
    """At most one :class:`TrainJob` at a time, run in a daemon thread into ``root``; ``on_done(path)``
    hears each finished run's folder (the explorer loads it as a model) and returns its model index."""

    def __init__(self, root: Path | None, book: ImageBook, on_done: Any = None) -> None:
        self.root, self.book, self.on_done = root, book, on_done
        self.job: TrainJob | None = None
        self.lock = threading.Lock()
        self.count = 0

    def limits(self) -> dict[str, Any]:
        return {
            "dataset": DATASET,
            "models": MODELS,
            "epochs": list(EPOCHS),
            "default_epochs": DEFAULT_EPOCHS,
            "rows": list(ROWS),
            "root": None if self.root is None else str(self.root),
            "probe": PROBE,
        }

    def request(self, body: Any) -> tuple[str, str, int, int | None]:
        """``(name, model, epochs, rows)`` of a start request's JSON body, each checked (400 otherwise)."""
        if not isinstance(body, dict):
            raise RequestError('send {"name": ..., "model": ..., "epochs": ...} as JSON')
        unknown = sorted(set(body) - {"name", "model", "epochs", "rows"})
        if unknown:
            raise RequestError(f"unknown fields {unknown}: a training takes name, model, epochs and rows")
        name, model = body.get("name"), body.get("model", "vit-digits")
        epochs, rows = body.get("epochs", DEFAULT_EPOCHS), body.get("rows")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise RequestError(
                f"name {name!r}: give 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        if model not in MODELS:
            raise RequestError(f"model {model!r}: the explorer trains {list(MODELS)}")
        for what, value, (low, high), optional in (("epochs", epochs, EPOCHS, False), ("rows", rows, ROWS, True)):
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise RequestError(f"{what} must be a whole number in [{low}, {high}], got {value!r}")
        return name, model, epochs, rows

    def start(self, body: Any) -> TrainJob:
        """Start the run a request asks for; 409 while another runs or when the folder exists."""
        name, model, epochs, rows = self.request(body)
        if self.root is None:
            raise RequestError("no runs folder to train into: start `vitlab explore --runs DIR`", 409)
        path = self.root / name
        with self.lock:
            if self.job is not None and not self.job.finished:
                raise RequestError(f"run {self.job.name!r} is training: cancel it or wait for it to end", 409)
            if path.exists() or path.is_symlink():
                raise RequestError(f"{path} exists: choose another name (the explorer never overwrites a run)", 409)
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.book.get(PROBE)
            config = TrainConfig(
                model=model,
                dataset=DATASET,
                epochs=epochs,
                rows=rows,
                warmup_epochs=min(3.0, epochs / 5),
                device="cpu",
                out_dir=str(path),
            )
            self.count += 1
            job = TrainJob(self.count, name, path, config, list(self.book.split(DATASET).classes))
            self.job = job
        threading.Thread(target=self._run, args=(job, probe), name=f"vitlab-train-{name}", daemon=True).start()
        return job

    def _run(self, job: TrainJob, probe: LabeledImage) -> None:
        status, message = self._train(job, probe)
        if status in ("done", "cancelled") and job.records and self.on_done is not None:
            try:
                job.model_index = self.on_done(job.path)
            except (VitlabError, ValueError, OSError) as err:
                message += f" (it could not be opened here: {err})"
        with job.lock:  # the end event and the finished state together: a stream that sees one sees both
            job.status, job.message = status, message
            job.events.append(
                {
                    "id": f"{job.number}.{len(job.events)}",
                    "event": "end",
                    "data": {"status": status, "message": message, "model_index": job.model_index},
                }
            )

    def _train(self, job: TrainJob, probe: LabeledImage) -> tuple[str, str]:
        """Run the job; its final state and message."""
        from ...tasks import run

        threads = torch.get_num_threads()
        torch.set_num_threads(THREADS)  # the process's intra-op threads: restored when the run ends
        try:
            model, mean, std = initial_model(job.config)
            job.snapshots[0] = snapshot(model, probe, mean, std, 0)
            job.publish("epoch", {"record": {"epoch": 0}})
            result = run("classify", job.config, reporter=WatchReporter(job, probe, mean, std))
        except Cancelled as err:
            kept = len(job.records)
            return "cancelled", f"{err}: " + (
                f"the {kept} finished epoch(s) stay in {job.path} (`vitlab train --resume` continues it)"
                if kept and job.path.exists()
                else "no epoch had finished, so no folder was kept"
            )
        except (VitlabError, ValueError, OSError) as err:
            return "failed", f"failed: {' '.join(str(err).split())}"
        except Exception as err:  # a bug must end the job, not leave it running forever
            return "failed", f"failed: {type(err).__name__}: {err}"
        finally:
            torch.set_num_threads(threads)
        return "done", (
            f"done: {len(result.history)} epochs in {result.seconds:.1f} s, best validation accuracy "
            f"{result.best_val_acc:.4f} (epoch {result.best_epoch})"
        )

    def cancel(self) -> TrainJob:
        """Ask the running job to stop at its next step; 409 when none runs."""
        job = self.job
        if job is None or job.finished:
            raise RequestError("no training is running", 409)
        job.cancel.set()
        return job

    def snapshot(self, epoch: int) -> dict[str, Any]:
        """The current (or last) job's snapshot after ``epoch`` epochs, with ``shared_max``: the largest attention
        weight of every snapshot so far, the one colour scale the page draws every epoch on (so a near-uniform
        epoch does not look as bright as a peaked one)."""
        job = self.job
        if job is None:
            raise RequestError("no training has run yet: start one on the Runs page", 404)
        if epoch not in job.snapshots:
            raise RequestError(
                f"run {job.name!r} has no snapshot at epoch {epoch}: it has {sorted(job.snapshots)}", 404
            )
        shared = max(float(snap.heat.max()) for snap in list(job.snapshots.values()))
        return {
            "name": job.name,
            "classes": job.classes,
            "shared_max": shared,
            **job.snapshots[epoch].to_dict(job.classes),
        }


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
