"""CIFAR-10 from its python batches (``data_batch_1..5``, ``test_batch``); CIFAR-100 from its
(``train``, ``test``, ``meta``: the 100 fine labels and their names).

Splits (by :func:`~vitlab.data.dataset.make_splits`): validation is a stratified random 10% of the
training batches, the test split is the test batch; with the test batch alone, validation is a
stratified random 20% of it and there is no test split.

The batches are pickles. They are read with a restricted unpickler that resolves only the handful of
globals a pickled NumPy array needs (``ndarray``, ``dtype``, NumPy's array reconstructors and
``_codecs.encode``), never arbitrary objects, so a malicious file cannot run code: it fails with an
error naming the file.
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np
import torch

from ..errors import DataError
from .dataset import ImageDataset, Source

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
FOLDER = "cifar-10-batches-py"
FOLDER_100 = "cifar-100-python"
TRAIN_100, TEST_100, META_100 = "train", "test", "meta"
VAL_FRACTION = 0.1
TEST_ONLY_VAL_FRACTION = 0.2

_probe = np.zeros(1)
_SAFE_GLOBALS = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
    **{(f"numpy.{core}.multiarray", "_reconstruct"): _probe.__reduce__()[0] for core in ("core", "_core")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): _probe.__reduce_ex__(5)[0] for core in ("core", "_core")},
}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}: only NumPy arrays are allowed")
        return _SAFE_GLOBALS[module, name]


def _unpickle(path: Path, what: str) -> object:
    try:
        with path.open("rb") as f:
            return _SafeUnpickler(f, encoding="latin1").load()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from err
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        MemoryError,
        OverflowError,
    ) as err:
        raise DataError(f"{path}: not a readable {what} ({type(err).__name__}: {err}); download it again") from err


def read_cifar_batch(
    path: str | Path, label_key: str = "labels", num_classes: int = 10, what: str = "CIFAR-10 batch"
) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR batch: images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` int64 (``batch[label_key]``,
    each in ``[0, num_classes)``), checked strictly."""
    path = Path(path)
    batch = _unpickle(path, what)
    if not isinstance(batch, dict) or "data" not in batch or label_key not in batch:
        raise DataError(
            f"{path}: expected a dict with 'data' and {label_key!r}, got {type(batch).__name__}"
            + (f" with keys {sorted(map(str, batch))}" if isinstance(batch, dict) else "")
        )
    data, labels = batch["data"], np.asarray(batch[label_key])
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(
            f"{path}: 'data' must be uint8 of shape (N, 3072), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}"
        )
    if not len(data):
        raise DataError(f"{path}: holds no images; download the file again")
    if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"{path}: need {len(data)} integer labels, got {labels.dtype} of shape {labels.shape}")
    if labels.min() < 0 or labels.max() >= num_classes:
        bad = int(np.flatnonzero((labels < 0) | (labels >= num_classes))[0])
        raise DataError(f"{path}: label {int(labels[bad])} at index {bad} is out of range [0, {num_classes - 1}]")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def locate_cifar10(folder: Path) -> Path | None:
    """The folder (``folder/cifar-10-batches-py`` or ``folder``) holding CIFAR-10 batches, or None."""
    candidates = (folder / FOLDER, folder)
    return next((d for d in candidates if any((d / n).is_file() for n in (*TRAIN_FILES, TEST_FILE))), None)


def read_cifar10(data_dir: str | Path) -> Source:
    """CIFAR-10 from the batches found by :func:`locate_cifar10`; images ``(N, 3, 32, 32)`` in [0, 1].

    All five training batches must be present, or none (then the test batch alone is split).
    """
    root = locate_cifar10(Path(data_dir)) or Path(data_dir)
    present = [name for name in TRAIN_FILES if (root / name).is_file()]
    if present and len(present) != len(TRAIN_FILES):
        missing = sorted(set(TRAIN_FILES) - set(present))
        raise DataError(f"cifar10: {root} lacks {missing}; put all five training batches there")
    test = _to_dataset([read_cifar_batch(root / TEST_FILE)]) if (root / TEST_FILE).is_file() else None
    if present:
        train = _to_dataset([read_cifar_batch(root / name) for name in present])
        return Source(train, (VAL_FRACTION,), test, True, str(root), "the training batches")
    if test is not None:
        return Source(test, (TEST_ONLY_VAL_FRACTION,), None, True, str(root), "test_batch (no training batches)")
    raise DataError(f"cifar10: no batches in {data_dir} (expected {', '.join(TRAIN_FILES)}, {TEST_FILE})")


def locate_cifar100(folder: Path) -> Path | None:
    """The folder (``folder/cifar-100-python`` or ``folder``) holding CIFAR-100's ``meta`` and a batch, or None."""
    candidates = (folder / FOLDER_100, folder)
    return next(
        (d for d in candidates if (d / META_100).is_file() and any((d / n).is_file() for n in (TRAIN_100, TEST_100))),
        None,
    )


def read_cifar100(data_dir: str | Path) -> Source:
    """CIFAR-100 (fine labels) from the files found by :func:`locate_cifar100`; images ``(N, 3, 32, 32)`` in
    [0, 1], classes the ``fine_label_names`` of ``meta``."""
    root = locate_cifar100(Path(data_dir)) or Path(data_dir)
    if not (root / META_100).is_file():
        raise DataError(f"cifar100: {root} has no meta file; it names the 100 classes (download the set again)")
    meta = _unpickle(root / META_100, "CIFAR-100 meta file")
    names = meta.get("fine_label_names") if isinstance(meta, dict) else None
    if not isinstance(names, list) or len(names) != 100 or not all(isinstance(n, str) for n in names):
        raise DataError(f"cifar100: {root / META_100} must hold 100 fine_label_names")

    def read(name: str) -> ImageDataset:
        batch = read_cifar_batch(root / name, "fine_labels", len(names), "CIFAR-100 batch")
        return _to_dataset([batch], names)

    test = read(TEST_100) if (root / TEST_100).is_file() else None
    if (root / TRAIN_100).is_file():
        return Source(read(TRAIN_100), (VAL_FRACTION,), test, True, str(root), "the training batch")
    if test is not None:
        return Source(test, (TEST_ONLY_VAL_FRACTION,), None, True, str(root), "test (no training batch)")
    raise DataError(f"cifar100: no batches in {data_dir} (expected {TRAIN_100}, {TEST_100} and {META_100})")


def _to_dataset(batches: list[tuple[np.ndarray, np.ndarray]], classes: list[str] = CLASSES) -> ImageDataset:
    images = torch.from_numpy(np.concatenate([b[0] for b in batches])).float().div_(255)
    labels = torch.from_numpy(np.concatenate([b[1] for b in batches]))
    return ImageDataset(images, labels, list(classes))
