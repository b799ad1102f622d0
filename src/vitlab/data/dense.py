"""Datasets for dense prediction: images with per-pixel class masks and per-object boxes, and the readers of
the user's own: ``mask-folder`` (:func:`load_mask_folder`) and ``coco`` (:func:`load_coco_boxes`). The generated
``shapes`` are :mod:`vitlab.data.shapes`; all are registered in :mod:`vitlab.data.registry`.

- ``mask-folder``: ``images/NAME.png`` with ``masks/NAME.png`` (one channel, pixel value = class id,
  0 = background); boxes are the connected components of each class.
- ``coco``: COCO-style box annotations (a JSON file) over a folder of images; no masks.

Conventions: images ``(N, 3, H, W)`` float32 in [0, 1]; masks ``(N, H, W)`` int64 with 0 for
background and ``c + 1`` for object class ``c``; per image, boxes ``(K, 4)`` float32 pixel
``(x0, y0, x1, y1)`` and labels ``(K,)`` int64 object classes in ``0..len(classes) - 1``; instance
masks ``(N, H, W)`` int64 (``shapes`` only) with 0 for background and ``k + 1`` for the object of box ``k``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import DataError


@dataclass
class DenseDataset:
    """Images with optional masks and per-image boxes and labels, and optional instance masks
    (see the module docstring)."""

    images: torch.Tensor
    masks: torch.Tensor | None
    boxes: list[torch.Tensor]
    labels: list[torch.Tensor]
    classes: tuple[str, ...]
    instances: torch.Tensor | None = None

    def __post_init__(self) -> None:
        n = len(self.images)
        if self.masks is not None and self.masks.shape != (n, *self.images.shape[-2:]):
            raise DataError(f"masks {tuple(self.masks.shape)} do not match images {tuple(self.images.shape)}")
        if self.instances is not None and self.instances.shape != (n, *self.images.shape[-2:]):
            raise DataError(f"instances {tuple(self.instances.shape)} do not match images {tuple(self.images.shape)}")
        if len(self.boxes) != n or len(self.labels) != n:
            raise DataError(f"{n} images but {len(self.boxes)} box sets and {len(self.labels)} label sets")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def num_classes(self) -> int:
        """Object classes (masks have one more value: background)."""
        return len(self.classes)

    def subset(self, index: torch.Tensor | list[int]) -> DenseDataset:
        index = torch.as_tensor(index, dtype=torch.long)
        masks = None if self.masks is None else self.masks[index]
        return DenseDataset(
            self.images[index],
            masks,
            [self.boxes[i] for i in index.tolist()],
            [self.labels[i] for i in index.tolist()],
            self.classes,
            instances=None if self.instances is None else self.instances[index],
        )


@dataclass
class DenseSplits:
    """Train / val / test dense datasets sharing one class list."""

    name: str
    train: DenseDataset
    val: DenseDataset
    test: DenseDataset

    @property
    def classes(self) -> tuple[str, ...]:
        return self.train.classes


def _boxes_from_mask(mask: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of each class -> boxes ``(K, 4)`` xyxy and labels ``(K,)``."""
    from scipy import ndimage

    boxes, labels = [], []
    for c in range(1, num_classes + 1):
        parts, _ = ndimage.label(mask == c)
        for sl in ndimage.find_objects(parts):
            boxes.append([sl[1].start, sl[0].start, sl[1].stop, sl[0].stop])
            labels.append(c - 1)
    return np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64)


def split_dense(name: str, data: DenseDataset, seed: int) -> DenseSplits:
    """A seeded 70/15/15 split."""
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    a, b = int(0.7 * len(data)), int(0.85 * len(data))
    if a == 0 or b == a or b == len(data):
        raise DataError(f"{len(data)} images are too few to split 70/15/15: use at least 7")
    return DenseSplits(name, data.subset(order[:a]), data.subset(order[a:b]), data.subset(order[b:]))


