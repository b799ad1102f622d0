"""The images the explorer may show: dataset samples and uploaded PNG / JPEG files.

An image is named by a reference string: ``"digits:12"`` is image 12 of the digits' sample split
(the test split, else validation), ``"upload:3f2a..."`` an uploaded file. Every image is a tensor
``(1, C, H, W)`` float32 in [0, 1] with ``C`` 1 (greyscale) or 3 (RGB).

Uploads are decoded by Pillow from memory, only as PNG or JPEG, after a byte limit and a pixel
budget (the size the header declares, checked before any pixel is decoded), at most
:data:`DECODE_SLOTS` at a time; anything else is refused with :class:`RequestError`. Decoded
uploads live in memory (a bounded number of them); nothing is written to disk. A sample split is loaded once
however many requests ask for it at once, and kept under a byte cap (:class:`~vitlab.explore.cache.LoadOnce`).
"""

from __future__ import annotations

import io
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from ..data import DataSplits, ImageDataset, decode_image, describe_dataset, list_datasets, load_dataset
from ..data.image import convert_image, image_channels, image_tensor
from ..data.preprocess import Preprocess, resize_images, thumbnail
from ..data.registry import dataset_spec, locate_dataset, photo_sources, read_records
from ..errors import DataError
from .cache import LoadOnce, LoadTimeoutError

UPLOAD_LIMIT = 8 * 2**20  # bytes of one uploaded file
MAX_PIXELS = 4096 * 4096  # width x height of an upload, checked before it is decoded (~67 MB as RGBA)
DECODE_SLOTS = 2  # uploads decoded at the same time
DECODE_WAIT = 3.0  # seconds an upload waits for a decode slot before 503
MAX_SIDE = 224  # uploads are shrunk (aspect kept) to at most this side
KEEP_UPLOADS = 32  # decoded uploads kept in memory, oldest dropped first
SAMPLE_CACHE_BYTES = 256 * 2**20  # bytes of sample splits kept in memory (two CIFAR test splits), LRU
LOAD_SLOTS = 2  # sample splits loaded at the same time (one load per source, however many ask)
LOAD_WAIT = 60.0  # seconds a request waits for a sample split's load before 503
UPLOAD_FORMATS = ("PNG", "JPEG")
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601 weights: RGB -> grey


