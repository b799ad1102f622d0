"""The one dataset registry (every target, plug-ins, `vitlab data list`) and load_dataset: the one split rule,
rows, normalization, option checking, and where files are found."""

import numpy as np
import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import (
    DatasetSpec,
    ImageDataset,
    dataset_spec,
    list_datasets,
    load_dataset,
    load_dense_dataset,
    locate_dataset,
    make_splits,
    register_dataset,
    stratified_order,
)
from vitlab.data.dataset import Source
from vitlab.data.registry import dataset_specs, photo_sources, unregister_dataset
from vitlab.data.split import stratified_split
from vitlab.data.synthetic import make_synthetic
from vitlab.errors import DataError


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", seed=0)


def indexed(labels) -> ImageDataset:
    """Image i is filled with the value i, so a split tells which indices it holds."""
    labels = torch.as_tensor(labels)
    n = len(labels)
    images = torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 1, 2, 2).contiguous()
    return ImageDataset(images, labels, [str(c) for c in range(int(labels.max()) + 1)])


def ids(part: ImageDataset) -> list[int]:
    return part.images[:, 0, 0, 0].long().tolist()


def test_list_datasets():
    assert set(list_datasets()) == {
        *("digits", "mnist", "fashion-mnist", "cifar10", "cifar100", "synthetic"),
        *("folder", "manifest", "wds", "hf"),
    }


def test_digits_split_is_disjoint_complete_stratified_and_seeded(digits):
    from sklearn.datasets import load_digits

    raw = load_digits()
    parts = [digits.train, digits.val, digits.test]
    assert [len(p) for p in parts] == [1258, 270, 269] and sum(map(len, parts)) == 1797
    # every real image appears in exactly one split (rows of the flattened images identify them)
    all_rows = np.concatenate([(p.images.reshape(len(p), -1) * 16).round().numpy() for p in parts])
    assert sorted(map(bytes, all_rows.astype(np.uint8))) == sorted(map(bytes, raw.data.astype(np.uint8)))
    full = np.bincount(raw.target) / len(raw.target)
    for part in parts:
        assert np.abs(np.bincount(part.labels.numpy(), minlength=10) / len(part) - full).max() < 0.01
    again, other = load_dataset("digits", seed=0), load_dataset("digits", seed=1)
    assert torch.equal(again.train.images, digits.train.images)
    assert not torch.equal(other.train.labels, digits.train.labels)
    assert digits.image_shape == (1, 8, 8) and not digits.hflip_ok
    assert digits.mean[0] == pytest.approx(float(digits.train.images.mean()), rel=1e-5)
    assert digits.source == "embedded in scikit-learn" and "stratified random 15% and 15%" in digits.split_rule


def test_digits_rows_is_a_stratified_nested_subset(digits):
    small, large = load_dataset("digits", rows=50), load_dataset("digits", rows=200)
    assert len(small.train) == 50 and len(large.train) == 200
    assert np.bincount(small.train.labels.numpy(), minlength=10).tolist() == [5] * 10
    train_rows = {bytes(r) for r in (digits.train.images.reshape(len(digits.train), -1) * 16).byte().numpy()}
    small_rows = {bytes(r) for r in (small.train.images.reshape(50, -1) * 16).byte().numpy()}
    large_rows = {bytes(r) for r in (large.train.images.reshape(200, -1) * 16).byte().numpy()}
    assert small_rows <= large_rows <= train_rows
    assert torch.equal(small.val.images, digits.val.images)
    assert small.mean[0] == pytest.approx(float(small.train.images.mean()), rel=1e-5)
    with pytest.raises(DataError, match=r"rows=1259 but the digits training pool has 1258"):
        load_dataset("digits", rows=1259)


def test_rows_do_not_depend_on_the_validation_size():
    data = indexed(np.repeat(np.arange(4), [100, 60, 30, 10]))
    trains = [ids(make_splits("d", Source(data, (val,)), seed=7, rows=40).train) for val in (0.1, 0.2, 0.3)]
    assert trains[0] == trains[1] == trains[2]
    counts = np.bincount(data.labels[trains[0]].numpy(), minlength=4)
    assert np.abs(counts - 40 * np.array([100, 60, 30, 10]) / 200).max() <= 1
    other_seed = ids(make_splits("d", Source(data, (0.1,)), seed=8, rows=40).train)
    assert other_seed != trains[0]


def test_validation_is_a_stratified_random_part_not_the_tail():
    labels = np.tile(np.arange(5), 40)  # 200 images, class i at i, i + 5, ...
    splits = make_splits("d", Source(indexed(labels), (0.2,)), seed=0)
    val = ids(splits.val)
    assert len(val) == 40 and np.bincount(labels[val]).tolist() == [8] * 5
    assert val != list(range(160, 200)) and max(val) - min(val) > 100
    assert sorted(val + ids(splits.train)) == list(range(200))


@pytest.mark.parametrize("n", [1, 7, 10, 99])
def test_stratified_order_prefixes_keep_proportions(n):
    labels = np.repeat([0, 1, 2], [60, 30, 10])
    prefix = labels[stratified_order(labels, seed=3)[:n]]
    expected = n * np.array([0.6, 0.3, 0.1])
    assert np.abs(np.bincount(prefix, minlength=3) - expected).max() <= 1
    assert sorted(stratified_order(labels, seed=3)) == list(range(100))


