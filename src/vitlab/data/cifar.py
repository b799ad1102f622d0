"""CIFAR-10 from its python batches (``data_batch_1..5``, ``test_batch``).

Splits (by :func:`~vitlab.data.dataset.make_splits`): validation is a stratified random 10% of the five
training batches, the test split is ``test_batch``; with ``test_batch`` alone, validation is a
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


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch: images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` int64, checked strictly."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            batch = _SafeUnpickler(f, encoding="latin1").load()
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
        raise DataError(
            f"{path}: not a readable CIFAR-10 batch ({type(err).__name__}: {err}); download it again"
        ) from err
    if not isinstance(batch, dict) or "data" not in batch or "labels" not in batch:
        raise DataError(
            f"{path}: expected a dict with 'data' and 'labels', got {type(batch).__name__}"
            + (f" with keys {sorted(map(str, batch))}" if isinstance(batch, dict) else "")
        )
    data, labels = batch["data"], np.asarray(batch["labels"])
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(
            f"{path}: 'data' must be uint8 of shape (N, 3072), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}"
        )
    if not len(data):
        raise DataError(f"{path}: holds no images; download the file again")
    if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"{path}: need {len(data)} integer labels, got {labels.dtype} of shape {labels.shape}")
    if labels.min() < 0 or labels.max() >= len(CLASSES):
        bad = int(np.flatnonzero((labels < 0) | (labels >= len(CLASSES)))[0])
        raise DataError(f"{path}: label {int(labels[bad])} at index {bad} is out of range [0, {len(CLASSES) - 1}]")
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


def _to_dataset(batches: list[tuple[np.ndarray, np.ndarray]]) -> ImageDataset:
    images = torch.from_numpy(np.concatenate([b[0] for b in batches])).float().div_(255)
    labels = torch.from_numpy(np.concatenate([b[1] for b in batches]))
    return ImageDataset(images, labels, list(CLASSES))
