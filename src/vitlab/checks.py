"""The values a config field allows, one vocabulary for every config (runs, data, models): a
:class:`Check` per field, applied when the config is made by :func:`check_fields`.

A value of the wrong type or out of its range raises :class:`~vitlab.errors.ConfigError` naming the
field and the range (``depth must be a positive integer in [1, 1024], got 0``); a value that passes is
stored normalised (a NumPy integer becomes an ``int``, ``2`` a ``2.0`` for a float field, a list a tuple).
It depends on nothing of vitlab's but the errors, so every floor (``data`` included) may use it.
"""

from __future__ import annotations

import difflib
import numbers
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import ConfigError, RunFolderError


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters: a hostile value must not flood the one-line message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# An upper limit at or above these guards the machine rather than saying what the field means: not shown.
UNBOUNDED = 2**31 - 1
UNBOUNDED_REAL = 1e6


class UnknownKeysError(ConfigError):
    """Names a mapping does not know (``unknown``): a :class:`ConfigError` a caller that knows more names (a
    run config taking its model's fields too) can say better."""

    def __init__(self, message: str, unknown: list[str], known: Iterable[str]) -> None:
        super().__init__(message)
        self.unknown, self.known = unknown, sorted(known)


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'lr'?)`` for a ``word`` close to one of ``choices`` (difflib's ratio), else ``""``: the
    one "did you mean" of every refusal of a name (a command, an option, a field, a dataset, a model)."""
    near = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


class Check:
    """The values one field allows: ``check(name, value)`` returns the value, normalised, or raises
    :class:`ConfigError` naming ``name`` and :meth:`describe`."""

    def describe(self) -> str:
        raise NotImplementedError

    def __call__(self, name: str, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Int(Check):
    """An integer in ``[low, high]`` (a ``bool`` is not one)."""

    low: int
    high: int

    def describe(self) -> str:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(self.low, "an integer")
        if self.high >= UNBOUNDED:  # a machine's limit, not the field's meaning: only the lower bound is said
            return kind if self.low in (0, 1) else f"{kind} >= {self.low}"
        return f"{kind} in [{self.low}, {self.high}]"

    def __call__(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(f"{name} must be an integer, got {shown(value)}")
        if not self.low <= int(value) <= self.high:
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
        return int(value)


@dataclass(frozen=True)
class Float(Check):
    """A real number in ``[low, high]``, either end open; NaN is in no range."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        if self.high >= UNBOUNDED_REAL:
            return f"a number {'>' if self.low_open else '>='} {self.low:g}"
        return f"a number in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def __call__(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{name} must be a number, got {shown(value)}")
        number = int(value) if isinstance(value, numbers.Integral) else float(value)  # 10**400 stays an int
        above = number > self.low if self.low_open else number >= self.low
        below = number < self.high if self.high_open else number <= self.high
        if not (above and below):
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
        return float(number)


@dataclass(frozen=True)
class Bool(Check):
    """``True`` or ``False`` itself (not ``1``, not ``"yes"``)."""

    def describe(self) -> str:
        return "true or false"

    def __call__(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {shown(value)}")
        return value


@dataclass(frozen=True)
class OneOf(Check):
    """One of a few named choices."""

    choices: tuple[str, ...]

    def describe(self) -> str:
        if len(self.choices) == 2:
            return " or ".join(map(repr, self.choices))
        return f"one of {self.choices}"

    def __call__(self, name: str, value: Any) -> Any:
        if not isinstance(value, str) or value not in self.choices:
            near = suggest(value, self.choices) if isinstance(value, str) else ""
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}{near}")
        return value


@dataclass(frozen=True)
class Maybe(Check):
    """``None`` or a value ``check`` allows."""

    check: Check

    def describe(self) -> str:
        return f"null or {self.check.describe()}"

    def __call__(self, name: str, value: Any) -> Any:
        try:
            return None if value is None else self.check(name, value)
        except ConfigError:
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}") from None


