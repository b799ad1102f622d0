"""A task's command-line options, derived from its config: each field a task lists in ``TaskSpec.options``
becomes ``--field-name`` with its type, choices and range from the config's checks, and ``--set`` reaches
every other field, a nested field as ``PREFIX.KEY`` and the model's config by its own field names."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..checks import Bool, Check, Float, Int, Maybe, OneOf
from ..errors import ConfigError
from . import data_options

if TYPE_CHECKING:
    from ..engine import RunConfig
    from ..tasks import TaskSpec


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
