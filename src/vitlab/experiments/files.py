"""Every file a comparison writes goes through :func:`write_file` (atomic, with the user's umask: see
:mod:`vitlab.runs.files`); a study's folder is a :class:`~vitlab.runs.RunDir` of kind ``compare``, which
refuses a folder holding another run (or an earlier study of the same name) unless ``overwrite``."""

from __future__ import annotations

from pathlib import Path

from ..runs import RunDir, atomic_write


def open_study(out_dir: str | Path, config: dict, overwrite: bool = False) -> RunDir:
    """The study's run folder, opened before any training: it refuses an existing study (or any other
    run) unless ``overwrite``, and a path that cannot be a folder."""
    return RunDir(out_dir).open("compare", config, overwrite=overwrite)


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically: a reader sees the old file or the new one."""
    atomic_write(path, data.encode() if isinstance(data, str) else data)
    return Path(path)
