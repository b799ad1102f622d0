"""Writing files so that nothing is lost: atomic replacement, the user's umask, no NaN in JSON.

:func:`atomic_write` writes a temporary file beside the target, fsyncs it, gives it the permissions a
plain ``open()`` would (``0o666 & ~umask``) and renames it over the target, so a reader sees the old
file or the whole new one, never half. The temporary file is named ``.vitlab-NAME.XXXX.tmp``, and
``.vitlab-RUNID-NAME.XXXX.tmp`` inside an open run folder (:func:`own_folder`), so that a write
killed half-way leaves a file that :func:`clean_temp_files` can prove is that run's: it removes only
those, never a user's ``*.tmp``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import DataError
from .layout import FOLDERS, TEMP_PREFIX, TEMP_SUFFIX, own_temp

# Run folders this process has open, by real path: their run id tags the temporary files written there.
_OWNED: dict[Path, str] = {}


def current_umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable_dir(path: str | Path) -> Path:
    """``path`` as a folder that exists or can be made: refuses a path under a regular file."""
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                raise DataError(f"cannot write to {path}: {parent} is a file, not a folder; choose another path")
            break
    return path


def own_folder(folder: str | Path, run_id: str | None) -> None:
    """Tag the temporary files written in ``folder`` (and its layout sub-folders) with ``run_id``;
    ``None`` stops tagging."""
    real = Path(folder).resolve()
    if run_id is None:
        _OWNED.pop(real, None)
    else:
        _OWNED[real] = run_id


def owner_tag(folder: str | Path) -> str | None:
    """The run id of the open run folder that ``folder`` is (or is a layout sub-folder of)."""
    if not _OWNED:
        return None
    real = Path(folder).resolve()
    return _OWNED.get(real) or (_OWNED.get(real.parent) if real.name in FOLDERS else None)


def fsync_dir(folder: str | Path) -> None:
    """Make the renames in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: bytes, *, tag: str | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one.
    ``tag`` (default: the run id of the open run folder ``path`` is in) goes into the temporary
    file's name."""
    path = Path(path)
    check_writable_dir(path.parent).mkdir(parents=True, exist_ok=True)
    tag = tag or owner_tag(path.parent)
    prefix = f"{TEMP_PREFIX}{tag}-{path.name}." if tag else f"{TEMP_PREFIX}{path.name}."
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path`` (its folder made) and fsync it, with the user's umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 & ~current_umask())
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, inf) replaced by ``None``: strict JSON has no NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def json_bytes(obj: Any) -> bytes:
    """Strict JSON (non-finite floats as null), indented, with a final newline."""
    return (json.dumps(finite_json(obj), indent=2, allow_nan=False) + "\n").encode()


def write_json(path: str | Path, obj: Any) -> None:
    """:func:`atomic_write` of ``obj`` as strict JSON."""
    atomic_write(path, json_bytes(obj))


def read_json(path: str | Path, what: str = "file") -> Any:
    """The JSON in ``path``; a file that is not JSON raises :class:`DataError` naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not a valid JSON {what} ({err}): fix or remove it") from err


def clean_temp_files(folder: str | Path, run_id: str) -> list[Path]:
    """Remove the temporary files that killed :func:`atomic_write` calls of the run ``run_id`` left
    in the run folder ``folder`` (at its top and in its layout sub-folders, links never followed);
    returns what was removed. Any other file, a user's ``*.tmp`` included, stays."""
    folder = Path(folder)
    removed = []
    for place in ("", *FOLDERS):
        where = folder / place if place else folder
        if place and (where.is_symlink() or not where.is_dir()):
            continue
        for entry in where.iterdir() if where.is_dir() else ():
            rel = f"{place}/{entry.name}" if place else entry.name
            if own_temp(rel, run_id) and not entry.is_symlink() and entry.is_file():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed
