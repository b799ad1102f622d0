"""A generated dataset for tests and smoke runs: ten classes of shapes and textures.

Each image draws its class's pattern at a random position, size, phase, contrast and (with 3 channels)
colour, plus Gaussian noise, so a model must learn shape, not brightness. Every pattern is symmetric
under a left-right flip, so flips are safe. Seeded and vectorised: thousands of images take milliseconds.
"""

from __future__ import annotations

import torch

from ..errors import ConfigError
from .dataset import ImageDataset, Source

CLASSES = ["square", "disc", "triangle", "plus", "cross", "ring", "frame", "h-stripes", "v-stripes", "checker"]


def make_synthetic(
    num_images: int, image_size: int = 16, channels: int = 1, noise: float = 0.05, seed: int = 0
) -> ImageDataset:
    """``num_images`` balanced images ``(N, channels, image_size, image_size)`` float32 in [0, 1]."""
    if num_images < 1 or image_size < 4 or channels not in (1, 3):
        raise ConfigError(
            f"need num_images >= 1, image_size >= 4 and channels 1 or 3; got {num_images}, {image_size}, {channels}"
        )
    g = torch.Generator().manual_seed(seed)
    n = num_images
    labels = (torch.arange(n) % len(CLASSES))[torch.randperm(n, generator=g)]

    def uniform(lo: float, hi: float, *shape: int) -> torch.Tensor:
        return torch.rand((n, *shape), generator=g) * (hi - lo) + lo

    axis = torch.linspace(-1, 1, image_size)
    y, x = axis.view(1, -1, 1), axis.view(1, 1, -1)
    cy, cx, r = uniform(-0.3, 0.3, 1, 1), uniform(-0.3, 0.3, 1, 1), uniform(0.4, 0.7, 1, 1)
    dy, dx = y - cy, x - cx
    box, dist = torch.maximum(dx.abs(), dy.abs()), torch.sqrt(dx**2 + dy**2)
    freq, phase1, phase2 = uniform(2.0, 3.5, 1, 1) * torch.pi, uniform(0, 6.3, 1, 1), uniform(0, 6.3, 1, 1)
    masks = torch.stack(
        [
            box < r,
            dist < r,
            (dy.abs() < r) & (dx.abs() < (dy + r) / 2),
            ((dx.abs() < r / 3) & (dy.abs() < r)) | ((dy.abs() < r / 3) & (dx.abs() < r)),
            ((dx.abs() - dy.abs()).abs() < r / 4) & (box < r),
            (dist < r) & (dist > r / 2),
            (box < r) & (box > 0.6 * r),
            torch.sin(freq * y + phase1).expand(n, -1, image_size) > 0,
            torch.sin(freq * x + phase1).expand(n, image_size, -1) > 0,
            torch.sin(freq * x + phase1) * torch.sin(freq * y + phase2) > 0,
        ]
    )[labels, torch.arange(n)].float()[:, None]  # (N, 1, H, W)
    foreground = uniform(0.6, 1.0, channels, 1, 1)
    background = uniform(0.0, 0.3, channels, 1, 1)
    images = background + (foreground - background) * masks
    images = images + noise * torch.randn(images.shape, generator=g)
    return ImageDataset(images.clamp_(0, 1), labels, list(CLASSES))


def read_synthetic(
    num_images: int = 2000, image_size: int = 16, channels: int = 1, noise: float = 0.05, seed: int = 0
) -> Source:
    """:func:`make_synthetic` (generated with ``seed``), to be split stratified 70/15/15."""
    data = make_synthetic(num_images, image_size, channels, noise, seed)
    return Source(data, (0.15, 0.15), None, True, f"generated (seed {seed})", f"the {num_images} images")
