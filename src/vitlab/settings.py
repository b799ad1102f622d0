"""Settings from three places, in one order: a config file, then options (a command line's flags, a
caller's keywords), then ``--set KEY=VALUE``. Every config that takes settings from the command line
or a file merges them here (:func:`merge_settings`): a run's config (:func:`vitlab.tasks.resolve_config`)
and a study's (``vitlab compare``).

It depends on nothing of vitlab's but the errors and checks, so it stays cheap to import (the command
line's ``--help`` reads no model).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .checks import shown
from .errors import ConfigError

CONFIG_FILE_LIMIT = 1 << 20  # bytes: a config file is a few kilobytes; anything near this is not one


def picked(source: Any, *names: str) -> dict[str, Any]:
    """``{name: source.name}`` for each of ``names``: the fields of a config, request or parsed command line
    that are handed on under their own names."""
    return {name: getattr(source, name) for name in names}


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["depth=4", "pos_embed=sincos2d", "widths=[16,32]"]`` -> ``{key: value}``: JSON values where
    they parse (numbers, true/false/null, lists), the text otherwise."""
    sets = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {shown(item)}: e.g. --set depth=4")
        try:
            sets[key] = json.loads(text)
        except json.JSONDecodeError:
            sets[key] = text
    return sets


def merge_settings(
    file: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    sets: Mapping[str, Any] | Iterable[str] | None = None,
    nested: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``file``'s fields, then ``options`` (a None value is an option not given), then ``sets`` (a mapping,
    or ``KEY=VALUE`` texts): each later one wins. A key ``PREFIX.KEY`` (an option's or a set's) whose
    ``PREFIX`` is in ``nested`` sets ``KEY`` in the mapping field ``nested[PREFIX]``
    (``augment.color_jitter`` into ``augment``); a field that holds no mapping then is refused, naming it."""
    nested = nested or {}
    merged = dict(file or {})
    given = {k: v for k, v in (options or {}).items() if v is not None}
    sets = sets if isinstance(sets, Mapping) else parse_overrides(sets or ())
    for key, value in [*given.items(), *sets.items()]:
        prefix, dot, rest = key.partition(".")
        if dot and prefix in nested:
            field = nested[prefix]
            inner = merged.get(field)
            if inner is not None and not isinstance(inner, Mapping):
                raise ConfigError(f"{field} must be a mapping of {prefix} fields, got {shown(inner)}")
            merged[field] = {**(inner or {}), rest: value}
        else:
            merged[key] = value
    return merged


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config from a YAML or JSON file (a run folder's ``config.json`` included): a mapping.

    Budgeted before any work: a file over :data:`CONFIG_FILE_LIMIT` (1 MiB) is refused unread, and a
    YAML alias (``*name``, which can expand a 10-line file into billions of nodes: "billion laughs")
    is refused as soon as the parser meets it, each in one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    limit = f"{CONFIG_FILE_LIMIT // (1 << 20)} MiB"
    size = path.stat().st_size
    if size > CONFIG_FILE_LIMIT:
        raise ConfigError(f"{path} is {size:,} bytes, over the {limit} a config file may hold: is it a config?")
    with open(path, "rb") as f:
        raw = f.read(CONFIG_FILE_LIMIT + 1)
    if len(raw) > CONFIG_FILE_LIMIT:  # a file that grew, or one whose size the file system does not say
        raise ConfigError(f"{path} holds more than the {limit} a config file may hold: is it a config?")
    yaml_file = path.suffix in (".yaml", ".yml")
    try:
        text = raw.decode()
        data = _load_yaml(text, path) if yaml_file else json.loads(text)
    except ConfigError:
        raise
    except Exception as err:  # yaml and json raise their own error types (and RecursionError when nested deep)
        raise ConfigError(
            f"{path} is not valid {'YAML' if yaml_file else 'JSON'}: {' '.join(str(err).split())[:300]}"
        ) from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields, got {type(data).__name__}")
    return data


def _load_yaml(text: str, path: Path) -> Any:
    """``yaml.safe_load(text)`` with aliases refused: a config never needs one, and their expansion
    is unbounded work."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise ConfigError(
                    f"{path}: line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in "
                    f"a config file (their expansion is unbounded): write the values out"
                )
            return super().compose_node(parent, index)

    loader = NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
