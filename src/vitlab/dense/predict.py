"""Inference with a :class:`DenseModel`: class masks, boxes, checkpoints, and overlay images."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from torchvision.ops import box_convert

from ..train.checkpoint import read_metadata, save_weights, weights_path
from .heads import semantic_from_queries
from .model import DenseConfig, DenseModel


def class_scores(outputs: dict) -> torch.Tensor:
    """Per-pixel class scores ``(B, K + 1, H, W)`` from a segmentation head's outputs."""
    return semantic_from_queries(outputs["logits"], outputs["masks"]) if "masks" in outputs else outputs["logits"]


@torch.no_grad()
def predict_masks(model: DenseModel, images: torch.Tensor, batch_size: int = 64) -> torch.Tensor:
    """Images ``(N, 3, H, W)`` -> class ids ``(N, H, W)`` (0 = background)."""
    model.eval()
    device = next(model.parameters()).device
    return torch.cat([class_scores(model(images[i:i + batch_size].to(device))).argmax(1).cpu()
                      for i in range(0, len(images), batch_size)])


@torch.no_grad()
def predict_boxes(model: DenseModel, images: torch.Tensor, batch_size: int = 64,
                  min_score: float = 0.0) -> list[dict[str, torch.Tensor]]:
    """Images ``(N, 3, H, W)`` -> per image ``{"boxes": (M, 4) pixel xyxy, "scores": (M,), "labels": (M,)}``;
    a query's score is its best object-class probability; queries below ``min_score`` are dropped."""
    model.eval()
    device = next(model.parameters()).device
    h, w = images.shape[-2:]
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    results = []
    for i in range(0, len(images), batch_size):
        out = model(images[i:i + batch_size].to(device))
        scores, labels = out["logits"].softmax(-1)[..., :-1].max(-1)
        boxes = box_convert(out["boxes"], "cxcywh", "xyxy").cpu() * scale
        for s, lab, b in zip(scores.cpu(), labels.cpu(), boxes):
            keep = s >= min_score
            results.append({"boxes": b[keep], "scores": s[keep], "labels": lab[keep]})
    return results


def save_dense(model: DenseModel, path: str | Path, classes: tuple[str, ...], extra: dict | None = None) -> None:
    """Weights as safetensors with the dense config and class names in the metadata."""
    save_weights(model, path, {"dense_config": model.config.to_dict(), "classes": list(classes), **(extra or {})})


def is_dense_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` (file, checkpoint folder or run folder) holds a dense model."""
    return "dense_config" in read_metadata(weights_path(path))


def load_dense(path: str | Path, device: str | torch.device = "cpu") -> tuple[DenseModel, dict]:
    """Rebuild a dense model saved by :func:`save_dense`; returns ``(model in eval mode, metadata)``."""
    file = weights_path(path)
    meta = read_metadata(file)
    if "dense_config" not in meta:
        raise ValueError(f"{file} is not a dense checkpoint (no dense_config): train one with "
                         f"`vitlab train --task segment|detect --out DIR`")
    model = DenseModel(DenseConfig.from_dict(meta["dense_config"]))
    model.load_state_dict(load_file(str(file)))
    return model.to(device).eval(), meta


PALETTE = np.array([[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
                    [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60]], np.uint8)


def overlay(image: torch.Tensor, mask: torch.Tensor | None = None, boxes: dict | None = None,
            classes: tuple[str, ...] = (), alpha: float = 0.5, scale: int = 4):
    """An RGB PIL image: ``image (3, H, W)`` in [0, 1], class ``mask (H, W)`` blended in colour
    (background left clear), ``boxes`` (as from :func:`predict_boxes`) drawn with labels; upscaled."""
    from PIL import Image, ImageDraw

    rgb = (image.permute(1, 2, 0).clamp(0, 1).numpy() * 255).astype(np.float32)
    if mask is not None:
        colour = PALETTE[mask.numpy() % len(PALETTE)].astype(np.float32)
        fg = (mask.numpy() > 0)[..., None]
        rgb = np.where(fg, (1 - alpha) * rgb + alpha * colour, rgb)
    h, w = rgb.shape[:2]
    pil = Image.fromarray(rgb.astype(np.uint8)).resize((w * scale, h * scale), Image.NEAREST)
    if boxes is not None:
        draw = ImageDraw.Draw(pil)
        for box, score, label in zip(boxes["boxes"].tolist(), boxes["scores"].tolist(), boxes["labels"].tolist()):
            colour = tuple(int(c) for c in PALETTE[(label + 1) % len(PALETTE)])
            draw.rectangle([v * scale for v in box], outline=colour, width=2)
            name = classes[label] if label < len(classes) else str(label)
            draw.text((box[0] * scale + 2, box[1] * scale + 1), f"{name} {score:.2f}", fill=colour)
    return pil


def predict_file(checkpoint: str | Path, image: str | Path, out: str | Path, min_score: float = 0.5,
                 device: str = "cpu") -> Path:
    """Run a dense checkpoint on one image file; write the overlay PNG to ``out``."""
    from PIL import Image

    model, meta = load_dense(checkpoint, device)
    size = model.config.img_size
    with Image.open(image) as im:
        x = torch.from_numpy(np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR),
                                        np.float32) / 255).permute(2, 0, 1)[None]
    classes = tuple(meta.get("classes", ()))
    if model.config.task == "segment":
        pil = overlay(x[0], mask=predict_masks(model, x)[0], classes=classes)
    else:
        pil = overlay(x[0], boxes=predict_boxes(model, x, min_score=min_score)[0], classes=classes)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pil.save(out)
    return out
