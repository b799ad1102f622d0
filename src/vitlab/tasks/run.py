"""One way to run any task: ``run(spec, config) -> RunResult``.

task = spec.build(config, data, reporter)     data loaded, seeded, model built
fitted = fit(task, config, run_dir, reporter) the one loop (DDP, resume, EMA, checkpoints, history)
summary.json <- spec.summary(result)          when the run folder holds a checkpoint
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..engine import Reporter, RunConfig, fit
from ..runs import RunDir
from .registry import TaskSpec, get_task


@dataclass
class RunResult:
    """What :func:`run` returns, for every task.

    ``model`` is the deliverable of the weights chosen by validation (the last epoch's for a task that
    validates only at the end or not at all), unwrapped, in eval mode; ``val`` the chosen epoch's
    validation figures without their ``val_`` prefix; ``test`` the test figures measured on ``model``
    (None without a test split); ``history`` the engine's epoch records; ``seconds`` the epochs' wall
    time; ``params`` the trainable parameters of the deliverable; ``checkpoints`` the files the run
    folder holds (``best``, ``last``); ``skipped`` the inputs the task could not read."""

    task: str
    config: RunConfig
    model: nn.Module
    history: list[dict[str, Any]]
    val: dict[str, Any]
    test: dict[str, Any] | None
    best_epoch: int
    seconds: float
    params: int
    checkpoints: dict[str, Path] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    @property
    def checkpoint(self) -> Path | None:
        """The checkpoint the run hands on (``best/``; the last epoch's for a run without validation)."""
        return self.checkpoints.get("best")

    @property
    def last(self) -> dict[str, Any]:
        """The last epoch's record (``{}`` when none ran)."""
        return self.history[-1] if self.history else {}

    @property
    def best_val_acc(self) -> float:
        """Validation accuracy of the chosen epoch (NaN for a task that does not measure one)."""
        return float(self.val.get("acc", math.nan))

    @property
    def train_acc(self) -> float:
        """Training accuracy of the last epoch (NaN for a task that does not measure one)."""
        return float(self.last.get("train_acc", math.nan))


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
            "test_on": test_on,
        }

    return summary


__all__ = ["RunResult", "fit_summary", "run"]
