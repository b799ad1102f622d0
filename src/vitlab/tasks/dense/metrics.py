"""Dense metrics: pixel accuracy and mean IoU for masks; COCO mAP for boxes (pycocotools' COCOeval)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np
import torch

from ...errors import DataError, require


def segmentation_confusion(predicted: torch.Tensor, target: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Pixel counts ``(K, K)``, rows the true class, columns the predicted; inputs ``(B, H, W)`` ids."""
    index = target.flatten().long() * num_classes + predicted.flatten().long()
    return torch.bincount(index, minlength=num_classes**2).reshape(num_classes, num_classes)


def segmentation_report(confusion: torch.Tensor) -> dict:
    """``pixel_acc``, ``mean_iou`` (over classes present in the target or the prediction) and
    ``iou`` per class (None where a class is in neither) from a confusion matrix ``(K, K)``."""
    c = confusion.double()
    inter = c.diag()
    union = c.sum(0) + c.sum(1) - inter
    iou = torch.where(union > 0, inter / union.clamp(min=1), torch.nan)
    return {
        "pixel_acc": float(inter.sum() / c.sum().clamp(min=1)),
        "mean_iou": float(iou.nanmean()),
        "iou": [None if torch.isnan(v) else float(v) for v in iou],
    }


def boundary_band(masks: torch.Tensor, width: int = 1) -> torch.Tensor:
    """Pixels within ``width`` (Chebyshev distance) of a class boundary: ``(B, H, W)`` ids -> bool."""
    m = masks[:, None].float()
    k = 2 * width + 1
    high = torch.nn.functional.max_pool2d(m, k, stride=1, padding=width)
    low = -torch.nn.functional.max_pool2d(-m, k, stride=1, padding=width)
    return (high != low)[:, 0]


def boundary_accuracy(predicted: torch.Tensor, target: torch.Tensor, width: int = 1) -> float:
    """Pixel accuracy on the target's boundary band (see :func:`boundary_band`): where patch-level
    predictions lose most."""
    band = boundary_band(target, width)
    return float((predicted[band] == target[band]).float().mean()) if band.any() else float("nan")


def box_map(predictions: list[dict], targets: list[dict], num_classes: int) -> dict[str, float]:
    """COCO-style ``map`` (mAP@[.5:.95]) and ``map50`` (mAP@.5) by pycocotools' ``COCOeval``.

    ``predictions``: per image ``{"boxes": (M, 4), "scores": (M,), "labels": (M,)}``; ``targets``:
    per image ``{"boxes": (T, 4), "labels": (T,)}``; boxes ``(x0, y0, x1, y1)`` in pixels.
    """
    require("pycocotools", "dense", "COCO mAP of detections")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images: list[dict[str, Any]] = []
    gts: list[dict[str, Any]] = []
    dets: list[dict[str, Any]] = []
    for i, (p, t) in enumerate(zip(predictions, targets)):
        images.append({"id": i})
        for box, label in zip(t["boxes"].tolist(), t["labels"].tolist()):
            w, h = box[2] - box[0], box[3] - box[1]
            gts.append(
                {
                    "id": len(gts) + 1,
                    "image_id": i,
                    "category_id": int(label),
                    "bbox": [box[0], box[1], w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
        for box, score, label in zip(p["boxes"].tolist(), p["scores"].tolist(), p["labels"].tolist()):
            dets.append(
                {
                    "image_id": i,
                    "category_id": int(label),
                    "score": float(score),
                    "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
                }
            )
    if not gts:
        raise DataError("no target boxes: mAP needs at least one ground-truth box")
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        gt = COCO()
        gt.dataset = {"images": images, "annotations": gts, "categories": [{"id": c} for c in range(num_classes)]}
        gt.createIndex()
        if not dets:
            return {"map": 0.0, "map50": 0.0}
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = np.maximum(ev.stats[:2], 0.0)  # -1 means "no data" in COCOeval
    return {"map": float(stats[0]), "map50": float(stats[1])}
