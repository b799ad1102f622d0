"""``vitlab data info``: where a dataset was found, its splits, shape, classes, statistics and how its files are
read, as one text (the splits a classification run of the same settings trains on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...data.options import DataOptions
from ...data.registry import photo_sources
from .task import TrainConfig
from .train import describe_reading, load_splits

DEFAULT_PHOTO_SIZE = 224  # image files are read at ViT's usual side unless a model or --image-size says


def dataset_info(
    name: str,
    data_dir: str | None = None,
    *,
    seed: int = 0,
    rows: int | None = None,
    normalization: str = "standardize",
    model: str | None = None,
    data: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> str:
    """The description of dataset ``name`` split with ``seed`` (first ``rows`` training images), normalised by
    ``normalization``, image files read at ``model``'s input size (else ``data["image_size"]``, else
    :data:`DEFAULT_PHOTO_SIZE`) with the ``data`` options; ``progress`` hears the count of files indexed."""
    data = dict(data or {})
    if model is None and name in photo_sources():
        data.setdefault("image_size", DEFAULT_PHOTO_SIZE)
    config = TrainConfig(
        dataset=name,
        data_dir=data_dir,
        seed=seed,
        rows=rows,
        normalization=normalization,
        model=model or "vit-digits",
        data=DataOptions.from_dict(data),
    )
    splits, preprocess = load_splits(config, progress=progress)
    sizes = {
        "train": len(splits.train),
        "val": len(splits.val),
        "test": len(splits.test) if splits.test is not None else None,
    }
    lines = [
        f"dataset  {splits.name}",
        f"source   {splits.source}",
        "splits   " + "  ".join(f"{k} {'-' if v is None else v}" for k, v in sizes.items()),
        f"rule     {splits.split_rule}",
        f"shape    {splits.image_shape} (C, H, W)",
    ]
    if preprocess is not None:
        lines.append(f"read     {describe_reading(splits, preprocess)}")
    lines += [
        f"classes  {splits.num_classes}: {', '.join(splits.train.classes)}",
        f"norm     {splits.normalization}",
        "mean     " + ", ".join(f"{m:.4f}" for m in splits.mean),
        "std      " + ", ".join(f"{s:.4f}" for s in splits.std),
        f"hflip    {'ok' if splits.hflip_ok else 'no (changes the class)'}",
    ]
    return "\n".join(lines)


__all__ = ["DEFAULT_PHOTO_SIZE", "dataset_info"]
