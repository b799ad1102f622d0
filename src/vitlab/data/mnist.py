"""MNIST and Fashion-MNIST from a directory of IDX files (gzip or raw), split by :func:`file_splits`.

The directory holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``
and ``t10k-labels-idx1-ubyte``, each optionally ``.gz``; the train pair or the t10k pair may be absent
(not both). torchvision's layout (``DIR/MNIST/raw``, ``DIR/FashionMNIST/raw``) is found too.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .dataset import DataSplits, ImageDataset, file_splits
from .idx import read_idx_pair

CLASSES = {
    "mnist": [str(d) for d in range(10)],
    "fashion-mnist": ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                      "Bag", "Ankle boot"],
}
TORCHVISION_FOLDER = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}
SPLIT_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "t10k": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def load_mnist_splits(data_dir: str | Path, variant: str = "mnist") -> DataSplits:
    """``variant`` ("mnist" or "fashion-mnist") from IDX files; images ``(N, 1, 28, 28)`` float32 in [0, 1].

    Digits are never h-flipped (``hflip_ok`` False); clothes may be.
    """
    if variant not in CLASSES:
        raise ValueError(f"unknown MNIST variant {variant!r}; choose one of {list(CLASSES)}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{variant}: no directory {data_dir}; get the files with "
                                f"`vitlab data download {variant} --to {data_dir}`")
    names = [name for pair in SPLIT_FILES.values() for name in pair]
    candidates = (data_dir, data_dir / TORCHVISION_FOLDER[variant] / "raw")
    root = next((d for d in candidates if any(_find(d, name) for name in names)), data_dir)
    parts = {split: _read_split(root, split, CLASSES[variant]) for split in SPLIT_FILES}
    if parts["train"] is None and parts["t10k"] is None:
        wanted = ", ".join(f"{name}[.gz]" for name in names)
        raise FileNotFoundError(f"{variant}: no IDX files in {root} (expected {wanted}); get them with "
                                f"`vitlab data download {variant} --to {data_dir}`")
    return file_splits(variant, parts["train"], parts["t10k"], hflip_ok=variant != "mnist")


def _read_split(root: Path, split: str, classes: list[str]) -> ImageDataset | None:
    images_name, labels_name = SPLIT_FILES[split]
    images_path, labels_path = _find(root, images_name), _find(root, labels_name)
    if images_path is None and labels_path is None:
        return None
    if images_path is None or labels_path is None:
        missing = images_name if images_path is None else labels_name
        raise FileNotFoundError(f"{root}: found the other {split} file but not {missing}[.gz]")
    images, labels = read_idx_pair(images_path, labels_path, len(classes))
    return ImageDataset(torch.from_numpy(np.array(images))[:, None].float().div_(255),
                        torch.from_numpy(labels.astype(np.int64)), classes)


def _find(root: Path, name: str) -> Path | None:
    for candidate in (root / name, root / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None
