"""Any directory of class sub-folders of PNG/JPEG images (``DIR/cat/001.png``, ``DIR/dog/x.jpg``, ...).

Class names are the sub-folder names in sorted order; files with other suffixes are ignored. Images are
decoded with PIL, converted to RGB or greyscale and resized (bilinear, aspect ratio not kept) to
``image_size x image_size``, then split stratified and seeded.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from .dataset import DataSplits, ImageDataset, stratified_split

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def read_image(path: str | Path, image_size: int, channels: int = 3) -> np.ndarray:
    """One image as uint8 ``(channels, image_size, image_size)``; an unreadable file raises naming it."""
    try:
        with Image.open(path) as image:
            image = image.convert("RGB" if channels == 3 else "L").resize((image_size, image_size),
                                                                        Image.Resampling.BILINEAR)
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise ValueError(f"{path}: unreadable image ({err}); fix or remove the file") from err
    return np.asarray(image, dtype=np.uint8).reshape(image_size, image_size, channels).transpose(2, 0, 1)


def load_folder_splits(data_dir: str | Path, seed: int = 0, image_size: int = 32, channels: int = 3,
                       hflip_ok: bool = True,
                       fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)) -> DataSplits:
    """Images ``(N, channels, image_size, image_size)`` float32 in [0, 1] from class sub-folders.

    ``channels`` is 3 (RGB) or 1 (greyscale); set ``hflip_ok=False`` when mirroring changes the class.
    """
    data_dir = Path(data_dir)
    if channels not in (1, 3) or image_size < 1:
        raise ValueError(f"channels must be 1 or 3 and image_size >= 1, got {channels} and {image_size}")
    if not data_dir.is_dir():
        raise FileNotFoundError(f"folder: no directory {data_dir}")
    class_dirs = sorted(d for d in data_dir.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not class_dirs:
        raise ValueError(f"folder: {data_dir} has no class sub-folders; put each class's images in DIR/CLASS/")
    files, labels = [], []
    for label, class_dir in enumerate(class_dirs):
        found = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not found:
            raise ValueError(f"folder: class folder {class_dir} has no {'/'.join(IMAGE_SUFFIXES)} images")
        files += found
        labels += [label] * len(found)
    images = torch.from_numpy(np.stack([read_image(p, image_size, channels) for p in files])).float().div_(255)
    full = ImageDataset(images, torch.tensor(labels), [d.name for d in class_dirs])
    train, val, test = (full.subset(i) for i in stratified_split(np.array(labels), fractions, seed))
    return DataSplits("folder", train, val, test, hflip_ok=hflip_ok)
