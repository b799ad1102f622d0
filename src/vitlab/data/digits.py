"""scikit-learn's digits: 1,797 real 8x8 handwritten digits, shipped with scikit-learn (offline)."""

from __future__ import annotations

import torch

from .dataset import ImageDataset, Source

HELD_OUT = (0.15, 0.15)


def read_digits() -> Source:
    """All 1,797 digits, images ``(N, 1, 8, 8)`` in [0, 1], to be split stratified 70/15/15."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    images = torch.tensor(raw.images, dtype=torch.float32)[:, None] / 16.0
    labels = torch.tensor(raw.target, dtype=torch.long)
    data = ImageDataset(images, labels, [str(c) for c in range(10)])
    return Source(data, HELD_OUT, None, False, "embedded in scikit-learn", "the 1,797 digits")
