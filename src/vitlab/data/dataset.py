"""In-memory image datasets and their train / validation / test splits.

Small datasets live in memory as tensors: images ``(N, C, H, W)`` float32 in ``[0, 1]`` (photos decoded into
memory: uint8, read as ``x / 255``), labels ``(N,)`` int64. Normalisation and augmentation run batched on these
tensors.

Every dataset is split by one function, :func:`make_splits`, with one rule: each class is shuffled
with ``seed`` (default 0, so the split is fixed until the seed changes) and cut into the training
pool and the held-out parts (validation, and test when the dataset has no official test file), so
every part keeps the class proportions. ``rows`` then keeps the first ``rows`` pool images of the
seeded stratified order of *all* images (:func:`stratified_order`): stratified, nested (a smaller
``rows`` is a subset of a larger one) and independent of the size of the held-out parts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import DataError
from .preprocess import Statistics, unit_pixels
from .split import split_indices, split_rule

if TYPE_CHECKING:
    from .stream import StreamDataset

NORMALIZATIONS = ("standardize", "unit")
"""``standardize``: subtract the training images' per-channel mean, divide by their std.
``unit``: leave pixels in [0, 1] (mean 0, std 1), the textbook's scaling."""


@dataclass
class ImageDataset:
    """Images ``(N, C, H, W)`` float32 in ``[0, 1]``, or uint8 (photos decoded into memory, read as ``x / 255``
    by :func:`~vitlab.data.preprocess.unit_pixels`), with labels ``(N,)`` int64."""

    images: torch.Tensor
    labels: torch.Tensor
    classes: list[str]

    def __post_init__(self) -> None:
        if self.images.ndim != 4:
            raise DataError(f"images must be (N, C, H, W), got shape {tuple(self.images.shape)}")
        if len(self.images) != len(self.labels):
            raise DataError(f"{len(self.images)} images but {len(self.labels)} labels")
        if len(self.labels) and (int(self.labels.min()) < 0 or int(self.labels.max()) >= len(self.classes)):
            raise DataError(
                f"labels must lie in [0, {len(self.classes) - 1}] for {len(self.classes)} classes, "
                f"found {int(self.labels.min())}..{int(self.labels.max())}"
            )

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        c, h, w = self.images.shape[1:]
        return c, h, w

    def subset(self, index: torch.Tensor | np.ndarray | list[int]) -> ImageDataset:
        index = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return ImageDataset(self.images[index], self.labels[index], self.classes)

    def relabeled(self, index_map: np.ndarray, classes: Sequence[str]) -> ImageDataset:
        """The same images, label ``i`` becoming ``index_map[i]`` of ``classes``."""
        return ImageDataset(self.images, torch.as_tensor(index_map, dtype=torch.long)[self.labels], list(classes))


