"""Classify image files with any classifier checkpoint: ``classify_files(loaded, paths, top_k)``.

Each image is read as the checkpoint's data config says (its channels; resized, centre-cropped and
filtered and normalised by its :class:`~vitlab.data.DataConfig`'s ``eval_transform``, which for a timm or
Hugging Face model is that library's own eval pipeline) and scored; the
``top_k`` classes come back with their softmax probabilities.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ...data.options import DataOptions
from ...errors import CheckpointError, DataError
from ...runs import Loaded
from ...runs.weights import run_at_size

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".pgm")


@dataclass
class Prediction:
    """The ``top`` ``(class name, probability)`` pairs of one image, most probable first."""

    path: Path
    top: list[tuple[str, float]]


def image_files(paths: Sequence[str | Path]) -> list[Path]:
    """The image files named, a folder standing for the images directly inside it (sorted)."""
    files: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            found = sorted(p for p in item.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not found:
                raise DataError(f"{item} holds no image files ({', '.join(IMAGE_SUFFIXES)})")
            files += found
        else:
            files.append(item)
    return files


def output_names(classes: Sequence[str], outputs: int, path: Path | str) -> list[str]:
    """A name for each of a model's ``outputs``: its checkpoint's class names, and the index of each output
    the checkpoint does not name (said in a warning; a model with more outputs than names)."""
    names = list(classes[:outputs]) if outputs else list(classes)
    if len(names) < outputs:
        if names:
            warnings.warn(
                f"{path} names {len(names)} classes but the model has {outputs} outputs: outputs "
                f"{len(names)}..{outputs - 1} are shown by their index",
                stacklevel=3,
            )
        names += [str(i) for i in range(len(names), outputs)]
    return names


@torch.no_grad()
def classify_files(
    loaded: Loaded,
    paths: Sequence[str | Path],
    top_k: int = 5,
    batch_size: int = 64,
    options: DataOptions | None = None,
) -> list[Prediction]:
    """Top-``k`` classes of every image in ``paths`` (files or folders) under ``loaded``'s classifier, each
    read with the checkpoint's preprocessing changed by the fields ``options`` sets (``--image-size``:
    the model runs at that size, its positions resampled)."""
    if loaded.kind not in ("classifier", "distilled-classifier"):
        raise CheckpointError(
            f"{loaded.path} is a {loaded.kind} checkpoint: `vitlab predict` classifies with a "
            f"classifier and overlays masks or boxes with a segmenter or detector"
        )
    if top_k < 1:
        raise DataError(f"--top-k must be at least 1, got {top_k}")
    data, model = loaded.data.resolve(options), loaded.model.eval()
    run_at_size(model, data.image_size)
    if data.in_chans not in (1, 3):
        raise DataError(f"{loaded.path} takes {data.in_chans}-channel images; image files give 1 or 3")
    files = image_files(paths)
    device = next(model.parameters()).device
    outputs: int = getattr(getattr(model, "config", None), "num_classes", 0)
    classes = output_names(data.classes, outputs, loaded.path)
    transform, results = data.eval_transform(), []
    for start in range(0, len(files), batch_size):
        chunk = files[start : start + batch_size]
        inputs = torch.stack([transform(data.load_image(f)) for f in chunk]).to(device)
        probs = model(inputs).float().softmax(dim=-1)
        if len(classes) < probs.shape[-1]:  # a model whose config does not say its outputs
            classes = output_names(classes, probs.shape[-1], loaded.path)
        values, indices = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
        for f, vals, idx in zip(chunk, values.tolist(), indices.tolist()):
            results.append(Prediction(f, [(classes[i], v) for i, v in zip(idx, vals)]))
    return results