def test_every_part_gets_each_class_that_has_enough_images():
    labels = np.repeat([0, 1, 2], [3, 40, 1])
    train, val, test = stratified_split(labels, (0.7, 0.15, 0.15), seed=0)
    assert [int((labels[p] == 0).sum()) for p in (train, val, test)] == [1, 1, 1]
    assert (labels[train] == 2).sum() == 1  # a lone image stays in training
    with pytest.raises(
        DataError,
        match=r"leave the validation and test split empty; give every class at "
        r"least 3 images \(one each for training, validation, test\)",
    ):
        make_splits("tiny", Source(indexed([0, 1]), (0.15, 0.15)))


def test_normalization_unit_keeps_pixels_in_zero_one(digits):
    unit = load_dataset("digits", normalization="unit")
    assert unit.normalization == "unit" and unit.mean == (0.0,) and unit.std == (1.0,)
    assert torch.equal(unit.train.images, digits.train.images) and digits.normalization == "standardize"
    with pytest.raises(DataError, match=r"normalization 'minmax' is unknown; choose one of"):
        load_dataset("digits", normalization="minmax")


def test_bad_names_and_options():
    with pytest.raises(DataError, match=r"unknown dataset 'mnits'; choose one of"):
        load_dataset("mnits")
    with pytest.raises(DataError, match=r"no option\(s\) \['image_sise'\]; it accepts .*image_size"):
        load_dataset("synthetic", image_sise=8)


def test_data_dir_must_exist_and_embedded_data_takes_none(tmp_path):
    for name in ("digits", "synthetic"):
        with pytest.raises(DataError, match=rf"{name} is (embedded|generated); it takes no --data-dir"):
            load_dataset(name, tmp_path)
    for name in ("mnist", "fashion-mnist", "cifar10", "folder"):
        with pytest.raises(DataError, match=r"--data-dir .*nowhere does not exist"):
            load_dataset(name, tmp_path / "nowhere")
    (tmp_path / "file.png").write_bytes(b"")
    with pytest.raises(DataError, match=r"file.png is a file, not a folder"):
        load_dataset("folder", tmp_path / "file.png")
    with pytest.raises(DataError, match=r"reads your files: pass data_dir"):
        load_dataset("folder")
    assert locate_dataset("digits") is None


def test_synthetic_is_seeded_balanced_and_in_range():
    splits = load_dataset("synthetic", num_images=300, image_size=12, channels=3, seed=5)
    assert splits.image_shape == (3, 12, 12) and splits.num_classes == 10
    assert sum(len(p) for p in (splits.train, splits.val, splits.test)) == 300
    assert splits.train.labels.bincount().tolist() == [21] * 10
    a, b = make_synthetic(50, seed=1), make_synthetic(50, seed=1)
    assert torch.equal(a.images, b.images) and not torch.equal(a.images, make_synthetic(50, seed=2).images)
    assert 0 <= float(a.images.min()) and float(a.images.max()) <= 1


def test_synthetic_classes_are_learnable():
    """A nearest-class-mean classifier on flattened pixels must beat chance (10%) by far."""
    splits = load_dataset("synthetic", num_images=1000, image_size=16)
    x, y = splits.train.images.flatten(1), splits.train.labels
    means = torch.stack([x[y == c].mean(0) for c in range(10)])
    pred = torch.cdist(splits.test.images.flatten(1), means).argmin(1)
    assert (pred == splits.test.labels).float().mean() > 0.3


def test_one_registry_holds_every_target():
    specs = {(spec.target, spec.name): spec for spec in dataset_specs()}
    assert set(list_datasets("dense")) == {"shapes", "mask-folder", "coco"} and list_datasets("captions") == ["shapes"]
    assert {name for target, name in specs if target == "classify"} == set(list_datasets())
    assert photo_sources() == ["folder", "manifest", "wds", "hf"]
    assert all(specs[("classify", name)].storage == "memory or stream" for name in photo_sources())
    assert specs[("dense", "shapes")].provides == ("masks", "boxes", "instances")
    with pytest.raises(DataError, match=r"unknown dataset 'coco' \(coco is a dense dataset\); choose one of"):
        load_dataset("coco")
    with pytest.raises(DataError, match=r"unknown dense dataset 'digits' \(digits is a classify dataset\)"):
        load_dense_dataset("digits")
    with pytest.raises(DataError, match=r"mask-folder reads your files|reads your files: pass data_dir"):
        load_dense_dataset("mask-folder")
    with pytest.raises(DataError, match=r"shapes is generated; it takes no --data-dir"):
        load_dense_dataset("shapes", "/tmp")


def test_a_registered_dataset_is_listed_loaded_and_shown(capsys):
    def read_stripes(num_images: int = 30) -> Source:
        return Source(indexed(np.arange(num_images) % 3), (0.2,), what=f"the {num_images} stripes")

    spec = register_dataset(
        DatasetSpec("stripes", "classify", read_stripes, "generated", "a plug-in", options=("num_images",))
    )
    try:
        assert "stripes" in list_datasets() and dataset_spec("stripes") is spec
        splits = load_dataset("stripes", num_images=60, seed=1)
        assert (
            len(splits.train) + len(splits.val) == 60 and "stratified random 20% of the 60 stripes" in splits.split_rule
        )
        with pytest.raises(DataError, match="already registered"):
            register_dataset(spec)
        assert main(["data", "list"]) == 0
        rows = {tuple(line.split()[:2]) for line in capsys.readouterr().out.splitlines()}
        assert {(s.name, s.target) for s in dataset_specs()} <= rows and ("stripes", "classify") in rows
        assert main(["data", "info", "--dataset", "stripes"]) == 0
        assert "rule     val: stratified random 20% of the 30 stripes (seed 0)" in capsys.readouterr().out
    finally:
        unregister_dataset("stripes")
    assert "stripes" not in list_datasets()
