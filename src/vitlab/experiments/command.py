"""``vitlab compare`` as library functions: :func:`run_command` takes the command's options (by their
argparse names), builds the study they ask for, runs it and returns what the command prints
(:class:`CommandOutput`); the CLI only parses and prints.

Three studies answer it: ``--task segment`` (dense heads by patch size, :mod:`~vitlab.experiments.segment`),
``--preset pitfalls`` (every pitfall's grid, :mod:`~vitlab.experiments.pitfalls`), and otherwise one
:class:`~vitlab.experiments.config.CompareConfig` study (:func:`compare_config`: its fields from a
``--config`` file, under the options given, under ``--set``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..checks import reject_unknown, run_folder_name
from ..errors import ConfigError
from ..settings import merge_settings
from .aggregates import aggregate
from .compare import run_compare
from .config import CompareConfig
from .executors import Executor, make_executor, set_threads
from .pitfalls import SEEDS, PitfallsSettings, run_pitfalls, verdict_table
from .plan import skipped_summary
from .records import RunPlan, RunRecord
from .segment import segment_study
from .tables import results_table

# The options that are CompareConfig fields.
CONFIG_OPTIONS = (
    "dataset",
    "data_dir",
    "image_size",
    "rows",
    "patches",
    "augment",
    "seeds",
    "epochs",
    "recipe",
    "vit",
    "cnn",
    "cnns",
    "normalization",
    "device",
    "attention",
    "pretrain",
    "distill",
    "position",
    "stem",
    "pool",
    "block",
    "norm",
    "mask",
    "stride",
    "lr",
    "warmup",
    "tune",
    "init",
    "pretrain_epochs",
    "pretrain_images",
    "layer_decay",
    "distill_kind",
    "distill_temperature",
)
FLAGS = ("pad", "robustness", "permute")  # CompareConfig switches given as flags

PITFALLS = "pitfalls"  # the preset that is a set of grids (vitlab.experiments.pitfalls), not one CompareConfig
# Options --preset pitfalls takes; it fixes every other one itself.
PITFALLS_OPTIONS = ("dataset", "data_dir", "seeds", "device")

# say(line): where progress lines go (None: nowhere).
Say = Callable[[str], None]
# settings() -> (the --config file's fields, the --set fields): read only by a CompareConfig study.
Settings = Callable[[], tuple[dict[str, Any], dict[str, Any]]]


@dataclass
class CommandOutput:
    """What the command prints: ``table`` on stdout, then each of ``notes`` on stderr."""

    table: str
    notes: list[str] = field(default_factory=list)


def progress_line(done: int, total: int, run: RunPlan, record: RunRecord, elapsed: float) -> str:
    """``[3/12] vit-digits rows=300 augment=none patch=2 seed=0: val 0.9100 (12.3 s) [40 s elapsed]``."""
    axes = sorted(run.axes.items(), key=lambda item: item[0] == "seed")
    where = " ".join(f"{k}={'full' if k == 'rows' and v is None else v}" for k, v in axes)
    name = run.model if run.kind == "vit" else f"{run.model} widths={'-'.join(map(str, run.overrides['widths']))}"
    return (
        f"[{done}/{total}] {name} {where}: val {record.best_val_acc:.4f} ({record.seconds:.1f} s) "
        f"[{elapsed:.0f} s elapsed]"
    )


class Progress:
    """A study's ``progress`` callback that says one :func:`progress_line` as each run finishes."""

    def __init__(self, say: Say) -> None:
        self.say, self.started = say, time.perf_counter()

    def __call__(self, done: int, total: int, run: RunPlan, record: RunRecord) -> None:
        self.say(progress_line(done, total, run, record, time.perf_counter() - self.started))


