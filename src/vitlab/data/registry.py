"""Datasets by name: ``load_dataset(name, data_dir, seed=..., rows=..., **options) -> DataSplits``.

Split rules, per name:

- ``digits``: scikit-learn's 1,797 8x8 digits (offline), stratified seeded 70/15/15 train/val/test.
- ``synthetic``: generated shapes and textures, stratified seeded 70/15/15.
- ``folder``: class sub-folders of PNG/JPEG images, stratified seeded 70/15/15.
- ``mnist`` / ``fashion-mnist`` / ``cifar10``: with training files, the first 90% of the training
  file(s) are the training pool, the last 10% validation, the test file the test split. With only the
  test file (e.g. MNIST's t10k: the textbook protocol), its first 80% (8,000) are the pool, the last 20%
  (2,000) validation, and there is no test split.

``rows`` keeps the first ``rows`` images of the training split: for the datasets split here by class
(digits, synthetic, folder) the first ``rows`` of a seeded stratified order, so the subset keeps the
class proportions and a smaller ``rows`` is nested in a larger one; for mnist, fashion-mnist and
cifar10 the first ``rows`` in file order. Mean and std are those of the kept training images.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import torch

from .cifar import load_cifar10_splits
from .dataset import DataSplits, stratified_order
from .digits import load_digits_splits
from .folder import load_folder_splits
from .mnist import load_mnist_splits
from .synthetic import load_synthetic_splits


@dataclass(frozen=True)
class DatasetEntry:
    """A loader ``(data_dir?, seed?, **options) -> DataSplits`` and how ``rows`` subsets its train split."""
    loader: Callable[..., DataSplits]
    stratified_rows: bool
    description: str


DATASETS: dict[str, DatasetEntry] = {
    "digits": DatasetEntry(load_digits_splits, True, "scikit-learn's 1,797 real 8x8 handwritten digits (offline)"),
    "mnist": DatasetEntry(partial(load_mnist_splits, variant="mnist"), False, "MNIST 28x28 digits, IDX files"),
    "fashion-mnist": DatasetEntry(partial(load_mnist_splits, variant="fashion-mnist"), False,
                                  "Fashion-MNIST 28x28 clothes, IDX files"),
    "cifar10": DatasetEntry(load_cifar10_splits, False, "CIFAR-10 32x32 colour photos, python batches"),
    "folder": DatasetEntry(load_folder_splits, True, "class sub-folders of PNG/JPEG images"),
    "synthetic": DatasetEntry(load_synthetic_splits, True, "generated shapes and textures (for tests)"),
}


def list_datasets() -> list[str]:
    """The names ``load_dataset`` accepts."""
    return list(DATASETS)


def describe_dataset(name: str) -> str:
    """One line about dataset ``name``."""
    return _entry(name).description


def load_dataset(name: str, data_dir: str | Path | None = None, *, seed: int = 0, rows: int | None = None,
                 **options) -> DataSplits:
    """Load dataset ``name`` as in-memory splits, images ``(N, C, H, W)`` float32 in [0, 1].

    ``options`` go to the dataset's loader (e.g. ``image_size`` for folder and synthetic); see the
    module docstring for each dataset's split rule and what ``rows`` keeps.
    """
    entry = _entry(name)
    params = dict(inspect.signature(entry.loader).parameters)
    fixed = {"data_dir", "seed", *getattr(entry.loader, "keywords", {})}
    unknown = sorted(set(options) - set(params) - fixed)
    if unknown:
        accepted = [p for p in params if p not in fixed]
        raise ValueError(f"dataset {name!r} has no option(s) {unknown}; it accepts {accepted or 'none'}")
    if "data_dir" in params:
        if data_dir is None:
            how = "" if name == "folder" else f"; fetch the files with `vitlab data download {name} --to DIR`"
            raise ValueError(f"dataset {name!r} reads files: pass data_dir (--data-dir DIR){how}")
        options["data_dir"] = Path(data_dir)
    if "seed" in params:
        options["seed"] = seed
    splits = entry.loader(**options)
    return splits if rows is None else _keep_rows(splits, rows, seed, entry.stratified_rows)


def _keep_rows(splits: DataSplits, rows: int, seed: int, stratified: bool) -> DataSplits:
    pool = len(splits.train)
    if not 1 <= rows <= pool:
        raise ValueError(f"rows={rows} but the {splits.name} training pool has {pool} images; "
                         f"choose 1 <= rows <= {pool}")
    index = stratified_order(splits.train.labels.numpy(), seed)[:rows] if stratified else torch.arange(rows)
    return DataSplits(splits.name, splits.train.subset(index), splits.val, splits.test, hflip_ok=splits.hflip_ok)


def _entry(name: str) -> DatasetEntry:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {list(DATASETS)}")
    return DATASETS[name]
