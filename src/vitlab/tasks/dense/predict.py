"""Inference with a :class:`DenseModel`: class masks, boxes, and overlay images. Checkpoints are
the one format (``segmenter`` / ``detector`` kinds): :func:`vitlab.runs.load_checkpoint` reads them."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import torch
from torchvision.ops import box_convert

from ...data.options import DataOptions
from ...device import resolve_device
from ...errors import CheckpointError
from ...models.dense import DenseModel
from ...models.dense.heads import semantic_from_queries
from ...runs import Loaded, load_checkpoint

KINDS = {"segment": "segmenter", "detect": "detector"}  # a dense task -> its checkpoint kind


def dense_checkpoint(source: str | Path, device: str = "auto") -> Loaded:
    """:func:`vitlab.runs.load_checkpoint` for a ``segmenter`` / ``detector`` checkpoint; another kind is refused."""
    loaded = load_checkpoint(source, resolve_device(device))
    if loaded.kind not in KINDS.values():
        raise CheckpointError(
            f"{loaded.path} is a {loaded.kind} checkpoint, not a segmenter or detector: "
            f"train one with `vitlab train --task segment|detect --out DIR`"
        )
    return loaded


def class_scores(outputs: dict) -> torch.Tensor:
    """Per-pixel class scores ``(B, K + 1, H, W)`` from a segmentation head's outputs."""
    return semantic_from_queries(outputs["logits"], outputs["masks"]) if "masks" in outputs else outputs["logits"]


@torch.no_grad()
def predict_masks(model: DenseModel, images: torch.Tensor, batch_size: int = 64) -> torch.Tensor:
    """Images ``(N, 3, H, W)`` -> class ids ``(N, H, W)`` (0 = background)."""
    model.eval()
    device = next(model.parameters()).device
    return torch.cat(
        [
            class_scores(model(images[i : i + batch_size].to(device))).argmax(1).cpu()
            for i in range(0, len(images), batch_size)
        ]
    )


@torch.no_grad()
def predict_boxes(
    model: DenseModel, images: torch.Tensor, batch_size: int = 64, min_score: float = 0.0
) -> list[dict[str, torch.Tensor]]:
    """Images ``(N, 3, H, W)`` -> per image ``{"boxes": (M, 4) pixel xyxy, "scores": (M,), "labels": (M,)}``;
    a query's score is its best object-class probability; queries below ``min_score`` are dropped."""
    model.eval()
    device = next(model.parameters()).device
    h, w = images.shape[-2:]
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    results = []
    for i in range(0, len(images), batch_size):
        out = model(images[i : i + batch_size].to(device))
        scores, labels = out["logits"].softmax(-1)[..., :-1].max(-1)
        boxes = box_convert(out["boxes"], "cxcywh", "xyxy").cpu() * scale
        for s, lab, b in zip(scores.cpu(), labels.cpu(), boxes):
            keep = s >= min_score
            results.append({"boxes": b[keep], "scores": s[keep], "labels": lab[keep]})
    return results


PALETTE = np.array(
    [
        [0, 0, 0],
        [230, 25, 75],
        [60, 180, 75],
        [255, 225, 25],
        [0, 130, 200],
        [245, 130, 48],
        [145, 30, 180],
        [70, 240, 240],
        [240, 50, 230],
        [210, 245, 60],
    ],
    np.uint8,
)


def overlay(
    image: torch.Tensor,
    mask: torch.Tensor | None = None,
    boxes: dict | None = None,
    classes: tuple[str, ...] = (),
    alpha: float = 0.5,
    scale: int = 4,
):
    """An RGB PIL image: ``image (3, H, W)`` in [0, 1], class ``mask (H, W)`` blended in colour
    (background left clear), ``boxes`` (as from :func:`predict_boxes`) drawn with labels; upscaled."""
    from PIL import Image, ImageDraw

    rgb = (image.permute(1, 2, 0).clamp(0, 1).numpy() * 255).astype(np.float32)
    if mask is not None:
        colour = PALETTE[mask.numpy() % len(PALETTE)].astype(np.float32)
        fg = (mask.numpy() > 0)[..., None]
        rgb = np.where(fg, (1 - alpha) * rgb + alpha * colour, rgb)
    h, w = rgb.shape[:2]
    pil = Image.fromarray(rgb.astype(np.uint8)).resize((w * scale, h * scale), Image.Resampling.NEAREST)
    if boxes is not None:
        draw = ImageDraw.Draw(pil)
        for box, score, label in zip(boxes["boxes"].tolist(), boxes["scores"].tolist(), boxes["labels"].tolist()):
            colour = tuple(int(c) for c in PALETTE[(label + 1) % len(PALETTE)])
            draw.rectangle([v * scale for v in box], outline=colour, width=2)
            name = classes[label] if label < len(classes) else str(label)
            draw.text((box[0] * scale + 2, box[1] * scale + 1), f"{name} {score:.2f}", fill=colour)
    return pil


def predict_file(
    checkpoint: str | Path, image: str | Path, out: str | Path, min_score: float = 0.5, device: str = "auto"
) -> Path:
    """Run a ``segmenter`` / ``detector`` checkpoint (any source :func:`vitlab.runs.load_checkpoint`
    reads) on one image file, resized to the model's size; write the overlay PNG to ``out``."""
    loaded = dense_checkpoint(checkpoint, device)
    model = cast(DenseModel, loaded.model)  # dense_checkpoint admits only dense kinds
    data = loaded.data.resolve(DataOptions(image_size=model.config.img_size))  # the model normalises itself
    x = data.eval_transform()(data.load_image(image))[None]
    classes = tuple(loaded.data.classes)
    if model.config.task == "segment":
        pil = overlay(x[0], mask=predict_masks(model, x)[0], classes=classes)
    else:
        pil = overlay(x[0], boxes=predict_boxes(model, x, min_score=min_score)[0], classes=classes)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pil.save(out)
    return out
