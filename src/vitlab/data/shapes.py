"""Generated ``shapes`` for dense prediction: circles, squares, triangles and bars of varied size and colour,
overlapping, on a textured background; seeded, any image size, any count. The images, masks, boxes and
instance masks follow :mod:`vitlab.data.dense`'s conventions; the captioned scenes of :mod:`vitlab.data.captions`
draw with the same shapes and backgrounds.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError
from .dense import DenseDataset, DenseSplits, split_dense

SHAPE_CLASSES = ("circle", "square", "triangle", "bar")
SHAPES_COUNT = 5000
"""The default number of generated ``shapes`` images (split 70/15/15): generated, so plentiful."""
GENERATED_DATA_LIMIT = 8 * 2**30
"""The most memory (bytes) a generated dataset (``shapes``, captioned shapes) may take while it is made: 8 GiB.
Estimated from ``count`` and ``image_size`` before anything is allocated (:func:`check_generated`); a library
user with more memory may raise it (``vitlab.data.shapes.GENERATED_DATA_LIMIT = ...``)."""
PEAK_BYTES_PER_PIXEL = {"shapes": 68, "captioned shapes": 52}
"""Bytes per pixel at the peak of generating and splitting: RGB float32 twice (NumPy, then channels first),
int64 masks (and instance ids), and the split copies of them all."""


def generated_bytes(what: str, count: int, image_size: int) -> int:
    """The peak memory of generating ``count`` ``what`` images (see :data:`PEAK_BYTES_PER_PIXEL`) of
    ``image_size x image_size``."""
    return count * image_size * image_size * PEAK_BYTES_PER_PIXEL[what]


def check_generated(what: str, count: int, image_size: int, limit: int | None = None) -> None:
    """Refuse, in one line naming the figure and the limit, a generated dataset whose estimated memory
    (:func:`generated_bytes`) is over ``limit`` (default :data:`GENERATED_DATA_LIMIT`)."""
    limit = GENERATED_DATA_LIMIT if limit is None else limit
    need = generated_bytes(what, count, image_size)
    if need > limit:
        raise ConfigError(
            f"{count:,} generated {what} images of {image_size}x{image_size} pixels need about "
            f"{need / 2**30:,.1f} GiB of memory, over the limit of {limit / 2**30:,.1f} GiB for generated data "
            f"(vitlab.data.shapes.GENERATED_DATA_LIMIT): lower count or image_size"
        )


def _texture(rng: np.random.Generator, size: int) -> np.ndarray:
    """A background ``(size, size, 3)``: a colour, a gradient, stripes and smooth noise."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    base = rng.uniform(0.1, 0.9, 3)
    angle, freq = rng.uniform(0, np.pi), rng.uniform(2, 8)
    stripes = np.sin(2 * np.pi * freq * (xx * np.cos(angle) + yy * np.sin(angle)))
    coarse = rng.normal(0, 1, (4, 4, 3))
    noise = (
        F.interpolate(
            torch.from_numpy(coarse).permute(2, 0, 1)[None], size=(size, size), mode="bicubic", align_corners=False
        )[0]
        .permute(1, 2, 0)
        .numpy()
    )
    img = base + 0.08 * stripes[..., None] + 0.06 * noise + 0.1 * (xx[..., None] - 0.5)
    return img + rng.normal(0, 0.02, img.shape)


def shape_mask(
    kind: int, centre: tuple[float, float], r: float, size: int, bar: tuple[float, float] = (1.0, 0.3)
) -> np.ndarray:
    """A boolean ``(size, size)`` mask of shape ``SHAPE_CLASSES[kind]`` centred at pixel ``(x, y)``
    ``centre`` with radius ``r``: a circle, a square of half-side ``0.85 r``, an upright triangle
    (apex at the top) of height ``2 r``, or a bar of half-sides ``bar = (half-width, half-height)``."""
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    cx, cy = centre
    if kind == 0:
        return (xx - cx) ** 2 + (yy - cy) ** 2 <= r**2
    if kind == 1:
        return (np.abs(xx - cx) <= r * 0.85) & (np.abs(yy - cy) <= r * 0.85)
    if kind == 2:
        top, bottom = cy - r, cy + r
        half = (yy - top) / (2 * r) * r
        return (yy >= top) & (yy <= bottom) & (np.abs(xx - cx) <= half)
    w, h = bar
    return (np.abs(xx - cx) <= w) & (np.abs(yy - cy) <= h)


