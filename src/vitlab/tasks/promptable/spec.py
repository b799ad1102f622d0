"""Promptable (SAM-style) segmentation in the registry: ``promptable`` runs and checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ...runs import Loaded
from ..dense.spec import overlay_path
from ..registry import TaskSpec, register
from ..requests import PredictRequest, option
from ..run import fit_summary
from .predict import predict_file
from .train import PromptableTrainConfig, build_task, run_line


def coordinates(text: str, n: int, option: str) -> list[float]:
    """``"X,Y"`` -> ``[X, Y]`` (``n`` comma-separated pixel coordinates of ``option``)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != n:
        raise ConfigError(f"{option} takes {n} comma-separated pixel coordinates, got {text!r}")
    return values


@dataclass
class PromptPredict(PredictRequest):
    """A promptable model's best mask over one image for its prompts: ``point`` (``"X,Y"``, any number) and /
    or ``box`` (``"X0,Y0,X1,Y1"``), in the image's pixels."""

    point: list[str] = option(
        [], "a foreground point in the image's pixels (repeatable)", metavar="X,Y", action="append"
    )
    box: str | None = option(None, "a box prompt in the image's pixels", metavar="X0,Y0,X1,Y1")


def predict(loaded: Loaded, request: PromptPredict) -> str:
    """The best mask for the point prompts and / or the box prompt, over one image."""
    image, out = overlay_path(request, "promptable")
    if not request.point and request.box is None:
        raise ConfigError("a promptable model needs a prompt: --point X,Y (repeatable) or --box X0,Y0,X1,Y1")
    points = [coordinates(p, 2, "--point") for p in request.point] or None
    box = coordinates(request.box, 4, "--box") if request.box is not None else None
    path, iou = predict_file(request.checkpoint, image, out, points=points, box=box, device=request.device)
    return f"wrote {path} (predicted IoU {iou:.3f})"


PROMPTABLE = register(
    TaskSpec(
        "promptable",
        PromptableTrainConfig,
        build=build_task,
        kinds=("promptable",),
        summary=fit_summary("the final model (validation runs at the end)"),
        line=run_line,
        predict=predict,
        predict_request=PromptPredict,
        options=("dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "compile"),
        help="promptable segmentation from points and boxes",
    )
)

__all__ = ["PROMPTABLE", "PromptPredict", "coordinates"]
