"""Segment page: the promptable runs, one run's model and held-out images, one prompt's masks.

Promptable segmentation in the explorer: the ``promptable`` runs under the runs roots, their models,
held-out images to prompt, and one prompt's candidate masks.

A run is addressed by its name in the runs listing (:class:`~vitlab.explore.run_index.RunShelf`), never by
path; its checkpoint (``best/`` else ``last/``) is read through :func:`~vitlab.explore.run_files.run_file`,
so a file whose real path leaves the runs root, is not a regular file or is over the size cap is
refused, and loaded by :func:`vitlab.tasks.promptable.promptable_checkpoint` (any other kind is refused).

Held-out images are :data:`HELD_OUT` ``shapes`` images generated with the seed after the run's data
seed: the run's data never drew them. They come with their objects' masks, so an answer says, beside
the model's predicted IoU of each candidate, its actual IoU with the object prompted. An image the user
uploads (any reference of :class:`~vitlab.explore.images.ImageBook`) is prompted the same way, without
the actual IoU.

A prompt is at most :data:`MAX_POINTS` pixel points ``(x, y)`` of the image, each foreground (1) or
background (0), and / or a box ``(x0, y0, x1, y1)`` (``x1``, ``y1`` exclusive); on the wire,
``points=x,y;x,y``, ``labels=1,0`` and ``box=x0,y0,x1,y1``. Anything else is refused in one line.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from fastapi import APIRouter

from ...data.dense import DenseDataset
from ...data.shapes import generate_shapes
from ...errors import VitlabError
from ...models.promptable import PromptableModel
from ...runs import DataConfig
from ...runs.layout import BEST, LAST, SUMMARY, WEIGHTS
from ...tasks.promptable import promptable_checkpoint, segment
from ...tasks.promptable.losses import mask_iou
from ..arrays import encode_array
from ..images import ImageBook, RequestError, fit_image
from ..run_files import Run, as_object, read_json, run_file
from ..run_index import RunShelf, run_task
from . import Context

TASK = "promptable"  # the kind run.json records for a promptable run
HELD_OUT = 24  # held-out images generated per run
HELD_OUT_REF = "held-out"  # references "held-out:INDEX" name them
MAX_POINTS = 8  # points in one prompt
MAX_PROMPT_TEXT = 400  # characters of one prompt parameter
KEEP_MODELS = 2  # loaded promptable models kept in memory
KEEP_HELD_OUT = 4  # held-out sets kept in memory


@dataclass
class Prompt:
    """Points ``(P, 2)`` pixel ``(x, y)`` with labels ``(P,)`` (1 foreground, 0 background), and a box."""

    points: list[tuple[float, float]]
    labels: list[int]
    box: tuple[float, float, float, float] | None

    def describe(self) -> dict[str, Any]:
        return {"points": [list(p) for p in self.points], "labels": self.labels, "box": self.box and list(self.box)}


@dataclass
class Objects:
    """The objects of an image: ``instances (H, W)`` (0 background, ``k + 1`` object ``k``) and the class
    name of each object."""

    instances: torch.Tensor
    classes: list[str]


@dataclass
class PromptRun:
    """A promptable run ready to prompt: its model (eval mode, CPU), its data config and checkpoint file."""

    run: Run
    model: PromptableModel
    data: DataConfig
    checkpoint: str

    @property
    def image_size(self) -> int:
        return self.model.config.img_size

    def describe(self) -> dict[str, Any]:
        """JSON-ready facts about the run's model, all read from it."""
        cfg = self.model.config
        return {
            "name": self.run.name,
            "checkpoint": self.checkpoint,
            "image_size": self.image_size,
            "masks": cfg.num_masks,
            "patch_size": cfg.patch_size,
            "params": sum(p.numel() for p in self.model.parameters()),
            "dataset": self.data.dataset,
            "classes": list(self.data.classes),
            "seed": self.data.seed,
        }


def checkpoint_file(run: Run) -> tuple[str, Path]:
    """The name (``best/model.safetensors`` else ``last/...``) and real path of ``run``'s checkpoint, read
    through :func:`~vitlab.explore.run_files.run_file`; 409 when it has none yet."""
    for kept in (BEST, LAST):
        file = run_file(run, f"{kept}/{WEIGHTS}")
        if file is not None:
            return f"{kept}/{WEIGHTS}", file
    raise RequestError(f"run {run.name!r} has no checkpoint ({BEST}/{WEIGHTS} or {LAST}/{WEIGHTS}) yet", 409)


