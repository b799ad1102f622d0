"""SAM's training loss on K candidate masks: focal + dice on the best candidate only, and the
mean squared error between each candidate's predicted IoU and its actual IoU.

Shapes: mask logits ``(B, K, H, W)``, targets ``(B, H, W)`` in {0, 1}, predicted IoU ``(B, K)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchvision.ops import sigmoid_focal_loss

FOCAL_WEIGHT, DICE_WEIGHT, IOU_WEIGHT = 20.0, 1.0, 1.0  # SAM's 20 : 1 focal to dice


def focal_per_mask(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean sigmoid focal loss (alpha 0.25, gamma 2) over the pixels of each candidate: ``(B, K)``."""
    return sigmoid_focal_loss(logits, targets[:, None].expand_as(logits), reduction="none").mean((-2, -1))


def dice_per_mask(logits: torch.Tensor, targets: torch.Tensor, eps: float = 1.0) -> torch.Tensor:
    """``1 - (2 |p t| + eps) / (|p| + |t| + eps)`` of each candidate, ``p = sigmoid(logits)``: ``(B, K)``."""
    p, t = logits.sigmoid().flatten(2), targets[:, None].flatten(2)
    return 1 - (2 * (p * t).sum(-1) + eps) / (p.sum(-1) + t.sum(-1) + eps)


def mask_iou(masks: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """IoU of boolean masks ``(..., H, W)`` with boolean targets broadcast to them: ``(...)``; two
    empty masks agree (IoU 1)."""
    inter = (masks & targets).flatten(-2).sum(-1).float()
    union = (masks | targets).flatten(-2).sum(-1).float()
    return torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union))


def promptable_loss(logits: torch.Tensor, iou: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"loss", "mask", "iou_mse", "best_iou" (B,)}``: ``mask`` is the mean over images of the
    smallest ``20 focal + dice`` among the K candidates (only the best one learns, so the others
    stay free to cover other readings of an ambiguous prompt); ``iou_mse`` the mean over images and
    candidates of ``(predicted - actual IoU)^2``, the actual IoU that of the mask ``logits > 0``;
    ``best_iou`` the actual IoU of each image's best candidate."""
    logits, targets = logits.float(), targets.float()
    per_mask = FOCAL_WEIGHT * focal_per_mask(logits, targets) + DICE_WEIGHT * dice_per_mask(logits, targets)
    mask, best = per_mask.min(1)
    actual = mask_iou(logits.detach() > 0, targets[:, None].bool())
    iou_mse = F.mse_loss(iou.float(), actual)
    return {
        "loss": mask.mean() + IOU_WEIGHT * iou_mse,
        "mask": mask.mean(),
        "iou_mse": iou_mse,
        "best_iou": actual.gather(1, best[:, None])[:, 0],
    }