class RequestError(ValueError):
    """A request the explorer refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class LabeledImage:
    """An image ``(1, C, H, W)`` in [0, 1], its reference, its label where known, and for an upload the file
    itself (``original``), which a model reads as ``vitlab predict`` would (:func:`model_image`)."""

    ref: str
    image: torch.Tensor
    label: str | None
    original: bytes | None = None

    def describe(self) -> dict[str, Any]:
        """JSON-ready: reference, label, channels, height, width."""
        _, c, h, w = self.image.shape
        return {"ref": self.ref, "label": self.label, "channels": c, "height": h, "width": w}


def decode_upload(
    data: bytes, limit: int = UPLOAD_LIMIT, max_side: int = MAX_SIDE, max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """Decode an image file held in memory through vitlab's image door (:func:`vitlab.data.decode_image`, as
    ``vitlab predict`` reads a file: 16-bit greyscale scaled, palettes and CMYK converted): ``(1, C, H, W)`` in
    [0, 1], shrunk to ``max_side`` for showing (a model reads the file itself, see :func:`model_image`).

    Raises :class:`RequestError`: 413 over ``limit`` bytes or ``max_pixels`` pixels (read from the header,
    before decoding), 415 for anything the door cannot read.
    """
    if len(data) > limit:
        raise RequestError(
            f"the file has {len(data):,} bytes, over the upload limit of {limit:,}: "
            f"send a smaller PNG or JPEG (or start `vitlab explore --upload-limit` higher)",
            413,
        )
    if not data:
        raise RequestError("the upload is empty: choose a PNG or JPEG file", 415)
    img = open_upload(data, max_pixels)
    channels = image_channels(img)
    try:  # the CLI's door (read_image): the same conversion, then shrunk for showing, then the same tensor
        img = convert_image(img, channels, "the upload")
        if max(img.size) > max_side:
            img = thumbnail(img, max_side)
        return grey_if_equal(image_tensor(img, channels, name="the upload")[None].contiguous())
    except DataError as err:
        raise unreadable(err) from err


def open_upload(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """The uploaded file ``data``, a PNG or JPEG (its header read first), decoded by
    :func:`vitlab.data.decode_image`; a refusal as a :class:`RequestError` (413 over ``max_pixels`` pixels, else
    415)."""
    try:
        with Image.open(io.BytesIO(data), formats=UPLOAD_FORMATS):
            pass  # the header only: the explorer reads no other format
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        pass  # the door below refuses it, naming its pixels
    except Exception as err:  # Pillow's parsers raise many exception types on malformed headers
        raise unreadable(err) from err
    try:
        return decode_image(bytes(data), "the upload", max_pixels=max_pixels)
    except DataError as err:
        if "over the limit" in str(err):
            raise RequestError(
                f"{err} (the explorer decodes at most {max_pixels:,} pixels; start `vitlab explore --max-pixels` "
                f"higher)",
                413,
            ) from err
        raise unreadable(err) from err


def grey_if_equal(image: torch.Tensor) -> torch.Tensor:
    """``image (1, 3, H, W)`` as one channel when its three channels are equal everywhere (a grey picture
    saved as RGB, as a browser's canvas always is), else unchanged."""
    if image.shape[1] == 3 and torch.equal(image[:, 0], image[:, 1]) and torch.equal(image[:, 0], image[:, 2]):
        return image[:, :1].contiguous()
    return image


def unreadable(err: Exception) -> RequestError:
    return RequestError(
        f"the upload is not a readable PNG or JPEG image ({' '.join(str(err).split())[:200]}): "
        f"export it as .png or .jpg and try again",
        415,
    )


def as_picture(image: torch.Tensor) -> Image.Image:
    """``image (C, H, W)`` in [0, 1] (C 1 or 3) as an 8-bit PIL image."""
    pixels = (image * 255).round().clamp(0, 255).to(torch.uint8)
    return Image.fromarray(pixels[0].numpy() if pixels.shape[0] == 1 else pixels.permute(1, 2, 0).numpy())


def model_images(images: torch.Tensor, preprocess: Preprocess) -> torch.Tensor:
    """Images ``(B, C, H, W)`` in [0, 1] as a model fed by ``preprocess`` reads them, ``(B, C', H', W')`` in [0, 1]:
    unchanged when they already have its channels and size (a sample split read for that model, as ``vitlab
    evaluate`` reads it), else each through the model's own resize and crop (:meth:`Preprocess.eval_image`)."""
    if tuple(images.shape[1:]) == (preprocess.channels, *preprocess.image_size):
        return images
    if images.shape[1] not in (1, 3):
        raise RequestError(f"cannot read a {images.shape[1]}-channel image: choose a greyscale or RGB image")
    return torch.stack([preprocess.eval_image(as_picture(image)).float() / 255 for image in images])


def model_image(picture: LabeledImage, preprocess: Preprocess) -> torch.Tensor:
    """``picture`` as the model fed by ``preprocess`` reads it, ``(1, C, H, W)`` in [0, 1]: an upload from its
    file, as ``vitlab predict`` reads it (the image door, then the model's own resize and crop); a sample as
    :func:`model_images` says."""
    if picture.original is not None:
        return (preprocess.eval_image(open_upload(picture.original)).float() / 255)[None]
    return model_images(picture.image, preprocess)


def fit_image(image: torch.Tensor, channels: int, size: tuple[int, int]) -> torch.Tensor:
    """``image (1, C, H, W)`` with ``channels`` channels (grey repeated, or RGB by luma) and
    resized (bilinear, antialiased) to ``size``, for a model without a recorded preprocessing (a promptable
    run's input); returned unchanged when it already fits."""
    if image.shape[1] != channels:
        if channels == 3 and image.shape[1] == 1:
            image = image.expand(-1, 3, -1, -1)
        elif channels == 1 and image.shape[1] == 3:
            image = (image * torch.tensor(LUMA).view(1, 3, 1, 1)).sum(1, keepdim=True)
        else:
            raise RequestError(
                f"cannot turn a {image.shape[1]}-channel image into the {channels} channels "
                f"the model reads: choose a greyscale or RGB image"
            )
    if tuple(image.shape[-2:]) != tuple(size):
        image = resize_images(image, (size[0], size[1]))
    return image.clamp(0, 1).contiguous()


def needs_files(name: str) -> bool:
    """Whether dataset ``name`` reads files (it is not embedded or generated)."""
    return dataset_spec(name).locator is not None


def locate_source(name: str, data_dir: Path | None) -> tuple[Path | None, str | None]:
    """Where sample source ``name``'s files are, as ``(folder, None)``, or ``(None, why not)``.

    An embedded or generated dataset reads no folder: ``(None, None)``. A dataset vitlab searches for
    (MNIST, Fashion-MNIST, CIFAR) is looked for in ``data_dir`` first, then where vitlab looks by
    default (``$VITLAB_DATA``, the cache, ``/usr/share/datasets``): it is available only where its files
    are found. One that reads the user's own files (a folder of images, a manifest, shards) is available only
    where ``data_dir`` holds that kind of source (indexed, without decoding a pixel).
    """
    if not needs_files(name):
        return None, None
    if dataset_spec(name).reads == "given":
        if data_dir is None:
            return None, f"{name} reads your own files: start `vitlab explore --data-dir DIR` with them"
        if name in photo_sources():
            try:
                read_records(name, data_dir)
            except (DataError, OSError) as err:
                return None, f"{data_dir} is not a {name} source: {err}"
        return data_dir, None
    reason = ""
    for where in ([data_dir] if data_dir is not None else []) + [None]:
        try:
            return locate_dataset(name, where), None
        except DataError as err:
            reason = str(err)
    return None, reason


@dataclass(frozen=True)
class OwnSource:
    """A sample source of one model's own data: what the picker says of it, the folder its files are in, and
    ``load()``, its held-out split as the model reads it."""

    description: str
    folder: str | None
    load: Callable[[], ImageDataset]


def split_bytes(data: ImageDataset) -> int:
    """Bytes a sample split holds in memory: its images and labels."""
    return data.images.nbytes + data.labels.nbytes


def held_out(splits: DataSplits, why: str) -> ImageDataset:
    """The test split of ``splits``, else its validation split, as float images in memory (refused with ``why``)."""
    part = "test" if splits.test is not None else "val"
    if not isinstance(getattr(splits, part), ImageDataset):
        raise RequestError(f"{why}: the explorer shows images held in memory")
    return splits.in_memory(part, "the explorer")


class ImageBook:
    """Resolves image references to images: samples of the registered datasets and uploads.

    Every dataset registered in :mod:`vitlab.data` is a sample source (a new one appears by
    registering it); one that reads files is available only where :func:`locate_source` finds them
    (``data_dir``, else vitlab's default places). Thread-safe.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        upload_limit: int = UPLOAD_LIMIT,
        max_side: int = MAX_SIDE,
        max_pixels: int = MAX_PIXELS,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.upload_limit, self.max_side, self.max_pixels = upload_limit, max_side, max_pixels
        self._decoding = threading.BoundedSemaphore(DECODE_SLOTS)
        self.splits: LoadOnce[ImageDataset] = LoadOnce(SAMPLE_CACHE_BYTES, split_bytes, LOAD_SLOTS, LOAD_WAIT)
        self._uploads: OrderedDict[str, LabeledImage] = OrderedDict()
        self._own: dict[str, OwnSource] = {}
        self._located: dict[str, tuple[Path | None, str | None]] = {}
        self._lock = threading.Lock()

    # -- samples ---------------------------------------------------------------------------------

    def sources(self) -> list[dict[str, Any]]:
        """Every registered dataset: name, description, availability and, if unavailable, why; where its
        files were found (``null`` for an embedded or generated one)."""
        out = [
            {"name": name, "description": own.description, "available": True, "reason": None, "folder": own.folder}
            for name, own in self._own.items()
        ]
        for name in list_datasets():
            folder, reason = self.locate(name)
            out.append(
                {
                    "name": name,
                    "description": describe_dataset(name),
                    "available": reason is None,
                    "reason": reason,
                    "folder": None if folder is None else str(folder),
                }
            )
        return out

    def split(self, name: str) -> ImageDataset:
        """The sample split of dataset ``name``: its test split, else its validation split. Loaded once
        however many requests ask at once, and kept while the kept splits stay under
        :data:`SAMPLE_CACHE_BYTES` (the least recently used dropped first)."""
        own = self._own.get(name)
        if own is None and name not in list_datasets():
            known = [*self._own, *list_datasets()]
            raise RequestError(f"unknown sample source {name!r}: choose one of {known} or upload a file", 404)
        try:
            return self.splits.get(name, own.load if own is not None else lambda: self._load_split(name))
        except LoadTimeoutError as err:
            raise RequestError(f"the samples of {name} are still loading ({err}): try again in a moment", 503) from err

    def _load_split(self, name: str) -> ImageDataset:
        folder, reason = self.locate(name)
        if reason is not None:
            raise RequestError(reason, 404)
        try:
            splits = load_dataset(name, folder)
        except (FileNotFoundError, DataError) as err:
            raise RequestError(str(err), 404) from err
        return held_out(splits, f"{name} is read as a stream of files")

    def locate(self, name: str) -> tuple[Path | None, str | None]:
        """:func:`locate_source` of ``name`` in this book's ``data_dir``, looked up once."""
        with self._lock:
            if name not in self._located:
                self._located[name] = locate_source(name, self.data_dir)
            return self._located[name]

    def add_source(self, name: str, source: OwnSource) -> None:
        """Offer ``source`` (a model's own held-out images, read as it reads them) as sample source ``name``."""
        with self._lock:
            self._own[name] = source

    def samples(self, name: str, start: int = 0, count: int = 24) -> dict[str, Any]:
        """Images ``start .. start+count`` of the sample split, with labels, for the picker."""
        data = self.split(name)
        if not 0 <= start < len(data) or count < 1:
            raise RequestError(
                f"{name} has {len(data)} sample images: ask for start in [0, {len(data)}) "
                f"and count >= 1, got start={start}, count={count}"
            )
        index = list(range(start, min(start + count, len(data))))
        return {
            "source": name,
            "total": len(data),
            "start": start,
            "index": index,
            "labels": [data.classes[int(data.labels[i])] for i in index],
            "images": data.images[index],
        }

    # -- uploads ---------------------------------------------------------------------------------

    def add_upload(self, data: bytes) -> LabeledImage:
        """Decode and keep an upload; returns it with its new reference ``upload:<id>``. At most
        :data:`DECODE_SLOTS` decode at once; one that waits over :data:`DECODE_WAIT` seconds is
        refused (503)."""
        if not self._decoding.acquire(timeout=DECODE_WAIT):
            raise RequestError(f"{DECODE_SLOTS} uploads are being decoded already: try again in a moment", 503)
        try:
            image = decode_upload(data, self.upload_limit, self.max_side, self.max_pixels)
        finally:
            self._decoding.release()
        key = secrets.token_hex(8)
        picture = LabeledImage(f"upload:{key}", image, None, bytes(data))
        with self._lock:
            self._uploads[key] = picture
            while len(self._uploads) > KEEP_UPLOADS:
                self._uploads.popitem(last=False)
        return picture

    # -- references ------------------------------------------------------------------------------

    def get(self, ref: str) -> LabeledImage:
        """The image named by ``ref`` (``"<dataset>:<index>"`` or ``"upload:<id>"``)."""
        source, sep, key = ref.partition(":")
        if not sep or not key:
            raise RequestError(f"image reference {ref!r} is not SOURCE:INDEX (e.g. digits:0) or upload:ID")
        if source == "upload":
            with self._lock:
                picture = self._uploads.get(key)
            if picture is None:
                raise RequestError(
                    f"no upload {key!r} (uploads are kept in memory, the latest {KEEP_UPLOADS}): upload the file again",
                    404,
                )
            return picture
        if not key.isdigit():
            raise RequestError(f"image index {key!r} in {ref!r} is not a non-negative integer")
        data, index = self.split(source), int(key)
        if index >= len(data):
            raise RequestError(f"{source} has {len(data)} sample images (0..{len(data) - 1}), not {index}", 404)
        return LabeledImage(ref, data.images[index : index + 1], data.classes[int(data.labels[index])])
