"""The classification task in the registry: training, ``vitlab evaluate`` and ``vitlab predict`` on
``classifier`` and ``distilled-classifier`` checkpoints (DeiT distillation is classification with a teacher)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path

from ...checks import Bool, Int
from ...errors import ConfigError
from ...runs import Loaded, atomic_write
from ...settings import picked
from ..registry import TaskSpec, register
from ..requests import PredictRequest, option
from ..ssl.probe import ProbeRequest, probe_lines
from .predict import Prediction, classify_files
from .task import TrainConfig
from .train import HeadMismatchError, build_task, evaluate_checkpoint, run_line, run_summary


@dataclass
class ClassifyEvaluate(ProbeRequest):
    """A classifier's evaluation: its accuracy, NLL and ECE on a split (with ``temperature_scale``, before and
    after a temperature fitted on val), or probes of its frozen features."""

    temperature_scale: bool = option(False, "fit a temperature on val, report before/after", Bool())


TOP_K = 1000  # classes one prediction may list


@dataclass
class ClassifyPredict(PredictRequest):
    """A classifier's prediction: each image's ``top_k`` classes as a table, as ``json``, or a CSV (``out``)."""

    top_k: int = option(5, "classes to show per image", Int(1, TOP_K))
    json: bool = option(False, "print JSON instead of a table", Bool())


def evaluation_text(report: dict, out: str | None) -> str:
    """``vitlab evaluate``'s lines for a classifier report (see :func:`evaluate_checkpoint`)."""
    lines = [
        f"{report['model']} on {report['dataset']} {report['split']} ({report['n']} images): "
        f"accuracy {report['accuracy']:.4f}  NLL {report['nll']:.4f}  ECE {report['ece']:.4f}"
    ]
    if "temperature" in report:
        cal = report["calibrated"]
        lines.append(
            f"temperature {report['temperature']:.3f} (fitted on val): NLL {cal['nll']:.4f}  ECE {cal['ece']:.4f}"
        )
    worst = sorted((acc, name) for name, acc in report["per_class_accuracy"].items() if acc is not None)[:3]
    lines.append("lowest per-class accuracy: " + ", ".join(f"{name} {acc:.3f}" for acc, name in worst))
    if out:
        lines.append(f"wrote {out}/metrics.json, reliability.png, confusion.png")
    return "\n".join(lines)


def evaluate(loaded: Loaded, request: ClassifyEvaluate) -> str:
    """Accuracy, NLL, ECE (and temperature scaling) on a split; or, with ``linear_probe`` / ``knn``, probes
    of the frozen features."""
    if request.linear_probe or request.knn:
        return probe_lines(request, loaded)
    try:
        asked = picked(request, "dataset", "data_dir", "split", "temperature_scale", "overwrite", "device", "options")
        report = evaluate_checkpoint(loaded, out_dir=request.out, **asked)
    except HeadMismatchError as mismatch:
        if request.out or request.temperature_scale:  # files and a temperature need the head: refused, with options
            raise
        return frozen_note(mismatch, request.k) + "\n" + probe_lines(replace(request, knn=True), loaded)
    return evaluation_text(report, request.out)


def frozen_note(mismatch: HeadMismatchError, k: int) -> str:
    """The line that says why a classifier is scored by its frozen features: its head is for other classes."""
    return (
        f"its head predicts {mismatch.outputs} classes, not {mismatch.dataset}'s {mismatch.classes}: scoring its "
        f"frozen features by {k}-NN instead (--linear-probe for a linear probe; vitlab train --init to fine-tune it)"
    )


def prediction_csv(predictions: list[Prediction]) -> str:
    """One row per image: its path, then class and probability of each of its top k."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(
        ["image", *[f"{kind}{i + 1}" for i in range(len(predictions[0].top)) for kind in ("class", "probability")]]
    )
    for p in predictions:
        writer.writerow([str(p.path), *[x for c, v in p.top for x in (c, f"{v:.6f}")]])
    return table.getvalue()


def predict(loaded: Loaded, request: ClassifyPredict) -> str:
    """Each image's top-k classes: a table, JSON (``json``), or a CSV (for a folder, or written to ``out``)."""
    if request.out and Path(request.out).suffix.lower() != ".csv":
        raise ConfigError(
            f"--out {request.out!r}: a classifier writes its predictions as a CSV; give a name ending in .csv"
        )
    predictions = classify_files(loaded, request.images, top_k=request.top_k, options=request.options)
    if request.json:
        rows = [{"image": str(p.path), "top": [{"class": c, "probability": v} for c, v in p.top]} for p in predictions]
        return json.dumps(rows, indent=2)
    if request.out:
        atomic_write(request.out, prediction_csv(predictions).encode())
        return f"wrote {request.out} ({len(predictions)} images)"
    if any(Path(p).is_dir() for p in request.images):
        return prediction_csv(predictions).removesuffix("\n")
    width = max(len(str(p.path)) for p in predictions)
    return "\n".join(f"{str(p.path):<{width}}  " + "  ".join(f"{c} {v:.3f}" for c, v in p.top) for p in predictions)


CLASSIFY = register(
    TaskSpec(
        "classify",
        TrainConfig,
        build=build_task,
        kinds=("classifier", "distilled-classifier"),
        summary=run_summary,
        line=run_line,
        evaluate=evaluate,
        predict=predict,
        evaluate_request=ClassifyEvaluate,
        predict_request=ClassifyPredict,
        options=(
            "model",
            "dataset",
            "data_dir",
            "rows",
            "epochs",
            "batch_size",
            "lr",
            "seed",
            "augment",
            "init",
            "layer_decay",
            "teacher",
            "distill",
            "distill_alpha",
            "distill_temperature",
            "compile",
            "tune",
        ),
        help="image classification (with --teacher: DeiT distillation)",
    )
)

__all__ = ["CLASSIFY", "ClassifyEvaluate", "ClassifyPredict", "evaluate", "predict"]
