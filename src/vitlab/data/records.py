"""Images by reference: the photo sources users have, indexed without decoding a pixel.

A :class:`Records` is a split's images as references (a file, a tar member, a row of a Hugging Face
dataset), their labels ``(N,)`` int64 and the class names; :meth:`Records.open` decodes one through the one
image door (:func:`~vitlab.data.image.decode_image`), so every unreadable item is a
:class:`~vitlab.errors.DataError` naming it. :func:`read_records` reads a source into
``{"train": Records, "val"?: Records, "test"?: Records}``:

- ``folder``: ``DIR/CLASS/*.{png,jpg,jpeg,webp,bmp}``; when DIR holds only ``train/`` and ``val/``
  (``valid/``, ``validation/``) and/or ``test/`` folders of class folders, those are the official splits.
  Indexing reads file names only (``os.scandir``), with a ``progress(count)`` call every 10,000 files.
- ``manifest``: a CSV (``path,label[,split]`` header) or JSON list of ``{"path", "label"[, "split"]}``,
  paths relative to the manifest's folder (``--data-dir`` the file, or a folder holding ``manifest.csv``
  or ``manifest.json``).
- ``wds``: WebDataset tar shards, a path, glob or brace pattern (``shards/train-{000000..000009}.tar``),
  samples grouped by key (``KEY.jpg``/``KEY.png``/... and ``KEY.cls``). Each shard is indexed once with
  the standard library's ``tarfile`` (member offsets and sizes, headers only) and an image is then read
  by offset: random access, so the seeded order, rank sharding and resume work as for a folder, and no
  ``webdataset`` dependency. Measured on a shard of 2,000 JPEGs (250-320 px): indexing and reading every
  image's bytes by offset took 0.36 s, ``webdataset``'s sequential reading of the same samples 0.45 s
  (both small beside decoding them, about 1 ms an image). Validation and test shards are the same
  pattern with ``train`` replaced by ``val`` (``valid``, ``validation``) and ``test`` where such files exist.
- ``hf``: a folder written by ``datasets``' ``save_to_disk`` (a ``DatasetDict``'s splits honoured) or
  ``*.parquet`` files (split from the file name: ``train-*``, ``validation-*``, ``test-*``), with an image
  column (an ``Image`` feature or ``{"bytes", "path"}`` structs) and a label column (``ClassLabel``: its
  names; else integers or strings); rows are read lazily from the memory-mapped Arrow files.

Classes: folder names (sorted) for ``folder``; the distinct labels otherwise, sorted numerically when
every label is an integer and as text otherwise, the union over the splits. A class that has no training
image is refused. Within a split the records are ordered by class, then in the source's own order (sorted
file names; the manifest's rows; shards then members; rows), so the same images listed by two sources are
split alike. :func:`split_records` makes the splits a source does not have, by the rule of
:func:`~vitlab.data.dataset.make_splits`.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import os
import re
import tarfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from ..errors import DataError, require
from .image import decode_image
from .split import held_out_parts, stratified_order

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
"""The files a folder or manifest dataset reads (case-insensitive)."""
SPLIT_NAMES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
"""Folder, manifest, shard and parquet names of the official splits -> the split they are."""
PROGRESS_EVERY = 10_000
"""Indexing calls ``progress(count)`` after every this many items."""
SOURCES = ("folder", "manifest", "wds", "hf")
WDS_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp")
WDS_LABEL_EXTENSIONS = ("cls", "cls.txt")

Progress = Callable[[int], None]


class Names:
    """``N`` strings packed in one UTF-8 buffer with offsets: no Python object per string, so an index of
    millions of names is compact and forked loader workers do not copy it page by page."""

    def __init__(self, strings: Iterable[str]) -> None:
        encoded = [s.encode() for s in strings]
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=self.offsets[1:])
        self.blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, j: int) -> str:
        return self.blob[self.offsets[j] : self.offsets[j + 1]].tobytes().decode()


class Store(Protocol):
    """Where a source's items live: ``source(j)`` is what :func:`decode_image` reads (a path or the
    bytes), ``name(j)`` says where the item is in messages, ``key(j)`` is the same relative to the source
    (stable when its folder moves: :meth:`Records.fingerprint` hashes it)."""

    def source(self, j: int) -> str | Path | bytes: ...

    def name(self, j: int) -> str: ...

    def key(self, j: int) -> str: ...


class FileStore:
    """Image files, by path relative to ``root`` (absolute paths stay as they are)."""

    def __init__(self, root: Path, paths: Names) -> None:
        self.root = root
        self.paths = paths

    def source(self, j: int) -> Path:
        return self.root / self.paths[j]

    def name(self, j: int) -> str:
        return str(self.root / self.paths[j])

    def key(self, j: int) -> str:
        return self.paths[j]


class TarStore:
    """Members of uncompressed tar shards, read by byte offset: ``shard[j]``, ``offset[j]``, ``size[j]``."""

    def __init__(self, shards: list[str], shard: np.ndarray, offset: np.ndarray, size: np.ndarray, members: Names):
        self.shards = shards
        self.shard = shard
        self.offset = offset
        self.size = size
        self.members = members

    def source(self, j: int) -> bytes:
        path = self.shards[int(self.shard[j])]
        try:
            with open(path, "rb") as f:
                f.seek(int(self.offset[j]))
                data = f.read(int(self.size[j]))
        except OSError as err:
            raise DataError(f"{self.name(j)}: cannot read the shard ({err.strerror or err})") from err
        if len(data) != int(self.size[j]):
            raise DataError(f"{self.name(j)}: the shard ends inside the member (truncated); fetch the shard again")
        return data

    def name(self, j: int) -> str:
        return f"{self.shards[int(self.shard[j])]}:{self.members[j]}"

    def key(self, j: int) -> str:
        return f"{Path(self.shards[int(self.shard[j])]).name}:{self.members[j]}"


class RowStore:
    """Rows of a ``datasets.Dataset`` of one column ``column`` in the arrow format (nothing decoded by
    ``datasets``) holding ``{"bytes", "path"}`` structs, bytes or paths (relative paths: from ``root``);
    ``paths`` the rows' recorded paths, where they have one."""

    def __init__(self, dataset: Any, column: str, root: Path, split: str, paths: list[str | None]) -> None:
        self.dataset = dataset
        self.column = column
        self.root = root
        self.split = split
        self.paths = Names(p or "" for p in paths)

    def source(self, j: int) -> str | Path | bytes:
        value = self.dataset[j].column(0)[0].as_py()
        if isinstance(value, dict):
            if value.get("bytes"):
                return value["bytes"]
            value = value.get("path")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str) and value:
            return self.root / value
        raise DataError(f"{self.name(j)}: the row has no image (neither bytes nor a path)")

    def name(self, j: int) -> str:
        path = self.paths[j]
        return f"{self.root}:{self.split}[{j}]" + (f" ({path})" if path else "")

    def key(self, j: int) -> str:
        return self.paths[j] or f"{self.split}[{j}]"


