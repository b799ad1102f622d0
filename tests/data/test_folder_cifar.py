"""The folder reader on generated PNG/JPEG files and the CIFAR-10 reader on generated batches."""

import os
import pickle

import numpy as np
import pytest
from PIL import Image

from vitlab.data import load_dataset
from vitlab.data.cifar import read_cifar_batch
from vitlab.errors import DataError


def make_folder(root, rng, per_class=10):
    """Class 'red' holds red PNGs, class 'blue' blue JPEGs (plus a stray text file to be ignored)."""
    for name, colour, suffix in (("red", (220, 10, 10), ".png"), ("blue", (10, 10, 220), ".JPG")):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            size = tuple(int(s) for s in rng.integers(10, 30, 2))
            Image.new("RGB", size, colour).save(root / name / f"{i}{suffix}")
    (root / "red" / "notes.txt").write_text("not an image")


def test_folder_reads_resizes_and_splits(tmp_path, rng):
    make_folder(tmp_path, rng)
    splits = load_dataset("folder", tmp_path, image_size=8, seed=1)
    assert splits.train.classes == ["blue", "red"] and splits.image_shape == (3, 8, 8)
    assert sum(len(p) for p in (splits.train, splits.val, splits.test)) == 20
    assert splits.train.labels.bincount().tolist() == [7, 7]
    red = splits.in_memory("train", "a test").images[splits.train.labels == 1]  # uint8 in memory, as floats
    np.testing.assert_allclose(red.mean((0, 2, 3)).numpy(), np.array([220, 10, 10]) / 255, atol=0.02)
    grey = load_dataset("folder", tmp_path, image_size=4, channels=1, rows=4)
    assert grey.image_shape == (1, 4, 4) and grey.train.labels.bincount().tolist() == [2, 2]


def test_folder_unreadable_image_names_the_file(tmp_path, rng):
    make_folder(tmp_path, rng, per_class=3)  # enough to split: files are split before any is decoded
    bad = tmp_path / "red" / "1.png"
    bad.write_bytes(bad.read_bytes()[:30])
    with pytest.raises(DataError, match=r"red/1.png: unreadable image"):  # when the split holding it is decoded
        [part.images for part in load_dataset("folder", tmp_path).parts().values()]
    with pytest.raises(DataError, match=r"has no class sub-folders"):
        load_dataset("folder", tmp_path / "red")


def pixels(part) -> np.ndarray:
    return (part.images * 255).round().byte().numpy()


def write_cifar(root, write_cifar_batch, rng, per_batch=20, protocol=2):
    images, labels = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        images.append(rng.integers(0, 256, (per_batch, 3, 32, 32), dtype=np.uint8))
        labels.append(np.arange(per_batch) % 10)
        write_cifar_batch(root / name, images[-1], labels[-1], protocol)
    return np.concatenate(images), np.concatenate(labels)


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar_reader_keeps_pixel_layout_and_splits(tmp_path, rng, write_cifar_batch, protocol):
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    images, labels = write_cifar(root, write_cifar_batch, rng, protocol=protocol)
    splits = load_dataset("cifar10", tmp_path)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (90, 10, 20)
    assert splits.val.labels.bincount().tolist() == [1] * 10  # a stratified tenth of the training batches
    assert sorted(map(bytes, [*pixels(splits.train), *pixels(splits.val)])) == sorted(map(bytes, images[:100]))
    np.testing.assert_array_equal(pixels(splits.test), images[100:])
    np.testing.assert_array_equal(splits.test.labels.numpy(), labels[100:])
    assert splits.hflip_ok and splits.train.classes[0] == "airplane"


def test_cifar_refuses_arbitrary_objects_and_bad_labels(tmp_path, rng, write_cifar_batch):
    class Exploit:
        def __reduce__(self):
            return os.system, ("echo owned",)

    evil = tmp_path / "evil"
    evil.write_bytes(pickle.dumps({"data": Exploit(), "labels": []}))
    with pytest.raises(DataError, match=r"evil: not a readable CIFAR-10 batch .*refusing to load global"):
        read_cifar_batch(evil)
    bad = write_cifar_batch(
        tmp_path / "bad", rng.integers(0, 256, (3, 3, 32, 32), dtype=np.uint8), np.array([1, 10, 2])
    )
    with pytest.raises(DataError, match=r"bad: label 10 at index 1 is out of range"):
        read_cifar_batch(bad)
    truncated = tmp_path / "truncated"
    truncated.write_bytes(bad.read_bytes()[:500])
    with pytest.raises(DataError, match=r"truncated: not a readable CIFAR-10 batch"):
        read_cifar_batch(truncated)
    (tmp_path / "data_batch_1").write_bytes(b"")
    with pytest.raises(DataError, match=r"lacks \['data_batch_2'"):
        load_dataset("cifar10", tmp_path)
