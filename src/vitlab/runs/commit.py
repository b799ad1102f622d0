"""One consistent step: the files a resume relies on (:data:`~vitlab.runs.layout.CHECKPOINT_SET`: ``last/state.pt``,
``last/``, ``best/``, ``metrics.jsonl``, ``metrics.csv``) change together.

:func:`commit_files` writes an epoch's files into ``.vitlab-stage-RUNID/``, then renames a record of them (epoch
and SHA-256s) into place there (the commit point), then renames each file over its old version, and the record
becomes ``.vitlab-epoch.json``. A process killed before the commit point leaves the previous set untouched (the
next ``--resume`` discards the stage, :func:`recover`, and says so); killed after it, the next ``--resume`` finishes
the renames and says so. :func:`committed_record` and :func:`set_problems` read what stands; :func:`state_bytes` and
:func:`history_files` are the bytes of an epoch's files.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import DataError, RunFolderError
from .files import fsync_dir, json_bytes, read_json, sha256_file, write_synced
from .layout import EPOCH, LAST, METRICS, METRICS_CSV, STAGE_PREFIX, STATE

COMMIT = "commit.json"  # inside the stage: the record whose rename commits the epoch


def stage_path(folder: Path, run_id: str) -> Path:
    """The stage folder of run ``run_id`` in the run folder ``folder``."""
    return folder / f"{STAGE_PREFIX}{run_id}"


def commit_files(folder: Path, run_id: str, epoch: int, files: dict[str, bytes]) -> None:
    """Replace the files ``files`` (relative names -> bytes) of the run folder ``folder`` as one step recorded as
    ``epoch`` of run ``run_id``: a kill at any point leaves the previous set or this one (after :func:`recover`)."""
    for sub in {rel.split("/")[0] for rel in files if "/" in rel}:
        if (folder / sub).is_symlink():
            raise RunFolderError(f"{folder / sub} is a link, not vitlab's folder: remove it and resume")
    stage = stage_path(folder, run_id)
    remove_stage(stage)
    try:
        for rel, data in files.items():
            write_synced(stage / rel, data)
        previous = committed_record(folder)
        record = {
            "run_id": run_id,
            "epoch": epoch,
            "files": {
                **(previous or {}).get("files", {}),
                **{rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()},
            },
        }
        write_synced(stage / f"{COMMIT}.part", json_bytes(record))
        fsync_dir(stage)
        os.replace(stage / f"{COMMIT}.part", stage / COMMIT)  # the commit point
    except BaseException:
        if not (stage / COMMIT).is_file():
            remove_stage(stage, quiet=True)
        raise
    fsync_dir(stage)
    _roll_forward(folder, stage)


def _roll_forward(folder: Path, stage: Path) -> None:
    """Rename each file of the committed ``stage`` into ``folder``; its record becomes ``.vitlab-epoch.json``."""
    record = read_json(stage / COMMIT, "epoch record")
    for rel in record["files"]:
        source = stage / rel
        if source.is_file():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
    for sub in {str(Path(rel).parent) for rel in record["files"]}:
        fsync_dir(folder / sub)
    os.replace(stage / COMMIT, folder / EPOCH)
    fsync_dir(folder)
    remove_stage(stage)


def recover(folder: Path, run_id: str) -> str | None:
    """Finish the epoch of run ``run_id`` a killed process committed, or discard the one it had not; what was
    done, in words (``None``: there was no stage)."""
    stage = stage_path(folder, run_id)
    if not stage.exists() and not stage.is_symlink():
        return None
    record: Any = None
    if (stage / COMMIT).is_file():
        try:
            record = read_json(stage / COMMIT, "epoch record")
        except (DataError, OSError):
            record = None
    if isinstance(record, dict) and isinstance(record.get("files"), dict) and record.get("run_id") == run_id:
        _roll_forward(folder, stage)
        return f"finished writing epoch {record.get('epoch')}, which a stopped process had committed"
    remove_stage(stage)
    stands = (committed_record(folder) or {}).get("epoch")
    where = f"the run stands at epoch {stands}" if stands else "no epoch of the run was complete"
    return f"discarded the files of an epoch a stopped process had not finished; {where}"


def committed_record(folder: Path) -> dict[str, Any] | None:
    """The record of ``folder``'s last committed epoch (``{"epoch", "files": {name: sha256}}``), or ``None``."""
    path = folder / EPOCH
    if not path.is_file():
        return None
    try:
        record = read_json(path, "epoch record")
    except (DataError, OSError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def set_problems(folder: Path, epoch: int) -> list[str]:
    """What keeps ``folder``'s set from being the one committed as ``epoch``: no record, another
    epoch, a file missing or changed. Empty when it is that set."""
    record = committed_record(folder)
    if record is None:
        return [f"no {EPOCH} records which epoch its files hold"]
    if record.get("epoch") != epoch:
        return [f"{EPOCH} records epoch {record.get('epoch')}, {LAST}/{STATE} epoch {epoch}"]
    problems = []
    for rel, digest in record["files"].items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif sha256_file(path) != digest:
            problems.append(f"{rel} was changed")
    return problems


def remove_stage(stage: Path, quiet: bool = False) -> None:
    """Remove a stage folder (its name carries the run id; everything in it is that run's)."""
    if stage.is_symlink():
        stage.unlink()
    elif stage.is_dir():
        shutil.rmtree(stage, ignore_errors=quiet)


def state_bytes(state: dict[str, Any]) -> bytes:
    """``state`` as the bytes of ``state.pt``: tensors and primitives only (read with ``weights_only=True``)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def history_files(records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> dict[str, bytes]:
    """``metrics.jsonl`` (one record a line) and, with records, ``metrics.csv`` (``columns``,
    default the first record's keys), as bytes by name."""
    files = {METRICS: "".join(json.dumps(json.loads(json_bytes(r))) + "\n" for r in records).encode()}
    if records:
        table = io.StringIO()
        writer = csv.DictWriter(table, list(columns or records[0]), lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
        files[METRICS_CSV] = table.getvalue().encode()
    return files
