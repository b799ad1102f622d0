"""Datasets for dense prediction: images with per-pixel class masks and per-object boxes.

- ``shapes``: generated and seeded; circles, squares, triangles and bars of varied size and colour,
  overlapping, on a textured background. Any image size, any count.
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
import torch.nn.functional as F

from ..errors import ConfigError, DataError

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


def _split(name: str, data: DenseDataset, seed: int) -> DenseSplits:
    """A seeded 70/15/15 split."""
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    a, b = int(0.7 * len(data)), int(0.85 * len(data))
    if a == 0 or b == a or b == len(data):
        raise DataError(f"{len(data)} images are too few to split 70/15/15: use at least 7")
    return DenseSplits(name, data.subset(order[:a]), data.subset(order[a:b]), data.subset(order[b:]))


def load_shapes_splits(count: int = SHAPES_COUNT, image_size: int = 64, seed: int = 0) -> DenseSplits:
    """``count`` generated images split 70/15/15 (seeded)."""
    return _split("shapes", generate_shapes(count, image_size, seed), seed)


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
    return _split("mask-folder", data, seed)


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
    return _split("coco", data, seed)


def load_dense_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    rows: int | None = None,
    image_size: int = 64,
    count: int = SHAPES_COUNT,
) -> DenseSplits:
    """Dense splits by name: ``shapes`` (generated, ``count`` images), ``mask-folder`` (``data_dir``
    with images/ and masks/), ``coco`` (``data_dir`` = the annotation JSON). ``rows`` keeps the first
    ``rows`` training images."""
    if name == "shapes":
        splits = load_shapes_splits(count, image_size, seed)
    elif name in ("mask-folder", "coco"):
        if data_dir is None:
            raise ConfigError(f"dataset {name!r} reads files: pass data_dir (--data-dir)")
        splits = (
            load_mask_folder(data_dir, image_size, seed=seed)
            if name == "mask-folder"
            else load_coco_boxes(data_dir, image_size=image_size, seed=seed)
        )
    else:
        raise ConfigError(f"unknown dense dataset {name!r}; choose one of {DENSE_DATASETS}")
    if rows is not None:
        if not 1 <= rows <= len(splits.train):
            raise ConfigError(f"rows={rows} but the training split has {len(splits.train)} images")
        splits.train = splits.train.subset(list(range(rows)))
    return splits


DENSE_DATASETS = ("shapes", "mask-folder", "coco")
