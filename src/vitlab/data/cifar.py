"""CIFAR-10 from its python batches (``data_batch_1..5``, ``test_batch``), split by :func:`file_splits`.

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

from .dataset import DataSplits, ImageDataset, file_splits

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
FOLDER = "cifar-10-batches-py"

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
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise ValueError(f"{path}: not a readable CIFAR-10 batch ({type(err).__name__}: {err}); "
                         "download it again") from err
    if not isinstance(batch, dict) or "data" not in batch or "labels" not in batch:
        raise ValueError(f"{path}: expected a dict with 'data' and 'labels', got {type(batch).__name__}"
                         + (f" with keys {sorted(map(str, batch))}" if isinstance(batch, dict) else ""))
    data, labels = batch["data"], np.asarray(batch["labels"])
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(f"{path}: 'data' must be uint8 of shape (N, 3072), got "
                         f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}")
    if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{path}: need {len(data)} integer labels, got {labels.dtype} of shape {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= len(CLASSES)):
        bad = int(np.flatnonzero((labels < 0) | (labels >= len(CLASSES)))[0])
        raise ValueError(f"{path}: label {int(labels[bad])} at index {bad} is out of range [0, {len(CLASSES) - 1}]")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def load_cifar10_splits(data_dir: str | Path) -> DataSplits:
    """CIFAR-10 from ``data_dir/cifar-10-batches-py`` or ``data_dir`` itself; images ``(N, 3, 32, 32)`` in [0, 1].

    All five training batches must be present, or none (then the test batch alone is split).
    """
    data_dir = Path(data_dir)
    root = data_dir / FOLDER if (data_dir / FOLDER).is_dir() else data_dir
    present = [name for name in TRAIN_FILES if (root / name).is_file()]
    if present and len(present) != len(TRAIN_FILES):
        missing = sorted(set(TRAIN_FILES) - set(present))
        raise FileNotFoundError(f"cifar10: {root} lacks {missing}; put all five training batches there")
    if not present and not (root / TEST_FILE).is_file():
        raise FileNotFoundError(f"cifar10: no batches in {root} (expected {', '.join(TRAIN_FILES)}, {TEST_FILE}); "
                                f"get them with `vitlab data download cifar10 --to {data_dir}`")
    train = _to_dataset([read_cifar_batch(root / name) for name in present]) if present else None
    test = _to_dataset([read_cifar_batch(root / TEST_FILE)]) if (root / TEST_FILE).is_file() else None
    return file_splits("cifar10", train, test, hflip_ok=True)


def _to_dataset(batches: list[tuple[np.ndarray, np.ndarray]]) -> ImageDataset:
    images = torch.from_numpy(np.concatenate([b[0] for b in batches])).float().div_(255)
    labels = torch.from_numpy(np.concatenate([b[1] for b in batches]))
    return ImageDataset(images, labels, list(CLASSES))
