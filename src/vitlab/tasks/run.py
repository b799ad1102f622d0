"""One way to run any task: ``run(spec, config) -> RunResult``.

task = spec.build(config, data, reporter)     data loaded, seeded, model built
fitted = fit(task, config, run_dir, reporter) the one loop (DDP, resume, EMA, checkpoints, history)
summary.json <- spec.summary(result)          when the run folder holds a checkpoint
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import Reporter, RunConfig, fit
from ..runs import RunDir
from .registry import TaskSpec, get_task
from .result import RunResult


def run(spec: TaskSpec | str, config: RunConfig, data: Any = None, reporter: Reporter | None = None) -> RunResult:
    """Train the task ``spec`` (a :class:`TaskSpec` or a registered name) under ``config`` on ``data``
    (default: the dataset ``config`` names); with ``config.out_dir``, write the run folder (see
    :class:`vitlab.runs.RunDir`), its ``summary.json`` included."""
    spec = get_task(spec) if isinstance(spec, str) else spec
    reporter = reporter or Reporter()
    task = spec.build(config, data, reporter)
    run_dir = RunDir(config.out_dir) if config.out_dir is not None else None
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


__all__ = ["RunResult", "fit_summary", "run"]
