"""Bipartite matching of predictions to targets (the Hungarian algorithm, SciPy's
``linear_sum_assignment``) and the DETR / MaskFormer matching costs.

Costs are ``(Q, T)``: ``Q`` predictions (queries) by ``T`` targets; lower is a better pair.
"""

from __future__ import annotations

import torch
from torchvision.ops import box_convert, generalized_box_iou

from ...errors import ConfigError


def hungarian_match(cost: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The assignment of targets to distinct predictions of least total cost.

    ``cost (Q, T)`` with ``Q >= T`` -> ``(pred_index (T,), target_index (T,))``, sorted by prediction.
    """
    if cost.ndim != 2 or cost.shape[0] < cost.shape[1]:
        raise ConfigError(
            f"cost must be (queries, targets) with queries >= targets, got {tuple(cost.shape)}: "
            f"use more queries than the most objects in an image"
        )
    from scipy.optimize import linear_sum_assignment  # scipy's import costs every command ~40 MB: only here

    rows, cols = linear_sum_assignment(cost.detach().cpu().float().numpy())
    return torch.as_tensor(rows, dtype=torch.long), torch.as_tensor(cols, dtype=torch.long)


def detection_cost(
    logits: torch.Tensor,
    boxes: torch.Tensor,
    labels: torch.Tensor,
    target_boxes: torch.Tensor,
    w_class: float = 1.0,
    w_l1: float = 5.0,
    w_giou: float = 2.0,
) -> torch.Tensor:
    """DETR's matching cost ``(Q, T)``: ``-w_class p(label) + w_l1 |b - b'|_1 - w_giou GIoU(b, b')``.

    ``logits (Q, K + 1)``, ``boxes (Q, 4)`` and ``target_boxes (T, 4)`` as ``(cx, cy, w, h)``, ``labels (T,)``.
    """
    prob = logits.softmax(-1)[:, labels]
    l1 = torch.cdist(boxes, target_boxes, p=1)
    giou = generalized_box_iou(box_convert(boxes, "cxcywh", "xyxy"), box_convert(target_boxes, "cxcywh", "xyxy"))
    return -w_class * prob + w_l1 * l1 - w_giou * giou


def dice_cost(masks: torch.Tensor, target_masks: torch.Tensor) -> torch.Tensor:
    """``1 - dice`` between mask logits ``(Q, H, W)`` and binary targets ``(T, H, W)``: ``(Q, T)``."""
    p, t = masks.flatten(1).sigmoid(), target_masks.flatten(1).float()
    return 1 - (2 * p @ t.T + 1) / (p.sum(-1)[:, None] + t.sum(-1)[None] + 1)


def bce_cost(masks: torch.Tensor, target_masks: torch.Tensor) -> torch.Tensor:
    """Mean per-pixel binary cross-entropy of every mask against every target: ``(Q, T)``."""
    x, t = masks.flatten(1), target_masks.flatten(1).float()
    pos, neg = torch.nn.functional.softplus(-x), torch.nn.functional.softplus(x)
    return (pos @ t.T + neg @ (1 - t).T) / x.shape[1]


def mask_cost(
    logits: torch.Tensor,
    masks: torch.Tensor,
    labels: torch.Tensor,
    target_masks: torch.Tensor,
    w_class: float = 1.0,
    w_mask: float = 5.0,
    w_dice: float = 5.0,
) -> torch.Tensor:
    """MaskFormer's matching cost ``(Q, T)``: class probability, per-pixel BCE and dice."""
    return (
        -w_class * logits.softmax(-1)[:, labels]
        + w_mask * bce_cost(masks, target_masks)
        + w_dice * dice_cost(masks, target_masks)
    )
