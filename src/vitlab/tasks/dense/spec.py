"""Dense prediction in the registry: ``segment`` (``segmenter`` checkpoints) and ``detect`` (``detector``),
one config told apart by its ``task`` field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...checks import Float
from ...errors import ConfigError, DataError
from ...runs import Loaded
from ..registry import TaskSpec, register
from ..requests import EvaluateRequest, PredictRequest, option
from ..run import fit_summary
from .predict import predict_file
from .train import DenseTrainConfig, build_task, evaluate_dense_checkpoint, run_line


@dataclass
class DensePredict(PredictRequest):
    """A dense model's overlay of one image (``out``, default ``IMAGE_overlay.png``); boxes scored under
    ``min_score`` are not drawn."""

    min_score: float = option(0.5, "boxes below this score are not drawn", Float(0.0, 1.0))


def evaluate(loaded: Loaded, request: EvaluateRequest) -> str:
    """Pixel accuracy and mean IoU, or COCO mAP, on a split of the checkpoint's dataset."""
    report = evaluate_dense_checkpoint(request)
    head = f"{report['head']} {report['task']} on {report['dataset']} {report['split']} ({report['n']} images):"
    if report["task"] == "segment":
        line = f"{head} pixel accuracy {report['pixel_acc']:.4f}  mean IoU {report['mean_iou']:.4f}"
    else:
        line = f"{head} mAP@[.5:.95] {report['map']:.4f}  mAP@.5 {report['map50']:.4f}"
    return line + (f"\nwrote {request.out}/metrics.json" if request.out else "")


IMAGE_OUT = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")


def overlay_path(request: PredictRequest, what: str) -> tuple[str, str]:
    """The one image a drawing model takes, and where its overlay goes (``out``, else ``IMAGE_overlay.png``)."""
    if len(request.images) != 1:
        raise DataError(f"a {what} model draws on one image at a time, got {len(request.images)}")
    image = request.images[0]
    out = request.out
    if out is not None and (out.endswith("/") or Path(out).is_dir() or Path(out).suffix.lower() not in IMAGE_OUT):
        raise ConfigError(
            f"--out {out!r}: a {what} model writes one overlay image; give a file name ending in {', '.join(IMAGE_OUT)}"
        )
    return image, out or str(Path(image).with_suffix("")) + "_overlay.png"


def predict(loaded: Loaded, request: DensePredict) -> str:
    """The checkpoint's masks or boxes drawn over one image."""
    image, out = overlay_path(request, "dense")
    return f"wrote {predict_file(request.checkpoint, image, out, min_score=request.min_score, device=request.device)}"


SEGMENT, DETECT = (
    register(
        TaskSpec(
            task,
            DenseTrainConfig,
            build=build_task,
            kinds=(kind,),
            summary=fit_summary("the final model (validation runs at the end)"),
            line=run_line,
            evaluate=evaluate,
            predict=predict,
            predict_request=DensePredict,
            preset={"task": task},
            options=("dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "head", "compile"),
            help=f"{task} on ViT features (dense heads)",
        )
    )
    for task, kind in (("segment", "segmenter"), ("detect", "detector"))
)

__all__ = ["DETECT", "SEGMENT", "DensePredict"]