@dataclass(frozen=True)
class Seq(Check):
    """``min_len`` to ``max_len`` values ``item`` allows, as a tuple (or as ``container``)."""

    item: Check
    min_len: int = 1
    max_len: int = 64
    container: type = tuple

    def describe(self) -> str:
        return f"a list of {self.min_len} to {self.max_len} entries, each {self.item.describe()}"

    def __call__(self, name: str, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or not self.min_len <= len(value) <= self.max_len:
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
        return self.container(self.item(f"{name}[{i}]", v) for i, v in enumerate(value))


@dataclass(frozen=True)
class Pair(Check):
    """One value ``item`` allows, or a pair of them: stored as a pair, e.g. ``(height, width)``."""

    item: Check

    def describe(self) -> str:
        return f"{self.item.describe()} or a pair of them"

    def __call__(self, name: str, value: Any) -> tuple[Any, Any]:
        pair = tuple(value) if isinstance(value, (list, tuple)) else (value, value)
        if len(pair) == 2:
            try:
                return self.item(name, pair[0]), self.item(name, pair[1])
            except ConfigError:
                pass
        raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")


@dataclass(frozen=True)
class Text(Check):
    """A non-empty string of at most ``max_len`` characters; ``what`` says what it names (a model, a path)."""

    what: str = "text"
    max_len: int = 4096
    path: bool = False  # a file system path: an ``os.PathLike`` is taken too, stored as its string

    def describe(self) -> str:
        return f"a non-empty string ({self.what})"

    def __call__(self, name: str, value: Any) -> str:
        if self.path and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or not value.strip() or len(value) > self.max_len:
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
        return value


@dataclass(frozen=True)
class Fields(Check):
    """A mapping of ``what``'s fields (e.g. ``DenseConfig``): its keys among ``known`` (an unknown key is
    refused naming the known ones), each value checked by ``values`` (the ``checks`` of the config the fields
    go to) where it names one; how the values relate is the config's to check when it is made. ``nested``
    names the keys whose value is itself a mapping of fields (``{"vision": Fields(...)}``)."""

    known: tuple[str, ...]
    what: str
    nested: tuple[tuple[str, Check], ...] = ()
    open: bool = False  # any string key (the fields are not known yet)
    values: Any = None  # {key: Check}: each value given checked now
    prefix: bool = False  # a value's message names it ``NAME.KEY`` (a nested mapping), else ``KEY``

    def describe(self) -> str:
        return f"a mapping of {self.what} fields"

    def __call__(self, name: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            example = f": e.g. {{{self.known[0]!r}: ...}}" if self.known else ""
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}{example}")
        if self.open:
            keys = sorted(repr(k) for k in value if not isinstance(k, str))
            if keys:
                raise ConfigError(f"{name} must be {self.describe()} (by name), got the key(s) {', '.join(keys)}")
        else:
            unknown = sorted(str(k) for k in value if k not in self.known)
            if unknown:
                raise UnknownKeysError(
                    f"{name}: unknown {self.what} option(s) {unknown}; known: {sorted(self.known)}"
                    f"{suggest(unknown[0], self.known)}",
                    unknown,
                    self.known,
                )
        checked = dict(value)
        for key, check in self.nested:  # named as the field is set: ``vision.depth``
            if key in checked and not _is_config(checked[key]):
                checked[key] = check(key, checked[key])
        for key, check in (self.values or {}).items():
            if key in checked:
                checked[key] = check(f"{name}.{key}" if self.prefix else key, checked[key])
        return checked


def _is_config(value: Any) -> bool:
    """A config dataclass instance (already checked when it was made), not a mapping to check."""
    return hasattr(value, "__dataclass_fields__")


@dataclass(frozen=True)
class Options(Check):
    """A config dataclass ``cls`` (e.g. ``DataOptions``) or a mapping of its fields, made into ``cls`` so that
    each value meets ``cls``'s own checks; a message names the field ``NAME.FIELD``."""

    cls: type
    what: str
    null_ok: bool = False  # None stays None (the caller's defaults)

    def describe(self) -> str:
        return f"{'null or ' if self.null_ok else ''}a mapping of {self.what} fields"

    def __call__(self, name: str, value: Any) -> Any:
        if isinstance(value, self.cls) or (value is None and self.null_ok):
            return value
        known = tuple(f.name for f in fields(self.cls))
        checked = Fields(known, self.what)(name, value)
        try:
            return self.cls(**checked)
        except ConfigError as err:
            text = str(err)
            if text.startswith(f"{name}.") or not any(text.startswith(k) for k in known):
                raise
            raise ConfigError(f"{name}.{text}") from None


def as_pair(value: int | tuple[int, int]) -> tuple[int, int]:
    """A :class:`Pair` field's value as the pair it is stored as (its type also admits the int a caller gives)."""
    return (value, value) if isinstance(value, int) else value


def check_fields(config: Any, checks: Mapping[str, Check]) -> None:
    """Check and normalise ``config``'s fields in place (a frozen dataclass too): ``{field name: Check}``;
    the first field out of its range raises :class:`ConfigError`."""
    for name, check in checks.items():
        object.__setattr__(config, name, check(name, getattr(config, name)))


def check_options(args: Any, checks: Mapping[str, Check]) -> None:
    """:func:`check_fields` for parsed command-line options (``argparse`` destinations): a message names the
    option as typed, ``--mlp-ratio must be a number in (0, 64], got nan``."""
    for dest, check in checks.items():
        setattr(args, dest, check(f"--{dest.replace('_', '-')}", getattr(args, dest)))


def reject_unknown(given: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise :class:`ConfigError` naming the keys in ``given`` that ``what`` (e.g. ``"TrainConfig"``)
    does not know, and listing those it does; nothing when all are known."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        near = suggest(unknown[0], known)
        raise UnknownKeysError(f"unknown {what} option(s) {unknown}; known: {known}{near}", unknown, known)


def run_folder_name(path: str | os.PathLike[str]) -> str:
    """``path`` as a run folder's name; an empty or blank name (an unset shell variable) is refused."""
    name = os.fspath(path)
    if isinstance(name, str) and not name.strip():
        raise RunFolderError(
            f"the output folder is {name!r}, an empty name (an unset shell variable?): give --out a folder; "
            f"vitlab never makes the working directory a run folder"
        )
    return str(name)
