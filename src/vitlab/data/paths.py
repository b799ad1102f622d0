"""Where a dataset's files are looked for, and where ``vitlab data download`` puts them by default.

Without an explicit folder, dataset ``NAME`` is looked for, in this order, in

1. ``$VITLAB_DATA/NAME``, then ``$VITLAB_DATA`` itself, when ``VITLAB_DATA`` is set; otherwise
   :func:`data_home` ``/ NAME`` (``$XDG_CACHE_HOME/vitlab/data/NAME``, by default ``~/.cache/vitlab/data/NAME``);
2. ``/usr/share/datasets/NAME``, where Debian's ``dataset-*`` packages install their files
   (``apt-get install dataset-fashion-mnist``).

An explicit folder ``DIR`` (``--data-dir``) is searched alone, as ``DIR`` and ``DIR/NAME``, and must exist.

A run records its ``data_dir`` absolute (:func:`absolute_data_dir`, resolved when it trains), so that evaluating,
predicting, explaining or resuming it from another working directory reads the same files; a URL (:func:`is_url`) is
recorded as given. A relative ``data_dir`` an earlier vitlab recorded is refused when read back
(:func:`recorded_data_dir`), never re-resolved against the reader's directory.
"""

from __future__ import annotations

import os
import re
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


def is_url(name: str) -> bool:
    """``https://``, ``s3://``, ``gs://``, ... (read through ``fsspec``), not a local path."""
    return re.match(r"[A-Za-z][A-Za-z0-9+.-]+://", name) is not None


def absolute_data_dir(data_dir: str | Path | None) -> str | None:
    """``data_dir`` as a run records it: a local path absolute (``~`` expanded, against the working directory
    now), a URL as given, None as None."""
    if data_dir is None:
        return None
    text = str(data_dir)
    return text if is_url(text) else os.path.abspath(os.path.expanduser(text))


def is_relative_path(data_dir: str | Path | None) -> bool:
    """Whether ``data_dir`` is a local path that depends on the working directory (not absolute, not a URL)."""
    if data_dir is None:
        return False
    text = str(data_dir)
    return not is_url(text) and not os.path.isabs(os.path.expanduser(text))


def relative_refusal(where: str, recorded: str) -> str:
    """The one line refusing a relative ``data_dir`` recorded by ``where`` (a run folder or checkpoint)."""
    return (
        f"{where} records its data folder as the relative path {recorded!r} (an earlier vitlab did not record "
        f"where training ran): pass --data-dir with the full folder (an absolute path ending in {recorded})"
    )


def recorded_data_dir(where: str, recorded: str | None, given: str | Path | None) -> str | Path | None:
    """The folder to read the data a run (``where``) was trained on: ``given`` (the user's ``--data-dir``) when
    given, else ``recorded``. A relative ``recorded`` (an earlier vitlab's) is never re-resolved against this
    process's working directory: :class:`DataError` unless ``given``."""
    if given is not None:
        return given
    if recorded is not None and is_relative_path(recorded):
        raise DataError(relative_refusal(where, recorded))
    return recorded


def resumed_data_dir(where: str, recorded: str, given: str | Path | None) -> str:
    """The absolute folder a resume of the run at ``where`` reads, whose ``config.json`` records the relative
    ``recorded`` (an earlier vitlab's): ``given`` (``--data-dir``, resolved now) when it ends with ``recorded``,
    else :class:`DataError` (a resume must read the data it trained on; the splits' fingerprints are checked too)."""
    if given is None:
        raise DataError(relative_refusal(where, recorded))
    full = absolute_data_dir(given)
    assert full is not None
    tail = tuple(p for p in Path(os.path.normpath(os.path.expanduser(recorded))).parts if p not in ("..", "."))
    if tail and tuple(Path(full).parts[-len(tail) :]) != tail:
        raise DataError(
            f"{where} records its data folder as the relative path {recorded!r}; --data-dir {given} does not end "
            f"with it: pass the full folder the run trained on (an absolute path ending in {recorded})"
        )
    return full


def install_hint(name: str) -> str:
    """How to get dataset ``name``'s files, as one clause."""
    ways = [f"`apt-get install {DEBIAN_PACKAGES[name]}`"] if name in DEBIAN_PACKAGES else []
    ways.append(f"`vitlab data download {name}`")
    return f"get them with {', '.join(ways)} or pass --data-dir DIR"
