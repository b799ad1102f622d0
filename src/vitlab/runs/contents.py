"""What a run folder holds, read without writing anything: :func:`inspect_folder` answers with a :class:`Found`
(the kind of run, its marker's run id, whether an earlier vitlab wrote it, a file vitlab did not write), from the
folder's complete :func:`listing` (links are never followed). A folder without vitlab's marker counts as vitlab's
only when every file in it is one the layout names (:func:`vitlab.runs.layout.legacy_named`)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError
from .files import read_json
from .layout import FOLDERS, LOCK, MARKER, RUN, RUN_ID, TEMP_PREFIX, TEMP_SUFFIX, legacy_named, names

OLDER = "an older vitlab run"  # written before run.json existed
FOREIGN = "files vitlab did not write"
DAMAGED = "a damaged vitlab run"


@dataclass
class Found:
    """What a folder holds: ``kind`` (``None``: empty or absent), the marker's ``run_id``, whether
    it is ``legacy`` (no marker, every file one the layout names), one ``foreign`` file for the message."""

    kind: str | None
    run_id: str | None = None
    legacy: bool = False
    foreign: str | None = None
    litter: tuple[str, ...] = ()  # the temporary files of a marker whose write was killed (see _aborted_marker)
    unused: bool = False  # a marked run killed before it recorded its config: nothing but its marker and run.json


def inspect_folder(folder: Path) -> Found:
    """What ``folder`` holds (see :meth:`vitlab.runs.RunDir.existing_kind`); reads, never writes."""
    if not folder.is_dir():
        return Found(None)
    marker = folder / MARKER
    if marker.is_symlink() or marker.exists():
        try:
            meta = json.loads(marker.read_text()) if marker.is_file() and not marker.is_symlink() else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            meta = None
        run_id, kind = (meta.get("run_id"), meta.get("kind")) if isinstance(meta, dict) else (None, None)
        if not (isinstance(run_id, str) and RUN_ID.fullmatch(run_id) and isinstance(kind, str) and kind):
            return Found(DAMAGED)
        written = {rel for rel, _ in listing(folder) if names(rel)}
        return Found(kind, run_id, unused=written <= {MARKER, RUN, LOCK})
    entries, litter = 0, []
    for rel, plain in listing(folder):
        if plain and _aborted_marker(folder, rel):
            litter.append(rel)
        elif not (plain and legacy_named(rel)):
            return Found(FOREIGN, foreign=rel)
        else:
            entries += rel != LOCK
    if entries == 0:
        return Found(None, litter=tuple(litter))
    try:
        kind = read_json(folder / RUN, "run file").get("kind") if (folder / RUN).is_file() else None
    except (DataError, AttributeError, OSError):
        kind = None
    return Found(kind if isinstance(kind, str) and kind else OLDER, legacy=True, litter=tuple(litter))


def listing(folder: Path) -> Iterator[tuple[str, bool]]:
    """Every entry under ``folder`` but the layout's own sub-folders, as ``(relative name, plain)``:
    ``plain`` for a regular file; a link, a special file, or a folder the layout does not name is
    listed as an entry that is not plain, never entered (links are never followed)."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel_root = os.path.relpath(root, folder)
        prefix = "" if rel_root == "." else rel_root.replace(os.sep, "/") + "/"
        for name in sorted(files):
            yield prefix + name, stat.S_ISREG(os.lstat(os.path.join(root, name)).st_mode)
        keep = []
        for name in sorted(dirs):
            rel = prefix + name
            if not os.path.islink(os.path.join(root, name)) and rel in FOLDERS:
                keep.append(name)
            else:
                yield rel, False  # a link, a stage, or a folder vitlab's layout does not name
        dirs[:] = keep


def _aborted_marker(folder: Path, rel: str) -> bool:
    """Whether ``rel`` is the temporary file of a marker whose write was killed: at the top,
    named ``.vitlab-RUNID-.vitlab-run.XXXX.tmp``, holding nothing or that marker (its run id)."""
    if not (rel.startswith(TEMP_PREFIX) and rel.endswith(TEMP_SUFFIX) and f"-{MARKER}." in rel):
        return False
    run_id = rel[len(TEMP_PREFIX) :].split("-", 1)[0]
    if not RUN_ID.fullmatch(run_id) or not rel.startswith(f"{TEMP_PREFIX}{run_id}-{MARKER}."):
        return False
    try:
        with open(folder / rel, "rb") as f:
            data = f.read(4097)
        meta = json.loads(data) if data else None
    except (OSError, ValueError):
        return False
    return meta is None or (isinstance(meta, dict) and meta.get("run_id") == run_id and len(data) <= 4096)


def describe(kind: str) -> str:
    """A folder's ``kind`` (see :class:`Found`) as the object of a sentence: ``a classify run``, ``files ...``."""
    return kind if kind.startswith(("an ", "a ", "files")) else f"a {kind} run"
