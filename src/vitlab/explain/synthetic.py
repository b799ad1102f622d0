"""A task whose label is decided by one known patch: ground truth for explanation maps.

Every ``P x P`` patch of an image shows one of ``num_classes`` binary patterns (half the pixels lit)
drawn at random, plus Gaussian noise; the label is the pattern in patch ``key_patch`` (raster
order). Every other patch is a distractor from the same distribution, so the key patch is the only
evidence, and a map that explains a model that learnt the task should rank it first.
"""

from __future__ import annotations

from itertools import combinations
from math import comb
from typing import Any

import torch

from ..data import DataSplits, ImageDataset, stratified_split
from ..errors import ConfigError

FRACTIONS = (0.7, 0.15, 0.15)  # train / val / test shares of the key-patch task


def patch_patterns(num_classes: int, patch_size: int) -> torch.Tensor:
    """``(num_classes, P, P)`` distinct 0/1 patterns with ``P*P // 2`` lit pixels each."""
    pixels = patch_size * patch_size
    available = comb(pixels, pixels // 2)
    if not 2 <= num_classes <= available:
        raise ConfigError(
            f"{patch_size}x{patch_size} patches hold {available} distinct half-lit patterns, "
            f"so num_classes must lie in [2, {available}], got {num_classes}: "
            f"change num_classes or patch_size"
        )
    patterns = torch.zeros(num_classes, pixels)
    for k, lit in zip(range(num_classes), combinations(range(pixels), pixels // 2)):
        patterns[k, list(lit)] = 1.0
    return patterns.reshape(num_classes, patch_size, patch_size)


def make_key_patch(
    num_images: int,
    image_size: int = 8,
    patch_size: int = 2,
    key_patch: int = 5,
    num_classes: int = 4,
    noise: float = 0.1,
    seed: int = 0,
) -> ImageDataset:
    """``num_images`` balanced images ``(N, 1, S, S)`` in [0, 1], labelled by patch ``key_patch``."""
    if image_size % patch_size:
        raise ConfigError(
            f"image_size {image_size} is not a multiple of patch_size {patch_size}: choose sizes that tile"
        )
    side = image_size // patch_size
    if not 0 <= key_patch < side * side:
        raise ConfigError(f"key_patch must be a patch index in [0, {side * side}), got {key_patch}")
    patterns = patch_patterns(num_classes, patch_size)
    g = torch.Generator().manual_seed(seed)
    labels = (torch.arange(num_images) % num_classes)[torch.randperm(num_images, generator=g)]
    drawn = torch.randint(num_classes, (num_images, side * side), generator=g)
    drawn[:, key_patch] = labels
    tiles = patterns[drawn].reshape(num_images, side, side, patch_size, patch_size)
    images = tiles.permute(0, 1, 3, 2, 4).reshape(num_images, 1, image_size, image_size)
    images = images + noise * torch.randn(images.shape, generator=g)
    return ImageDataset(images.clamp(0, 1), labels, [f"pattern {k}" for k in range(num_classes)])


def key_patch_splits(num_images: int = 1200, seed: int = 0, **design: Any) -> DataSplits:
    """:func:`make_key_patch` (``design``: its sizes, key patch, classes and noise) split stratified and seeded
    into train / val / test (:data:`FRACTIONS`)."""
    full = make_key_patch(num_images, seed=seed, **design)
    train, val, test = (full.subset(i) for i in stratified_split(full.labels.numpy(), FRACTIONS, seed))
    return DataSplits("key-patch", train, val, test, hflip_ok=False)
