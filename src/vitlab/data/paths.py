"""Where a dataset's files are looked for, and where ``vitlab data download`` puts them by default.

Without an explicit folder, dataset ``NAME`` is looked for, in this order, in

1. ``$VITLAB_DATA/NAME``, then ``$VITLAB_DATA`` itself, when ``VITLAB_DATA`` is set; otherwise
   :func:`data_home` ``/ NAME`` (``$XDG_CACHE_HOME/vitlab/data/NAME``, by default ``~/.cache/vitlab/data/NAME``);
2. ``/usr/share/datasets/NAME``, where Debian's ``dataset-*`` packages install their files
   (``apt-get install dataset-fashion-mnist``).

An explicit folder ``DIR`` (``--data-dir``) is searched alone, as ``DIR`` and ``DIR/NAME``, and must exist.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DataError

DATA_ENV = "VITLAB_DATA"
SYSTEM_DATA = Path("/usr/share/datasets")
DEBIAN_PACKAGES = {"fashion-mnist": "dataset-fashion-mnist"}


def data_home() -> Path:
    """The folder of downloaded datasets: ``$VITLAB_DATA``, else ``$XDG_CACHE_HOME/vitlab/data``
    (``~/.cache/vitlab/data``)."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "vitlab" / "data"


def search_dirs(name: str, data_dir: str | Path | None = None) -> list[Path]:
    """The folders searched for dataset ``name``'s files, in order (see the module docstring).

    Raises :class:`DataError` when ``data_dir`` is given but is not an existing folder.
    """
    if data_dir is not None:
        data_dir = existing_dir(data_dir, name)
        return [data_dir, data_dir / name]
    home = [data_home() / name, data_home()] if os.environ.get(DATA_ENV) else [data_home() / name]
    return [*home, SYSTEM_DATA / name]


def existing_dir(data_dir: str | Path, name: str) -> Path:
    """``data_dir`` as a Path; :class:`DataError` unless it is an existing folder."""
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        what = "is a file, not a folder" if data_dir.exists() else "does not exist"
        raise DataError(f"--data-dir {data_dir} {what}; pass the folder that holds the {name} files")
    return data_dir


def install_hint(name: str) -> str:
    """How to get dataset ``name``'s files, as one clause."""
    ways = [f"`apt-get install {DEBIAN_PACKAGES[name]}`"] if name in DEBIAN_PACKAGES else []
    ways.append(f"`vitlab data download {name}`")
    return f"get them with {', '.join(ways)} or pass --data-dir DIR"