def _read_rgb(path: Path, size: int) -> tuple[torch.Tensor, float, float]:
    """An image file (through :func:`~vitlab.data.image.decode_image`: 16-bit scaled, a pixel budget checked
    from the header) -> ``(3, size, size)`` in [0, 1] and the x, y scale factors applied."""
    from .image import decode_image
    from .preprocess import Preprocess, unit_pixels

    im = decode_image(path)
    w, h = im.size
    return unit_pixels(Preprocess(image_size=(size, size)).eval_image(im)), size / w, size / h


def load_mask_folder(
    data_dir: str | Path, image_size: int = 64, classes: tuple[str, ...] | None = None, seed: int = 0
) -> DenseSplits:
    """Pairs ``images/NAME.png`` + ``masks/NAME.png`` under ``data_dir``, resized, split 70/15/15.

    Mask pixel values are class ids (0 = background); ``classes`` names ids 1..K (default
    ``class1..classK`` for the largest id found).
    """
    from PIL import Image

    from .image import decode_image

    root = Path(data_dir)
    pairs = [
        (p, root / "masks" / (p.stem + ".png"))
        for p in sorted((root / "images").glob("*"))
        if p.suffix.lower() in (".png", ".jpg", ".jpeg")
    ]
    missing = [str(m) for _, m in pairs if not m.is_file()]
    if not pairs or missing:
        raise DataError(
            f"{root} needs images/NAME.png and masks/NAME.png pairs; "
            f"{'no images found' if not pairs else f'missing masks: {missing[:3]}'}"
        )
    images, masks = [], []
    for img_path, mask_path in pairs:
        images.append(_read_rgb(img_path, image_size)[0])
        ids = decode_image(mask_path, normalise=False)  # class ids, not intensities: never rescaled
        mask_image = ids.convert("L").resize((image_size, image_size), Image.Resampling.NEAREST)
        masks.append(np.asarray(mask_image, np.int64))
    mask = torch.from_numpy(np.stack(masks))
    k = int(mask.max())
    classes = tuple(classes) if classes is not None else tuple(f"class{c}" for c in range(1, k + 1))
    if k > len(classes):
        raise DataError(f"masks hold class id {k} but only {len(classes)} classes are named: name them all")
    found = [_boxes_from_mask(m.numpy(), len(classes)) for m in mask]
    data = DenseDataset(
        torch.stack(images),
        mask,
        [torch.from_numpy(b) for b, _ in found],
        [torch.from_numpy(lab) for _, lab in found],
        classes,
    )
    return split_dense("mask-folder", data, seed)


def load_coco_boxes(
    annotations: str | Path, image_dir: str | Path | None = None, image_size: int = 64, seed: int = 0
) -> DenseSplits:
    """COCO-style detection JSON (``images``, ``annotations`` with ``bbox`` = x, y, w, h,
    ``categories``) -> resized images with boxes; no masks. Images are read from ``image_dir``
    (default: the JSON's folder)."""
    path = Path(annotations)
    coco = json.loads(path.read_text())
    if not {"images", "annotations", "categories"} <= set(coco):
        raise DataError(f"{path} is not COCO-style: it needs 'images', 'annotations' and 'categories'")
    root = Path(image_dir) if image_dir is not None else path.parent
    cats = sorted(coco["categories"], key=lambda c: c["id"])
    index = {c["id"]: i for i, c in enumerate(cats)}
    per_image: dict[int, list[dict]] = {im["id"]: [] for im in coco["images"]}
    for ann in coco["annotations"]:
        per_image[ann["image_id"]].append(ann)
    images, boxes, labels = [], [], []
    for im in coco["images"]:
        img, sx, sy = _read_rgb(root / im["file_name"], image_size)
        anns = per_image[im["id"]]
        xywh = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        xyxy = torch.cat([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1) * torch.tensor([sx, sy, sx, sy])
        images.append(img)
        boxes.append(xyxy)
        labels.append(torch.tensor([index[a["category_id"]] for a in anns], dtype=torch.long))
    data = DenseDataset(torch.stack(images), None, boxes, labels, tuple(c["name"] for c in cats))
    return split_dense("coco", data, seed)
