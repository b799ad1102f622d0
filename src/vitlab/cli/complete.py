"""Shell completion (argcomplete) that answers a Tab without importing torch.

The command line's shape -- every command's options, their choices, and the names ``--model`` and
``--dataset`` take (the registered models and datasets) -- is derived from the real parser once and kept
in an index file; each Tab reads the index and completes from a stand-in parser of the same shape. The
index is keyed by vitlab's version, its source files (sizes and modification times) and the installed
``vitlab.tasks`` plug-ins, so the first Tab after any of them changes rebuilds it (the one slow Tab).

    eval "$(register-python-argcomplete vitlab)"
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAMES = {"model": "models", "dataset": "datasets"}  # an option or positional of this dest completes to names


def complete(build: Callable[[], argparse.ArgumentParser]) -> None:
    """Answer the completion request in the environment (``_ARGCOMPLETE``, ``COMP_LINE``, ...) and exit;
    ``build()`` makes the real parser when the index must be (re)built."""
    import argcomplete

    shape = index(build)
    argcomplete.autocomplete(stand_in(shape, shape["names"]), always_complete_options="long")


def index(build: Callable[[], argparse.ArgumentParser]) -> dict[str, Any]:
    """The command line's shape (see :func:`shape_of`) and names, from the index file; built from ``build()``
    and written first when it is missing or stale."""
    path = cache_dir() / f"complete-{fingerprint()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    from ..data.registry import list_datasets
    from ..models import list_models

    shape = shape_of(build())
    shape["names"] = {"models": list_models(), "datasets": list_datasets()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("complete-*.json"):
            old.unlink(missing_ok=True)
        part = path.with_suffix(f".{os.getpid()}.part")
        part.write_text(json.dumps(shape))
        os.replace(part, path)
    except OSError:  # a read-only home: complete from memory this time
        pass
    return shape


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vitlab"


def fingerprint() -> str:
    """A digest of what the command line's shape depends on: vitlab's version, its source files, the plug-ins."""
    from .._version import __version__

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for entry in importlib.metadata.entry_points(group="vitlab.tasks"):
        digest.update(f"{entry.name}={entry.value}".encode())
    return digest.hexdigest()[:16]


def shape_of(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """``{"options": [...], "positionals": [...], "commands": {name: shape}}``: each argument's flags, number of
    values, choices, and which names it completes to."""
    shape: dict[str, Any] = {"options": [], "positionals": [], "commands": {}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            shape["commands"] = {name: shape_of(sub) for name, sub in action.choices.items()}
            continue
        entry = {
            "flags": list(action.option_strings),
            "dest": action.dest,
            "nargs": action.nargs,
            "choices": [str(c) for c in action.choices] if action.choices is not None else None,
            "names": NAMES.get(action.dest),
        }
        if entry["flags"] and entry["flags"] != ["-h", "--help"]:
            shape["options"].append(entry)
        elif not entry["flags"]:
            shape["positionals"].append(entry)
    return shape


def stand_in(shape: dict[str, Any], names: dict[str, list[str]], parser: Any = None) -> argparse.ArgumentParser:
    """A parser of ``shape`` (no types, no actions beyond storing), whose ``--model`` / ``--dataset`` complete to
    the registered ``names`` rather than to file names."""
    parser = parser or argparse.ArgumentParser(prog="vitlab")
    for entry in [*shape["positionals"], *shape["options"]]:
        keywords: dict[str, Any] = {"choices": entry["choices"]} if entry["choices"] else {}
        if entry["nargs"] == 0:
            keywords = {"action": "store_true"}
        elif entry["nargs"] is not None:
            keywords["nargs"] = entry["nargs"]
        if entry["flags"]:
            action = parser.add_argument(*entry["flags"], dest=entry["dest"], **keywords)
        else:
            action = parser.add_argument(entry["dest"], **keywords)
        if entry["names"]:
            action.completer = Names(names[entry["names"]])  # argcomplete reads it
    if shape["commands"]:
        sub = parser.add_subparsers(dest="command")
        for name, inner in shape["commands"].items():
            stand_in(inner, names, sub.add_parser(name))
    return parser


class Names:
    """An argcomplete completer of a fixed list of names."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __call__(self, prefix: str, **_: Any) -> list[str]:
        return [name for name in self.names if name.startswith(prefix)]