@dataclass
class Records:
    """One split's images by reference: item ``i`` is ``store`` item ``refs[i]`` with label ``labels[i]``.

    ``labels`` ``(N,)`` int64 numpy in ``[0, len(classes))``; ``origin`` says where the source is.
    """

    store: Store
    refs: np.ndarray
    labels: np.ndarray
    classes: list[str]
    origin: str = ""

    def __post_init__(self) -> None:
        self.refs = np.asarray(self.refs, dtype=np.int64)
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if self.refs.shape != self.labels.shape or self.labels.ndim != 1:
            raise DataError(f"{self.refs.shape} references but {self.labels.shape} labels")
        if len(self.labels) and (self.labels.min() < 0 or self.labels.max() >= len(self.classes)):
            raise DataError(f"labels must lie in [0, {len(self.classes) - 1}] for {len(self.classes)} classes")

    def __len__(self) -> int:
        return len(self.labels)

    def open(self, i: int) -> Image.Image:
        """Item ``i`` decoded (see :func:`decode_image`); :class:`DataError` naming it when unreadable."""
        j = int(self.refs[i])
        return decode_image(self.store.source(j), self.store.name(j))

    def name(self, i: int) -> str:
        """Where item ``i`` is: its path, ``shard:member``, or ``folder:split[row]``."""
        return self.store.name(int(self.refs[i]))

    def key(self, i: int) -> str:
        """Item ``i``'s name relative to its source (a relative path, ``shard-file:member``, ``split[row]``)."""
        return self.store.key(int(self.refs[i]))

    def subset(self, index: np.ndarray | Sequence[int]) -> Records:
        """The records at positions ``index`` (any order, repeats allowed), sharing the store."""
        index = np.asarray(index, dtype=np.int64)
        return Records(self.store, self.refs[index], self.labels[index], self.classes, self.origin)

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the sorted ``key<TAB>class name`` lines: the same images with the same labels
        give the same fingerprint wherever the source lies and in whatever order it lists them."""
        lines = sorted(f"{self.key(i)}\t{self.classes[label]}" for i, label in enumerate(self.labels.tolist()))
        digest = hashlib.sha256()
        for line in lines:
            digest.update(line.encode() + b"\n")
        return digest.hexdigest()


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


# --- folder ---------------------------------------------------------------------------------------------


def read_folder_records(data_dir: str | Path, *, progress: Progress | None = None) -> dict[str, Records]:
    """``DIR/CLASS/*.png|jpg|...`` as ``{"train": ...}``, or ``DIR/{train,val,test}/CLASS/...`` as the
    official splits. File names only: nothing is decoded."""
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DataError(f"folder: {root} is not a folder; pass the folder that holds the class sub-folders")
    subdirs = _subdirs(root)
    if not subdirs:
        raise DataError(f"folder: {root} has no class sub-folders; put each class's images in DIR/CLASS/")
    counter = _Counter(progress)
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
    folder: Path, classes: list[str], root: Path, counter: _Counter, required: bool
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


class _Counter:
    """Calls ``progress(count)`` each time ``count`` passes a multiple of :data:`PROGRESS_EVERY`, and once
    at the end when it was called at all."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.count = 0
        self.reported = 0

    def add(self, n: int) -> None:
        self.count += n
        if self.progress is not None and self.count // PROGRESS_EVERY > self.reported // PROGRESS_EVERY:
            self.progress(self.count)
            self.reported = self.count

    def done(self) -> None:
        if self.progress is not None and self.reported and self.reported != self.count:
            self.progress(self.count)


# --- labels from values (manifest, wds, hf) ------------------------------------------------------------


_INTEGER = re.compile(r"^[+-]?\d+$")


def _class_names(values: Iterable[Any]) -> list[str]:
    """The sorted distinct labels as names: numerically when all are integers (``7``, ``"10"``), as text
    otherwise."""
    distinct = {str(v).strip() for v in values}
    if distinct and all(_INTEGER.match(v) for v in distinct):
        return [str(v) for v in sorted({int(v) for v in distinct})]
    return sorted(distinct)


def _encode(values: Sequence[Any], classes: list[str]) -> np.ndarray:
    """Label values -> indices into ``classes`` (as made by :func:`_class_names`)."""
    numeric = all(_INTEGER.match(c) for c in classes)
    lookup = {c: i for i, c in enumerate(classes)}
    if numeric:
        return np.array([lookup[str(int(str(v).strip()))] for v in values], dtype=np.int64)
    return np.array([lookup[str(v).strip()] for v in values], dtype=np.int64)


def _by_class(labels: np.ndarray) -> np.ndarray:
    """The stable order that groups records by class, keeping the source's order within a class."""
    return np.argsort(labels, kind="stable")


def _records_from_values(
    store: Store,
    refs_by_split: dict[str, list[int]],
    values_by_split: dict[str, list[Any]],
    origin: str,
    kind: str,
    classes: list[str] | None = None,
) -> dict[str, Records]:
    """Records per split, labels encoded against ``classes`` (default: :func:`_class_names` of all the
    values), each split ordered by class then as listed; a class with no training record is refused."""
    if not refs_by_split.get("train"):
        raise DataError(f"{kind}: {origin} has no training images")
    if classes is None:
        classes = _class_names(v for vals in values_by_split.values() for v in vals)
    out = {}
    for split, refs in refs_by_split.items():
        if not refs:
            continue
        labels = _encode(values_by_split[split], classes)
        order = _by_class(labels)
        out[split] = Records(store, np.asarray(refs)[order], labels[order], list(classes), origin)
    seen = set(out["train"].labels.tolist())
    held = {k for split, part in out.items() if split != "train" for k in part.labels.tolist()}
    unseen = [classes[k] for k in sorted(held - seen)]
    if unseen:
        raise DataError(
            f"{kind}: {origin}: class(es) {unseen[:5]} appear in val/test but have no training image; "
            "add training images or remove them"
        )
    return out


def _split_of(value: Any, where: str, kind: str) -> str:
    split = SPLIT_NAMES.get(str(value).strip().lower()) if value not in (None, "") else "train"
    if split is None:
        raise DataError(f"{kind}: {where}: split {value!r} is unknown; use one of {sorted(SPLIT_NAMES)}")
    return split


# --- manifest -------------------------------------------------------------------------------------------


MANIFEST_NAMES = ("manifest.csv", "manifest.json")


def read_manifest_records(data_dir: str | Path, *, progress: Progress | None = None) -> dict[str, Records]:
    """A CSV (``path,label[,split]`` header) or JSON list of ``{"path", "label"[, "split"]}`` objects;
    paths relative to the manifest's folder. ``data_dir``: the file, or a folder holding ``manifest.csv``
    or ``manifest.json``."""
    path = Path(data_dir).expanduser()
    if path.is_dir():
        found = [path / n for n in MANIFEST_NAMES if (path / n).is_file()]
        if len(found) != 1:
            raise DataError(
                f"manifest: {path} holds {'both' if found else 'neither'} of {' and '.join(MANIFEST_NAMES)}; "
                "pass the manifest file as --data-dir"
            )
        path = found[0]
    if not path.is_file():
        raise DataError(f"manifest: {path} does not exist; pass a .csv or .json manifest as --data-dir")
    rows = _manifest_rows(path)
    if not rows:
        raise DataError(f"manifest: {path} lists no images")
    root = path.parent
    paths: list[str] = []
    refs: dict[str, list[int]] = {}
    values: dict[str, list[Any]] = {}
    for number, (image, label, split_value) in enumerate(rows, start=2 if path.suffix.lower() == ".csv" else 0):
        where = f"{path} {'line' if path.suffix.lower() == '.csv' else 'item'} {number}"
        if not image or label is None or str(label).strip() == "":
            raise DataError(f"manifest: {where} needs a path and a label")
        if isinstance(label, float) or isinstance(label, bool) or not isinstance(label, (int, str)):
            raise DataError(f"manifest: {where}: label {label!r} must be a class name or an integer")
        split = _split_of(split_value, where, "manifest")
        refs.setdefault(split, []).append(len(paths))
        values.setdefault(split, []).append(label)
        paths.append(str(image))
        if progress is not None and len(paths) % PROGRESS_EVERY == 0:
            progress(len(paths))
    first = root / paths[0]
    if not first.is_file():
        raise DataError(f"manifest: {path}: the first image {first} does not exist; paths are relative to {root}")
    return _records_from_values(FileStore(root, Names(paths)), refs, values, str(path), "manifest")


def _manifest_rows(path: Path) -> list[tuple[str, Any, Any]]:
    try:
        if path.suffix.lower() == ".json":
            items = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise DataError(f'manifest: {path} must be a JSON list of {{"path": ..., "label": ...}} objects')
            return [(i.get("path"), i.get("label"), i.get("split")) for i in items]
        if path.suffix.lower() != ".csv":
            raise DataError(f"manifest: {path} is neither .csv nor .json")
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            fields = [c.strip() for c in reader.fieldnames or []]
            if "path" not in fields or "label" not in fields:
                raise DataError(f"manifest: {path} needs a header with path and label columns, got {fields}")
            reader.fieldnames = fields
            return [
                (r["path"], r["label"], r.get("split")) for r in reader if any((v or "").strip() for v in r.values())
            ]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as err:
        raise DataError(f"manifest: {path}: cannot read ({err})") from err


# --- WebDataset shards ------------------------------------------------------------------------------------


def expand_braces(pattern: str) -> list[str]:
    """Bash-style brace expansion: ``a-{000..002}.tar`` -> three names (zero padding kept),
    ``{train,val}.tar`` -> two; several and nested braces expand left to right."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, body, tail = pattern[: match.start()], match.group(1), pattern[match.end() :]
    numeric = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if numeric:
        lo, hi = numeric.groups()
        width = len(lo) if lo.lstrip("-").startswith("0") and len(lo) > 1 else 0
        step = 1 if int(hi) >= int(lo) else -1
        options = [str(v).zfill(width) for v in range(int(lo), int(hi) + step, step)]
    elif "," in body:
        options = body.split(",")
    else:
        options = ["{" + body + "}"]  # not a brace expression: keep it literally
        return [head + options[0] + t for t in expand_braces(tail)]
    return [e for option in options for e in expand_braces(head + option + tail)]


def shard_paths(pattern: str, required: bool = True) -> list[Path]:
    """The shard files of ``pattern`` (braces expanded, then globbed), in order. ``required``: every
    expanded name must exist (else :class:`DataError` naming the first missing); otherwise the ones that do."""
    out: list[Path] = []
    names = expand_braces(str(pattern))
    missing = []
    for name in names:
        if glob.has_magic(name):
            out += [Path(p) for p in sorted(glob.glob(name))]
        elif Path(name).is_file():
            out.append(Path(name))
        else:
            missing.append(name)
    if required and missing:
        raise DataError(
            f"wds: {len(missing)} of the {len(names)} shards of {pattern} do not exist, the first {missing[0]}; "
            "check the --data-dir pattern"
        )
    return out


def read_wds_records(data_dir: str | Path, *, progress: Progress | None = None) -> dict[str, Records]:
    """WebDataset tar shards: a path, glob or brace pattern (or a folder of ``*.tar``); see the module
    docstring. Each shard is indexed once (headers only); images are read by offset."""
    pattern = os.path.expanduser(str(data_dir))
    if Path(pattern).is_dir():
        tars = sorted(p.name for p in Path(pattern).glob("*.tar"))
        pattern = str(Path(pattern) / ("train*.tar" if any(t.startswith("train") for t in tars) else "*.tar"))
    shards_by_split = {"train": shard_paths(pattern)}
    if not shards_by_split["train"]:
        raise DataError(f"wds: no shards match {pattern}; pass a .tar file, a glob or a brace pattern")
    if "train" in pattern:
        cut = pattern.rindex("train")
        for word, split in (("val", "val"), ("valid", "val"), ("validation", "val"), ("test", "test")):
            if split not in shards_by_split:
                found = shard_paths(pattern[:cut] + word + pattern[cut + 5 :], required=False)
                if found:
                    shards_by_split[split] = found
    shards: list[str] = []
    shard_of: list[int] = []
    offsets: list[int] = []
    sizes: list[int] = []
    members: list[str] = []
    refs: dict[str, list[int]] = {}
    values: dict[str, list[Any]] = {}
    counter = _Counter(progress)
    for split, paths in shards_by_split.items():
        for path in paths:
            shards.append(str(path))
            for member, offset, size, label in _index_shard(path):
                refs.setdefault(split, []).append(len(members))
                values.setdefault(split, []).append(label)
                shard_of.append(len(shards) - 1)
                offsets.append(offset)
                sizes.append(size)
                members.append(member)
            counter.add(len(members) - counter.count)
    counter.done()
    store = TarStore(
        shards,
        np.asarray(shard_of, dtype=np.int32),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        Names(members),
    )
    return _records_from_values(store, refs, values, pattern, "wds")


def _index_shard(path: Path) -> list[tuple[str, int, int, str]]:
    """``[(image member, data offset, size, cls text), ...]`` of one uncompressed tar shard, by key."""
    samples: dict[str, dict[str, tarfile.TarInfo]] = {}
    try:
        with tarfile.open(path, "r:") as tar:
            for info in tar:
                if not info.isfile():
                    continue
                folder, _, base = info.name.rpartition("/")
                stem, dot, ext = base.partition(".")
                if not dot or not stem:
                    continue
                samples.setdefault(f"{folder}/{stem}" if folder else stem, {})[ext.lower()] = info
            out = []
            for key, parts in samples.items():
                image = next((parts[e] for e in WDS_IMAGE_EXTENSIONS if e in parts), None)
                label = next((parts[e] for e in WDS_LABEL_EXTENSIONS if e in parts), None)
                if image is None and label is None:
                    continue
                if image is None or label is None:
                    lacks = "an image (jpg/png/webp/bmp)" if image is None else "a cls label"
                    raise DataError(f"wds: {path}: sample {key} has no {lacks}; every sample needs both")
                extracted = tar.extractfile(label)
                text = extracted.read().decode("utf-8").strip() if extracted is not None else ""
                if not text:
                    raise DataError(f"wds: {path}: {label.name} is empty; it must hold the class")
                out.append((image.name, image.offset_data, image.size, text))
    except (tarfile.TarError, OSError, EOFError, UnicodeDecodeError) as err:
        raise DataError(
            f"wds: {path}: not a readable uncompressed tar shard ({type(err).__name__}: {err}); "
            "shards must be plain .tar (gunzip .tar.gz ones)"
        ) from err
    return out


# --- Hugging Face datasets ------------------------------------------------------------------------------------


IMAGE_COLUMNS = ("image", "img", "pixel_values", "jpg", "png")
LABEL_COLUMNS = ("label", "labels", "fine_label", "target", "cls", "class")


def hf_cache_dir() -> Path:
    """Where Arrow caches of parquet files go: ``$XDG_CACHE_HOME/vitlab/hf`` (``~/.cache/vitlab/hf``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vitlab" / "hf"


def read_hf_records(
    data_dir: str | Path,
    *,
    progress: Progress | None = None,
    image_column: str | None = None,
    label_column: str | None = None,
) -> dict[str, Records]:
    """A ``save_to_disk`` folder or parquet files with an image and a label column (see the module
    docstring); ``image_column`` / ``label_column`` name them when the guess would be wrong."""
    require("datasets", "hf", "the hf dataset (a Hugging Face datasets folder or parquet files)")
    root = Path(data_dir).expanduser()
    if not root.exists():
        raise DataError(f"hf: {root} does not exist; pass a save_to_disk folder or parquet files")
    splits = _hf_splits(root)
    stores: list[RowStore] = []
    refs: dict[str, list[int]] = {}
    values: dict[str, list[Any]] = {}
    declared: list[str] | None = None
    offset = 0
    for split, dataset in splits.items():
        image_col, label_col, names = _hf_columns(dataset, root, split, image_column, label_column)
        raw = dataset.data.column(label_col).to_pylist()
        if names is not None:
            if declared is not None and names != declared:
                raise DataError(f"hf: {root}: split {split}'s {label_col} names differ from the other splits'")
            declared = names
            if any(v is not None and not -1 <= v < len(names) for v in raw):
                raise DataError(f"hf: {root} split {split}: a {label_col} value is outside its {len(names)} names")
        missing = sum(v is None or (names is not None and v == -1) for v in raw)
        if missing == len(raw):
            continue  # an unlabelled split (a hub test split): nothing to score
        if missing:
            raise DataError(f"hf: {root} split {split}: {missing} rows have no {label_col}; label or drop them")
        stores.append(
            RowStore(
                dataset.select_columns([image_col]).with_format("arrow"),
                image_col,
                root,
                split,
                _hf_paths(dataset, image_col),
            )
        )
        refs[split] = list(range(offset, offset + len(raw)))
        values[split] = [names[v] for v in raw] if names is not None else raw
        offset += len(raw)
    if "train" not in refs:
        raise DataError(f"hf: {root} has no labelled training split; found {sorted(splits)}")
    out = _records_from_values(_Stores(stores), refs, values, str(root), "hf", declared)
    if progress is not None:
        progress(offset)
    return out


class _Stores:
    """Several stores as one, numbered one after another (the splits of a Hugging Face dataset)."""

    def __init__(self, stores: list[RowStore]) -> None:
        self.stores = stores
        self.starts = np.cumsum([0] + [len(s.paths) for s in stores])

    def _at(self, j: int) -> tuple[RowStore, int]:
        k = int(np.searchsorted(self.starts, j, side="right")) - 1
        return self.stores[k], j - int(self.starts[k])

    def source(self, j: int) -> str | Path | bytes:
        store, row = self._at(j)
        return store.source(row)

    def name(self, j: int) -> str:
        store, row = self._at(j)
        return store.name(row)

    def key(self, j: int) -> str:
        store, row = self._at(j)
        return store.key(row)


def _hf_splits(root: Path) -> dict[str, Any]:
    import datasets

    if root.is_dir() and any((root / f).is_file() for f in ("dataset_dict.json", "state.json", "dataset_info.json")):
        try:
            loaded = datasets.load_from_disk(str(root))
        except (OSError, ValueError, FileNotFoundError) as err:
            raise DataError(f"hf: {root}: cannot load the saved dataset ({err})") from err
        if isinstance(loaded, datasets.DatasetDict):
            out = {}
            for name, part in loaded.items():
                split = SPLIT_NAMES.get(name.lower())
                if split is None:
                    raise DataError(f"hf: {root} has split {name!r}; name the splits train, validation and test")
                if split in out:
                    raise DataError(f"hf: {root} has two validation splits; keep one")
                out[split] = part
            return out
        return {"train": loaded}
    files = [root] if root.is_file() else sorted(root.rglob("*.parquet"))
    if not files or any(f.suffix != ".parquet" for f in files):
        raise DataError(f"hf: {root} is neither a save_to_disk folder nor parquet files")
    by_split: dict[str, list[str]] = {}
    for f in files:
        word = re.match(r"[a-z]+", f.name.lower())
        by_split.setdefault(SPLIT_NAMES.get(word.group(0) if word else "", "train"), []).append(str(f))
    cache = hf_cache_dir()
    was_disabled = datasets.is_progress_bar_enabled() is False
    datasets.disable_progress_bars()
    try:
        return {
            split: datasets.Dataset.from_parquet(paths, cache_dir=str(cache), keep_in_memory=False)
            for split, paths in by_split.items()
        }
    except (OSError, ValueError) as err:
        raise DataError(f"hf: {root}: cannot read the parquet files ({err})") from err
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def _hf_columns(
    dataset: Any, root: Path, split: str, image_column: str | None, label_column: str | None
) -> tuple[str, str, list[str] | None]:
    """``(image column, label column, ClassLabel names or None)``."""
    import datasets

    features = dataset.features
    if image_column is None:
        typed = [c for c, f in features.items() if isinstance(f, datasets.Image)]
        image_column = typed[0] if typed else next((c for c in IMAGE_COLUMNS if c in features), None)
    if label_column is None:
        typed = [c for c, f in features.items() if isinstance(f, datasets.ClassLabel)]
        label_column = typed[0] if typed else next((c for c in LABEL_COLUMNS if c in features), None)
    for what, column in (("image", image_column), ("label", label_column)):
        if column is None or column not in features:
            raise DataError(
                f"hf: {root} split {split} has no {what} column{f' {column!r}' if column else ''} "
                f"(columns {list(features)}); name it with --set data.{what}_column=NAME"
            )
    assert image_column is not None and label_column is not None
    label = features[label_column]
    return image_column, label_column, list(label.names) if isinstance(label, datasets.ClassLabel) else None


def _hf_paths(dataset: Any, column: str) -> list[str | None]:
    """Each row's recorded image path (the struct's ``path`` field), read without touching the bytes."""
    chunks = dataset.data.column(column).chunks
    out: list[str | None] = []
    for chunk in chunks:
        if hasattr(chunk, "field") and any(chunk.type.field(i).name == "path" for i in range(chunk.type.num_fields)):
            out += chunk.field("path").to_pylist()
        else:
            out += [None] * len(chunk)
    return out


# --- splits -------------------------------------------------------------------------------------------------


def split_records(
    records: dict[str, Records],
    seed: int = 0,
    rows: int | None = None,
    held_out: tuple[float, float] = (0.15, 0.15),
    name: str = "folder",
) -> tuple[Records, Records, Records | None, str]:
    """``(train, val, test or None, rule)`` from a source's ``{"train", "val"?, "test"?}``.

    Official splits are kept. Without ``val`` the training records are split stratified and seeded as
    :func:`~vitlab.data.dataset.make_splits` splits a source of the same labels: ``held_out`` fractions
    (validation, then test when there is no official test), and ``rows`` keeps the first ``rows`` of the
    pool in the seeded stratified order of all the records before splitting (nested, stratified). So a
    source read in memory and streamed gives the same members.
    """
    train = records["train"]
    val, test = records.get("val"), records.get("test")
    labels = train.labels
    what = f"the {len(train)} images" if val is None and test is None else f"the {len(train)} training images"
    if val is not None:
        parts = [np.arange(len(train))]
        rule = f"val: the official validation split ({len(val)} images)"
    else:
        held = held_out if test is None else held_out[:1]
        parts = held_out_parts(labels, held, seed, name, len(train.classes))
        percent = " and ".join(f"{round(100 * f)}%" for f in held)
        rule = f"{'val' if len(held) == 1 else 'val and test'}: stratified random {percent} of {what} (seed {seed})"
        val = train.subset(parts[1])
    if test is not None:
        rule += f"; test: the official test split ({len(test)} images)"
    elif len(parts) > 2:
        test = train.subset(parts[2])
    pool = parts[0]
    if rows is not None:
        if not 1 <= rows <= len(pool):
            raise DataError(
                f"rows={rows} but the {name} training pool has {len(pool)} images; choose 1 <= rows <= {len(pool)}"
            )
        rank = np.empty(len(labels), dtype=np.int64)
        rank[stratified_order(labels, seed)] = np.arange(len(labels))
        pool = np.sort(pool[np.argsort(rank[pool], kind="stable")[:rows]])
        rule += f"; train: the first {rows} of the rest in a stratified order (seed {seed})"
    return train.subset(pool), val, test, rule