def parse_numbers(text: str, name: str, form: str) -> list[float]:
    """Comma-separated finite numbers of parameter ``name`` (written as ``form``)."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise RequestError(f"{name} must be {form}, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise RequestError(f"{name} must be {form} with finite numbers, got {text!r}")
    return values


def parse_prompt(points: str | None, labels: str | None, box: str | None, size: tuple[int, int]) -> Prompt:
    """The :class:`Prompt` of the wire parameters (see the module docstring) on an image of ``size (H, W)``."""
    height, width = size
    for name, text in (("points", points), ("labels", labels), ("box", box)):
        if text is not None and len(text) > MAX_PROMPT_TEXT:
            raise RequestError(f"{name} has {len(text)} characters, over {MAX_PROMPT_TEXT}: not a prompt of the page's")
    xy: list[tuple[float, float]] = []
    for part in points.split(";") if points else []:
        pair = parse_numbers(part, "points", "'x,y;x,y' (pixels)")
        if len(pair) != 2:
            raise RequestError(f"points must be 'x,y;x,y' (pixels), got {points!r}")
        if not (0 <= pair[0] < width and 0 <= pair[1] < height):
            raise RequestError(f"point ({pair[0]:g}, {pair[1]:g}) lies outside the {width}x{height} image")
        xy.append((pair[0], pair[1]))
    if len(xy) > MAX_POINTS:
        raise RequestError(f"a prompt takes at most {MAX_POINTS} points, got {len(xy)}: clear it and start again")
    marks = parse_numbers(labels, "labels", "'1,0' (1 foreground, 0 background)") if labels else [1.0] * len(xy)
    if len(marks) != len(xy) or any(m not in (0, 1) for m in marks):
        raise RequestError(f"labels must be one 1 (foreground) or 0 (background) per point, got {labels!r}")
    corners = None
    if box:
        values = parse_numbers(box, "box", "'x0,y0,x1,y1' (pixels)")
        if len(values) != 4:
            raise RequestError(f"box must be 'x0,y0,x1,y1' (pixels), got {box!r}")
        x0, y0, x1, y1 = values
        if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
            raise RequestError(f"box {box!r} must satisfy 0 <= x0 < x1 <= {width} and 0 <= y0 < y1 <= {height}")
        corners = (x0, y0, x1, y1)
    if not xy and corners is None:
        raise RequestError("a prompt needs a point or a box: click the image or drag a box")
    return Prompt(xy, [int(m) for m in marks], corners)


def prompted_object(prompt: Prompt, instances: torch.Tensor) -> int:
    """The object ``instances (H, W)`` (0 background, ``k + 1`` object ``k``) a prompt names: the one under
    its first foreground point, else the one with the most pixels in its box; 0 when none."""
    for (x, y), label in zip(prompt.points, prompt.labels):
        if label == 1:
            return int(instances[int(y), int(x)])
    if prompt.box is None:
        return 0
    x0, y0, x1, y1 = (int(v) for v in prompt.box)
    inside = instances[y0:y1, x0:x1].flatten()
    counts = torch.bincount(inside[inside > 0])
    return int(counts.argmax()) if len(counts) else 0


def segment_view(
    entry: PromptRun, image: torch.Tensor, prompt: Prompt, objects: Objects | None = None
) -> dict[str, Any]:
    """The candidate masks of ``prompt`` on ``image (1, C, H, W)`` in [0, 1] by :func:`vitlab.tasks.promptable.segment`:
    ``masks (K, H, W)`` (1 inside), their predicted IoU, best first, and their areas; with the image's
    ``objects``, the object prompted (:func:`prompted_object`), its class and area, and each candidate's
    actual IoU with it (:func:`vitlab.tasks.promptable.losses.mask_iou`, as training scores it)."""
    _, _, h, w = image.shape
    rgb = fit_image(image, 3, (h, w))[0]
    masks, iou = segment(entry.model, rgb, prompt.points or None, prompt.labels or None, prompt.box)
    target = prompted_object(prompt, objects.instances) if objects is not None else 0
    truth = None
    if objects is not None and target:
        mask = objects.instances == target
        truth = {
            "object": target,
            "class": objects.classes[target - 1],
            "area": int(mask.sum()),
            "iou": mask_iou(masks, mask).tolist(),
        }
    return {
        "run": entry.run.name,
        "height": h,
        "width": w,
        "prompt": prompt.describe(),
        "masks": encode_array(masks.float()),
        "iou": iou.tolist(),
        "areas": masks.flatten(1).sum(-1).tolist(),
        "truth": truth,
    }


class PromptShelf:
    """The promptable runs of a :class:`RunShelf`, their loaded models (a few, by checkpoint file and
    its modification time) and held-out images. Model computations run one at a time (a lock)."""

    def __init__(self, runs: RunShelf, book: ImageBook) -> None:
        self.runs, self.book = runs, book
        self._models: OrderedDict[tuple[Path, int, int], PromptRun] = OrderedDict()
        self._held_out: OrderedDict[tuple[int, int], DenseDataset] = OrderedDict()
        self.lock = threading.RLock()

    def listing(self) -> dict[str, Any]:
        """Every promptable run, name and summary (or, when its files cannot be read, the reason)."""
        found = []
        for run in self.runs.runs().values():
            if run.kind != "train":
                continue
            try:
                if run_task(run) != TASK:
                    continue
                summary = as_object(read_json(run, SUMMARY), f"{SUMMARY} of run {run.name}")
                found.append({"name": run.name, "test": as_object(summary.get("test"), "test"), "broken": None})
            except RequestError as err:
                found.append({"name": run.name, "test": {}, "broken": str(err)})
        return {"roots": [str(r) for r in self.runs.roots], "runs": found}

    def get(self, name: str) -> PromptRun:
        """Run ``name``'s model, loaded once per checkpoint version."""
        run = self.runs.get(name)
        task = run_task(run) if run.kind == "train" else run.kind
        if task != TASK:
            raise RequestError(
                f"run {name!r} is a {task or 'vitlab'} run, not a promptable one: train one with "
                f"`vitlab train --task promptable --dataset shapes --out runs/NAME`"
            )
        checkpoint, file = checkpoint_file(run)
        stat = file.stat()
        key = (file, stat.st_mtime_ns, stat.st_size)
        with self.lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            try:
                loaded = promptable_checkpoint(file, device="cpu")
            except (VitlabError, ValueError, OSError) as err:
                raise RequestError(f"run {name!r}: {' '.join(str(err).split())}", 422) from err
            entry = PromptRun(run, cast(PromptableModel, loaded.model), loaded.data, checkpoint)
            self._models[key] = entry
            while len(self._models) > KEEP_MODELS:
                self._models.popitem(last=False)
            return entry

    def held_out(self, entry: PromptRun) -> DenseDataset | None:
        """:data:`HELD_OUT` ``shapes`` images of the run's size, generated with its data seed + 1 (which its
        data never drew); ``None`` for a run not trained on ``shapes``."""
        if entry.data.dataset != "shapes":
            return None
        key = (entry.image_size, entry.data.seed + 1)
        with self.lock:
            if key not in self._held_out:
                self._held_out[key] = generate_shapes(HELD_OUT, *key)
                while len(self._held_out) > KEEP_HELD_OUT:
                    self._held_out.popitem(last=False)
            self._held_out.move_to_end(key)
            return self._held_out[key]

    def detail(self, name: str) -> dict[str, Any]:
        """Run ``name``'s model facts and its held-out images ``(M, 3, S, S)`` with their object counts."""
        entry = self.get(name)
        data = self.held_out(entry)
        held_out = None
        if data is not None:
            held_out = {
                "images": encode_array(data.images),
                "objects": [len(b) for b in data.boxes],
                "seed": entry.data.seed + 1,
            }
        return {**entry.describe(), "held_out": held_out}

    def image(self, entry: PromptRun, ref: str) -> tuple[torch.Tensor, Objects | None]:
        """The image ``(1, C, H, W)`` named ``ref`` (``held-out:INDEX`` or any image reference of the
        book) and its objects when known."""
        source, _, key = ref.partition(":")
        if source != HELD_OUT_REF:
            return self.book.get(ref).image, None
        data = self.held_out(entry)
        if data is None:
            raise RequestError(f"run {entry.run.name!r} was not trained on shapes: it has no held-out images", 404)
        if not key.isdigit() or int(key) >= len(data):
            raise RequestError(f"held-out image {key!r}: choose one of 0..{len(data) - 1}", 404)
        index = int(key)
        objects = None
        if data.instances is not None:
            objects = Objects(data.instances[index], [data.classes[int(c)] for c in data.labels[index]])
        return data.images[index : index + 1], objects

    def segment(self, name: str, ref: str, points: str | None, labels: str | None, box: str | None) -> dict[str, Any]:
        """:func:`segment_view` of the prompt given on the wire, on image ``ref``, by run ``name``."""
        entry = self.get(name)
        image, objects = self.image(entry, ref)
        prompt = parse_prompt(points, labels, box, (image.shape[-2], image.shape[-1]))
        with self.lock:
            return {"ref": ref, **segment_view(entry, image, prompt, objects)}


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    shelf = ctx.prompt_shelf

    @api.get("/api/prompt/runs")
    def prompt_runs() -> dict[str, Any]:
        return shelf.listing()

    @api.get("/api/prompt/runs/{name}")
    def prompt_run(name: str) -> dict[str, Any]:
        return shelf.detail(name)

    @api.get("/api/prompt/runs/{name}/segment")
    def prompt_segment(
        name: str, ref: str, points: str | None = None, labels: str | None = None, box: str | None = None
    ) -> dict[str, Any]:
        return shelf.segment(name, ref, points, labels, box)

    return api
