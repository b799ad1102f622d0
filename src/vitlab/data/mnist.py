"""MNIST and Fashion-MNIST from a folder of IDX files (gzip or raw).

The folder holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``
and ``t10k-labels-idx1-ubyte``, each optionally ``.gz`` (the official downloads and Debian's
``dataset-fashion-mnist`` ship ``.gz``); the train pair or the t10k pair may be absent (not both).
torchvision's layout (``DIR/MNIST/raw``, ``DIR/FashionMNIST/raw``) is found too.

Splits (by :func:`~vitlab.data.dataset.make_splits`): with the training files, validation is a
stratified random 10% of the training file and the test split is the official t10k file. With only
the t10k files (the MNIST test-set protocol), validation is a stratified random 20% of t10k and there
is no test split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import DataError
from .dataset import ImageDataset, Source
from .idx import read_idx_pair

CLASSES = {
    "mnist": [str(d) for d in range(10)],
    "fashion-mnist": [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ],
}
TORCHVISION_FOLDER = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}
SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "t10k": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
VAL_FRACTION = 0.1
TEST_ONLY_VAL_FRACTION = 0.2


def locate_mnist(folder: Path, variant: str = "mnist") -> Path | None:
    """The folder under ``folder`` (itself or torchvision's ``VARIANT/raw``) holding IDX files, or None."""
    names = [name for pair in SPLIT_FILES.values() for name in pair]
    candidates = (folder, folder / TORCHVISION_FOLDER[variant] / "raw")
    return next((d for d in candidates if any(_find(d, name) for name in names)), None)


def read_mnist(data_dir: str | Path, variant: str = "mnist") -> Source:
    """``variant`` ("mnist" or "fashion-mnist") from the IDX files in ``data_dir`` (found by
    :func:`locate_mnist`); images ``(N, 1, 28, 28)`` float32 in [0, 1]. Digits are never h-flipped."""
    if variant not in CLASSES:
        raise DataError(f"unknown MNIST variant {variant!r}; choose one of {list(CLASSES)}")
    root = locate_mnist(Path(data_dir), variant) or Path(data_dir)
    train, t10k = (_read_split(root, split, CLASSES[variant]) for split in SPLIT_FILES)
    hflip_ok = variant != "mnist"
    if train is not None:
        return Source(train, (VAL_FRACTION,), t10k, hflip_ok, str(root), "the training file")
    if t10k is not None:
        return Source(t10k, (TEST_ONLY_VAL_FRACTION,), None, hflip_ok, str(root), "the t10k file (no training file)")
    wanted = ", ".join(f"{name}[.gz]" for pair in SPLIT_FILES.values() for name in pair)
    raise DataError(f"{variant}: no IDX files in {data_dir} (expected {wanted})")


def _read_split(root: Path, split: str, classes: list[str]) -> ImageDataset | None:
    images_name, labels_name = SPLIT_FILES[split]
    images_path, labels_path = _find(root, images_name), _find(root, labels_name)
    if images_path is None and labels_path is None:
        return None
    if images_path is None or labels_path is None:
        missing = images_name if images_path is None else labels_name
        raise DataError(f"{root}: found the other {split} file but not {missing}[.gz]")
    images, labels = read_idx_pair(images_path, labels_path, len(classes))
    return ImageDataset(
        torch.from_numpy(np.array(images))[:, None].float().div_(255),
        torch.from_numpy(labels.astype(np.int64)),
        classes,
    )


def _find(root: Path, name: str) -> Path | None:
    for candidate in (root / name, root / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None
