"""Where a command writes, checked at the door before any work: one rule for every output option.

Each option that names something a command writes is added with :func:`add_output`, saying what it takes: a
folder (a run, report or export folder: the command decides what in it may be replaced), or a file with one of
the suffixes its writer supports. Before the command runs, :func:`check_outputs` refuses in one line naming the
option and the value: a file name without a supported suffix, a folder where a file goes (or a file where a folder
goes), a path under a file, a folder that cannot be written, and an existing file without ``--overwrite``. The
parent folder of a file is made, so the writer never meets a missing one, and :func:`remove_made` takes the
folders made back away (when still empty) if the command then fails.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
"""The files a figure may be written as (matplotlib writes each)."""


@dataclass(frozen=True)
class Output:
    """What an output option takes: a file ending in one of ``suffixes`` (``what`` it holds, said when refused),
    or with no suffixes a folder."""

    what: str
    suffixes: tuple[str, ...] = ()

    @property
    def folder(self) -> bool:
        return not self.suffixes


Rule = Output | Callable[[argparse.Namespace], Output | None]
"""An output's kind, or a function of the other options giving it (None: the option is not written)."""


def add_output(parser: argparse.ArgumentParser, *flags: str, rule: Rule, **keywords: Any) -> argparse.Action:
    """``parser.add_argument(*flags, **keywords)`` for an output, its ``rule`` recorded for :func:`check_outputs`."""
    action = parser.add_argument(*flags, **keywords)
    name = action.option_strings[0] if action.option_strings else action.dest.upper()
    parser.set_defaults(outputs={**(parser.get_default("outputs") or {}), action.dest: (name, rule)})
    return action


def output_rules(args: argparse.Namespace) -> dict[str, tuple[str, Output]]:
    """``{dest: (option, Output)}`` of each output option ``args`` gives a value."""
    found = {}
    for dest, (name, rule) in (getattr(args, "outputs", None) or {}).items():
        output = rule(args) if callable(rule) else rule
        if getattr(args, dest, None) is not None and output is not None:
            found[dest] = (name, output)
    return found


def check_outputs(args: argparse.Namespace) -> list[Path]:
    """Refuse (:class:`ConfigError`, one line) any output option of ``args`` its command could not write, or would
    write over an existing file without ``--overwrite``; make each file's parent folder. Returns the folders it
    made, deepest first (for :func:`remove_made`)."""
    overwrite = bool(getattr(args, "overwrite", False))
    files = []
    for dest, (name, output) in output_rules(args).items():
        path = check_output(str(getattr(args, dest)), name, output, overwrite=overwrite)
        if not output.folder:
            files.append(path)
    made: list[Path] = []
    for path in files:
        parent = path.absolute().parent
        missing = [p for p in (parent, *parent.parents) if not p.exists()]
        parent.mkdir(parents=True, exist_ok=True)
        made += missing
    return made


def remove_made(folders: list[Path]) -> None:
    """Remove the ``folders`` :func:`check_outputs` made (deepest first), each only while it is still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # something was written there, or it is gone: leave it
            pass


def check_output(value: str, option: str, output: Output, *, overwrite: bool = False) -> Path:
    """``value`` as the path ``option`` writes, checked (see the module docstring); returns it."""
    shown = f"{option} {value!r}"
    if not value.strip():
        raise ConfigError(
            f"{shown}: an empty name would mean the working directory: give a "
            f"{'folder' if output.folder else 'file name'} for the {output.what}"
        )
    path = Path(value).expanduser()
    if output.folder:
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{shown} is a file; the {output.what} is a folder: choose a folder's name")
    else:
        wanted = f"give a file name ending in {', '.join(output.suffixes)} for the {output.what}"
        if value.endswith(("/", os.sep)) or path.is_dir():
            raise ConfigError(f"{shown} is a folder: {wanted}")
        if path.suffix.lower() not in output.suffixes:
            raise ConfigError(f"{shown} has {f'the suffix {path.suffix!r}' if path.suffix else 'no suffix'}: {wanted}")
        if path.exists() and not overwrite:
            raise ConfigError(f"{shown} exists: choose another name, or pass --overwrite to replace it")
    ancestor = next(p for p in (path.absolute().parent, *path.absolute().parents) if p.exists())
    if not ancestor.is_dir():
        raise ConfigError(f"{shown}: {ancestor} is a file, so no folder can be made there: choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{shown}: {ancestor} is not writable: choose another path")
    return path
