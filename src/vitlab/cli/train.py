"""``vitlab train``: train any registered task (DDP under ``torchrun -m vitlab train``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from . import add_common, add_data_options, apply_threads

if TYPE_CHECKING:
    from ..engine import RunConfig


def reporter_for(args: argparse.Namespace) -> Any:
    """A progress bar on the main process (none with ``--quiet`` or on other ranks), after ``--threads``."""
    from ..engine import TqdmReporter

    apply_threads(args.threads)
    return TqdmReporter(disable=True if args.quiet else None) if is_main() else None


def is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def run_options(args: argparse.Namespace, recipes: bool) -> dict[str, Any]:
    """The run fields every task shares that have a flag of their own: ``--ema``, ``--no-amp``, and
    ``--recipe`` for a task with recipes (unless the settings come from ``--resume`` or ``--config``)."""
    extra: dict[str, Any] = {"ema_decay": args.ema} if args.ema is not None else {}
    extra |= {"amp": False} if args.no_amp else {}
    if recipes and not (args.resume or args.config):
        extra["recipe"] = args.recipe or "default"
    elif args.recipe is not None:
        from ..errors import ConfigError

        raise ConfigError(f"--recipe names settings of a new run of a task with recipes, not of task {args.task!r}")
    return extra


def build_config(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> RunConfig:
    """The config of the task ``args.task`` from the command line (see :func:`~vitlab.cli.options.task_config`)."""
    from ..tasks import get_task
    from .options import task_config

    spec = get_task(args.task)
    return task_config(spec, args, {**run_options(args, bool(spec.config.RECIPES)), **(extra or {})})


def train(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> int:
    """Run the task ``args.task`` from the command line and print its line."""
    from ..tasks import get_task, run

    spec = get_task(args.task)
    result = run(spec, build_config(args, extra), reporter=reporter_for(args))
    if is_main():
        print(spec.line(result))
        handoff = (spec.handoff or run_folder)(result)
        if handoff:
            print(handoff, file=sys.stderr)
    return 0


def run_folder(result: Any) -> str | None:
    return f"run folder: {result.config.out_dir}" if result.config.out_dir is not None else None


def add_run_options(p: argparse.ArgumentParser, command: str, out: str) -> None:
    """What every training command takes: the tasks' fields (``--set`` for the rest), ``--config``,
    ``--ema``, ``--no-amp``, ``--resume`` and the common options."""
    from ..tasks import specs
    from .options import add_config_options

    add_config_options(p, specs(command))
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML or JSON run config (e.g. a run's own config.json); options given on the command line override it",
    )
    p.add_argument("--ema", type=float, metavar="DECAY", help="keep an EMA of the weights (e.g. 0.999)")
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any config field of the task (e.g. --set weight_decay=0.1), a nested field as PREFIX.KEY (e.g. "
        "--set augment.color_jitter=0.4, data.crop_pct=0.9, mae.decoder_depth=1) or a model config field "
        "(e.g. --set drop_path_rate=0.1); repeatable",
    )
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    add_common(p, out=out)


def register(sub: argparse._SubParsersAction) -> None:
    from ..tasks import broken, specs

    tasks = specs("train")
    p = sub.add_parser(
        "train",
        help="train a model on a dataset",
        description="Train a model. Defaults: vit-digits on digits with the 'default' recipe. "
        "Under `torchrun --nproc_per_node=N -m vitlab train ...` runs DDP, or FSDP with --set distributed=fsdp "
        "(--batch-size per process). Tasks: " + "; ".join(f"{s.name}: {s.help}" for s in tasks),
    )
    p.add_argument(
        "--task",
        default="classify",
        choices=[*(s.name for s in tasks), *broken()],  # a broken plug-in's task is refused saying why
        help="what to train (default classify)",
    )
    add_data_options(p)
    recipes = {name: spec.name for spec in tasks for name in spec.config.RECIPES}
    p.add_argument(
        "--recipe", choices=tuple(recipes), help=f"named training settings ({', '.join(sorted(set(recipes.values())))})"
    )
    add_run_options(p, "train", out="run folder for checkpoints and metrics (default: write nothing)")
    p.set_defaults(func=train)