@dataclass
class DataSplits:
    """A dataset's splits and the per-channel statistics its images are normalised with.

    ``hflip_ok`` says whether a horizontal flip keeps an image's class (true for photos and clothes,
    false for digits: a mirrored 2 is not a 2); augmentation presets read it. ``normalization`` is one
    of :data:`NORMALIZATIONS`: ``"standardize"`` sets ``mean``/``std`` to the training images'
    per-channel statistics, ``"unit"`` to 0 and 1 (pixels stay in [0, 1]); explicit ``mean``/``std``
    are kept. ``source`` says where the images came from, ``split_rule`` how the splits were made.

    The splits are in-memory :class:`ImageDataset` (``loader == "memory"``) or
    :class:`~vitlab.data.stream.StreamDataset` (``loader == "stream"``: decoded on demand, uint8); a
    streamed training split's statistics are estimated from a seeded sample of at most 512 of its images
    (decoded for evaluation) unless ``mean``/``std`` are given. ``loader_reason`` says in one line why
    that loader was chosen.
    """

    name: str
    train: ImageDataset | StreamDataset
    val: ImageDataset | StreamDataset
    test: ImageDataset | StreamDataset | None = None
    mean: tuple[float, ...] = field(default=())
    std: tuple[float, ...] = field(default=())
    hflip_ok: bool = True
    normalization: str = "standardize"
    source: str = ""
    split_rule: str = ""
    loader: str = "memory"
    loader_reason: str = ""
    fingerprints: dict[str, str] = field(default_factory=dict)
    """``{split: SHA-256}`` of what each split holds (image files: ``Records.fingerprint``, the sorted file
    names with their class names; tensor datasets: the split's indices and labels), for a checkpoint to
    record and an evaluation to compare."""
    _bytes: dict[str, str | None] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.normalization not in NORMALIZATIONS:
            raise DataError(f"normalization {self.normalization!r} is unknown; choose one of {NORMALIZATIONS}")
        if not len(self.train) or not len(self.val):
            raise DataError(
                f"{self.name}: {len(self.train)} training and {len(self.val)} validation images; "
                "both splits need at least one"
            )
        if not self.mean:
            if isinstance(self.train, ImageDataset):
                self.mean, self.std = channel_statistics(self.train.images, self.normalization)
            else:
                self.mean, self.std = self.train.statistics(self.normalization)

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 or float-in-[0, 1] pixels ``(..., C, H, W)`` -> the model's input ``(x - mean) / std`` by these
        splits' statistics."""
        return Statistics(self.mean, self.std).normalize(pixels)

    def in_memory(self, part: str, purpose: str) -> ImageDataset:
        """Split ``part`` (``train``, ``val``, ``test``) as in-memory float tensors in [0, 1] (a uint8 cache
        converted), for work that indexes every image at once (``purpose`` names it); a streamed or missing split
        is refused in one line."""
        data = getattr(self, part)
        if data is None:
            raise DataError(f"{self.name} has no {part} split here: use --split val")
        if not isinstance(data, ImageDataset):
            raise DataError(
                f"{purpose} holds {self.name}'s images in memory, but this dataset is streamed "
                f"({self.loader_reason}): pass --loader memory (with a smaller --image-size or --rows)"
            )
        if data.images.dtype == torch.uint8:
            return ImageDataset(unit_pixels(data.images), data.labels, data.classes)
        return data

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.train.image_shape

    def parts(self) -> dict[str, ImageDataset | StreamDataset]:
        """``{"train", "val", "test"}``: the splits there are."""
        return {k: v for k, v in (("train", self.train), ("val", self.val), ("test", self.test)) if v is not None}

    def missing_classes(self) -> dict[str, list[str]]:
        """``{split: the class names it holds no image of}``, for each split that misses one (a class of two
        images leaves the test split without it)."""
        classes = list(self.train.classes)
        missing = {}
        for part, data in self.parts().items():
            present = set(torch.as_tensor(data.labels).unique().tolist())
            names = [name for i, name in enumerate(classes) if i not in present]
            if names:
                missing[part] = names
        return missing

    def identity(self) -> dict[str, dict[str, Any]]:
        """What a checkpoint records of each split: ``{split: {"images", "fingerprint", "missing_classes"}}``, and
        ``"bytes"`` (:meth:`~vitlab.data.records.Records.bytes_fingerprint`) where the split's store tells sizes."""
        missing = self.missing_classes()
        if self._bytes is None:  # stats every file once per process, not at every checkpoint
            records = {part: getattr(data, "records", None) for part, data in self.parts().items()}
            self._bytes = {part: r.bytes_fingerprint() for part, r in records.items() if r is not None}
        return {
            part: {
                "images": len(data),
                "fingerprint": self.fingerprints.get(part),
                "missing_classes": missing.get(part, []),
                **({"bytes": self._bytes[part]} if self._bytes.get(part) else {}),
            }
            for part, data in self.parts().items()
        }

    def relabeled(self, classes: Sequence[str]) -> DataSplits:
        """These splits with every label mapped by class name into ``classes`` (a model's, holding every class
        name of these splits, in any order): the labels then index ``classes``."""
        own = list(self.train.classes)
        index_map = np.array([list(classes).index(name) for name in own], dtype=np.int64)

        def mapped(data: ImageDataset | StreamDataset | None) -> Any:
            return None if data is None else data.relabeled(index_map, classes)

        return replace(self, train=mapped(self.train), val=mapped(self.val), test=mapped(self.test))


