"""IDX reader and the MNIST / Fashion-MNIST loader on generated files, where they are found, and the
real Fashion-MNIST of Debian's dataset-fashion-mnist when it is installed."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from vitlab.cli.main import main
from vitlab.data import load_dataset, locate_dataset, paths
from vitlab.data.idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx, read_idx_pair
from vitlab.errors import DataError

DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")
needs_fashion = pytest.mark.skipif(
    not DEBIAN_FASHION.is_dir(),
    reason=f"Fashion-MNIST is not installed in {DEBIAN_FASHION} (apt-get install dataset-fashion-mnist)",
)


def pixels(part) -> np.ndarray:
    return (part.images[:, 0] * 255).round().byte().numpy()


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
    with pytest.raises(DataError, match=r"images: wrong magic number 2051 \(expected 2049"):
        read_idx(path, LABELS_MAGIC)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(DataError, match=r"images: truncated"):
        read_idx(path, IMAGES_MAGIC)
    path.write_bytes(path.read_bytes() + b"\0" * 9)
    with pytest.raises(DataError, match=r"images: has trailing bytes"):
        read_idx(path, IMAGES_MAGIC)
    path.write_bytes(b"\0\0\x08")
    with pytest.raises(DataError, match=r"images: 3 bytes is too short"):
        read_idx(path, IMAGES_MAGIC)
    gz = write_idx(tmp_path / "images.gz", images)
    gz.write_bytes(gz.read_bytes()[:-12])
    with pytest.raises(DataError, match=r"images.gz: corrupt or truncated gzip"):
        read_idx(gz, IMAGES_MAGIC)
    html = tmp_path / "page.gz"
    html.write_bytes(gzip.compress(b"<html>404 Not Found</html>"))
    with pytest.raises(DataError, match=r"page.gz: wrong magic number"):
        read_idx(html, IMAGES_MAGIC)
    with pytest.raises(DataError, match=r"cannot read"):
        read_idx(tmp_path, IMAGES_MAGIC)


def test_idx_with_no_images_is_refused(tmp_path, write_idx, write_mnist_split):
    with pytest.raises(DataError, match=r"empty-images: dims \(0, 28, 28\) hold no images"):
        read_idx(write_idx(tmp_path / "empty-images", np.zeros((0, 28, 28), np.uint8)), IMAGES_MAGIC)
    with pytest.raises(DataError, match=r"dims \(5, 0, 28\) hold no images"):
        read_idx(write_idx(tmp_path / "flat", np.zeros((5, 0, 28), np.uint8)), IMAGES_MAGIC)
    write_mnist_split(tmp_path, "t10k", np.zeros((0, 28, 28), np.uint8), np.zeros(0, np.uint8))
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte.gz: dims \(0, 28, 28\) hold no images"):
        load_dataset("mnist", tmp_path)


def test_gzip_bomb_is_read_only_as_far_as_its_header_promises(tmp_path):
    header = IMAGES_MAGIC.to_bytes(4, "big") + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") * 2
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:  # a 4-byte image followed by 64 MiB of zeros
        f.write(header + bytes(4))
        for _ in range(64):
            f.write(bytes(1 << 20))
    assert bomb.stat().st_size < 200_000
    with pytest.raises(DataError, match=r"bomb.gz: has trailing bytes after the 4 its dims \(1, 2, 2\) need"):
        read_idx(bomb, IMAGES_MAGIC)


def test_idx_pair_checks_labels_and_counts(tmp_path, rng, write_idx):
    images = write_idx(tmp_path / "img", rng.integers(0, 256, (5, 4, 4), dtype=np.uint8))
    with pytest.raises(DataError, match=r"lab: label 10 at index 3 is out of range \[0, 9\]"):
        read_idx_pair(images, write_idx(tmp_path / "lab", np.array([0, 1, 2, 10, 4], np.uint8)), 10)
    with pytest.raises(DataError, match=r"img holds 5 images but .*lab4 holds 4 labels"):
        read_idx_pair(images, write_idx(tmp_path / "lab4", np.array([0, 1, 2, 3], np.uint8)), 10)


def test_mnist_textbook_protocol_on_test_only_dir(tmp_path, rng, write_mnist_split):
    images = rng.integers(0, 256, (10_000, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 10_000, dtype=np.uint8)
    write_mnist_split(tmp_path, "t10k", images, labels, gz=False)
    splits = load_dataset("mnist", tmp_path, rows=1000)
    pool = load_dataset("mnist", tmp_path)
    assert (len(splits.train), splits.test) == (1000, None) and abs(len(splits.val) - 2000) <= 5
    assert len(pool.train) + len(pool.val) == 10_000 and splits.image_shape == (1, 28, 28) and not splits.hflip_ok
    # validation: a stratified random fifth of t10k (not its tail); rows: a stratified part of the rest
    val = {bytes(r) for r in pixels(splits.val)}
    assert {bytes(r) for r in images[8000:]} != val and val == {bytes(r) for r in pixels(pool.val)}
    assert {bytes(r) for r in pixels(splits.train)} <= {bytes(r) for r in pixels(pool.train)}
    for part, size in ((splits.val, len(splits.val)), (splits.train, 1000)):
        expected = size * np.bincount(labels, minlength=10) / len(labels)
        assert np.abs(np.bincount(part.labels.numpy(), minlength=10) - expected).max() <= 1.5
    assert splits.mean[0] == pytest.approx(pixels(splits.train).mean() / 255, rel=1e-5)
    assert "val: stratified random 20% of the t10k file" in splits.split_rule
    with pytest.raises(DataError, match=rf"rows={len(pool.train) + 1} but the mnist training pool has"):
        load_dataset("mnist", tmp_path, rows=len(pool.train) + 1)


def test_mnist_with_train_and_test_files(tmp_path, rng, write_mnist_split):
    train = rng.integers(0, 256, (50, 28, 28), dtype=np.uint8), np.repeat(np.arange(10, dtype=np.uint8), 5)
    test = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8), rng.integers(0, 10, 20, dtype=np.uint8)
    layout = tmp_path / "FashionMNIST" / "raw"  # torchvision's layout is found too
    layout.mkdir(parents=True)
    write_mnist_split(layout, "train", *train)
    write_mnist_split(layout, "t10k", *test, gz=False)
    splits = load_dataset("fashion-mnist", tmp_path, rows=30)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (30, 10, 20)
    assert np.bincount(splits.val.labels.numpy()).tolist() == [1] * 10  # one of each class's five
    np.testing.assert_array_equal(splits.test.labels.numpy(), test[1])
    assert splits.hflip_ok and splits.train.classes[0] == "T-shirt/top" and splits.source == str(layout)


def test_mnist_missing_files_say_what_to_do(tmp_path, rng, write_idx, no_system_data):
    with pytest.raises(DataError, match=r"mnist: no files in .* get them with `vitlab data download mnist`"):
        load_dataset("mnist", tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (3, 28, 28), dtype=np.uint8))
    with pytest.raises(DataError, match=r"not t10k-labels-idx1-ubyte"):
        load_dataset("mnist", tmp_path)
    with pytest.raises(
        DataError,
        match=r"no files in .*data-home\d*/mnist or .*data-home\d* or "
        r".*system-datasets\d*/mnist; get them with",
    ):
        load_dataset("mnist")
    with pytest.raises(
        DataError,
        match=r"`apt-get install dataset-fashion-mnist`, `vitlab data download "
        r"fashion-mnist` or pass --data-dir DIR",
    ):
        load_dataset("fashion-mnist")


def test_mnist_bad_label_names_the_file(tmp_path, rng, write_mnist_split):
    labels = np.full(10, 3, np.uint8)
    labels[7] = 12
    write_mnist_split(tmp_path, "t10k", rng.integers(0, 256, (10, 28, 28), dtype=np.uint8), labels)
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte.gz: label 12 at index 7"):
        load_dataset("mnist", tmp_path)


def test_files_are_searched_in_data_home_then_the_system_folder(
    tmp_path, rng, write_mnist_split, empty_data_home, no_system_data, monkeypatch
):
    def put(folder):
        folder.mkdir(parents=True, exist_ok=True)
        write_mnist_split(
            folder,
            "t10k",
            rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
            np.repeat(np.arange(10, dtype=np.uint8), 2),
        )
        return folder

    system = put(no_system_data / "mnist")
    assert locate_dataset("mnist") == system and load_dataset("mnist").source == str(system)
    assert locate_dataset("mnist", put(empty_data_home)) == empty_data_home  # $VITLAB_DATA itself
    assert locate_dataset("mnist") == empty_data_home
    nested = put(empty_data_home / "mnist")
    assert locate_dataset("mnist") == nested  # $VITLAB_DATA/mnist first
    assert locate_dataset("mnist", empty_data_home) == empty_data_home  # an explicit folder
    mine = put(tmp_path / "mine" / "mnist")
    assert locate_dataset("mnist", tmp_path / "mine") == mine  # ... or its NAME sub-folder
    monkeypatch.delenv("VITLAB_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert locate_dataset("mnist") == system
    cached = put(tmp_path / "cache" / "vitlab" / "data" / "mnist")
    assert locate_dataset("mnist") == cached


@needs_fashion
def test_fashion_mnist_is_found_where_debian_installs_it():
    assert locate_dataset("fashion-mnist") == DEBIAN_FASHION
    splits = load_dataset("fashion-mnist", rows=200, seed=3)
    assert splits.source == str(DEBIAN_FASHION) and splits.train.classes[9] == "Ankle boot"
    assert (len(splits.train), len(splits.val), len(splits.test)) == (200, 6000, 10_000)
    assert np.bincount(splits.train.labels.numpy()).tolist() == [20] * 10
    assert np.bincount(splits.val.labels.numpy()).tolist() == [600] * 10
    assert np.bincount(splits.test.labels.numpy()).tolist() == [1000] * 10
    assert 0.2 < splits.mean[0] < 0.4 and splits.hflip_ok


@needs_fashion
def test_cli_info_says_where_fashion_mnist_was_found(capsys, no_system_data, monkeypatch):
    assert main(["data", "info", "fashion-mnist"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install dataset-fashion-mnist" in err and "Traceback" not in err
    monkeypatch.setattr(paths, "SYSTEM_DATA", DEBIAN_FASHION.parent)
    assert main(["data", "info", "fashion-mnist", "--rows", "100", "--normalization", "unit"]) == 0
    out = capsys.readouterr().out
    assert f"source   {DEBIAN_FASHION}" in out and "train 100  val 6000  test 10000" in out
    assert "val: stratified random 10% of the training file (seed 0); test: the official test file" in out
    assert "norm     unit" in out and "mean     0.0000" in out
