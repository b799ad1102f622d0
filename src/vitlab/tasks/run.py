"""One way to run any task: ``run(spec, config) -> RunResult``.

task = spec.build(config, data, reporter)     data loaded, seeded, model built
fitted = fit(task, config, run_dir, reporter) the one loop (DDP, resume, EMA, checkpoints, history)
summary.json <- spec.summary(result)          when the run folder holds a checkpoint
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..data.paths import is_relative_path, resumed_data_dir
from ..engine import Reporter, RunConfig, fit
from ..errors import ConfigError
from ..runs import RunDir
from ..runs.layout import CONFIG
from ..settings import merge_settings, parse_overrides, read_config_file
from .registry import TaskSpec, get_task
from .result import RunResult

RUN_FIELDS = ("out_dir", "resume", "overwrite")  # where and how a run is written: never read from a config file


def run(spec: TaskSpec | str, config: RunConfig, data: Any = None, reporter: Reporter | None = None) -> RunResult:
    """Train the task ``spec`` (a :class:`TaskSpec` or a registered name) under ``config`` on ``data``
    (default: the dataset ``config`` names); with ``config.out_dir``, write the run folder (see
    :class:`vitlab.runs.RunDir`), its ``summary.json`` included."""
    spec = get_task(spec) if isinstance(spec, str) else spec
    reporter = reporter or Reporter()
    run_dir = RunDir(config.out_dir) if config.out_dir is not None else None
    if run_dir is not None:  # refused before any image is read
        run_dir.check(spec.run_kinds or (spec.name,), resume=config.resume, overwrite=config.overwrite)
    task = spec.build(config, data, reporter)
    fitted = fit(task, config, run_dir, reporter)
    result = RunResult(
        spec.name,
        config,
        fitted.model,
        fitted.history,
        fitted.chosen_val(),
        fitted.test,
        fitted.best_epoch,
        fitted.seconds,
        fitted.params,
        fitted.checkpoints,
        sorted(task.skipped()),
        fitted.cost,
    )
    for note in task.notes():
        reporter.note(note)
    if run_dir is not None and fitted.checkpoints:
        run_dir.write_summary(spec.summary(result))
    return result


def resolve_config(
    spec: TaskSpec | str,
    file: str | Path | Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    sets: Mapping[str, Any] | Iterable[str] | None = None,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
) -> RunConfig:
    """The config of a run of the task ``spec``, from its settings in one order (each later one wins):

    1. ``file``: a YAML or JSON config file, or its mapping; on ``resume``, the run folder's own
       ``config.json`` (``file`` must then be None);
    2. ``options``: flat fields of the task's config, or of its model's config (a None value is not given);
       ``PREFIX.KEY`` sets ``KEY`` of a nested field (``data.image_size``, see ``RunConfig.NESTED``);
    3. ``sets``: ``KEY=VALUE`` texts (``--set``, values read as JSON where they parse) or a mapping, as options;
    4. the task's ``preset`` and ``out_dir`` / ``resume`` / ``overwrite`` (a file's or a set's are not taken).

    A relative ``data_dir`` a resumed run's ``config.json`` records (an earlier vitlab's) is refused unless
    ``options`` give the full folder ending with it (:func:`~vitlab.data.paths.resumed_data_dir`).
    On ``resume`` the ``RESUME_SETTABLE`` fields ``options`` or ``sets`` give (``lr``) are applied on purpose;
    any other change from the recorded run is refused when the run folder is opened. This is what
    ``vitlab train`` / ``pretrain``, the explorer and a Python caller of :func:`run` resolve a run with."""
    spec = get_task(spec) if isinstance(spec, str) else spec
    config: type[RunConfig] = spec.config
    sets = sets if isinstance(sets, Mapping) else parse_overrides(sets or ())
    for key in sets:
        if key in config.CLI_OWNED:
            owner = config.CLI_OWNED[key]
            raise ConfigError(f"--set {key}=...: {key} is set by {owner}, not by --set; use {owner}")
    if resume:
        if out_dir is None:
            raise ConfigError("resume needs the run folder: --out DIR")
        if file is not None:
            raise ConfigError("a resumed run's settings are its own config.json: drop --config")
        file = RunDir(out_dir) / CONFIG
        if not Path(file).is_file():
            raise ConfigError(
                f"{out_dir} holds no run to resume (a run stopped before its first epoch ended leaves none): "
                f"start it again without --resume"
            )
    base = read_config_file(file) if isinstance(file, (str, Path)) else dict(file or {})
    base = {k: v for k, v in base.items() if k not in RUN_FIELDS}
    merged = merge_settings(base, options, sets, config.NESTED)
    recorded = base.get("data_dir")
    moved = resume and isinstance(recorded, str) and is_relative_path(recorded)
    if moved:  # an earlier vitlab's relative data_dir: the user names the full folder, never this process's cwd
        given = merged.get("data_dir") if merged.get("data_dir") != recorded else None
        merged["data_dir"] = resumed_data_dir(str(out_dir), str(recorded), given)
    run_fields = {"out_dir": None if out_dir is None else str(out_dir), "resume": resume, "overwrite": overwrite}
    resolved = config.from_options({**merged, **spec.preset, **run_fields})
    if resume:
        given = {k for k, v in (options or {}).items() if v is not None}
        resolved.allow_on_resume(given | set(sets))
        if moved:  # config.json then records the absolute folder
            resolved.RESUME_FREE = (*resolved.RESUME_FREE, "data_dir")
    return resolved


def fit_summary(test_on: str) -> Callable[[RunResult], dict[str, Any]]:
    """The usual ``summary.json``: the chosen epoch's validation figures, the test figures, epochs, the
    chosen epoch, seconds, parameters, and ``test_on`` (which weights the test measured)."""

    def summary(result: RunResult) -> dict[str, Any]:
        return {
            "val": result.val,
            "test": result.test or {},
            "epochs": len(result.history),
            "best_epoch": result.best_epoch,
            "seconds": result.seconds,
            "params": result.params,
            "cost": result.cost,
            "test_on": test_on,
        }

    return summary


__all__ = ["RUN_FIELDS", "RunResult", "fit_summary", "resolve_config", "run"]
