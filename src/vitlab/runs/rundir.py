"""One run folder: :class:`RunDir` owns every file name and the layout, and nothing else writes there.

A run folder holds one run of one kind (``classify``, ``mae``, ``dino``, ``segment``, ``detect``,
``compare``, ``evaluate``, ``explain``, ...)::

    .vitlab-run          the marker, written first: a random run id and the kind (what makes it vitlab's)
    run.json             kind, vitlab version, start time
    config.json          the run's config; `--config runs/NAME/config.json` runs it again
    metrics.jsonl        one record per epoch (and metrics.csv)
    summary.json         the final figures
    last/model.safetensors   last/state.pt     every epoch; state.pt also holds the weights, so it
                                                is consistent on its own and resume reads only it
                                                (``checkpoint_every_steps``: state.pt alone inside an epoch too)
    best/model.safetensors                      best validation score so far
    .vitlab-epoch.json   the last committed epoch and the SHA-256 of each file of its set
    results.json  report.md  *.png              studies, evaluations, explanations
    .lock                                       held (flock) while a process uses the folder

**Ownership.** vitlab deletes only what it can prove it wrote: ``--overwrite`` empties a folder only
when it holds the marker, and then only of the files the layout names (:func:`vitlab.runs.layout.names`)
and the temporary files of that run (``.vitlab-RUNID-*.tmp``); anything else there stays. A folder
without the marker is a vitlab run only if it was written by an earlier vitlab, which the complete
listing proves: every file in it is one the layout names (:mod:`vitlab.runs.contents`). Any other
folder is refused, with or without ``--overwrite``, before anything in it is touched (no lock file,
no cleaning). An empty ``--out`` is refused: the working directory is never made a run folder.

**One consistent step.** The files a resume relies on (:data:`~vitlab.runs.layout.CHECKPOINT_SET`) change
together in :meth:`RunDir.commit` (staged, then committed by one rename: :mod:`vitlab.runs.commit`); a process
killed at any point leaves the previous set or the new one, which the next ``--resume`` finishes or discards, and
says so. Either way the run stands at one epoch whose files agree.

:meth:`RunDir.open` refuses a folder that holds another run (of any kind) unless ``resume`` (same
kind, same config but for the fields that do not affect the result) or ``overwrite``; a second
process on the same folder fails at once. A run killed before it recorded its config (nothing but its
marker and ``run.json``, or only the temporary file of a marker it was writing) holds nothing to lose
or resume: a plain start replaces it. ``--resume`` of a run killed before its first epoch was
committed starts it from the first epoch. Every file is written atomically with the user's umask
(:mod:`vitlab.runs.files`).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import __version__
from ..checks import run_folder_name
from ..data.config import DataConfig
from ..errors import CheckpointError, RunFolderError
from .checkpoint import checkpoint_bytes, recorded_epoch, save_checkpoint
from .commit import (
    commit_files,
    committed_record,
    history_files,
    recover,
    remove_stage,
    set_problems,
    stage_path,
    state_bytes,
)
from .contents import DAMAGED, FOREIGN, OLDER, Found, describe, inspect_folder, listing
from .files import atomic_write, check_writable_dir, clean_temp_files, current_umask, json_bytes, own_folder, read_json
from .kinds import resumable_kinds
from .layout import (
    BEST,
    CONFIG,
    FOLDERS,
    LAST,
    LOCK,
    MARKER,
    RUN,
    STATE,
    SUMMARY,
    WEIGHTS,
    legacy_named,
    names,
    own_temp,
)

RUN_ONLY = ("resume", "overwrite", "out_dir")
"""Config fields that say how this process treats the folder, not how the run trains."""


def note(message: str) -> None:
    """Say ``message`` on stderr (what vitlab did to a run folder on its own: recovery, repair)."""
    print(f"vitlab: {message}", file=sys.stderr, flush=True)


def check_out(path: str | Path) -> Path:
    """``path`` as a run folder's path; an empty or blank name (an unset shell variable) is refused."""
    return Path(run_folder_name(path))


