"""Evaluate a classifier: accuracy, NLL, ECE, reliability, confusion, optional temperature scaling."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..data import DataSplits, ImageDataset, load_dataset, normalize
from .checkpoint import Checkpoint, load_checkpoint
from .distributed import resolve_device
from .metrics import (calibration_bins, confusion_matrix, ece_from_bins, fit_temperature, per_class_accuracy,
                      reliability)

SPLITS = ("test", "val", "train")


@torch.no_grad()
def predict_logits(model: nn.Module, images: torch.Tensor, mean: Sequence[float], std: Sequence[float],
                   batch_size: int = 512, amp: bool = True) -> torch.Tensor:
    """Logits ``(N, K)`` float32 for ``images (N, C, H, W)`` in [0, 1] (on the model's device).

    Puts ``model`` in eval mode; bf16 autocast on CUDA when ``amp``.
    """
    model.eval()
    device = images.device
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp and device.type == "cuda"):
        chunks = [model(normalize(chunk, mean, std)).float() for chunk in images.split(batch_size)]
    return torch.cat(chunks)


def classification_report(logits: torch.Tensor, labels: torch.Tensor, classes: Sequence[str],
                          n_bins: int = 15) -> dict[str, Any]:
    """Metrics of ``logits (N, K)`` against ``labels (N,)``, as JSON-ready values.

    Keys: ``n``, ``accuracy``, ``nll``, ``ece``, ``per_class_accuracy`` (class -> recall, None if absent),
    ``confusion`` (rows true, columns predicted), ``reliability`` (see :func:`metrics.reliability`).
    """
    logits, labels = logits.float().cpu(), labels.cpu()
    probs = logits.softmax(dim=1)
    confusion = confusion_matrix(logits.argmax(dim=1), labels, len(classes))
    return {"n": len(labels),
            "accuracy": confusion.diagonal().sum().item() / max(1, len(labels)),
            "nll": F.cross_entropy(logits, labels).item(),
            "ece": ece_from_bins(calibration_bins(probs, labels, n_bins)),
            "per_class_accuracy": {c: None if math.isnan(a) else a
                                   for c, a in zip(classes, per_class_accuracy(confusion).tolist())},
            "confusion": confusion.tolist(),
            "reliability": reliability(probs, labels, n_bins)}


def evaluate_model(model: nn.Module, dataset: ImageDataset, mean: Sequence[float], std: Sequence[float], *,
                   calibration: ImageDataset | None = None, n_bins: int = 15, batch_size: int = 512,
                   amp: bool = True) -> dict[str, Any]:
    """:func:`classification_report` of ``model`` on ``dataset`` (images normalised by ``mean``/``std``).

    With a ``calibration`` set (the validation split), also fits a temperature ``T`` on it by
    minimising NLL and adds ``temperature`` and ``calibrated`` (the report of ``logits / T``).
    Data are moved to the model's device.
    """
    device = next(model.parameters()).device

    def logits_of(data: ImageDataset) -> torch.Tensor:
        return predict_logits(model, data.images.to(device), mean, std, batch_size, amp).cpu()

    logits = logits_of(dataset)
    report = classification_report(logits, dataset.labels, dataset.classes, n_bins)
    if calibration is not None:
        temperature = fit_temperature(logits_of(calibration), calibration.labels)
        report["temperature"] = temperature
        report["calibrated"] = classification_report(logits / temperature, dataset.labels, dataset.classes, n_bins)
    return report


def checkpoint_data(path: str | Path, dataset: str | None = None, data_dir: str | Path | None = None,
                    device: str = "auto", rows: int | None = None) -> tuple[Checkpoint, DataSplits]:
    """The checkpoint's model (eval mode, on ``device``) and its dataset's splits.

    The dataset (name, data_dir, seed, rows) defaults to the one the checkpoint records, so the
    splits are the training run's, normalised with the run's statistics; ``rows`` overrides the
    number of training rows.
    """
    ckpt = load_checkpoint(path, resolve_device(device))
    meta = ckpt.metadata
    name = dataset or meta.get("dataset")
    if name is None:
        raise ValueError(f"{ckpt.path} does not record its dataset: pass one (--dataset NAME)")
    same = name == meta.get("dataset")
    splits = load_dataset(name, data_dir or (meta.get("data_dir") if same else None), seed=meta.get("seed", 0),
                          rows=rows if rows is not None else meta.get("rows") if same else None)
    if same and "mean" in meta:
        splits = replace(splits, mean=tuple(meta["mean"]), std=tuple(meta["std"]))
    return ckpt, splits


def evaluate_checkpoint(path: str | Path, *, dataset: str | None = None, data_dir: str | Path | None = None,
                        split: str = "test", temperature_scale: bool = False, out_dir: str | Path | None = None,
                        device: str = "auto") -> dict[str, Any]:
    """Evaluate a checkpoint written by :func:`vitlab.train.train` on a split of its dataset.

    The dataset (name, data_dir, seed, rows) defaults to the one recorded in the checkpoint, so the
    splits are the training run's; images are normalised with the training statistics. With
    ``out_dir``, writes ``metrics.json``, ``reliability.png`` and ``confusion.png`` there.
    """
    from .figures import plot_confusion, plot_reliability

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: choose one of {SPLITS}")
    ckpt, splits = checkpoint_data(path, dataset, data_dir, device)
    meta, name = ckpt.metadata, splits.name
    data = getattr(splits, split)
    if data is None:
        raise ValueError(f"{name} has no {split} split here (e.g. MNIST from its test file alone): "
                         f"use --split val")
    report = evaluate_model(ckpt.model, data, splits.mean, splits.std,
                            calibration=splits.val if temperature_scale else None)
    report = {"checkpoint": str(ckpt.path), "model": meta["model"], "dataset": name, "split": split, **report}
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
        plot_reliability(report["reliability"], out / "reliability.png",
                         report.get("calibrated", {}).get("reliability"), title=f"{meta['model']} on {name} {split}")
        plot_confusion(report["confusion"], data.classes, out / "confusion.png",
                       title=f"{meta['model']} on {name} {split}")
    return report
