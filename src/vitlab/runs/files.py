"""Writing files so that nothing is lost: atomic replacement, the user's umask, no NaN in JSON.

:func:`atomic_write` writes a temporary file beside the target (``.NAME.XXXX.tmp``), fsyncs it,
gives it the permissions a plain ``open()`` would (``0o666 & ~umask``) and renames it over the
target, so a reader sees the old file or the whole new one, never half. A write killed half-way
leaves only its temporary file, which :func:`clean_temp_files` removes on the next start.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import DataError

TEMP_SUFFIX = ".tmp"


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


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path = Path(path)
    check_writable_dir(path.parent).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
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


def clean_temp_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files that killed :func:`atomic_write` calls left in ``folder`` and
    its sub-folders; returns what was removed."""
    removed = []
    for tmp in Path(folder).rglob(f".*{TEMP_SUFFIX}"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
