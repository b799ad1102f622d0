"""A task's command-line options, derived from its config: each field a task lists in ``TaskSpec.options``
becomes ``--field-name`` with its type, choices and range from the config's checks, and ``--set`` reaches
every other field, a nested field as ``PREFIX.KEY`` and the model's config by its own field names."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..checks import Bool, Check, Float, Int, Maybe, OneOf
from ..errors import ConfigError
from . import data_options, parse_overrides, read_config_file, refuse_owned

if TYPE_CHECKING:
    from ..engine import RunConfig
    from ..tasks import TaskSpec

RUN_FLAGS = ("out_dir", "resume", "overwrite")  # given by --out, --resume, --overwrite; never read from a file


def flag(name: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def argument(check: Check, default: Any) -> dict[str, Any]:
    """``add_argument`` keywords for a field checked by ``check`` whose default is ``default``."""
    inner = check.check if isinstance(check, Maybe) else check
    shown = inner.describe()
    if isinstance(inner, Bool):
        return {"action": "store_true", "default": None, "help": "turn it on"}
    if isinstance(inner, OneOf):
        return {"choices": inner.choices, "help": shown}
    kind = int if isinstance(inner, Int) else float if isinstance(inner, Float) else str
    return {"type": kind, "help": shown}


def add_config_options(parser: argparse.ArgumentParser, specs: list[TaskSpec]) -> None:
    """A flag for each field the tasks of ``specs`` give a flag (``TaskSpec.options``), typed by its check."""
    seen: list[str] = []
    for spec in specs:
        config = spec.config(**spec.preset)
        checks = config.checks()
        for name in spec.options:
            if name not in seen:
                seen.append(name)
                parser.add_argument(flag(name), dest=name, **argument(checks[name], getattr(config, name)))
    parser.set_defaults(config_flags=tuple(seen))


def task_options(spec: TaskSpec, args: argparse.Namespace) -> dict[str, Any]:
    """The task's options (``--device`` among them): the run's saved config (``--resume``) or ``--config
    FILE``, then the flags given, then ``--set`` (``PREFIX.KEY`` into the config's nested field), then the
    run-folder flags. A flag another
    task takes, or a ``--set`` of a field the command line owns (``out_dir`` is ``--out``), is refused."""
    from ..runs import RunDir
    from ..runs.layout import CONFIG

    config: type[RunConfig] = spec.config
    sets = parse_overrides(args.set)
    refuse_owned(sets, config.CLI_OWNED)
    foreign = [n for n in flagged(args) if n not in spec.options]
    if foreign:
        raise ConfigError(f"{flag(foreign[0])} is not an option of task {spec.name!r}: use --set or another task")
    if args.resume and args.out is None:
        raise ConfigError("--resume needs the run folder: --out DIR")
    base = (
        read_config_file(RunDir(args.out) / CONFIG)
        if args.resume
        else read_config_file(args.config)
        if args.config
        else {}
    )
    options = {k: v for k, v in base.items() if k not in RUN_FLAGS}
    options |= {name: getattr(args, name) for name in spec.options if getattr(args, name, None) is not None}
    for key, value in sets.items():
        prefix, dot, rest = key.partition(".")
        if dot and prefix in config.NESTED:
            nested = config.NESTED[prefix]
            if not isinstance(options.get(nested, {}), dict):
                raise ConfigError(f"{nested} must be a mapping of {prefix} fields, got {options[nested]!r:.40}")
            options[nested] = {**(options.get(nested) or {}), rest: value}
        else:
            options[key] = value
    if args.device is not None:  # a flag of every command (see add_common)
        options["device"] = args.device
    if "data" in config.NESTED and data_options(args):
        options["data"] = {**(options.get("data") or {}), **data_options(args)}
    return {**options, **spec.preset, "out_dir": args.out, "resume": args.resume, "overwrite": args.overwrite}


def flagged(args: argparse.Namespace) -> list[str]:
    """The config fields given by a flag of their own (see :func:`add_config_options`)."""
    return [name for name in getattr(args, "config_flags", ()) if getattr(args, name, None) is not None]


def task_config(spec: TaskSpec, args: argparse.Namespace, extra: dict[str, Any] | None = None) -> RunConfig:
    """The run's config for ``spec`` from the command line (see :func:`task_options`), with ``extra``; on
    ``--resume``, the fields of ``RESUME_SETTABLE`` an option or ``--set`` gives are applied on purpose
    (``--resume --set lr=1e-4``) instead of refused."""
    options = {**task_options(spec, args), **(extra or {})}
    config = spec.config.from_options(options)
    if args.resume:
        config.allow_on_resume(set(flagged(args)) | set(parse_overrides(args.set)))
    return config
