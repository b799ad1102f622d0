"""IDX reader and the MNIST / Fashion-MNIST directory loader on generated files."""
import gzip

import numpy as np
import pytest

from vitlab.data import load_dataset
from vitlab.data.idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx, read_idx_pair


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path, rng, write_idx, suffix):
    images = rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 7, dtype=np.uint8)
    got_images = read_idx(write_idx(tmp_path / f"i{suffix}", images), IMAGES_MAGIC)
    got_labels = read_idx(write_idx(tmp_path / f"l{suffix}", labels), LABELS_MAGIC)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


def test_idx_errors_name_the_file(tmp_path, rng, write_idx):
    images = rng.integers(0, 256, (4, 6, 6), dtype=np.uint8)
    path = write_idx(tmp_path / "images", images)
    with pytest.raises(ValueError, match=r"images: wrong magic number 2051 \(expected 2049"):
        read_idx(path, LABELS_MAGIC)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ValueError, match=r"images: truncated"):
        read_idx(path, IMAGES_MAGIC)
    path.write_bytes(path.read_bytes() + b"\0" * 9)
    with pytest.raises(ValueError, match=r"images: has trailing bytes"):
        read_idx(path, IMAGES_MAGIC)
    path.write_bytes(b"\0\0\x08")
    with pytest.raises(ValueError, match=r"images: 3 bytes is too short"):
        read_idx(path, IMAGES_MAGIC)
    gz = write_idx(tmp_path / "images.gz", images)
    gz.write_bytes(gz.read_bytes()[:-12])
    with pytest.raises(ValueError, match=r"images.gz: corrupt or truncated gzip"):
        read_idx(gz, IMAGES_MAGIC)
    html = tmp_path / "page.gz"
    html.write_bytes(gzip.compress(b"<html>404 Not Found</html>"))
    with pytest.raises(ValueError, match=r"page.gz: wrong magic number"):
        read_idx(html, IMAGES_MAGIC)


def test_idx_pair_checks_labels_and_counts(tmp_path, rng, write_idx):
    images = write_idx(tmp_path / "img", rng.integers(0, 256, (5, 4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"lab: label 10 at index 3 is out of range \[0, 9\]"):
        read_idx_pair(images, write_idx(tmp_path / "lab", np.array([0, 1, 2, 10, 4], np.uint8)), 10)
    with pytest.raises(ValueError, match=r"img holds 5 images but .*lab4 holds 4 labels"):
        read_idx_pair(images, write_idx(tmp_path / "lab4", np.array([0, 1, 2, 3], np.uint8)), 10)


def test_mnist_textbook_protocol_on_test_only_dir(tmp_path, rng, write_mnist_split):
    images = rng.integers(0, 256, (10_000, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 10_000, dtype=np.uint8)
    write_mnist_split(tmp_path, "t10k", images, labels, gz=False)
    splits = load_dataset("mnist", tmp_path, rows=1000)
    assert (len(splits.train), len(splits.val), splits.test) == (1000, 2000, None)
    assert splits.image_shape == (1, 28, 28) and not splits.hflip_ok
    np.testing.assert_array_equal((splits.train.images[:, 0] * 255).round().byte().numpy(), images[:1000])
    np.testing.assert_array_equal((splits.val.images[:, 0] * 255).round().byte().numpy(), images[8000:])
    np.testing.assert_array_equal(splits.val.labels.numpy(), labels[8000:])
    assert splits.mean[0] == pytest.approx(images[:1000].mean() / 255, rel=1e-5)
    assert len(load_dataset("mnist", tmp_path).train) == 8000
    with pytest.raises(ValueError, match=r"rows=8001 but the mnist training pool has 8000 images"):
        load_dataset("mnist", tmp_path, rows=8001)


def test_mnist_with_train_and_test_files(tmp_path, rng, write_mnist_split):
    train = rng.integers(0, 256, (50, 28, 28), dtype=np.uint8), rng.integers(0, 10, 50, dtype=np.uint8)
    test = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8), rng.integers(0, 10, 20, dtype=np.uint8)
    layout = tmp_path / "FashionMNIST" / "raw"          # torchvision's layout is found too
    layout.mkdir(parents=True)
    write_mnist_split(layout, "train", *train)
    write_mnist_split(layout, "t10k", *test, gz=False)
    splits = load_dataset("fashion-mnist", tmp_path, rows=30)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (30, 5, 20)
    np.testing.assert_array_equal(splits.val.labels.numpy(), train[1][45:])
    np.testing.assert_array_equal(splits.test.labels.numpy(), test[1])
    assert splits.hflip_ok and splits.train.classes[0] == "T-shirt/top"


def test_mnist_missing_files_say_what_to_do(tmp_path, rng, write_idx):
    with pytest.raises(FileNotFoundError, match=r"no IDX files in .*vitlab data download mnist --to"):
        load_dataset("mnist", tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (3, 28, 28), dtype=np.uint8))
    with pytest.raises(FileNotFoundError, match=r"not t10k-labels-idx1-ubyte"):
        load_dataset("mnist", tmp_path)
    with pytest.raises(ValueError, match=r"pass data_dir"):
        load_dataset("mnist")


def test_mnist_bad_label_names_the_file(tmp_path, rng, write_mnist_split):
    labels = np.full(10, 3, np.uint8)
    labels[7] = 12
    write_mnist_split(tmp_path, "t10k", rng.integers(0, 256, (10, 28, 28), dtype=np.uint8), labels)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte.gz: label 12 at index 7"):
        load_dataset("mnist", tmp_path)