def compare_config(options: Mapping[str, Any], settings: Settings) -> CompareConfig:
    """The study the options ask for: the ``--config`` file's fields (but its ``out_dir``), under the
    :data:`CONFIG_OPTIONS` and :data:`FLAGS` given, under ``--set``; started from ``--preset`` (or the
    config's ``preset``); named ``--name`` (default the preset's, else ``compare``), written to ``--out``
    (default ``runs/NAME``). Unknown fields in the file or ``--set`` are refused."""
    given = {k: options[k] for k in CONFIG_OPTIONS if options.get(k) is not None}
    for flag in FLAGS:
        if options.get(flag):
            given[flag] = True
    name = options.get("name") or options.get("preset") or "compare"
    given.update(name=name, out_dir=str(options.get("out") or Path("runs") / name))
    base, sets = settings()
    base = {k: v for k, v in base.items() if k != "out_dir"}
    if base or sets:
        reject_unknown({**base, **sets}, [f.name for f in fields(CompareConfig)], "CompareConfig")
        given = merge_settings(base, given, sets)
    preset = options.get("preset") or given.pop("preset", None)
    return CompareConfig.from_preset(preset, **given) if preset else CompareConfig(**given)


def run_command(options: Mapping[str, Any], settings: Settings, say: Say | None = None) -> CommandOutput:
    """Run the study ``vitlab compare``'s ``options`` ask for (see the module doc) and return what it
    prints. ``settings`` reads ``--config`` and ``--set`` (only a CompareConfig study calls it); ``say``
    hears the progress lines."""
    if options.get("out") is not None:
        run_folder_name(options["out"])  # --out '' (an unset shell variable) is refused, never read as unset
    executor = make_executor(
        options.get("executor", "local"), options.get("jobs"), options.get("threads", 1), options.get("address")
    )
    if options.get("task", "classify") == "segment":
        return _segment(options, say)
    if options.get("preset") == PITFALLS:
        return _pitfalls(options, executor, say)
    config = compare_config(options, settings)
    set_threads(options.get("threads", 1))  # this process: forward costs and attention figures
    progress = None if say is None else Progress(say)
    result = run_compare(config, progress=progress, executor=executor, overwrite=bool(options.get("overwrite")))
    return CommandOutput(
        "\n".join(results_table(aggregate(list(result.records.values())))),
        [f"skipped {line}" for line in skipped_summary(result.plan.skipped)]
        + [
            f"\n{len(result.records)} runs in {result.seconds:.1f}s ({result.cpu_seconds:.1f}s CPU); "
            f"report: {result.files['report']}"
        ],
    )


def _segment(options: Mapping[str, Any], say: Say | None) -> CommandOutput:
    """``--task segment``: :func:`~vitlab.experiments.segment.segment_study` in ``--out`` (default
    ``runs/NAME``)."""
    set_threads(options.get("threads", 1))
    table, path = segment_study(options.get("out") or Path("runs") / (options.get("name") or "compare"), options, say)
    return CommandOutput(table, [f"report: {path}"])


def _pitfalls(options: Mapping[str, Any], executor: Executor, say: Say | None) -> CommandOutput:
    """``--preset pitfalls``: every pitfall's grid, run together; it takes :data:`PITFALLS_OPTIONS` and how
    to run, and refuses any other study option."""
    fixed = [
        f"--{name.replace('_', '-')}"
        for name, value in options.items()
        if name in (*CONFIG_OPTIONS, *FLAGS) and name not in PITFALLS_OPTIONS and value not in (None, False, [])
    ]
    if fixed or options.get("config") or options.get("set"):
        raise ConfigError(
            f"--preset pitfalls sets its own grids; it takes --seeds, --dataset, --data-dir, --device and how "
            f"to run (--jobs, --threads, --executor, --out), not {', '.join(fixed or ['--config/--set'])}"
        )
    set_threads(options.get("threads", 1))
    name = options.get("name") or PITFALLS
    seeds = options.get("seeds")
    settings = PitfallsSettings(
        seeds=SEEDS if seeds is None else seeds,
        dataset=options.get("dataset"),
        data_dir=options.get("data_dir"),
        device=options.get("device") or "auto",
    )
    result = run_pitfalls(
        options.get("out") or Path("runs") / name,
        settings,
        executor=executor,
        progress=None if say is None else Progress(say),
        overwrite=bool(options.get("overwrite")),
    )
    return CommandOutput(
        "\n".join(verdict_table(result.verdicts)),
        [
            f"\n{sum(len(s.records) for s in result.studies)} run records in {result.seconds:.1f}s "
            f"({result.cpu_seconds:.1f}s CPU); report: {result.files['report']}"
        ],
    )
