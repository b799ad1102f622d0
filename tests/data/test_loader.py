"""BatchLoader: epochs cover the data once, and shards are DistributedSampler's."""

import math

import pytest
import torch
from torch.utils.data import DistributedSampler

from vitlab.data import BatchLoader, ImageDataset


def make_dataset(n: int) -> ImageDataset:
    """Image i is filled with the value i, so a batch tells which indices it holds."""
    images = torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 1, 2, 2).contiguous()
    return ImageDataset(images, torch.arange(n) % 3, ["a", "b", "c"])


@pytest.mark.parametrize("shuffle", [True, False])
def test_epoch_covers_every_index_once(shuffle):
    data = make_dataset(23)
    loader = BatchLoader(data, batch_size=5, shuffle=shuffle, seed=1)
    seen = torch.cat([images[:, 0, 0, 0] for images, _ in loader]).long()
    assert len(loader) == 5 and sorted(seen.tolist()) == list(range(23))
    assert (seen == torch.arange(23)).all() != shuffle
    images, labels = next(iter(loader))
    assert images.shape == (5, 1, 2, 2) and torch.equal(labels, images[:, 0, 0, 0].long() % 3)


def test_set_epoch_reshuffles_reproducibly():
    loader = BatchLoader(make_dataset(40), batch_size=8, seed=2)
    orders = []
    for epoch in (0, 1, 0):
        loader.set_epoch(epoch)
        orders.append(torch.cat([x[:, 0, 0, 0] for x, _ in loader]))
    assert torch.equal(orders[0], orders[2]) and not torch.equal(orders[0], orders[1])


@pytest.mark.parametrize("n,world_size,shuffle", [(23, 4, True), (24, 4, True), (10, 3, False), (5, 8, True)])
def test_shards_match_distributed_sampler(n, world_size, shuffle):
    data = make_dataset(n)
    for epoch in (0, 3):
        covered = []
        for rank in range(world_size):
            sampler = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=7)
            sampler.set_epoch(epoch)
            loader = BatchLoader(data, batch_size=2, shuffle=shuffle, seed=7, rank=rank, world_size=world_size)
            loader.set_epoch(epoch)
            got = torch.cat([x[:, 0, 0, 0] for x, _ in loader]).long().tolist()
            assert got == list(sampler) and len(loader) == math.ceil(len(sampler) / 2)
            covered += got
        assert set(covered) == set(range(n)) and len(covered) == world_size * math.ceil(n / world_size)


def test_drop_last_and_bad_arguments():
    loader = BatchLoader(make_dataset(23), batch_size=5, drop_last=True)
    assert len(loader) == 4 and [len(y) for _, y in loader] == [5] * 4
    with pytest.raises(ValueError, match="rank"):
        BatchLoader(make_dataset(4), batch_size=2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        BatchLoader(make_dataset(4), batch_size=0)
