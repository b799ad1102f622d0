"""The photo sources users have, behind one door: :func:`read_records` indexes one, without decoding a pixel.

:func:`read_records` reads a source into ``{"train": Records, "val"?: Records, "test"?: Records}``
(:class:`~vitlab.data.records.Records`):

- ``folder`` (:mod:`~vitlab.data.folder_records`): ``DIR/CLASS/*.{png,jpg,jpeg,webp,bmp}``, or
  ``DIR/{train,val,test}/CLASS/...`` as the official splits.
- ``manifest`` (:mod:`~vitlab.data.manifest_records`): a CSV (``path,label[,split]`` header) or JSON list of
  ``{"path", "label"[, "split"]}``, paths relative to the manifest's folder.
- ``wds`` (:mod:`~vitlab.data.wds_records`): WebDataset tar shards, a path, glob or brace pattern, indexed
  once and read by offset.
- ``hf`` (:mod:`~vitlab.data.hf_records`): a ``save_to_disk`` folder or ``*.parquet`` files with an image
  and a label column, rows read lazily from the memory-mapped Arrow files.

Classes: folder names (sorted) for ``folder``; the distinct labels otherwise, sorted numerically when
every label is an integer and as text otherwise, the union over the splits. A class that has no training
image is refused. Within a split the records are ordered by class, then in the source's own order (sorted
file names; the manifest's rows; shards then members; rows), so the same images listed by two sources are
split alike. :func:`~vitlab.data.records.split_records` makes the splits a source does not have.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import DataError
from .folder_records import read_folder_records
from .hf_records import read_hf_records
from .manifest_records import read_manifest_records
from .records import Progress, Records
from .wds_records import read_wds_records

SOURCES = ("folder", "manifest", "wds", "hf")


def read_records(
    kind: str, data_dir: str | Path, *, progress: Progress | None = None, **options: Any
) -> dict[str, Records]:
    """Index source ``kind`` (one of :data:`SOURCES`) at ``data_dir``: ``{"train", "val"?, "test"?}``.

    ``options``: ``image_column``, ``label_column`` for ``hf``. See the module docstring for the layouts.
    """
    readers: dict[str, Callable[..., dict[str, Records]]] = {
        "folder": read_folder_records,
        "manifest": read_manifest_records,
        "wds": read_wds_records,
        "hf": read_hf_records,
    }
    if kind not in readers:
        raise DataError(f"unknown photo source {kind!r}; choose one of {SOURCES}")
    return readers[kind](data_dir, progress=progress, **options)
