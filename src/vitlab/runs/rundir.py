"""One run folder: :class:`RunDir` owns every file name and the layout, and nothing else writes there.

A run folder holds one run of one kind (``classify``, ``mae``, ``dino``, ``segment``, ``detect``,
``compare``, ``evaluate``, ``explain``, ...)::

    run.json             kind, vitlab version, start time          (what makes it a run folder)
    config.json          the run's config; `--config runs/NAME/config.json` runs it again
    metrics.jsonl        one record per epoch (and metrics.csv)
    summary.json         the final figures
    last/model.safetensors   last/state.pt     every epoch; state.pt also holds the weights, so it
                                                is consistent on its own and resume reads only it
    best/model.safetensors                      best validation score so far
    results.json  report.md  *.png              studies, evaluations, explanations
    .lock                                       held (flock) while a process uses the folder

:meth:`RunDir.open` refuses a folder that holds another run (of any kind) unless ``resume`` (same
kind, same config but for the fields that do not affect the result) or ``overwrite`` (which empties
a vitlab run folder first, never a folder vitlab did not write); a second process on the same
folder fails at once; temporary files of a killed write are removed. Every file is written
atomically with the user's umask (:mod:`vitlab.runs.files`).
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import __version__
from ..errors import CheckpointError, DataError, RunFolderError
from .checkpoint import DataConfig, save_checkpoint
from .files import atomic_write, check_writable_dir, clean_temp_files, current_umask, json_bytes, read_json
from .layout import (
    BEST,
    CONFIG,
    LAST,
    LEGACY_MARKERS,
    LOCK,
    METRICS,
    METRICS_CSV,
    RESUMABLE,
    RUN,
    STATE,
    SUMMARY,
    WEIGHTS,
)


class RunDir:
    """The run folder at ``path``. Use as ``with RunDir(path).open(kind, config) as run: ...``, or
    call :meth:`close` (the lock is also released when the process ends)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None
        self._started: bool = False  # this process wrote run.json (a new run, not a resumed one)
        self._made_folder: bool = False

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # -- opening --------------------------------------------------------------------------------

    def existing_kind(self) -> str | None:
        """The kind of run the folder holds: its ``run.json`` kind, ``"an older vitlab run"`` for a
        folder written before run.json, ``"files vitlab did not write"`` for another non-empty
        folder, ``None`` when it is empty or absent."""
        if not self.path.is_dir():
            return None
        run_file = self.path / RUN
        if run_file.is_file():
            try:
                return str(read_json(run_file, "run file").get("kind"))
            except (DataError, AttributeError):
                return "a damaged vitlab run"
        if any((self.path / m).exists() for m in LEGACY_MARKERS):
            return "an older vitlab run"
        entries = [p for p in self.path.iterdir() if p.name != LOCK and not p.name.endswith(".tmp")]
        return "files vitlab did not write" if entries else None

    def open(
        self,
        kind: str,
        config: dict[str, Any] | None = None,
        *,
        resume: bool = False,
        overwrite: bool = False,
        resume_free: Iterable[str] = (),
    ) -> RunDir:
        """Start (or resume) a run of ``kind`` here: take the lock, clean temp files, check the
        folder holds no other run, write ``run.json`` and ``config.json``."""
        if resume and overwrite:
            raise RunFolderError("--resume and --overwrite contradict each other: choose one")
        self._made_folder = not check_writable_dir(self.path).exists()
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            clean_temp_files(self.path)
            found = self.existing_kind()
            if resume:
                self._check_resume(kind, config, found, set(resume_free))
                return self
            if found is not None:
                if not overwrite:
                    resume_hint = "resume it (--resume), " if found == kind and kind in RESUMABLE else ""
                    raise RunFolderError(
                        f"{self.path} already holds {_describe(found)}: choose another folder, "
                        f"{resume_hint}or replace it (--overwrite)"
                    )
                if found == "files vitlab did not write":
                    raise RunFolderError(
                        f"{self.path} holds files vitlab did not write; --overwrite only "
                        f"replaces vitlab runs: choose an empty or new folder"
                    )
                self._empty()
            self.write_json(RUN, {"kind": kind, "vitlab": __version__, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            self._started = True
            if config is not None:
                self.write_json(CONFIG, config)
        except BaseException:
            self.close()
            raise
        return self

    def _check_resume(self, kind: str, config: dict[str, Any] | None, found: str | None, free: set[str]) -> None:
        if found is None:
            raise RunFolderError(f"nothing to resume in {self.path}: it holds no run; start without --resume")
        if found not in (kind, "an older vitlab run"):
            raise RunFolderError(f"cannot resume {self.path} as a {kind} run: it holds {_describe(found)}")
        if not (self.path / LAST / STATE).is_file():
            raise RunFolderError(
                f"nothing to resume in {self.path}: no {LAST}/{STATE} (the run stopped before its "
                f"first epoch ended); start again with --overwrite"
            )
        if config is not None and (self.path / CONFIG).is_file():
            saved = read_json(self.path / CONFIG, "run config")
            current = json.loads(json_bytes(config))
            changed = sorted(k for k in set(saved) | set(current) if k not in free and saved.get(k) != current.get(k))
            if changed:
                raise RunFolderError(
                    f"resuming {self.path} with different settings: "
                    + ", ".join(f"{k} (run has {saved.get(k)!r}, given {current.get(k)!r})" for k in changed)
                    + "; use the run's settings or start a new run"
                )

    def _empty(self) -> None:
        for entry in self.path.iterdir():
            if entry.name == LOCK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def _lock(self) -> None:
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunFolderError(
                f"{self.path} is in use by another vitlab process (pid {holder}): wait for it "
                f"to finish, or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def close(self) -> None:
        """Release the lock."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None:
            self.discard_if_unused()
        self.close()

    def discard_if_unused(self) -> None:
        """Undo :meth:`open` for a run that failed before writing anything but ``run.json`` and
        ``config.json``, so that trying again needs no ``--overwrite``."""
        if not self._started or not self.path.is_dir():
            return
        left = {p.name for p in self.path.iterdir()} - {LOCK}
        if left <= {RUN, CONFIG}:
            for name in left:
                (self.path / name).unlink(missing_ok=True)
            self._started = False
            if self._made_folder:
                self.close()
                (self.path / LOCK).unlink(missing_ok=True)
                self.path.rmdir()

    # -- writing ----------------------------------------------------------------------------------

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write ``name`` (a path inside the folder) atomically."""
        path = self.path / name
        atomic_write(path, data)
        return path

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def write_json(self, name: str, obj: Any) -> Path:
        """Strict JSON (NaN and infinities become null)."""
        return self.write_bytes(name, json_bytes(obj))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """``summary.json``: the run's final figures."""
        return self.write_json(SUMMARY, summary)

    def write_history(self, records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> None:
        """``metrics.jsonl`` (one record a line) and ``metrics.csv`` (``columns``, default the first record's keys)."""
        self.write_bytes(METRICS, "".join(json.dumps(json.loads(json_bytes(r))) + "\n" for r in records).encode())
        if records:
            table = io.StringIO()
            writer = csv.DictWriter(table, list(columns or records[0]), lineterminator="\n", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(records)
            self.write_text(METRICS_CSV, table.getvalue())

    def figure_path(self, name: str) -> Path:
        """Where a figure called ``name`` goes (figures are drawn by their own modules, then renamed into place)."""
        return self.path / name

    # -- checkpoints ------------------------------------------------------------------------------

    def checkpoint(self, which: str = BEST) -> Path:
        """The weights file of ``best`` or ``last``."""
        return self.path / which / WEIGHTS

    def save_checkpoint(
        self,
        which: str,
        model: nn.Module,
        kind: str,
        data: DataConfig | dict[str, Any],
        *,
        name: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> Path:
        """Write ``model`` as ``which/model.safetensors`` (the one checkpoint format)."""
        data = data if isinstance(data, DataConfig) else DataConfig.from_dict(data)
        return save_checkpoint(
            model,
            self.checkpoint(which),
            kind,
            data,
            name=name,
            provenance={"run": str(self.path), **(provenance or {})},
        )

    def save_state(self, state: dict[str, Any]) -> None:
        """``last/state.pt``: tensors and primitives only (it is read with ``weights_only=True``)."""
        buffer = io.BytesIO()
        torch.save(state, buffer)
        self.write_bytes(f"{LAST}/{STATE}", buffer.getvalue())

    def load_state(self) -> dict[str, Any]:
        """The training state saved by :meth:`save_state`, without unpickling arbitrary objects."""
        path = self.path / LAST / STATE
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises many types for a damaged file
            raise CheckpointError(
                f"{path} cannot be read ({type(err).__name__}): the run cannot resume; start again with --overwrite"
            ) from err


def _describe(kind: str) -> str:
    return kind if kind.startswith(("an ", "a ", "files")) else f"a {kind} run"
