"""The ``manifest`` photo source: a CSV (``path,label[,split]`` header) or JSON list of
``{"path", "label"[, "split"]}``, paths relative to the manifest's folder (``--data-dir`` the file, or a
folder holding ``manifest.csv`` or ``manifest.json``). Records keep the manifest's row order within a class.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ..errors import DataError
from .labels import records_from_values, split_of
from .records import PROGRESS_EVERY, FileStore, Names, Progress, Records

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
        split = split_of(split_value, where, "manifest")
        refs.setdefault(split, []).append(len(paths))
        values.setdefault(split, []).append(label)
        paths.append(str(image))
        if progress is not None and len(paths) % PROGRESS_EVERY == 0:
            progress(len(paths))
    first = root / paths[0]
    if not first.is_file():
        raise DataError(f"manifest: {path}: the first image {first} does not exist; paths are relative to {root}")
    return records_from_values(FileStore(root, Names(paths)), refs, values, str(path), "manifest")


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
            rows = []
            for r in reader:
                if r.get(None):  # DictReader keeps the fields past the header under None
                    raise DataError(
                        f"manifest: {path} line {reader.line_num} has more fields than its header {fields}: "
                        f"quote a value that holds a comma"
                    )
                if any((v or "").strip() for v in r.values()):
                    rows.append((r["path"], r["label"], r.get("split")))
            return rows
    except RecursionError:
        raise DataError(f"manifest: {path}: cannot read (JSON nested too deep)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as err:
        raise DataError(f"manifest: {path}: cannot read ({err})") from err
