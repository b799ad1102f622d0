"""Any directory of class sub-folders of images (``DIR/cat/001.png``, ``DIR/dog/x.jpg``, ...), decoded in memory.

``load_dataset("folder", DIR)`` reads folders through :mod:`vitlab.data.folder_records` (official ``train/`` ``val/``
``test/`` sub-folders, streaming, the preprocessing of a model); :func:`read_folder` is the plain in-memory
reader of one flat folder kept for callers of the earlier API. Class names are the sub-folder names in
sorted order; files with other suffixes than :data:`IMAGE_SUFFIXES` are ignored. Images are decoded by
:meth:`~vitlab.data.preprocess.Preprocess.eval_image` (by default: converted to RGB or greyscale and
resized bilinear, aspect ratio not kept, to ``image_size x image_size``), then split stratified and seeded
70/15/15, so every class needs at least 3 images.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .dataset import ImageDataset, Source
from .folder_records import IMAGE_SUFFIXES, read_folder_records

__all__ = ["IMAGE_SUFFIXES", "read_folder"]


def read_folder(data_dir: str | Path, image_size: int = 32, channels: int = 3, hflip_ok: bool = True) -> Source:
    """Images ``(N, channels, image_size, image_size)`` float32 in [0, 1] from class sub-folders.

    ``channels`` is 3 (RGB) or 1 (greyscale); set ``hflip_ok=False`` when mirroring changes the class.
    """
    from .preprocess import Preprocess
    from .stream import decode_records

    if channels not in (1, 3) or image_size < 1:
        raise DataError(f"channels must be 1 or 3 and image_size >= 1, got {channels} and {image_size}")
    records = read_folder_records(data_dir)
    if set(records) != {"train"}:
        raise DataError(f"folder: {data_dir} has official splits; read it with load_dataset('folder', ...)")
    train = records["train"]
    images, labels = decode_records(train, Preprocess(image_size=(image_size, image_size), channels=channels))
    data = ImageDataset(images, labels, train.classes)
    return Source(data, (0.15, 0.15), None, hflip_ok, str(data_dir), f"the {len(train)} images")