class RunDir:
    """The run folder at ``path``. Use as ``with RunDir(path).open(kind, config) as run: ...``, or
    call :meth:`close` (the lock is also released when the process ends)."""

    def __init__(self, path: str | Path) -> None:
        self.path = check_out(path)
        self.run_id: str | None = None
        self.resumed = False  # open(resume=True) found a run to continue
        self._resumed_settings: tuple[dict[str, Any], list[str]] | None = None  # see record_resumed_settings
        self._lock_fd: int | None = None
        self._started: bool = False  # this process wrote the marker (a new run, not a resumed one)
        self._made_folder: bool = False
        self._made_lock: bool = False

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # -- what the folder holds --------------------------------------------------------------------

    def existing_kind(self) -> str | None:
        """The kind of run the folder holds: its marker's kind; for a folder an earlier vitlab wrote
        (no marker, only files the layout names) its ``run.json`` kind or ``"an older vitlab run"``;
        ``"a damaged vitlab run"`` for a marker that cannot be read; ``"files vitlab did not write"``
        for any other non-empty folder; ``None`` when it is empty or absent."""
        return self.inspect().kind

    def inspect(self) -> Found:
        """What the folder holds (see :meth:`existing_kind`); reads, never writes."""
        return inspect_folder(self.path)

    # -- opening --------------------------------------------------------------------------------

    def open(
        self,
        kind: str,
        config: dict[str, Any] | None = None,
        *,
        resume: bool = False,
        overwrite: bool = False,
        resume_free: Iterable[str] = (),
    ) -> RunDir:
        """Start (or resume) a run of ``kind`` here: check the folder holds no other run (a folder
        that is not vitlab's is refused before anything in it is touched), take the lock, write the
        marker, ``run.json`` and ``config.json``; with ``resume``, finish or discard an epoch a killed
        process left half-committed."""
        if resume and overwrite:
            raise RunFolderError("--resume and --overwrite contradict each other: choose one")
        check_writable_dir(self.path)
        self._refuse(kind, self.inspect(), resume, overwrite)  # before touching anything
        self._made_folder = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            found = self.inspect()  # again, under the lock
            self._refuse(kind, found, resume, overwrite)
            for rel in found.litter:
                (self.path / rel).unlink(missing_ok=True)
            if resume:
                self._resume(kind, config, found, set(resume_free))
                return self
            if found.kind is not None:
                self._clear(found)
            self._start(kind, config, found.run_id)
        except BaseException:
            self._undo_open()
            raise
        return self

    def check(self, kinds: Iterable[str], *, resume: bool = False, overwrite: bool = False) -> None:
        """Refuse now what :meth:`open` would refuse for a run of one of ``kinds`` (the first unless the
        folder holds another of them), so a command can say so before it reads any data; reads, never writes.
        Only rank 0 of a ``torchrun`` launch checks (it alone opens the folder, maybe before another rank looks)."""
        if os.environ.get("RANK", "0") != "0":
            return
        if resume and overwrite:
            raise RunFolderError("--resume and --overwrite contradict each other: choose one")
        found = self.inspect()
        kinds = tuple(kinds)
        self._refuse(found.kind if found.kind in kinds else kinds[0], found, resume, overwrite)

    def _refuse(self, kind: str, found: Found, resume: bool, overwrite: bool) -> None:
        resumable = kind in resumable_kinds()  # a training's kind; studies and evaluations cannot resume
        if found.kind == FOREIGN:
            raise RunFolderError(
                f"{self.path} is not a vitlab run: it holds files vitlab did not write (e.g. {found.foreign}); "
                f"nothing in it was touched: choose an empty or new folder"
            )
        if found.kind == DAMAGED:
            raise RunFolderError(
                f"{self.path} holds a damaged vitlab marker ({MARKER}), so vitlab cannot prove which files are "
                f"its own; nothing in it was touched: choose another folder, or remove this one yourself"
            )
        if resume:
            if found.kind is None:
                raise RunFolderError(f"nothing to resume in {self.path}: it holds no run; start without --resume")
            if found.kind != kind and not (found.kind == OLDER and resumable):
                raise RunFolderError(f"cannot resume {self.path} as a {kind} run: it holds {describe(found.kind)}")
            if found.legacy and not (self.path / LAST / STATE).is_file():
                raise RunFolderError(
                    f"nothing to resume in {self.path}: no {LAST}/{STATE} (the run stopped before its "
                    f"first epoch ended); start again with --overwrite"
                )
        elif found.kind is not None and not overwrite and not found.unused:  # an unused run is replaced
            resume_hint = "resume it (--resume), " if found.kind == kind and resumable else ""
            raise RunFolderError(
                f"{self.path} already holds {describe(found.kind)}: choose another folder, "
                f"{resume_hint}or replace it (--overwrite)"
            )

    def _start(self, kind: str, config: dict[str, Any] | None, previous: str | None) -> None:
        """Write the marker (first: it replaces a ``previous`` run's atomically, its temporary file
        tagged with that run's id so that a killed write leaves a file that run owns), then
        ``run.json`` and ``config.json``."""
        self.run_id = secrets.token_hex(8)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._started = True
        atomic_write(
            self.path / MARKER,
            json_bytes({"run_id": self.run_id, "kind": kind, "vitlab": __version__, "created": stamp}),
            tag=previous or self.run_id,
        )
        own_folder(self.path, self.run_id)
        self.write_json(RUN, {"kind": kind, "vitlab": __version__, "started": stamp, "run_id": self.run_id})
        if config is not None:
            self.write_json(CONFIG, config)

    def _resume(self, kind: str, config: dict[str, Any] | None, found: Found, free: set[str]) -> None:
        if found.legacy:  # an earlier vitlab's run, proved by its listing: adopt it
            self.run_id = secrets.token_hex(8)
            meta = {"run_id": self.run_id, "kind": kind, "vitlab": __version__, "adopted": True}
            atomic_write(self.path / MARKER, json_bytes(meta), tag=self.run_id)
            note(f"{self.path}: adopted a run an earlier vitlab wrote (every file in it is vitlab's), marked {MARKER}")
        else:
            self.run_id = found.run_id
        own_folder(self.path, self.run_id)
        clean_temp_files(self.path, str(self.run_id))
        self._recover()
        if config is not None and (self.path / CONFIG).is_file():
            saved = read_json(self.path / CONFIG, "run config")
            saved = saved if isinstance(saved, dict) else {}
            changed = config_changes(saved, config, free)
            if changed:
                raise RunFolderError(
                    f"resuming {self.path} with different settings: {'; '.join(changed)}; "
                    f"use the run's settings or start a new run"
                )
            said = config_changes(saved, config, RUN_ONLY)  # fields the resume changes on purpose (free ones)
            self._resumed_settings = (config, said) if said else None
        self.resumed = True

    def record_resumed_settings(self) -> None:
        """Write ``config.json`` with the settings this resume changes on purpose (a new ``lr``, the full data
        folder of a run that recorded it relative), saying so; called once the resume has checked its state and
        its data, so a refused resume leaves the run's record as it was."""
        if self._resumed_settings is None:
            return
        config, said = self._resumed_settings
        self._resumed_settings = None
        self.write_json(CONFIG, config)
        note(f"{self.path}: resumed with {'; '.join(said)}; config.json records it")

    def _clear(self, found: Found) -> None:
        """Delete the run ``found`` (proved vitlab's): the files the layout names and that run's
        temporary files and stage; then the layout's sub-folders if they are left empty."""
        for rel, plain in list(listing(self.path)):
            owned = legacy_named(rel) if found.legacy else names(rel) or own_temp(rel, str(found.run_id))
            if plain and owned and rel not in (LOCK, MARKER):  # the marker stays until the new one replaces it
                (self.path / rel).unlink(missing_ok=True)
        if found.run_id is not None:
            remove_stage(stage_path(self.path, found.run_id))
        for folder in FOLDERS:
            where = self.path / folder
            if where.is_dir() and not where.is_symlink() and not any(where.iterdir()):
                where.rmdir()

    def _lock(self) -> None:
        lock = self.path / LOCK
        self._made_lock = not (lock.exists() or lock.is_symlink())
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666 & ~current_umask())
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

    def _undo_open(self) -> None:
        """After a refusal or failure inside :meth:`open`: what this call wrote goes, the folder and
        lock file too when this call made them."""
        self.discard_if_unused()
        self.close()
        if self._made_lock and not self._started:
            (self.path / LOCK).unlink(missing_ok=True)
            if self._made_folder:
                _rmdir_if_empty(self.path)

    def close(self) -> None:
        """Release the lock."""
        if self.run_id is not None:
            own_folder(self.path, None)
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
        """Undo :meth:`open` for a run that failed before writing anything but the marker,
        ``run.json`` and ``config.json``, so that trying again needs no ``--overwrite``."""
        if not self._started or not self.path.is_dir():
            return
        left = {rel for rel, _ in listing(self.path) if names(rel) or own_temp(rel, str(self.run_id))} - {LOCK}
        if left <= {MARKER, RUN, CONFIG}:
            for name in (RUN, CONFIG, MARKER):  # the marker last: until then the folder is provably vitlab's
                (self.path / name).unlink(missing_ok=True)
            self._started = False
            if self._made_folder or self._made_lock:
                self.close()
                if not any(p.name != LOCK for p in self.path.iterdir()):
                    (self.path / LOCK).unlink(missing_ok=True)
                    if self._made_folder:
                        _rmdir_if_empty(self.path)

    # -- writing ----------------------------------------------------------------------------------

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write ``name`` (a path inside the folder) atomically."""
        path = self.path / name
        atomic_write(path, data, tag=self.run_id)
        return path

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def write_json(self, name: str, obj: Any) -> Path:
        """Strict JSON (NaN and infinities become null)."""
        return self.write_bytes(name, json_bytes(obj))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """``summary.json``: the run's final figures. A summary naming a ``best_epoch`` is written
        only when the checkpoint that holds the chosen weights (``best/``, else ``last/``) records that
        epoch: it never names weights the folder does not hold."""
        if "best_epoch" in summary:
            which = BEST if self.checkpoint(BEST).is_file() else LAST
            held = self.checkpoint_epoch(which)
            if held != summary["best_epoch"]:
                raise RunFolderError(
                    f"{self.path}: the summary would name epoch {summary['best_epoch']} as chosen, but "
                    f"{which}/{WEIGHTS} holds epoch {held}; resume the run (--resume) to make them agree"
                )
        return self.write_json(SUMMARY, summary)

    def write_history(self, records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> None:
        """``metrics.jsonl`` (one record a line) and ``metrics.csv`` (``columns``, default the first record's keys)."""
        for name, data in history_files(records, columns).items():
            self.write_bytes(name, data)

    def figure_path(self, name: str) -> Path:
        """Where a figure called ``name`` goes (figures are drawn by their own modules, then renamed into place)."""
        return self.path / name

    # -- one consistent step (vitlab.runs.commit) ------------------------------------------------

    def commit(self, epoch: int, files: dict[str, bytes]) -> None:
        """Replace the files ``files`` (relative names -> bytes; see :data:`CHECKPOINT_SET`) as one
        step recorded as ``epoch``: a kill at any point leaves the previous set or this one (after
        :meth:`open` with ``resume`` finishes the step)."""
        if self.run_id is None:
            raise RunFolderError(f"{self.path} is not open: open the run folder before writing an epoch")
        commit_files(self.path, self.run_id, epoch, files)

    def _recover(self) -> None:
        """Finish the epoch a killed process committed, or discard the one it had not; say which."""
        done = recover(self.path, str(self.run_id))
        if done is not None:
            note(f"{self.path}: {done}")

    def committed(self) -> dict[str, Any] | None:
        """The record of the last committed epoch (``{"epoch", "files": {name: sha256}}``), or ``None``."""
        return committed_record(self.path)

    def check_committed(self, epoch: int) -> list[str]:
        """What keeps the folder's set from being the one committed as ``epoch``: no record, another
        epoch, a file missing or changed. Empty when it is that set."""
        return set_problems(self.path, epoch)

    # -- checkpoints ------------------------------------------------------------------------------

    def checkpoint(self, which: str = BEST) -> Path:
        """The weights file of ``best`` or ``last``."""
        return self.path / which / WEIGHTS

    def checkpoint_epoch(self, which: str = BEST) -> int | None:
        """The epoch ``which``'s checkpoint records in its provenance (``None``: absent or unreadable)."""
        return recorded_epoch(self.checkpoint(which))

    def checkpoint_file(
        self,
        model: nn.Module,
        kind: str,
        data: DataConfig | dict[str, Any],
        *,
        name: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> bytes:
        """``model`` as the bytes of a vitlab checkpoint of this run (for :meth:`commit`)."""
        data = data if isinstance(data, DataConfig) else DataConfig.from_dict(data)
        return checkpoint_bytes(model, kind, data, name=name, provenance={"run": str(self.path), **(provenance or {})})

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
        """Write ``model`` as ``which/model.safetensors`` (the one checkpoint format) on its own;
        training writes its checkpoints through :meth:`commit`."""
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
        """``last/state.pt`` on its own (training writes it through :meth:`commit`)."""
        self.write_bytes(f"{LAST}/{STATE}", state_bytes(state))

    def has_state(self) -> bool:
        return (self.path / LAST / STATE).is_file()

    def load_state(self) -> dict[str, Any]:
        """The training state saved by :meth:`save_state`, without unpickling arbitrary objects;
        ``state["config"]`` is what the run trained with (the engine compares it with the config now)."""
        path = self.path / LAST / STATE
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises many types for a damaged file
            raise CheckpointError(
                f"{path} cannot be read ({type(err).__name__}): the run cannot resume; start again with --overwrite"
            ) from err
        return state

    def commit_epoch(
        self,
        epoch: int,
        state: dict[str, Any],
        checkpoints: dict[str, dict[str, Any]],
        history: Sequence[dict[str, Any]],
    ) -> None:
        """One epoch's files as one step (:meth:`commit`): ``state`` as ``last/state.pt`` (its ``config`` as
        JSON reads it back), each of ``checkpoints`` (``{"last" | "best": the arguments of
        :meth:`checkpoint_file`}``) as that folder's weights, and the history as ``metrics.jsonl``/``.csv``."""
        files = {f"{LAST}/{STATE}": _state_file(state)}
        for which, spec in checkpoints.items():
            files[f"{which}/{WEIGHTS}"] = self.checkpoint_file(**spec)
        files.update(history_files(history))
        self.commit(epoch, files)

    def commit_state(self, epoch: int, state: dict[str, Any]) -> None:
        """A state taken inside the epoch after ``epoch`` as one step (:meth:`commit`): ``state`` as
        ``last/state.pt`` alone; ``last/`` and ``best/`` weights and the metrics stay those of ``epoch``."""
        self.commit(epoch, {f"{LAST}/{STATE}": _state_file(state)})

    @staticmethod
    def config_changes(recorded: dict[str, Any], given: dict[str, Any], free: Iterable[str] = ()) -> list[str]:
        """:func:`config_changes`: what a resume would change of the recorded run."""
        return config_changes(recorded, given, free)

    @staticmethod
    def note(message: str) -> None:
        """:func:`note`: what vitlab did to a run folder on its own."""
        note(message)


def config_changes(recorded: dict[str, Any], given: dict[str, Any], free: Iterable[str] = ()) -> list[str]:
    """The fields where ``given`` differs from ``recorded`` (nested mappings by dotted name), each as
    ``"name (run has X, given Y)"``, leaving out the top-level fields ``free``."""
    recorded, given = json.loads(json_bytes(recorded)), json.loads(json_bytes(given))
    free = set(free)
    changes: list[str] = []

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if not prefix and key in free:
                    continue
                walk(a.get(key), b.get(key), f"{prefix}{key}.")
        elif a != b:
            changes.append(f"{prefix[:-1]} (run has {a!r}, given {b!r})")

    walk(recorded, given, "")
    return changes


def _state_file(state: dict[str, Any]) -> bytes:
    """The bytes of ``last/state.pt`` holding ``state``, its ``config`` as JSON reads it back."""
    return state_bytes({**state, "config": json.loads(json_bytes(state["config"]))})


def _rmdir_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