def _shape_mask(kind: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """A boolean ``(size, size)`` mask of one shape of a random size and place."""
    r = rng.uniform(0.08, 0.2) * size
    cx, cy = rng.uniform(r, size - r, 2)
    if kind < 3:
        return shape_mask(kind, (cx, cy), r, size)
    long, short = r * rng.uniform(1.4, 2.2), r * rng.uniform(0.2, 0.35)
    return shape_mask(kind, (cx, cy), r, size, (long, short) if rng.random() < 0.5 else (short, long))


def generate_shapes(
    count: int, image_size: int = 64, seed: int = 0, max_objects: int = 4, min_visible: float = 0.5
) -> DenseDataset:
    """``count`` seeded images of ``image_size x image_size`` with 1..``max_objects`` shapes each.

    Shapes are painted in order, so later ones occlude earlier ones; each keeps a box (of its
    visible pixels). A new shape that would leave an earlier one less than ``min_visible`` visible is
    redrawn, for up to 50 draws per image; after that shapes are kept as drawn. Each visible shape's
    pixels are its instance (``instances``: ``k + 1`` for the object of box ``k``).
    """
    if count < 1 or image_size < 16:
        raise ConfigError(f"count={count}, image_size={image_size}: need count >= 1 and image_size >= 16")
    check_generated("shapes", count, image_size)
    rng = np.random.default_rng(seed)
    images = np.empty((count, image_size, image_size, 3), np.float32)
    masks = np.zeros((count, image_size, image_size), np.int64)
    instances = np.zeros((count, image_size, image_size), np.int64)
    boxes, labels = [], []
    for i in range(count):
        img, mask = _texture(rng, image_size), masks[i]
        ids = np.zeros((image_size, image_size), np.int64)  # object instance per pixel, 0 = none
        kinds: list[int] = []
        target, tries = int(rng.integers(1, max_objects + 1)), 0
        while len(kinds) < target:
            kind = int(rng.integers(len(SHAPE_CLASSES)))
            shape = _shape_mask(kind, rng, image_size)
            trial = np.where(shape, len(kinds) + 1, ids)
            area = [(ids == j + 1).sum() for j in range(len(kinds))]
            kept = [(trial == j + 1).sum() >= min_visible * a for j, a in enumerate(area)]
            tries += 1
            if all(kept) or tries > 50:
                colour = rng.uniform(0, 1, 3)
                while np.abs(colour - img[shape].mean(0)).sum() < 0.6:
                    colour = rng.uniform(0, 1, 3)
                img[shape] = colour + rng.normal(0, 0.03, (int(shape.sum()), 3))
                ids, mask[shape] = trial, kind + 1
                kinds.append(kind)
        images[i] = img.clip(0, 1)
        b = [np.argwhere(ids == j + 1) for j in range(len(kinds))]
        keep = [j for j in range(len(kinds)) if len(b[j])]
        for k, j in enumerate(keep):
            instances[i][ids == j + 1] = k + 1
        boxes.append(
            torch.tensor(
                [[b[j][:, 1].min(), b[j][:, 0].min(), b[j][:, 1].max() + 1, b[j][:, 0].max() + 1] for j in keep],
                dtype=torch.float32,
            ).reshape(-1, 4)
        )
        labels.append(torch.tensor([kinds[j] for j in keep], dtype=torch.long))
    return DenseDataset(
        torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(),
        torch.from_numpy(masks),
        boxes,
        labels,
        SHAPE_CLASSES,
        instances=torch.from_numpy(instances),
    )


def load_shapes_splits(count: int = SHAPES_COUNT, image_size: int = 64, seed: int = 0) -> DenseSplits:
    """``count`` generated images split 70/15/15 (seeded)."""
    return split_dense("shapes", generate_shapes(count, image_size, seed), seed)
