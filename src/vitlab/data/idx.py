"""A strict reader for IDX files (the MNIST format), gzip-compressed or raw.

Layout: a 4-byte big-endian magic ``0x0000TTDD`` (TT = element type, DD = number of dims), DD
big-endian uint32 sizes, then the elements. Only unsigned bytes (TT = 0x08) are accepted, so the
magic is 2049 for labels (1 dim) and 2051 for images (3 dims). Every check names the file.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

IDX_UBYTE = 0x08
LABELS_MAGIC = 2049
IMAGES_MAGIC = 2051


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """Read an IDX file of unsigned bytes whose magic number must be ``magic``; returns uint8 of its dims."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{path}: corrupt or truncated gzip data ({err}); download the file again") from err
    if len(raw) < 4:
        raise ValueError(f"{path}: {len(raw)} bytes is too short for an IDX header; the file is truncated")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise ValueError(f"{path}: wrong magic number {found} (expected {magic}: "
                         f"{'labels' if magic == LABELS_MAGIC else 'images'} of unsigned bytes); "
                         "is it the right file, and not an HTML error page?")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated header ({len(raw)} bytes, need {header} for {ndim} dims)")
    dims = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims, dtype=np.int64))
    if len(raw) != expected:
        problem = "truncated" if len(raw) < expected else "has trailing bytes"
        raise ValueError(f"{path}: {problem}: dims {dims} need {expected} bytes, found {len(raw)}; "
                         "download the file again")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def read_idx_pair(images_path: str | Path, labels_path: str | Path, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(N, H, W)`` uint8 and labels ``(N,)`` uint8 in ``[0, num_classes)`` from two IDX files."""
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if len(images) != len(labels):
        raise ValueError(f"{images_path} holds {len(images)} images but {labels_path} holds {len(labels)} "
                         "labels; the two files must come from the same split")
    if len(labels) and int(labels.max()) >= num_classes:
        bad = int(np.flatnonzero(labels >= num_classes)[0])
        raise ValueError(f"{labels_path}: label {int(labels[bad])} at index {bad} is out of range "
                         f"[0, {num_classes - 1}]")
    return images, labels
