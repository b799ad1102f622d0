"""Batched random resized crops (DINO's multi-crop), by affine resampling.

Each image gets a crop of area ``scale`` (uniform in the range) of the image and aspect ratio
log-uniform in ``ratio``, at a uniform position inside the image, optionally mirrored, resampled
bilinearly to ``size x size`` in one ``grid_sample`` call.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...errors import ConfigError


def random_resized_crop(
    images: torch.Tensor,
    size: int,
    scale: tuple[float, float] = (0.4, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    hflip: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``images (B, C, H, W)`` -> crops ``(B, C, size, size)``."""
    if not 0.0 < scale[0] <= scale[1] <= 1.0:
        raise ConfigError(f"crop scale must satisfy 0 < low <= high <= 1, got {scale}")
    b = images.shape[0]

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(b, generator=generator)

    area = uniform(*scale)
    aspect = uniform(math.log(ratio[0]), math.log(ratio[1])).exp()
    # half-extents in normalised coordinates ([-1, 1] spans the image)
    sx = (area * aspect).sqrt().clamp(max=1.0)
    sy = (area / aspect).sqrt().clamp(max=1.0)
    tx = (1.0 - sx) * (2.0 * torch.rand(b, generator=generator) - 1.0)
    ty = (1.0 - sy) * (2.0 * torch.rand(b, generator=generator) - 1.0)
    flip = torch.where(torch.rand(b, generator=generator) < 0.5, -1.0, 1.0) if hflip else torch.ones(b)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2] = sx * flip, tx
    theta[:, 1, 1], theta[:, 1, 2] = sy, ty
    grid = F.affine_grid(theta.to(images), [b, images.shape[1], size, size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def multi_crop(
    images: torch.Tensor,
    global_size: int,
    local_size: int,
    local_crops: int,
    global_scale: tuple[float, float] = (0.4, 1.0),
    local_scale: tuple[float, float] = (0.1, 0.4),
    hflip: bool = False,
    generator: torch.Generator | None = None,
) -> list[torch.Tensor]:
    """Two global crops ``(B, C, G, G)`` then ``local_crops`` local ones ``(B, C, L, L)``."""
    crops = [random_resized_crop(images, global_size, global_scale, hflip=hflip, generator=generator) for _ in range(2)]
    return crops + [
        random_resized_crop(images, local_size, local_scale, hflip=hflip, generator=generator)
        for _ in range(local_crops)
    ]
