"""In-memory image datasets and their train / validation / test splits.

Small datasets live in memory as tensors: images ``(N, C, H, W)`` float32 in ``[0, 1]``,
labels ``(N,)`` int64. Normalisation and augmentation run batched on these tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class ImageDataset:
    """Images ``(N, C, H, W)`` float32 in ``[0, 1]`` with labels ``(N,)`` int64."""
    images: torch.Tensor
    labels: torch.Tensor
    classes: list[str]

    def __post_init__(self) -> None:
        if self.images.ndim != 4:
            raise ValueError(f"images must be (N, C, H, W), got shape {tuple(self.images.shape)}")
        if len(self.images) != len(self.labels):
            raise ValueError(f"{len(self.images)} images but {len(self.labels)} labels")
        if len(self.labels) and (int(self.labels.min()) < 0 or int(self.labels.max()) >= len(self.classes)):
            raise ValueError(f"labels must lie in [0, {len(self.classes) - 1}] for {len(self.classes)} classes, "
                             f"found {int(self.labels.min())}..{int(self.labels.max())}")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        return tuple(self.images.shape[1:])

    def subset(self, index: torch.Tensor | np.ndarray | list[int]) -> "ImageDataset":
        index = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return ImageDataset(self.images[index], self.labels[index], self.classes)


@dataclass
class DataSplits:
    """A dataset's splits and the per-channel statistics of its training images.

    ``hflip_ok`` says whether a horizontal flip keeps an image's class (true for photos and clothes,
    false for digits: a mirrored 2 is not a 2); augmentation presets read it.
    """
    name: str
    train: ImageDataset
    val: ImageDataset
    test: ImageDataset | None = None
    mean: tuple[float, ...] = field(default=())
    std: tuple[float, ...] = field(default=())
    hflip_ok: bool = True

    def __post_init__(self) -> None:
        if not self.mean:
            images = self.train.images
            self.mean = tuple(images.mean(dim=(0, 2, 3)).tolist())
            self.std = tuple(images.std(dim=(0, 2, 3)).clamp_min(1e-6).tolist())

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.train.image_shape


def stratified_split(labels: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Split indices into parts of the given fractions, keeping class proportions; seeded."""
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in fractions]
    bounds = np.cumsum(fractions)
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        cuts = np.round(bounds * len(idx)).astype(int)
        for i, (lo, hi) in enumerate(zip(np.r_[0, cuts[:-1]], cuts)):
            parts[i].extend(idx[lo:hi].tolist())
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def stratified_order(labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded order of all indices whose every prefix keeps the class proportions.

    Each class is shuffled, its ``k``-th member gets the key ``(k + 0.5) / class_size``, and indices are
    sorted by key, so ``stratified_order(labels, seed)[:n]`` is a stratified subset of size ``n`` and
    smaller subsets are nested in larger ones.
    """
    rng = np.random.default_rng(seed)
    keys = np.empty(len(labels))
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        keys[idx] = (np.arange(len(idx)) + 0.5) / len(idx)
    return np.argsort(keys, kind="stable")


TRAIN_VAL_FRACTION = 0.1
TEST_ONLY_VAL_FRACTION = 0.2


def file_splits(name: str, train: ImageDataset | None, test: ImageDataset | None, hflip_ok: bool) -> DataSplits:
    """Splits for datasets that ship as a train file and a test file, keeping file order.

    With a train file: its first 90% is the training pool, the last 10% validation, the test file the
    test split. With only a test file: its first 80% is the pool, the last 20% validation, no test split
    (MNIST's t10k: 8,000 + 2,000, the textbook protocol).
    """
    source = train if train is not None else test
    if source is None:
        raise ValueError(f"{name}: need a train or a test file")
    n_val = round(len(source) * (TRAIN_VAL_FRACTION if train is not None else TEST_ONLY_VAL_FRACTION))
    cut = len(source) - n_val
    pool = ImageDataset(source.images[:cut], source.labels[:cut], source.classes)
    val = ImageDataset(source.images[cut:], source.labels[cut:], source.classes)
    return DataSplits(name, pool, val, test if train is not None else None, hflip_ok=hflip_ok)
