"""The benchmarks' photo folders: ``--layout splits`` puts a share of every class into val/, so vitlab reads it."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from photos import make_photo_folder  # noqa: E402
from vitlab.data import read_records  # noqa: E402


@pytest.mark.parametrize(("n", "classes", "val_every"), [(60, 10, 5), (23, 3, 4), (40, 4, 2)])
def test_splits_layout_is_stratified(tmp_path, n, classes, val_every):
    root = make_photo_folder(
        tmp_path / "photos", n, classes, sizes=(16, 20), layout="splits", val_every=val_every, processes=1
    )
    records = read_records("folder", root)
    train, val = records["train"], records["val"]
    assert len(train) + len(val) == n and set(train.labels.tolist()) == set(val.labels.tolist()) == set(range(classes))
    for c in range(classes):
        per_class = len(range(c, n, classes))
        assert (val.labels == c).sum() == per_class // val_every
