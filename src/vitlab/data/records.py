"""Images by reference: one split's images as a :class:`Records`, indexed without decoding a pixel.

A :class:`Records` is a split's images as references into a :class:`Store` (a file, a tar member, a row of
a Hugging Face dataset), their labels ``(N,)`` int64 and the class names; :meth:`Records.open` decodes one
through the one image door (:func:`~vitlab.data.image.decode_image`), so every unreadable item is a
:class:`~vitlab.errors.DataError` naming it. The photo sources that index them (``*_records.py``) are
registered in :mod:`~vitlab.data.registry` (:func:`~vitlab.data.registry.read_records`); they share
:data:`SPLIT_NAMES`, :class:`Names`, :class:`FileStore` and the :class:`ProgressCounter` here.
:func:`split_records` makes the splits a source does not have, by the one rule
(:func:`~vitlab.data.split.split_indices`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image

from ..errors import DataError
from .image import decode_image, jpeg_bytes
from .split import split_indices, split_rule

SPLIT_NAMES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
"""Folder, manifest, shard and parquet names of the official splits -> the split they are."""
PROGRESS_EVERY = 10_000
"""Indexing calls ``progress(count)`` after every this many items."""

Progress = Callable[[int], None]


class Names:
    """``N`` strings packed in one UTF-8 buffer with offsets: no Python object per string, so an index of
    millions of names is compact and forked loader workers do not copy it page by page."""

    def __init__(self, strings: Iterable[str]) -> None:
        encoded = [s.encode() for s in strings]
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=self.offsets[1:])
        self.blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, j: int) -> str:
        return self.blob[self.offsets[j] : self.offsets[j + 1]].tobytes().decode()


class Store(Protocol):
    """Where a source's items live: ``source(j)`` is what :func:`decode_image` reads (a path or the
    bytes), ``name(j)`` says where the item is in messages, ``key(j)`` is the same relative to the source
    (stable when its folder moves: :meth:`Records.fingerprint` hashes it)."""

    def source(self, j: int) -> str | Path | bytes: ...

    def name(self, j: int) -> str: ...

    def key(self, j: int) -> str: ...


def item_bytes(store: Store, j: int) -> int | None:
    """How many bytes item ``j`` of ``store`` holds (-1: a file that cannot be read); ``None`` where the store
    cannot tell without reading the item (``store.nbytes`` is optional)."""
    nbytes = getattr(store, "nbytes", None)
    return None if nbytes is None else int(nbytes(j))


class FileStore:
    """Image files, by path relative to ``root`` (absolute paths stay as they are)."""

    def __init__(self, root: Path, paths: Names) -> None:
        self.root = root
        self.paths = paths

    def source(self, j: int) -> Path:
        return self.root / self.paths[j]

    def name(self, j: int) -> str:
        return str(self.root / self.paths[j])

    def key(self, j: int) -> str:
        return self.paths[j]

    def nbytes(self, j: int) -> int:
        try:
            return os.stat(self.root / self.paths[j]).st_size
        except OSError:
            return -1


@dataclass
class Records:
    """One split's images by reference: item ``i`` is ``store`` item ``refs[i]`` with label ``labels[i]``.

    ``labels`` ``(N,)`` int64 numpy in ``[0, len(classes))``; ``origin`` says where the source is.
    """

    store: Store
    refs: np.ndarray
    labels: np.ndarray
    classes: list[str]
    origin: str = ""

    def __post_init__(self) -> None:
        self.refs = np.asarray(self.refs, dtype=np.int64)
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if self.refs.shape != self.labels.shape or self.labels.ndim != 1:
            raise DataError(f"{self.refs.shape} references but {self.labels.shape} labels")
        if len(self.labels) and (self.labels.min() < 0 or self.labels.max() >= len(self.classes)):
            raise DataError(f"labels must lie in [0, {len(self.classes) - 1}] for {len(self.classes)} classes")

    def __len__(self) -> int:
        return len(self.labels)

    def open(self, i: int) -> Image.Image:
        """Item ``i`` decoded (see :func:`decode_image`); :class:`DataError` naming it when unreadable."""
        j = int(self.refs[i])
        return decode_image(self.store.source(j), self.store.name(j))

    def jpeg(self, i: int) -> tuple[bytes, int, int] | None:
        """Item ``i``'s bytes, height and width when it is an RGB or greyscale JPEG (from its header, no pixel
        decoded: :func:`~vitlab.data.image.jpeg_bytes`), else None; :class:`DataError` naming it when unreadable."""
        j = int(self.refs[i])
        return jpeg_bytes(self.store.source(j), self.store.name(j))

    def name(self, i: int) -> str:
        """Where item ``i`` is: its path, ``shard:member``, or ``folder:split[row]``."""
        return self.store.name(int(self.refs[i]))

    def key(self, i: int) -> str:
        """Item ``i``'s name relative to its source (a relative path, ``shard-file:member``, ``split[row]``)."""
        return self.store.key(int(self.refs[i]))

    def subset(self, index: np.ndarray | Sequence[int]) -> Records:
        """The records at positions ``index`` (any order, repeats allowed), sharing the store."""
        index = np.asarray(index, dtype=np.int64)
        return Records(self.store, self.refs[index], self.labels[index], self.classes, self.origin)

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the sorted ``key<TAB>class name`` lines: the same images with the same labels
        give the same fingerprint wherever the source lies and in whatever order it lists them."""
        lines = sorted(f"{self.key(i)}\t{self.classes[label]}" for i, label in enumerate(self.labels.tolist()))
        return _digest(lines)

    def bytes_fingerprint(self) -> str | None:
        """SHA-256 (hex) of the sorted ``key<TAB>byte size`` lines, which tells an image replaced by other bytes
        (of another size) where :meth:`fingerprint` does not; ``None`` where the store cannot tell sizes."""
        if not len(self) or item_bytes(self.store, int(self.refs[0])) is None:
            return None
        return _digest(sorted(f"{self.key(i)}\t{item_bytes(self.store, int(j))}" for i, j in enumerate(self.refs)))


def _digest(lines: Iterable[str]) -> str:
    """SHA-256 (hex) of ``lines``, each ended by a newline."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


