"""Every file a comparison writes goes through :func:`write_file`; :func:`check_out_dir` refuses an
output folder that cannot be made before any training starts."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError


def check_out_dir(out_dir: str | Path) -> None:
    """Raise :class:`~vitlab.errors.ConfigError` unless ``out_dir`` is a folder or can be made one:
    the deepest part of the path that exists must be a writable folder."""
    path = Path(out_dir).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"output folder {str(out_dir)!r} cannot be made: {str(existing)!r} is a file, not a "
                          f"folder; choose another --out or --name")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"output folder {str(out_dir)!r} cannot be made: {str(existing)!r} is not writable; "
                          f"choose another --out")


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, making its folder; atomic: a reader sees the old
    file or the new one, never a part (a temporary file beside it, renamed over it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(temporary, path)
    return path
