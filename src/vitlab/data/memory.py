"""A split of image files held in memory: :class:`DecodedSplit`, decoded whole (:func:`decode_records`) the first
time its images are used, so loading a dataset decodes nothing and a command that scores one split never opens
another split's files.

The cache holds each image as :class:`~vitlab.data.stream.StreamDataset` reads it for evaluation (``eval_image``):
uint8 at the model's input size, a quarter of the bytes of float32 and exactly the streamed pixels. Training
crops (RandomResizedCrop) are then cut from that image on the device, where a stream cuts them from the full
photo: a bounded margin would not make the two crops equal (a crop of 8% of the area needs the photo at 3.5
times the model's side to keep its detail), so the cache keeps no margin and the two loaders give the same
evaluation images, not the same training crops.

Decoding runs in DataLoader workers (``workers``; 0, or a split of one :data:`DECODE_BATCH`, which one worker
would decode while this process waits: here); this process only copies each uint8 batch into one preallocated
tensor, with one torch thread (a small uint8 copy costs ten times more spread over two threads).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from .dataset import ImageDataset
from .records import Records
from .stream import RecordsSplit, StreamDataset

if TYPE_CHECKING:
    from .preprocess import Preprocess

DECODE_BATCH = 32
"""Images a worker decodes per batch for the cache: ``workers * PREFETCH`` such batches are in flight."""


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one torch thread, then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def decode_records(
    records: Records, preprocess: Preprocess, *, workers: int = 2, max_bad: int = 0, bad: dict[str, str] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every image of ``records`` through ``preprocess.eval_image`` -> ``(images (N', C, H, W) uint8, labels (N',)
    int64)``: the in-memory cache, exactly the streamed evaluation images.

    ``workers`` DataLoader processes decode (0, or a single batch of :data:`DECODE_BATCH`: this process); the
    images land in one tensor allocated up front. Unreadable images are left out and recorded in ``bad``; more
    than ``max_bad`` raise :class:`~vitlab.errors.DataError`.
    """
    stream = StreamDataset(records, preprocess)
    if bad is not None:
        stream.bad = bad
    images = torch.empty((len(records), *stream.image_shape), dtype=torch.uint8)
    labels = torch.empty(len(records), dtype=torch.int64)
    filled = 0
    batches = -(-len(records) // DECODE_BATCH)
    workers = min(workers, batches) if batches > 1 else 0
    with one_thread():
        for batch, batch_labels in stream.batches(
            np.arange(len(records)), DECODE_BATCH, workers=workers, max_bad=max_bad, pin_memory=False
        ):
            images[filled : filled + len(batch)] = batch
            labels[filled : filled + len(batch)] = batch_labels
            filled += len(batch)
    return images[:filled], labels[:filled]


class DecodedSplit(RecordsSplit, ImageDataset):
    """A split of image files held in memory: an :class:`~vitlab.data.dataset.ImageDataset` whose ``images``
    ``(N, C, H, W)`` uint8 are decoded (:func:`decode_records`) the first time they are used, so
    loading a dataset decodes nothing and a command that scores one split never opens another's files.

    ``labels``, ``classes`` and ``image_shape`` come from the records and ``preprocess`` without decoding;
    with ``max_bad > 0`` an unreadable image is left out (and named in ``bad``), so ``labels`` then wait for
    the decoding too. :meth:`subset` and :meth:`relabeled` stay undecoded until used.
    """

    def __init__(
        self, records: Records, preprocess: Preprocess, *, workers: int = 2, max_bad: int = 0, bad: dict[str, str]
    ) -> None:
        super().__init__(records, preprocess, workers, max_bad, bad)
        self._decoded: tuple[torch.Tensor, torch.Tensor] | None = None

    def decode(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, labels)``, decoded now unless they were already."""
        if self._decoded is None:
            self._decoded = decode_records(
                self.records, self.preprocess, workers=self.workers, max_bad=self.max_bad, bad=self.bad
            )
        return self._decoded

    @property
    def images(self) -> torch.Tensor:  # type: ignore[override]
        return self.decode()[0]

    @property
    def labels(self) -> torch.Tensor:  # type: ignore[override]
        if self._decoded is None and not self.max_bad:
            return torch.from_numpy(self.records.labels)
        return self.decode()[1]

    def subset(self, index: torch.Tensor | np.ndarray | list[int]) -> ImageDataset:
        if self._decoded is not None or self.max_bad:
            return super().subset(index)
        return self._over(self.records.subset(np.asarray(index)))

    def relabeled(self, index_map: np.ndarray, classes: Sequence[str]) -> ImageDataset:
        if self._decoded is not None or self.max_bad:
            return super().relabeled(index_map, classes)
        return self._over(
            replace(self.records, labels=np.asarray(index_map)[self.records.labels], classes=list(classes))
        )

    def _over(self, records: Records) -> DecodedSplit:
        return DecodedSplit(records, self.preprocess, workers=self.workers, max_bad=self.max_bad, bad=self.bad)

    def __repr__(self) -> str:
        state = "decoded" if self._decoded is not None else "not decoded yet"
        return f"DecodedSplit({len(self.records)} records of {self.records.origin!r}, {state})"
