"""Reading a run folder's files as the explorer may: confined to the runs root, capped, JSON checked.

A run (:class:`Run`) is a folder found under a root given with ``--runs``. Every file is read through
:func:`run_file`, which resolves it (links included) and refuses one whose real path leaves the resolved
runs root (403), is not a regular file or is over :data:`MAX_RUN_FILE` bytes (422). :func:`read_json`
reads NaN, infinities and numbers too large for a float as ``null``, so every answer is valid JSON, and
refuses JSON nested deeper than vitlab writes; :func:`as_object` and :func:`as_objects` check a value has
the shape vitlab writes. Which runs exist and what the Runs page shows of them is
:mod:`vitlab.explore.run_index`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .images import RequestError

MAX_RUN_FILE = 64 * 2**20  # bytes of one run file the explorer reads
MAX_DEPTH = 32  # nesting of lists and objects in a run's JSON (vitlab writes 5)


@dataclass(frozen=True)
class Run:
    """A run folder found under a root: its unique ``name``, ``kind`` (compare, train), real
    ``path`` and the real ``root`` it was found under (no file outside ``root`` is read)."""

    name: str
    kind: str
    path: Path
    root: Path


def real_path(path: Path) -> Path | None:
    """``path`` with every link resolved, or ``None`` if it cannot be reached (missing, a dangling
    link or a link loop on the way, a folder we may not enter)."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):  # Python 3.11 reports a link loop as RuntimeError
        return None


def run_file(run: Run, name: str) -> Path | None:
    """The real path of file ``name`` of ``run``, ``None`` if there is none; raises :class:`RequestError`
    (403) if it leads outside the runs root, (422) if it is not a regular file or is too large."""
    real = real_path(run.path / name)
    if real is None:
        return None
    if not real.is_relative_to(run.root):
        raise RequestError(f"{name} of run {run.name} links outside the runs root {run.root}: not read", 403)
    if not real.is_file():
        raise RequestError(f"{name} of run {run.name} is not a regular file", 422)
    if real.stat().st_size > MAX_RUN_FILE:
        raise RequestError(
            f"{name} of run {run.name} has {real.stat().st_size:,} bytes, over the {MAX_RUN_FILE:,} the explorer reads",
            422,
        )
    return real


def read_text(run: Run, name: str) -> str | None:
    """The text of file ``name`` of ``run`` (see :func:`run_file`), ``None`` if there is none."""
    path = run_file(run, name)
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise RequestError(f"{name} of run {run.name} is not UTF-8 text ({err})", 422) from err
    except OSError as err:
        raise RequestError(
            f"{name} of run {run.name} cannot be read ({err}): is the run still being written?", 409
        ) from err


def finite(text: str) -> float | None:
    """``text`` read as a float; ``None`` for NaN or an infinity."""
    value = float(text)
    return value if math.isfinite(value) else None


def parse_json(text: str) -> Any:
    """JSON with NaN, infinities and integers of more than 15 digits read as ``None`` or floats
    (so the value can be sent back as JSON and ranked)."""
    return json.loads(
        text,
        parse_constant=lambda _: None,
        parse_float=finite,
        parse_int=lambda s: int(s) if len(s.lstrip("-")) <= 15 else finite(s),
    )


def read_json(run: Run, name: str, line: int | None = None, text: str | None = None) -> Any:
    """File ``name`` of ``run`` (or ``text``, its line ``line``) parsed as JSON; ``None`` if absent."""
    text = read_text(run, name) if text is None else text
    if text is None:
        return None
    where = f"{name} of run {run.name}" if line is None else f"line {line} of {name} of run {run.name}"
    try:
        value = parse_json(text)
    except RecursionError as err:
        raise RequestError(f"{where} nests lists and objects too deeply to be vitlab's", 422) from err
    except ValueError as err:
        raise RequestError(f"{where} is not JSON ({err}): is the run still being written?", 409) from err
    if depth(value) > MAX_DEPTH:
        raise RequestError(f"{where} nests lists and objects over {MAX_DEPTH} deep: not a file vitlab wrote", 422)
    return value


def depth(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (0 for a number or string)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def as_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, ``{}`` for ``None``; else 422 naming ``what``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(f"{what} is a {type(value).__name__}, not an object: not a file vitlab wrote", 422)
    return value


def as_objects(value: Any, what: str) -> list[dict[str, Any]]:
    """``value`` if it is a list of JSON objects, ``[]`` for ``None``; else 422 naming ``what``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RequestError(f"{what} is not a list of objects: not a file vitlab wrote", 422)
    return value
