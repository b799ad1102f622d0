"""A task's command-line options, derived from its config: each field a task lists in ``TaskSpec.options``
becomes ``--field-name`` with its type, choices and range from the config's checks, and ``--set`` reaches
every other field, a nested field as ``PREFIX.KEY`` and the model's config by its own field names."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..checks import Bool, Check, Float, Int, Maybe, OneOf, Text
from ..errors import ConfigError
from . import data_options, load_source, source_data_options

if TYPE_CHECKING:
    from ..engine import RunConfig
    from ..tasks import TaskSpec


def flag(name: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def argument(check: Check, default: Any, meaning: str = "") -> dict[str, Any]:
    """``add_argument`` keywords for a field checked by ``check`` whose default is ``default``: typed by the
    check, its help the field's ``meaning``, what it allows and its default (:func:`help_text`)."""
    inner = check.check if isinstance(check, Maybe) else check
    if isinstance(inner, Bool):
        return {"action": "store_true", "default": None, "help": help_text(meaning or "turn it on", None, default)}
    if isinstance(inner, OneOf):
        return {"choices": inner.choices, "help": help_text(meaning, None, default)}
    kind = int if isinstance(inner, Int) else float if isinstance(inner, Float) else str
    return {"type": kind, "help": help_text(meaning, inner, default)}


def help_text(meaning: str, check: Check | None, default: Any) -> str:
    """``peak learning rate: a number in (0, 10] (default: 0.003)``: what a flag means, the values its check
    allows (argparse shows choices itself) and its default (when it has a plain one)."""
    inner = check.check if isinstance(check, Maybe) else check
    said = isinstance(inner, (Bool, OneOf)) or (isinstance(inner, Text) and meaning)  # by argparse or the meaning
    allowed = "" if inner is None or said else inner.describe()
    text = ": ".join(part for part in (meaning, allowed) if part)
    if isinstance(default, (bool, int, float, str)) and default is not False and default != "":
        text += f" (default: {default:g})" if isinstance(default, float) else f" (default: {default})"
    return text


def add_config_options(parser: argparse.ArgumentParser, specs: list[TaskSpec]) -> None:
    """A flag for each field the tasks of ``specs`` give a flag (``TaskSpec.options``), typed by its check."""
    seen: list[str] = []
    for spec in specs:
        config = spec.config(**spec.preset)
        checks = config.checks()
        for name in spec.options:
            if name not in seen:
                seen.append(name)
                meaning = spec.config.HELP.get(name, "")
                parser.add_argument(flag(name), dest=name, **argument(checks[name], getattr(config, name), meaning))
    parser.set_defaults(config_flags=tuple(seen))


def flagged(args: argparse.Namespace) -> list[str]:
    """The config fields given by a flag of their own (see :func:`add_config_options`)."""
    return [name for name in getattr(args, "config_flags", ()) if getattr(args, name, None) is not None]


def task_config(spec: TaskSpec, args: argparse.Namespace, extra: dict[str, Any] | None = None) -> RunConfig:
    """The run's config for ``spec`` from the command line, resolved by :func:`vitlab.tasks.resolve_config`:
    ``--config FILE`` (on ``--resume``, the run's own), then the task's flags, ``--device``, the data flags and
    ``extra``, then ``--set``. A flag of another task's is refused."""
    from ..tasks import resolve_config

    foreign = [n for n in flagged(args) if n not in spec.options]
    if foreign:
        raise ConfigError(f"{flag(foreign[0])} is not an option of task {spec.name!r}: use --set or another task")
    options = {name: getattr(args, name, None) for name in spec.options}
    options["device"] = args.device
    if "data" in spec.config.NESTED:
        options |= {f"data.{name}": value for name, value in data_options(args).items()}
    return resolve_config(
        spec,
        None if args.resume else args.config,
        {**options, **(extra or {})},
        args.set,
        out_dir=args.out,
        resume=args.resume,
        overwrite=args.overwrite,
    )


def add_request_options(parser: argparse.ArgumentParser, command: str) -> None:
    """A flag for each option a registered task's ``command`` (``evaluate`` | ``predict``) request declares
    (:func:`vitlab.tasks.requests.option`), once however many tasks take it; its help names those tasks."""
    from ..tasks import specs
    from ..tasks.requests import task_options

    declared: dict[str, Any] = {}
    takers: dict[str, list[str]] = {}
    for spec in specs():
        if getattr(spec, command) is not None:
            for f in task_options(getattr(spec, f"{command}_request")):
                declared.setdefault(f.name, f)
                takers.setdefault(f.name, []).append(spec.name)
    for name, f in declared.items():
        keywords = dict(f.metadata["flag"])
        kind = str(f.type)
        if not keywords and kind == "bool":
            keywords["action"] = "store_true"
        elif "action" not in keywords:
            keywords["type"] = int if kind.startswith("int") else float if kind.startswith("float") else str
        default = f.default if not callable(f.default_factory) else None
        text = help_text(f.metadata["help"], f.metadata["check"], default)
        parser.add_argument(flag(name), dest=name, default=None, help=f"{', '.join(takers[name])}: {text}", **keywords)
    parser.set_defaults(request_flags=tuple(declared))


def request_from_args(spec: TaskSpec, command: str, args: argparse.Namespace, **given: Any) -> Any:
    """The task's ``command`` request from the command line: the options of its request class that were given
    (checked by their flags' names), and ``given``; a flag of another task's request is refused."""
    from dataclasses import fields

    from ..checks import check_options
    from ..tasks.requests import task_options

    cls = getattr(spec, f"{command}_request")
    own = {f.name: f for f in task_options(cls)}
    flagged = [name for name in getattr(args, "request_flags", ()) if getattr(args, name, None) is not None]
    foreign = [name for name in flagged if name not in own]
    if foreign:
        takes = ", ".join(flag(name) for name in own) or "none of its own"
        raise ConfigError(
            f"{flag(foreign[0])} is not an option of a {spec.name} checkpoint (task {spec.name!r} takes {takes})"
        )
    check_options(args, {name: own[name].metadata["check"] for name in flagged if own[name].metadata["check"]})
    shared = {f.name: getattr(args, f.name) for f in fields(cls) if f.name not in own and hasattr(args, f.name)}
    return cls(**{**shared, **{name: getattr(args, name) for name in flagged}, **given})


def hand_over(args: argparse.Namespace, command: str) -> str:
    """``vitlab evaluate`` / ``predict``: load the checkpoint ``args`` name and hand it to the task that wrote
    its kind (see :class:`vitlab.tasks.TaskSpec`), with the ``command`` request that task declares."""
    from ..tasks import task_for_kind

    loaded = load_source(args, command)
    spec = task_for_kind(loaded.kind, command)
    request = request_from_args(spec, command, args, options=source_data_options(args))
    return getattr(spec, command)(loaded, request)  # task_for_kind checked it has one
