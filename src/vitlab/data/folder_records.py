"""The ``folder`` photo source: ``DIR/CLASS/*.{png,jpg,jpeg,webp,bmp}`` indexed by file name.

When DIR holds only ``train/`` and ``val/`` (``valid/``, ``validation/``) and/or ``test/`` folders of class
folders, those are the official splits. Indexing reads file names only (``os.scandir``), with a
``progress(count)`` call every :data:`~vitlab.data.records.PROGRESS_EVERY` files. Classes are the folder
names, sorted; within a split the records are ordered by class, then by file name.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DataError
from .records import SPLIT_NAMES, FileStore, Names, Progress, ProgressCounter, Records

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
"""The files a folder or manifest dataset reads (case-insensitive)."""


def read_folder_records(data_dir: str | Path, *, progress: Progress | None = None) -> dict[str, Records]:
    """``DIR/CLASS/*.png|jpg|...`` as ``{"train": ...}``, or ``DIR/{train,val,test}/CLASS/...`` as the
    official splits. File names only: nothing is decoded."""
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DataError(f"folder: {root} is not a folder; pass the folder that holds the class sub-folders")
    subdirs = _subdirs(root)
    if not subdirs:
        raise DataError(f"folder: {root} has no class sub-folders; put each class's images in DIR/CLASS/")
    counter = ProgressCounter(progress)
    layout = _split_layout(root, subdirs)
    if layout is None:
        files = {"train": _class_files(root, subdirs, root, counter, required=True)}
    else:
        files = {
            split: _class_files(folder, _subdirs(folder), root, counter, required=split == "train")
            for split, folder in layout.items()
        }
    counter.done()
    classes = sorted({cls for found in files.values() for cls in found})
    unseen = sorted({cls for found in files.values() for cls in found} - set(files["train"]))
    if unseen:
        raise DataError(
            f"folder: {root}: class folder(s) {unseen[:5]} appear in val/test but not in train; "
            "add training images or remove them"
        )
    store_paths: list[str] = []
    out: dict[str, tuple[list[int], list[int]]] = {}
    for split, found in files.items():
        refs, labels = [], []
        for cls in sorted(found):
            for path in found[cls]:
                refs.append(len(store_paths))
                labels.append(classes.index(cls))
                store_paths.append(path)
        if refs:
            out[split] = (refs, labels)
    store = FileStore(root, Names(store_paths))
    return {split: Records(store, np.asarray(r), np.asarray(y), classes, str(root)) for split, (r, y) in out.items()}


def _subdirs(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir())


def _split_layout(root: Path, subdirs: list[str]) -> dict[str, Path] | None:
    """``{"train": DIR/train, "val": DIR/val, ...}`` when DIR's folders are only split folders of class
    folders (a dataset with a class named ``train`` beside other classes is a class dataset)."""
    if "train" not in subdirs or not _subdirs(root / "train"):
        return None
    others = [d for d in subdirs if d not in SPLIT_NAMES]
    if others:
        if _has_images(root / "train"):
            return None  # "train" is a class folder among others
        raise DataError(
            f"folder: {root} has train/ of class folders beside {others[:3]}; keep only train/, val/ and test/ "
            "there (or only class folders)"
        )
    vals = [d for d in subdirs if SPLIT_NAMES[d] == "val"]
    if len(vals) > 1:
        raise DataError(f"folder: {root} has both {' and '.join(vals)}; keep one validation folder")
    return {SPLIT_NAMES[d]: root / d for d in subdirs}


def _has_images(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return any(os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES and e.is_file() for e in entries)


def _class_files(
    folder: Path, classes: list[str], root: Path, counter: ProgressCounter, required: bool
) -> dict[str, list[str]]:
    """``{class: [path relative to root, ...]}`` of the image files directly in ``folder/CLASS``, sorted."""
    found: dict[str, list[str]] = {}
    prefix = folder.relative_to(root)
    for cls in classes:
        with os.scandir(folder / cls) as entries:
            names = sorted(
                e.name
                for e in entries
                if not e.name.startswith(".") and os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES and e.is_file()
            )
        if not names:
            if required:
                raise DataError(f"folder: class folder {folder / cls} has no {'/'.join(IMAGE_SUFFIXES)} images")
            continue
        found[cls] = [str(prefix / cls / n) for n in names]
        counter.add(len(names))
    return found
