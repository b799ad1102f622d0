"""The in-memory cache of photos: uint8 at the model's size, decoded in the DataLoader workers."""

import os

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.data import read_records
from vitlab.data.dataset import channel_statistics
from vitlab.data.memory import DECODE_BATCH, decode_records
from vitlab.data.preprocess import Preprocess, unit_pixels
from vitlab.data.records import Records
from vitlab.data.stream import StreamDataset


def test_the_cache_is_uint8_at_the_model_size_and_the_workers_decode_it(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    for i in range(DECODE_BATCH + 8):  # two decode batches: the workers get them
        folder = tmp_path / ("ant", "bee")[i % 2]
        folder.mkdir(exist_ok=True)
        h, w = rng.integers(14, 30, size=2)
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    records = read_records("folder", tmp_path)["train"]
    read = Preprocess(image_size=(12, 10))
    streamed, _ = next(StreamDataset(records, read).batches(np.arange(len(records)), len(records), workers=0))
    main, opened = os.getpid(), Records.open

    def open_in_a_worker(self, i):
        assert os.getpid() != main, "the main process decoded an image"
        return opened(self, i)

    monkeypatch.setattr(Records, "open", open_in_a_worker)
    images, labels = decode_records(records, read, workers=2)
    assert images.dtype == torch.uint8 and images.shape == (len(records), 3, 12, 10)
    assert torch.equal(images, streamed) and torch.equal(labels, torch.from_numpy(records.labels))
    with pytest.raises(AssertionError, match="the main process decoded"):  # the spy bites
        decode_records(records, read, workers=0)
    exact = channel_statistics(images, "standardize")
    np.testing.assert_allclose(exact, channel_statistics(unit_pixels(images), "standardize"), rtol=0, atol=1e-6)