def channel_statistics(images: torch.Tensor, normalization: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel ``(mean, std)`` in [0, 1] units of ``images (N, C, H, W)`` (float, or uint8 read as ``x / 255``:
    counted by value, exact and with no float copy) for ``normalization`` (unbiased std, at least 1e-6)."""
    channels = images.shape[1]
    if normalization == "unit":
        return (0.0,) * channels, (1.0,) * channels
    if images.dtype == torch.uint8:
        counts = torch.zeros(channels, 256, dtype=torch.float64)
        for chunk in images.split(256):
            for c in range(channels):
                counts[c] += torch.bincount(chunk[:, c].reshape(-1), minlength=256)
        values = torch.arange(256, dtype=torch.float64) / 255
        n = counts.sum(1)
        mean = counts @ values / n
        var = (counts * (values - mean[:, None]).square()).sum(1) / (n - 1).clamp_min(1)
        return tuple(mean.tolist()), tuple(var.sqrt().clamp_min(1e-6).tolist())
    return (
        tuple(images.mean(dim=(0, 2, 3)).tolist()),
        tuple(images.std(dim=(0, 2, 3)).nan_to_num(0.0).clamp_min(1e-6).tolist()),
    )


@dataclass
class Source:
    """What a reader found, before splitting: ``data`` is split here into the training pool and the
    ``held_out`` fractions (validation, then test when there is no official ``test``)."""

    data: ImageDataset
    held_out: tuple[float, ...]
    test: ImageDataset | None = None
    hflip_ok: bool = True
    origin: str = ""
    what: str = "the images"


def make_splits(
    name: str, source: Source, *, seed: int = 0, rows: int | None = None, normalization: str = "standardize"
) -> DataSplits:
    """Split ``source`` stratified and seeded (:func:`~vitlab.data.split.split_indices`) and keep ``rows``
    training images.

    Raises :class:`DataError` when a split would be empty (saying how many images each class needs)
    or when ``rows`` is not in ``1..len(pool)``.
    """
    data = source.data
    labels = data.labels.numpy()
    parts = split_indices(labels, source.held_out, seed, rows, name, len(data.classes))
    pool = parts[0]
    test = source.test if source.test is not None else (data.subset(parts[2]) if len(parts) > 2 else None)
    fingerprints = {
        "train": index_fingerprint(pool, labels[pool]),
        "val": index_fingerprint(parts[1], labels[parts[1]]),
    }
    if source.test is not None:
        official = source.test.labels.numpy()
        fingerprints["test"] = index_fingerprint(np.arange(len(official)), official, "official test")
    elif len(parts) > 2:
        fingerprints["test"] = index_fingerprint(parts[2], labels[parts[2]])
    official_test = "the official test file" if source.test is not None else None
    return DataSplits(
        name,
        data.subset(pool),
        data.subset(parts[1]),
        test,
        hflip_ok=source.hflip_ok,
        normalization=normalization,
        source=source.origin,
        split_rule=split_rule(source.held_out, source.what, seed, rows, test=official_test),
        fingerprints=fingerprints,
    )


def identity_changes(recorded: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """How the splits ``given`` (:meth:`DataSplits.identity`) differ from the ``recorded`` ones, one phrase a
    split (``"train: 24 -> 42 images, fingerprint 1a2b3c4d -> 5e6f7a8b"``); each figure is compared only where
    both record it. Empty when they agree."""
    changes = []
    for part in sorted(set(recorded) | set(given)):
        was, now = recorded.get(part), given.get(part)
        if not isinstance(was, dict) or not isinstance(now, dict):
            changes.append(f"{part}: {'no split now' if now is None else 'a split the run did not have'}")
            continue
        said = []
        if was.get("images") != now.get("images"):
            said.append(f"{was.get('images')} -> {now.get('images')} images")
        for key, what in (("fingerprint", "fingerprint"), ("bytes", "byte sizes")):
            if was.get(key) and now.get(key) and was[key] != now[key]:
                said.append(f"{what} {str(was[key])[:8]} -> {str(now[key])[:8]}")
        if said:
            changes.append(f"{part}: {', '.join(said)}")
    return changes


def index_fingerprint(index: np.ndarray, labels: np.ndarray, what: str = "") -> str:
    """SHA-256 (hex) of a tensor dataset's split: which images (``index`` into the source) with which labels."""
    digest = hashlib.sha256(what.encode())
    digest.update(np.ascontiguousarray(index, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return digest.hexdigest()
