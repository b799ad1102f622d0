"""The ``hf`` photo source: a Hugging Face dataset, its rows read lazily from memory-mapped Arrow files.

``--data-dir`` is a folder written by ``datasets``' ``save_to_disk`` (a ``DatasetDict``'s splits honoured)
or ``*.parquet`` files (split from the file name: ``train-*``, ``validation-*``, ``test-*``; converted once
to an Arrow cache under :func:`hf_cache_dir`), with an image column (an ``Image`` feature or
``{"bytes", "path"}`` structs) and a label column (``ClassLabel``: its names; else integers or strings).
A split with no labels (a hub test split) is left out.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, require
from .labels import records_from_values
from .records import SPLIT_NAMES, Names, Progress, Records

IMAGE_COLUMNS = ("image", "img", "pixel_values", "jpg", "png")
LABEL_COLUMNS = ("label", "labels", "fine_label", "target", "cls", "class")


def hf_cache_dir() -> Path:
    """Where Arrow caches of parquet files go: ``$XDG_CACHE_HOME/vitlab/hf`` (``~/.cache/vitlab/hf``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vitlab" / "hf"


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
    out = records_from_values(_Stores(stores), refs, values, str(root), "hf", declared)
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


def _check_saved(root: Path) -> None:
    """Refuse a ``save_to_disk`` folder whose own JSON files are not the objects ``datasets`` reads (a list for
    ``state.json``, an int for ``dataset_info.json``'s features): one line naming the file and the field."""
    folders = [root, *(p for p in root.iterdir() if p.is_dir())]
    for file in (f / name for f in folders for name in ("state.json", "dataset_info.json", "dataset_dict.json")):
        if not file.is_file():
            continue
        try:
            obj = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise DataError(
                f"hf: {file} is not JSON ({' '.join(str(err).split()[:12]) or 'nested too deep'})"
            ) from None
        bad = "the file" if not isinstance(obj, dict) else None
        if (
            bad is None
            and file.name == "dataset_info.json"
            and not isinstance(obj.get("features", {}), (dict, type(None)))
        ):
            bad = "field 'features'"
        if bad is None and file.name == "dataset_dict.json" and not isinstance(obj.get("splits", []), list):
            bad = "field 'splits'"
        if bad is not None:
            raise DataError(f"hf: {file}: {bad} is not what datasets' save_to_disk writes (a JSON object of objects)")


def _hf_splits(root: Path) -> dict[str, Any]:
    import datasets

    if root.is_dir() and any((root / f).is_file() for f in ("dataset_dict.json", "state.json", "dataset_info.json")):
        _check_saved(root)
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
