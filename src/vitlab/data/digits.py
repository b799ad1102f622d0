"""scikit-learn's digits: 1,797 real 8x8 handwritten digits, shipped with scikit-learn (offline)."""
from __future__ import annotations

import torch

from .dataset import DataSplits, ImageDataset, stratified_split


def load_digits_splits(seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)) -> DataSplits:
    """A fixed, stratified, seeded train / val / test split of the digits, images ``(N, 1, 8, 8)`` in [0, 1]."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    images = torch.tensor(raw.images, dtype=torch.float32)[:, None] / 16.0
    labels = torch.tensor(raw.target, dtype=torch.long)
    full = ImageDataset(images, labels, [str(c) for c in range(10)])
    train, val, test = (full.subset(i) for i in stratified_split(raw.target, fractions, seed))
    return DataSplits("digits", train, val, test, hflip_ok=False)
