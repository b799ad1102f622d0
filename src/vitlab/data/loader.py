"""Batches from an in-memory dataset by indexing its tensors: no workers, no per-sample Python.

Shuffling and sharding follow ``torch.utils.data.DistributedSampler`` exactly (``drop_last=False``),
so a run on ``world_size`` ranks sees the same permutation as a single process with the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from .dataset import ImageDataset


class BatchLoader:
    """Iterate ``(images (B, C, H, W), labels (B,))`` over one rank's shard of a seeded permutation.

    Each epoch's order is ``torch.randperm(N)`` from a generator seeded with ``seed + epoch`` (call
    :meth:`set_epoch` before each epoch), or ``0..N-1`` without ``shuffle``. With ``world_size > 1``
    the order is padded by repeating its head to a multiple of ``world_size`` and rank ``r`` takes
    positions ``r, r + world_size, ...``, DistributedSampler's rule. ``drop_last`` drops this rank's
    final incomplete batch (as DataLoader's ``drop_last`` does). Batches live on the dataset's device.
    """

    def __init__(
        self,
        dataset: ImageDataset,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if len(dataset) == 0:
            raise ValueError("cannot batch an empty dataset")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / world_size)

    def set_epoch(self, epoch: int) -> None:
        """Reseed the shuffle for ``epoch``; every rank must call it with the same value."""
        self.epoch = epoch

    def indices(self) -> torch.Tensor:
        """This rank's sample indices for the current epoch, ``(num_samples,)`` int64."""
        n = len(self.dataset)
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

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        images, labels = self.dataset.images, self.dataset.labels
        index = self.indices().to(images.device)
        for b in range(len(self)):
            batch = index[b * self.batch_size : (b + 1) * self.batch_size]
            yield images[batch], labels[batch.to(labels.device)]
