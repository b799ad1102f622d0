"""Batches from an in-memory dataset by indexing its tensors: no workers, no per-sample Python.

Shuffling and sharding follow ``torch.utils.data.DistributedSampler`` exactly (``drop_last=False``),
so a run on ``world_size`` ranks sees the same permutation as a single process with the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from ..errors import ConfigError, DataError
from .dataset import ImageDataset


class ShardSampler:
    """One rank's shard of a seeded permutation of ``n`` samples, in batches of ``batch_size``.

    Each epoch's order is ``torch.randperm(n)`` from a generator seeded with ``seed + epoch`` (call
    :meth:`set_epoch` before each epoch), or ``0..n-1`` without ``shuffle``. With ``world_size > 1``
    the order is padded by repeating its head to a multiple of ``world_size`` and rank ``r`` takes
    positions ``r, r + world_size, ...``, DistributedSampler's rule. ``drop_last`` drops this rank's
    final incomplete batch (as DataLoader's ``drop_last`` does).
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if n == 0:
            raise DataError("cannot batch an empty dataset")
        self.n = n
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.num_samples = math.ceil(n / world_size)

    def set_epoch(self, epoch: int) -> None:
        """Reseed the shuffle for ``epoch``; every rank must call it with the same value."""
        self.epoch = epoch

    def indices(self) -> torch.Tensor:
        """This rank's sample indices for the current epoch, ``(num_samples,)`` int64."""
        n = self.n
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=generator)
        else:
            order = torch.arange(n)
        total = self.num_samples * self.world_size
        order = order.repeat(math.ceil(total / n))[:total]
        return order[self.rank : total : self.world_size]

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return math.ceil(self.num_samples / self.batch_size)


class BatchLoader(ShardSampler):
    """Iterate ``(images (B, C, H, W), labels (B,))`` of ``dataset`` in the :class:`ShardSampler`
    order (``sampling``: its ``shuffle``, ``seed``, ``drop_last``, ``rank``, ``world_size``); batches live on
    the dataset's device."""

    def __init__(self, dataset: ImageDataset, batch_size: int, **sampling: Any) -> None:
        super().__init__(len(dataset), batch_size, **sampling)
        self.dataset = dataset

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        images, labels = self.dataset.images, self.dataset.labels
        index = self.indices().to(images.device)
        for b in range(len(self)):
            batch = index[b * self.batch_size : (b + 1) * self.batch_size]
            yield images[batch], labels[batch.to(labels.device)]