class ProgressCounter:
    """Calls ``progress(count)`` each time ``count`` passes a multiple of :data:`PROGRESS_EVERY`, and once
    at the end when it was called at all."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.count = 0
        self.reported = 0

    def add(self, n: int) -> None:
        self.count += n
        if self.progress is not None and self.count // PROGRESS_EVERY > self.reported // PROGRESS_EVERY:
            self.progress(self.count)
            self.reported = self.count

    def done(self) -> None:
        if self.progress is not None and self.reported and self.reported != self.count:
            self.progress(self.count)


def split_records(
    records: dict[str, Records],
    seed: int = 0,
    rows: int | None = None,
    held_out: tuple[float, float] = (0.15, 0.15),
    name: str = "folder",
) -> tuple[Records, Records, Records | None, str]:
    """``(train, val, test or None, rule)`` from a source's ``{"train", "val"?, "test"?}``.

    Official splits are kept. The rest is :func:`~vitlab.data.split.split_indices`' rule, the one
    :func:`~vitlab.data.dataset.make_splits` follows: without ``val``, the ``held_out`` fractions (validation,
    then test when there is no official test) of the training records; ``rows`` keeps the first ``rows`` of
    the pool in the seeded stratified order of all the training records. So a source read in memory and
    streamed gives the same members.
    """
    train = records["train"]
    val, test = records.get("val"), records.get("test")
    what = f"the {len(train)} images" if val is None and test is None else f"the {len(train)} training images"
    held = () if val is not None else held_out if test is None else held_out[:1]
    parts = split_indices(train.labels, held, seed, rows, name, len(train.classes))
    rule = split_rule(
        held,
        what,
        seed,
        rows,
        val=None if val is None else f"the official validation split ({len(val)} images)",
        test=None if test is None else f"the official test split ({len(test)} images)",
    )
    val = train.subset(parts[1]) if val is None else val
    if test is None and len(parts) > 2:
        test = train.subset(parts[2])
    return train.subset(parts[0]), val, test, rule
