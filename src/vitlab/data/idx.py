"""A strict reader for IDX files (the MNIST format), gzip-compressed or raw.

Layout: a 4-byte big-endian magic ``0x0000TTDD`` (TT = element type, DD = number of dims), DD
big-endian uint32 sizes, then the elements. Only unsigned bytes (TT = 0x08) are accepted, so the
magic is 2049 for labels (1 dim) and 2051 for images (3 dims). The file is read as a stream and never
past the size its header promises (at most :data:`MAX_IDX_BYTES`), so a gzip bomb costs nothing.
Every check raises :class:`~vitlab.errors.DataError` naming the file.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

import numpy as np

from ..errors import DataError

IDX_UBYTE = 0x08
LABELS_MAGIC = 2049
IMAGES_MAGIC = 2051
MAX_IDX_BYTES = 1 << 31
"""The largest IDX payload read (2 GiB; MNIST's training images are 47 MB)."""


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """Read an IDX file of unsigned bytes whose magic number must be ``magic``; returns uint8 of its dims."""
    path = Path(path)
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            if not gzipped:
                return _read_idx_stream(raw, path, magic)
            with gzip.GzipFile(fileobj=raw) as stream:
                return _read_idx_stream(stream, path, magic)
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise DataError(f"{path}: corrupt or truncated gzip data ({err}); download the file again") from err
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from err


def _read_idx_stream(stream: io.BufferedIOBase, path: Path, magic: int) -> np.ndarray:
    head = stream.read(4)
    if len(head) < 4:
        raise DataError(f"{path}: {len(head)} bytes is too short for an IDX header; the file is truncated")
    found = int.from_bytes(head, "big")
    if found != magic:
        raise DataError(
            f"{path}: wrong magic number {found} (expected {magic}: "
            f"{'labels' if magic == LABELS_MAGIC else 'images'} of unsigned bytes); "
            "is it the right file, and not an HTML error page?"
        )
    ndim = head[3]
    sizes = stream.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise DataError(f"{path}: truncated header ({4 + len(sizes)} bytes, need {4 + 4 * ndim} for {ndim} dims)")
    dims = tuple(int.from_bytes(sizes[4 * i : 4 * i + 4], "big") for i in range(ndim))
    count = int(np.prod(dims, dtype=object))
    if count == 0:
        raise DataError(
            f"{path}: dims {dims} hold no {'labels' if magic == LABELS_MAGIC else 'images'}; download the file again"
        )
    if count > MAX_IDX_BYTES:
        raise DataError(f"{path}: dims {dims} promise {count:,} bytes, over the limit of {MAX_IDX_BYTES:,}")
    body = stream.read(count + 1)
    if len(body) < count:
        raise DataError(
            f"{path}: truncated: dims {dims} need {count:,} bytes of data, found {len(body):,}; download the file again"
        )
    if len(body) > count:
        raise DataError(f"{path}: has trailing bytes after the {count:,} its dims {dims} need; download the file again")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def read_idx_pair(images_path: str | Path, labels_path: str | Path, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(N, H, W)`` uint8 and labels ``(N,)`` uint8 in ``[0, num_classes)`` from two IDX files."""
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if len(images) != len(labels):
        raise DataError(
            f"{images_path} holds {len(images)} images but {labels_path} holds {len(labels)} "
            "labels; the two files must come from the same split"
        )
    if int(labels.max()) >= num_classes:
        bad = int(np.flatnonzero(labels >= num_classes)[0])
        raise DataError(
            f"{labels_path}: label {int(labels[bad])} at index {bad} is out of range [0, {num_classes - 1}]"
        )
    return images, labels
