"""Writers of small dataset files in their official formats, for the readers' tests; every test
searches an empty ``$VITLAB_DATA`` so files of the machine's own data home never leak in."""

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from vitlab.data import paths


@pytest.fixture(autouse=True)
def empty_data_home(tmp_path_factory, monkeypatch) -> Path:
    """``$VITLAB_DATA`` set to an empty folder of this test's own (outside ``tmp_path``)."""
    home = tmp_path_factory.mktemp("data-home")
    monkeypatch.setenv(paths.DATA_ENV, str(home))
    return home


@pytest.fixture
def no_system_data(tmp_path_factory, monkeypatch) -> Path:
    """``/usr/share/datasets`` replaced by an empty folder (outside ``tmp_path``)."""
    system = tmp_path_factory.mktemp("system-datasets")
    monkeypatch.setattr(paths, "SYSTEM_DATA", system)
    return system


def write_idx(path: Path, array: np.ndarray, magic: int | None = None) -> Path:
    """IDX file of uint8 ``array`` (gzip when ``path`` ends in .gz); ``magic`` overrides the header's."""
    header = (magic if magic is not None else 0x0800 + array.ndim).to_bytes(4, "big")
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    payload = header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload, compresslevel=1) if path.suffix == ".gz" else payload)
    return path


def write_mnist_split(root: Path, split: str, images: np.ndarray, labels: np.ndarray, gz: bool = True) -> None:
    suffix = ".gz" if gz else ""
    write_idx(root / f"{split}-images-idx3-ubyte{suffix}", images)
    write_idx(root / f"{split}-labels-idx1-ubyte{suffix}", labels)


def write_cifar_batch(path: Path, images: np.ndarray, labels: np.ndarray, protocol: int = 2) -> Path:
    """A CIFAR-10 python batch: images (N, 3, 32, 32) uint8 flattened row-major to (N, 3072)."""
    batch = {
        "batch_label": path.name,
        "labels": [int(v) for v in labels],
        "data": images.reshape(len(images), -1),
        "filenames": [f"{i}.png" for i in range(len(images))],
    }
    path.write_bytes(pickle.dumps(batch, protocol=protocol))
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(name="write_idx")
def _write_idx():
    return write_idx


@pytest.fixture(name="write_mnist_split")
def _write_mnist_split():
    return write_mnist_split


@pytest.fixture(name="write_cifar_batch")
def _write_cifar_batch():
    return write_cifar_batch
