"""Set losses for query heads: match (Hungarian), then supervise matched pairs; the unmatched
queries learn the no-object class (the last logit), down-weighted by ``eos_coef``. Auxiliary
losses apply the same to every earlier decoder layer (``outputs["aux"]``), and a detection head's
token proposals (``outputs["proposals"]``) learn by one-to-many matching.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import box_convert, generalized_box_iou

from .matching import detection_cost, hungarian_match, mask_cost


def class_weights(num_logits: int, eos_coef: float, device: torch.device) -> torch.Tensor:
    """Cross-entropy weights ``(K + 1,)``: 1 for classes, ``eos_coef`` for no-object (last)."""
    w = torch.ones(num_logits, device=device)
    w[-1] = eos_coef
    return w


def set_class_loss(
    logits: torch.Tensor, matches: list[tuple[torch.Tensor, torch.Tensor]], labels: list[torch.Tensor], eos_coef: float
) -> torch.Tensor:
    """Cross-entropy of ``logits (B, Q, K + 1)``: matched queries -> their target's label, others -> no-object."""
    b, q, k = logits.shape
    classes = torch.full((b, q), k - 1, dtype=torch.long, device=logits.device)
    for i, ((pred, tgt), lab) in enumerate(zip(matches, labels)):
        classes[i, pred.to(logits.device)] = lab[tgt.to(lab.device)].to(logits.device)
    return F.cross_entropy(logits.transpose(1, 2), classes, class_weights(k, eos_coef, logits.device))


@dataclass
class DetectionLossWeights:
    """Class 2, L1 5, GIoU 2 (Deformable DETR's), the same in the matching cost; no-object
    cross-entropy weight 0.5 (DETR's 0.1 let near-duplicate queries all score high on `shapes`).
    ``one_to_many``: how many proposals learn each target (H-DETR's one-to-many matching), see
    :func:`repeat_targets`."""

    w_class: float = 2.0
    w_l1: float = 5.0
    w_giou: float = 2.0
    eos_coef: float = 0.5
    one_to_many: int = 4


def repeat_targets(targets: list[dict], copies: int, num_queries: int) -> list[dict]:
    """Each image's targets repeated ``copies`` times (fewer where ``copies x T`` would exceed the
    ``num_queries``): Hungarian matching against the copies pairs every target with that many distinct
    predictions, the one-to-many assignment that gives a dense signal where one-to-one gives one."""
    out = []
    for t in targets:
        k = max(1, min(copies, num_queries // max(len(t["labels"]), 1)))
        out.append({"labels": t["labels"].repeat(k), "boxes": t["boxes"].repeat(k, 1)})
    return out


class DetectionLoss(nn.Module):
    """DETR's set loss over the last layer and every auxiliary one, plus the one-to-many loss of the
    proposals where the head makes them (``outputs["proposals"]``, same keys).

    ``outputs``: ``{"logits": (B, Q, K + 1), "boxes": (B, Q, 4), "aux": [...]}``; ``targets``: per image
    ``{"labels": (T,), "boxes": (T, 4)}``, boxes ``(cx, cy, w, h)`` in [0, 1]. Returns a dict with
    ``loss`` (the total) and its parts for the last layer.
    """

    def __init__(self, weights: DetectionLossWeights | None = None) -> None:
        super().__init__()
        self.w = weights or DetectionLossWeights()

    def layer_loss(self, out: dict, targets: list[dict]) -> dict[str, torch.Tensor]:
        w = self.w
        with torch.no_grad():
            matches = [
                hungarian_match(detection_cost(lg, bx, t["labels"], t["boxes"], w.w_class, w.w_l1, w.w_giou))
                for lg, bx, t in zip(out["logits"], out["boxes"], targets)
            ]
        cls = set_class_loss(out["logits"], matches, [t["labels"] for t in targets], w.eos_coef)
        pred = torch.cat([bx[p] for bx, (p, _) in zip(out["boxes"], matches)])
        true = torch.cat([t["boxes"][g] for t, (_, g) in zip(targets, matches)]).to(pred)
        n = max(len(true), 1)
        l1 = F.l1_loss(pred, true, reduction="sum") / n
        giou = (
            1
            - torch.diag(generalized_box_iou(box_convert(pred, "cxcywh", "xyxy"), box_convert(true, "cxcywh", "xyxy")))
        ).sum() / n
        return {"loss": w.w_class * cls + w.w_l1 * l1 + w.w_giou * giou, "class": cls, "l1": l1, "giou": giou}

    def forward(self, outputs: dict, targets: list[dict]) -> dict[str, torch.Tensor]:
        last = self.layer_loss(outputs, targets)
        aux = [self.layer_loss(a, targets)["loss"] for a in outputs.get("aux", [])]
        if "proposals" in outputs:
            proposals = outputs["proposals"]
            many = repeat_targets(targets, self.w.one_to_many, proposals["logits"].shape[1])
            aux.append(self.layer_loss(proposals, many)["loss"])
        return {**last, "loss": last["loss"] + sum(aux)}


def dice_loss(masks: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean ``1 - dice`` of matched mask logits ``(M, H, W)`` and binary targets ``(M, H, W)``."""
    p, t = masks.flatten(1).sigmoid(), targets.flatten(1).float()
    return (1 - (2 * (p * t).sum(-1) + 1) / (p.sum(-1) + t.sum(-1) + 1)).mean()


class MaskClassificationLoss(nn.Module):
    """MaskFormer's set loss for semantic segmentation: each class present in an image is one target.

    ``outputs``: ``{"logits": (B, Q, K + 1), "masks": (B, Q, H, W), "aux": [...]}``; ``masks``
    ``(B, H, W)`` class ids in ``0..K-1``. Loss = class CE + 5 BCE + 5 dice (per layer, summed).
    """

    def __init__(self, eos_coef: float = 0.1, w_mask: float = 5.0, w_dice: float = 5.0) -> None:
        super().__init__()
        self.eos_coef, self.w_mask, self.w_dice = eos_coef, w_mask, w_dice

    def layer_loss(self, out: dict, targets: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        with torch.no_grad():
            matches = [
                hungarian_match(mask_cost(lg, mk, lab, tm, 1.0, self.w_mask, self.w_dice))
                for lg, mk, (lab, tm) in zip(out["logits"], out["masks"], targets)
            ]
        cls = set_class_loss(out["logits"], matches, [lab for lab, _ in targets], self.eos_coef)
        pred = torch.cat([mk[p] for mk, (p, _) in zip(out["masks"], matches)])
        true = torch.cat([tm[g] for (_, tm), (_, g) in zip(targets, matches)]).float()
        return cls + self.w_mask * F.binary_cross_entropy_with_logits(pred, true) + self.w_dice * dice_loss(pred, true)

    def forward(self, outputs: dict, masks: torch.Tensor) -> torch.Tensor:
        targets = []
        for m in masks:
            present = m.unique()
            targets.append((present, m[None] == present[:, None, None]))
        return self.layer_loss(outputs, targets) + sum(self.layer_loss(a, targets) for a in outputs.get("aux", []))
