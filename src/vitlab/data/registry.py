"""Datasets by name: ``load_dataset(name, data_dir, seed=..., rows=..., normalization=..., **options)``.

Every dataset is split by :func:`~vitlab.data.dataset.make_splits`: each class is shuffled with
``seed`` (default 0) and cut, so validation (and test, when made here) is a *stratified random* part,
fixed for a given seed, never a file's tail.

- ``digits``: scikit-learn's 1,797 8x8 digits (embedded), 70/15/15 train/val/test.
- ``synthetic``: generated shapes and textures, 70/15/15.
- ``folder``: class sub-folders of PNG/JPEG images (``--data-dir``), 70/15/15.
- ``mnist`` / ``fashion-mnist`` / ``cifar10``: validation is 10% of the training file(s), the test split
  is the official test file. With only the test file (e.g. MNIST's t10k alone),
  validation is 20% of it and there is no test split. Their files are searched for as
  :mod:`vitlab.data.paths` says (``$VITLAB_DATA``, ``~/.cache/vitlab/data``, ``/usr/share/datasets``)
  unless ``data_dir`` is given.

``rows`` keeps ``rows`` images of the training pool: the first of a seeded stratified order of all the
images, so the subset keeps the class proportions, a smaller ``rows`` is nested in a larger one, and it
does not depend on the validation size. ``normalization`` is ``"standardize"`` (mean and std of the
kept training images) or ``"unit"`` (mean 0, std 1: pixels stay in [0, 1]).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..errors import DataError
from .cifar import locate_cifar10, read_cifar10
from .dataset import NORMALIZATIONS, DataSplits, Source, make_splits
from .digits import read_digits
from .folder import read_folder
from .mnist import locate_mnist, read_mnist
from .paths import existing_dir, install_hint, search_dirs
from .synthetic import read_synthetic


@dataclass(frozen=True)
class DatasetEntry:
    """A reader ``(data_dir?, seed?, **options) -> Source``; ``locate(folder) -> Path | None`` finds its
    files in a folder (None: the reader takes ``data_dir`` as given, or reads no files)."""

    loader: Callable[..., Source]
    description: str
    locate: Callable[[Path], Path | None] | None = None


DATASETS: dict[str, DatasetEntry] = {
    "digits": DatasetEntry(read_digits, "scikit-learn's 1,797 real 8x8 handwritten digits (embedded)"),
    "mnist": DatasetEntry(
        partial(read_mnist, variant="mnist"), "MNIST 28x28 digits, IDX files", partial(locate_mnist, variant="mnist")
    ),
    "fashion-mnist": DatasetEntry(
        partial(read_mnist, variant="fashion-mnist"),
        "Fashion-MNIST 28x28 clothes, IDX files",
        partial(locate_mnist, variant="fashion-mnist"),
    ),
    "cifar10": DatasetEntry(read_cifar10, "CIFAR-10 32x32 colour photos, python batches", locate_cifar10),
    "folder": DatasetEntry(read_folder, "class sub-folders of PNG/JPEG images (--data-dir DIR)"),
    "synthetic": DatasetEntry(read_synthetic, "generated shapes and textures (for tests)"),
}


def list_datasets() -> list[str]:
    """The names ``load_dataset`` accepts."""
    return list(DATASETS)


def describe_dataset(name: str) -> str:
    """One line about dataset ``name``: what it is and, for one that is searched for, where its files
    were found or how to get them."""
    entry = _entry(name)
    if entry.locate is None:
        return entry.description
    try:
        return f"{entry.description}; found in {locate_dataset(name)}"
    except DataError:
        return f"{entry.description}; not found: {install_hint(name)}"


def locate_dataset(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The folder holding dataset ``name``'s files (searched as :mod:`vitlab.data.paths` says unless
    ``data_dir`` is given), or None for a dataset that reads no files.

    Raises :class:`DataError` when the files are not found (saying how to get them), when ``data_dir``
    does not exist, and when one is given for an embedded or generated dataset.
    """
    entry = _entry(name)
    if "data_dir" not in inspect.signature(entry.loader).parameters:
        if data_dir is not None:
            kind = "embedded" if name == "digits" else "generated"
            raise DataError(f"{name} is {kind}; it takes no --data-dir (got {data_dir})")
        return None
    if entry.locate is None:
        if data_dir is None:
            raise DataError(f"dataset {name!r} reads your files: pass data_dir (--data-dir DIR)")
        return existing_dir(data_dir, name)
    tried = search_dirs(name, data_dir)
    for folder in tried:
        found = entry.locate(folder)
        if found is not None:
            return found
    raise DataError(f"{name}: no files in {' or '.join(map(str, tried))}; {install_hint(name)}")


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    rows: int | None = None,
    normalization: str = "standardize",
    **options,
) -> DataSplits:
    """Load dataset ``name`` as in-memory splits, images ``(N, C, H, W)`` float32 in [0, 1].

    ``options`` go to the dataset's reader (e.g. ``image_size`` for folder and synthetic); see the
    module docstring for where files are found, each dataset's split rule and what ``rows`` keeps.
    ``splits.source`` says where the images came from, ``splits.split_rule`` how they were split.
    """
    entry = _entry(name)
    if normalization not in NORMALIZATIONS:
        raise DataError(f"normalization {normalization!r} is unknown; choose one of {NORMALIZATIONS}")
    params = dict(inspect.signature(entry.loader).parameters)
    fixed = {"data_dir", "seed", *getattr(entry.loader, "keywords", {})}
    unknown = sorted(set(options) - set(params) - fixed)
    if unknown:
        accepted = [p for p in params if p not in fixed]
        raise DataError(f"dataset {name!r} has no option(s) {unknown}; it accepts {accepted or 'none'}")
    folder = locate_dataset(name, data_dir)
    if folder is not None:
        options["data_dir"] = folder
    if "seed" in params:
        options["seed"] = seed
    return make_splits(name, entry.loader(**options), seed=seed, rows=rows, normalization=normalization)


def _entry(name: str) -> DatasetEntry:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose one of {list(DATASETS)}")
    return DATASETS[name]
