"""Any directory of class sub-folders of PNG/JPEG images (``DIR/cat/001.png``, ``DIR/dog/x.jpg``, ...).

Class names are the sub-folder names in sorted order; files with other suffixes are ignored. Images are
decoded by :func:`~vitlab.data.image.read_image`, converted to RGB or greyscale and resized (bilinear,
aspect ratio not kept) to ``image_size x image_size``, then split stratified and seeded 70/15/15, so
every class needs at least 3 images.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import DataError
from .dataset import ImageDataset, Source
from .image import read_image

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def read_folder(data_dir: str | Path, image_size: int = 32, channels: int = 3, hflip_ok: bool = True) -> Source:
    """Images ``(N, channels, image_size, image_size)`` float32 in [0, 1] from class sub-folders.

    ``channels`` is 3 (RGB) or 1 (greyscale); set ``hflip_ok=False`` when mirroring changes the class.
    """
    data_dir = Path(data_dir)
    if channels not in (1, 3) or image_size < 1:
        raise DataError(f"channels must be 1 or 3 and image_size >= 1, got {channels} and {image_size}")
    class_dirs = sorted(d for d in data_dir.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not class_dirs:
        raise DataError(f"folder: {data_dir} has no class sub-folders; put each class's images in DIR/CLASS/")
    files, labels = [], []
    for label, class_dir in enumerate(class_dirs):
        found = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not found:
            raise DataError(f"folder: class folder {class_dir} has no {'/'.join(IMAGE_SUFFIXES)} images")
        files += found
        labels += [label] * len(found)
    images = torch.stack([read_image(p, channels, image_size) for p in files])
    data = ImageDataset(images, torch.tensor(labels), [d.name for d in class_dirs])
    return Source(data, (0.15, 0.15), None, hflip_ok, str(data_dir), f"the {len(files)} images")
