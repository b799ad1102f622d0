"""Inference with a :class:`~vitlab.models.promptable.PromptableModel`: :func:`segment` one image
from points and / or a box, and overlay files. Checkpoints are the one format (kind ``promptable``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F

from ...data.image import read_image
from ...data.preprocess import resize_images
from ...device import resolve_device
from ...errors import CheckpointError, ConfigError
from ...models.promptable import FOREGROUND, PADDING, PromptableModel, box_prompt
from ...runs import Loaded, load_checkpoint
from .train import KIND


def promptable_checkpoint(source: str | Path, device: str = "auto") -> Loaded:
    """:func:`vitlab.runs.load_checkpoint` for a ``promptable`` checkpoint; another kind is refused."""
    loaded = load_checkpoint(source, resolve_device(device))
    if loaded.kind != KIND:
        raise CheckpointError(
            f"{loaded.path} is a {loaded.kind} checkpoint, not a promptable one: train one with "
            f"`vitlab train --task promptable --dataset shapes --out DIR`"
        )
    return loaded


def prompt_tensors(
    points: Sequence[Sequence[float]] | torch.Tensor | None,
    labels: Sequence[int] | torch.Tensor | None,
    box: Sequence[float] | torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One prompt as points ``(P, 2)`` and labels ``(P,)``: the points (labels default to foreground),
    then the box's two corners; a prompt without a box ends with a padding point, as in training."""
    if points is None and box is None:
        raise ConfigError("a prompt needs a point or a box: pass points=[(x, y)] or box=(x0, y0, x1, y1)")
    xy = torch.as_tensor(points if points is not None else [], dtype=torch.float32).reshape(-1, 2)
    lab = (
        torch.full((len(xy),), FOREGROUND) if labels is None else torch.as_tensor(labels, dtype=torch.long).reshape(-1)
    )
    if len(lab) != len(xy):
        raise ConfigError(
            f"{len(xy)} points but {len(lab)} labels: give one label (1 foreground, 0 background) per point"
        )
    if box is not None:
        corners, corner_labels = box_prompt(torch.as_tensor(box, dtype=torch.float32).reshape(1, 4))
        return torch.cat([xy, corners[0]]), torch.cat([lab, corner_labels[0]])
    return torch.cat([xy, torch.zeros(1, 2)]), torch.cat([lab, torch.tensor([PADDING])])


@torch.no_grad()
def segment(
    model: PromptableModel,
    image: torch.Tensor,
    points: Sequence[Sequence[float]] | torch.Tensor | None = None,
    labels: Sequence[int] | torch.Tensor | None = None,
    box: Sequence[float] | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks for one prompt on one image ``(3, H, W)`` in [0, 1], of any size (resized to the model's).

    ``points``: pixel ``(x, y)`` of the image, ``(P, 2)``; ``labels``: 1 foreground (default) or 0
    background per point; ``box``: pixel ``(x0, y0, x1, y1)``. Returns the K candidate masks
    ``(K, H, W)`` bool and their predicted IoU ``(K,)``, best first.
    """
    if image.dim() != 3 or image.shape[0] != 3:
        raise ConfigError(f"segment takes one RGB image (3, H, W) in [0, 1], got shape {tuple(image.shape)}")
    model.eval()
    device = next(model.parameters()).device
    h, w = image.shape[-2:]
    size = model.config.img_size
    xy, lab = prompt_tensors(points, labels, box)
    xy = xy * torch.tensor([size / w, size / h])
    x = resize_images(image[None].float(), (size, size), antialias=False)
    out = model(x.to(device), xy[None].to(device), lab[None].to(device))
    logits = F.interpolate(out["masks"].float(), size=(h, w), mode="bilinear", align_corners=False)[0]
    iou, order = out["iou"][0].float().sort(descending=True)
    return (logits[order] > 0).cpu(), iou.cpu()


def overlay_prompt(
    image: torch.Tensor,
    mask: torch.Tensor,
    points: torch.Tensor | None = None,
    labels: torch.Tensor | None = None,
    box: Sequence[float] | None = None,
    scale: int = 4,
    alpha: float = 0.5,
):
    """An RGB PIL image: ``image (3, H, W)`` in [0, 1], ``mask (H, W)`` blended in blue, the points
    (green foreground, red background) and the box drawn on top; upscaled ``scale`` times."""
    from PIL import Image, ImageDraw

    rgb = image.permute(1, 2, 0).clamp(0, 1).numpy() * 255
    blue = np.array([30, 144, 255], np.float32)
    rgb = np.where(mask.numpy()[..., None], (1 - alpha) * rgb + alpha * blue, rgb)
    h, w = rgb.shape[:2]
    pil = Image.fromarray(rgb.astype(np.uint8)).resize((w * scale, h * scale), Image.Resampling.NEAREST)
    draw = ImageDraw.Draw(pil)
    if box is not None:
        draw.rectangle([v * scale for v in box], outline=(255, 215, 0), width=2)
    for (px, py), label in zip(
        (points if points is not None else torch.zeros(0, 2)).tolist(),
        (labels if labels is not None else torch.zeros(0)).tolist(),
    ):
        cx, cy, r = (px + 0.5) * scale, (py + 0.5) * scale, max(3, scale)
        draw.ellipse(
            [cx - r, cy - r, cx + r, cy + r],
            fill=(0, 200, 0) if label == FOREGROUND else (220, 0, 0),
            outline=(255, 255, 255),
        )
    return pil


def predict_file(
    checkpoint: str | Path,
    image: str | Path,
    out: str | Path,
    points: Sequence[Sequence[float]] | None = None,
    labels: Sequence[int] | None = None,
    box: Sequence[float] | None = None,
    device: str = "auto",
) -> tuple[Path, float]:
    """Segment one image file (prompts in its own pixels) with a ``promptable`` checkpoint; write the
    overlay of the best mask to ``out``; returns the path and the mask's predicted IoU."""

    loaded = promptable_checkpoint(checkpoint, device)
    model = cast(PromptableModel, loaded.model)  # promptable_checkpoint admits only this kind
    x = read_image(image)  # the one image door, at its own size: (3, H, W) in [0, 1]
    masks, ious = segment(model, x, points, labels, box)
    xy, lab = prompt_tensors(points, labels, None) if points is not None else (None, None)
    pil = overlay_prompt(x, masks[0], xy, lab, box)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pil.save(out)
    return out, float(ious[0])
