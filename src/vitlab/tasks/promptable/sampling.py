"""Prompts for training and evaluation, drawn from instance masks and boxes.

Training (SAM's first interaction): per drawn object (the task draws several per image) either one
foreground point uniform inside the object, or its box with each coordinate moved by noise of
standard deviation ``jitter`` times the box side. Evaluation: the object's centre (the pixel farthest from
its boundary, SAM's "centre point") or its exact box. Points are pixel ``(x, y)``; boxes pixel
``(x0, y0, x1, y1)``; every prompt is two points ``(B, 2, 2)`` with labels ``(B, 2)``, a single point
padded by one padding point.
"""

from __future__ import annotations

import numpy as np
import torch

from ...models.promptable import FOREGROUND, PADDING, box_prompt


def point_prompt(points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Foreground points ``(B, 2)`` -> prompt points ``(B, 2, 2)`` and labels ``(B, 2)`` (one padding point)."""
    labels = torch.tensor([FOREGROUND, PADDING], device=points.device).expand(len(points), 2)
    return torch.stack([points, torch.zeros_like(points)], 1), labels


def uniform_points(targets: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A pixel ``(x, y)`` uniform inside each non-empty mask of ``targets (B, H, W)``: ``(B, 2)`` float."""
    w = targets.shape[-1]
    flat = torch.multinomial(targets.flatten(1).float(), 1, generator=generator)[:, 0]
    return torch.stack([flat % w, flat // w], 1).float()


def jitter_boxes(boxes: torch.Tensor, jitter: float, generator: torch.Generator) -> torch.Tensor:
    """Boxes ``(B, 4)`` with each coordinate moved by ``N(0, (jitter * side)^2)``, the side that
    coordinate spans; each box keeps at least one pixel of width and height."""
    side = (boxes[:, 2:] - boxes[:, :2]).repeat(1, 2)
    moved = boxes + jitter * side * torch.randn(boxes.shape, generator=generator)
    lo = torch.minimum(moved[:, :2], moved[:, 2:] - 1)
    return torch.cat([lo, torch.maximum(moved[:, 2:], lo + 1)], 1)


def training_prompts(
    targets: torch.Tensor, boxes: torch.Tensor, box_prob: float, jitter: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per object (mask ``targets (B, H, W)``, box ``boxes (B, 4)``) a jittered box with
    probability ``box_prob``, else a uniform point inside: points ``(B, 2, 2)``, labels ``(B, 2)``."""
    point_xy, point_labels = point_prompt(uniform_points(targets, generator))
    box_xy, box_labels = box_prompt(jitter_boxes(boxes, jitter, generator))
    is_box = torch.rand(len(boxes), generator=generator) < box_prob
    return (
        torch.where(is_box[:, None, None], box_xy, point_xy),
        torch.where(is_box[:, None], box_labels, point_labels),
    )


def centre_points(targets: torch.Tensor) -> torch.Tensor:
    """The pixel ``(x, y)`` of each mask ``(M, H, W)`` farthest from its boundary (the image edge
    counts as boundary); the first such pixel in raster order: ``(M, 2)`` float."""
    from scipy import ndimage

    centres = []
    for mask in targets.cpu().numpy().astype(bool):
        distance = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
        y, x = np.unravel_index(int(np.argmax(distance)), mask.shape)
        centres.append((x, y))
    return torch.tensor(centres, dtype=torch.float32).reshape(-1, 2)
