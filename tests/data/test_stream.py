"""StreamDataset: uint8 batches that depend on (seed, index) only, unreadable files skipped and counted,
rank shards that cover an epoch once."""

import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.data import ShardSampler, load_dataset, read_records
from vitlab.data.preprocess import Preprocess
from vitlab.data.stream import StreamDataset, sample_seeds
from vitlab.errors import DataError


def write_photos(root, per_class=6, classes=("ant", "bee")):
    rng = np.random.default_rng(0)
    for label, cls in enumerate(classes):
        (root / cls).mkdir(parents=True)
        for k in range(per_class):
            height, width = (int(v) for v in rng.integers(10, 40, 2))
            pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            pixels[..., label] = 255
            Image.fromarray(pixels).save(root / cls / f"{k:02d}.png")
    return root


def stream(root, train=True, size=12) -> StreamDataset:
    return StreamDataset(read_records("folder", root)["train"], Preprocess(image_size=(size, size)), train=train)


def collect(batches) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = zip(*batches, strict=True)
    return torch.cat(images), torch.cat(labels)


def test_batches_depend_on_seed_and_index_only(tmp_path):
    data = stream(write_photos(tmp_path))
    index = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))
    x, y = collect(data.batches(index, 5, seed=3, workers=0))
    assert x.dtype == torch.uint8 and x.shape == (12, 3, 12, 12) and torch.equal(y, data.labels[index])
    for workers, batch_size in ((1, 5), (2, 5), (2, 12), (0, 1)):
        again, _ = collect(data.batches(index, batch_size, seed=3, workers=workers))
        assert torch.equal(again, x), (workers, batch_size)
    part, _ = collect(data.batches(index[4:7], 2, seed=3, workers=0))  # an item's pixels follow it anywhere
    assert torch.equal(part, x[4:7])
    other, _ = collect(data.batches(index, 5, seed=4, workers=0))
    assert not torch.equal(other, x)
    plain = data.augmented(False)
    first, _ = collect(plain.batches(index, 5, seed=3, workers=0))
    assert torch.equal(first, collect(plain.batches(index, 5, seed=9, workers=2))[0])  # eval ignores the seed
    assert sample_seeds(3, [5, 5, 6])[0] == sample_seeds(3, [5])[0] != sample_seeds(3, [6])[0]


def test_unreadable_images_are_skipped_counted_and_refused_above_max_bad(tmp_path):
    root = write_photos(tmp_path)
    (root / "bee" / "03.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    (root / "ant" / "01.png").write_bytes(b"")
    data = stream(root, train=False)
    with pytest.raises(DataError, match=r"ant/01.png: unreadable image .*--set data.max_bad_images=N"):
        list(data.batches(range(len(data)), 4, workers=0))
    data = stream(root, train=False)
    x, y = collect(data.batches(range(len(data)), 4, workers=2, max_bad=2))
    assert len(x) == len(y) == 10 and y.tolist() == [0] * 5 + [1] * 5
    assert sorted(name.split("/")[-2] + "/" + name.split("/")[-1] for name in data.bad) == ["ant/01.png", "bee/03.png"]
    assert data.bad_report().startswith("skipped 2 unreadable image(s)")
    with pytest.raises(DataError, match=r"2 unreadable image\(s\), more than the 1 tolerated: .*also unreadable"):
        list(stream(root, train=False).batches(range(12), 12, workers=0, max_bad=1))
    assert list(data.batches([1], 1, workers=0, max_bad=2)) == []  # a batch left empty is skipped


def test_in_memory_loading_leaves_out_tolerated_unreadable_images(tmp_path):
    root = write_photos(tmp_path, per_class=7)
    (root / "bee" / "03.png").write_bytes(b"")
    with pytest.raises(DataError, match=r"bee/03.png: unreadable image"):  # when the split holding it is decoded
        [part.images for part in load_dataset("folder", root, loader="memory").parts().values()]
    splits = load_dataset("folder", root, loader="memory", max_bad=1)
    assert len(splits.train) + len(splits.val) + len(splits.test) == 13
    assert "left out 1 unreadable image(s)" in splits.loader_reason and "bee/03.png" in splits.loader_reason
    streamed = load_dataset("folder", root, loader="stream", max_bad=1, workers=0)  # batches() defaults to these
    sizes = [
        len(collect(part.batches(range(len(part)), 4))[1]) for part in (streamed.train, streamed.val, streamed.test)
    ]
    assert sum(sizes) == 13 and list(streamed.test.bad) == [str(root / "bee" / "03.png")]


def test_rank_shards_cover_the_epoch_once(tmp_path):
    data = stream(write_photos(tmp_path, per_class=5), train=False)
    everything, _ = collect(data.batches(range(len(data)), 10, workers=0))
    seen = []
    for rank in range(2):
        sampler = ShardSampler(len(data), 3, seed=7, rank=rank, world_size=2)
        sampler.set_epoch(2)
        seen.append(collect(data.batches(sampler.indices(), 3, seed=7, workers=rank))[0])
    union = torch.cat(seen)
    assert len(union) == len(everything) == 10
    assert sorted(map(bytes, union.flatten(1).numpy())) == sorted(map(bytes, everything.flatten(1).numpy()))


def test_streamed_statistics_match_the_in_memory_ones_and_the_dataset_pickles(tmp_path):
    root = write_photos(tmp_path)
    memory = load_dataset("folder", root, loader="memory", image_size=12)
    streamed = load_dataset("folder", root, loader="stream", image_size=12, workers=0)
    np.testing.assert_allclose(streamed.mean, memory.mean, atol=1e-6)
    np.testing.assert_allclose(streamed.std, memory.std, atol=1e-6)
    given = load_dataset("folder", root, loader="stream", preprocess=Preprocess(mean=(0.5,) * 3, std=(0.25,) * 3))
    assert given.mean == (0.5,) * 3 and given.std == (0.25,) * 3
    unit = load_dataset("folder", root, loader="stream", normalization="unit", workers=0)
    assert unit.mean == (0.0,) * 3 and unit.std == (1.0,) * 3
    copy = pickle.loads(pickle.dumps(streamed.val))
    assert torch.equal(collect(copy.batches([0, 1], 2, workers=0))[0], collect(streamed.val.batches([0, 1], 2))[0])
    assert streamed.train.subset([2, 0]).labels.tolist() == streamed.train.labels[[2, 0]].tolist()
